// AudioWorklet processor: plays float32 chunks as they arrive, and reports the first audible sample.
//
// Messages in (port): {chunk: Float32Array} to queue audio, {end: true} once the run has no more,
// {reset: true} to drop everything (Stop, or a new run). Messages out: {type: "first-audio",
// time} when the first non-zero sample is rendered (time: audio clock, in seconds), {type:
// "drained", time, rendered, audible, stalls} when an ended run has played out (samples rendered,
// how many of them were not silent, and stalls: how often the queue ran dry before the end, each
// a gap the listener heard).

class StreamPlayer extends AudioWorkletProcessor {
  constructor() {
    super();
    this.queue = [];
    this.offset = 0; // read position in queue[0]
    this.ended = false;
    this.heard = false;
    this.playing = false;
    this.rendered = 0;
    this.audible = 0;
    this.stalls = 0;
    this.starved = false;
    this.port.onmessage = (event) => {
      const message = event.data;
      if (message.reset) {
        this.queue = [];
        this.offset = 0;
        this.ended = false;
        this.heard = false;
        this.playing = false;
        this.rendered = 0;
        this.audible = 0;
        this.stalls = 0;
        this.starved = false;
      }
      if (message.chunk) {
        this.queue.push(message.chunk);
        this.playing = true;
        this.starved = false;
      }
      if (message.end) this.ended = true;
    };
  }

  process(inputs, outputs) {
    const out = outputs[0][0];
    let written = 0;
    while (written < out.length && this.queue.length > 0) {
      const chunk = this.queue[0];
      const n = Math.min(out.length - written, chunk.length - this.offset);
      out.set(chunk.subarray(this.offset, this.offset + n), written);
      for (let i = 0; i < n; i++) if (chunk[this.offset + i] !== 0) this.audible++;
      this.rendered += n;
      if (!this.heard) {
        for (let i = 0; i < n; i++) {
          if (chunk[this.offset + i] !== 0) {
            this.heard = true;
            this.port.postMessage({ type: "first-audio", time: currentTime + (written + i) / sampleRate });
            break;
          }
        }
      }
      written += n;
      this.offset += n;
      if (this.offset === chunk.length) {
        this.queue.shift();
        this.offset = 0;
      }
    }
    out.fill(0, written);
    if (this.playing && this.queue.length === 0) {
      if (this.ended) {
        this.playing = false;
        this.port.postMessage({
          type: "drained",
          time: currentTime + written / sampleRate,
          rendered: this.rendered,
          audible: this.audible,
          stalls: this.stalls,
        });
      } else if (written < out.length && !this.starved) {
        this.starved = true;
        this.stalls++;
      }
    }
    return true;
  }
}

registerProcessor("stream-player", StreamPlayer);
