// The audio of the current run drawn as it arrives (both engines): a peak per column, the start of
// each segment as a mark, and the playhead where playback is (by the audio clock: the page moves
// it when the worklet's position says that sample is leaving the speakers). The whole run fits the
// canvas: as it grows, the columns cover more samples. `data-samples` on the canvas: the samples
// drawn so far (for automation).

const BLOCK = 256; // samples per stored peak (about 11 ms at 24 kHz)

export class Waveform {
  constructor(canvas) {
    this.canvas = canvas;
    this.reset();
  }

  reset() {
    this.peaks = []; // the largest |sample| of each BLOCK
    this.samples = 0;
    this.marks = []; // sample indices where segments start
    this.playhead = null;
    this.draw();
  }

  add(chunk) {
    for (let i = 0; i < chunk.length; i++) {
      const block = Math.floor((this.samples + i) / BLOCK);
      const value = Math.abs(chunk[i]);
      if (block >= this.peaks.length) this.peaks.push(value);
      else if (value > this.peaks[block]) this.peaks[block] = value;
    }
    this.samples += chunk.length;
    this.later();
  }

  mark(sample) {
    this.marks.push(sample);
    this.later();
  }

  position(sample) {
    this.playhead = sample;
    this.later();
  }

  // One drawing per animation frame, however many chunks arrived in between.
  later() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.draw();
    });
  }

  draw() {
    const canvas = this.canvas;
    const width = canvas.clientWidth || canvas.width;
    const ratio = window.devicePixelRatio || 1;
    if (canvas.width !== Math.round(width * ratio)) canvas.width = Math.round(width * ratio);
    const context = canvas.getContext("2d");
    const w = canvas.width;
    const h = canvas.height;
    const style = getComputedStyle(canvas);
    const color = (name, fallback) => style.getPropertyValue(name).trim() || fallback;
    context.clearRect(0, 0, w, h);
    canvas.dataset.samples = String(this.samples);
    if (this.samples === 0) return;
    // Columns of whole blocks; at least a block per column, more once the run is longer than that.
    const perColumn = Math.max(1, Math.ceil(this.peaks.length / w));
    const x = (sample) => sample / BLOCK / perColumn;
    context.fillStyle = color("--wave", "#3b6ea5");
    for (let column = 0; column * perColumn < this.peaks.length; column++) {
      let peak = 0;
      const end = Math.min(this.peaks.length, (column + 1) * perColumn);
      for (let b = column * perColumn; b < end; b++) peak = Math.max(peak, this.peaks[b]);
      const bar = Math.max(1, Math.sqrt(Math.min(1, peak)) * h); // square root: quiet speech stays visible
      context.fillRect(column, (h - bar) / 2, 1, bar);
    }
    context.fillStyle = color("--mark", "#d08a00");
    for (const sample of this.marks) context.fillRect(Math.floor(x(sample)), 0, Math.max(1, ratio), h);
    if (this.playhead !== null) {
      context.fillStyle = color("--playhead", "#b00020");
      context.fillRect(Math.floor(x(this.playhead)), 0, Math.max(1, ratio), h);
    }
  }
}
