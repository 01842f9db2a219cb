// The audio side of the UI: an AudioContext at the model's rate and the streaming worklet (or,
// without one, chunks scheduled back to back).
// Both engines (server and in-browser) feed it Float32Array chunks; it tells when the first audible
// sample reached the output (TTFA) and when a run has played out. Its events are the worklet's
// messages (audio-protocol.js): on(AudioMessage.FIRST_AUDIO, ...), on(AudioMessage.DRAINED, ...).

import "./audio-protocol.js";

const AudioMessage = globalThis.PocketAudioProtocol;

// What both players share: the events, and the audio clock's mapping to performance.now().
class Events {
  constructor() {
    this.context = null;
    this.listeners = {};
    this.forgetPushes();
  }

  // Audio-clock time (s) -> performance.now() time (ms) of the moment it leaves the speakers,
  // from the context's output timestamp (which includes the output latency).
  toPerformanceTime(audioTime) {
    const stamp = this.context.getOutputTimestamp();
    return stamp.performanceTime + (audioTime - stamp.contextTime) * 1000;
  }

  // The same for the run's `sample` (counted from its start), which plays at `audioTime`: never
  // before its chunk was pushed, as the output timestamp can lag the audio clock by a buffer and
  // put it there.
  heardAt(audioTime, sample) {
    const chunk = this.pushed.find(({ end }) => end > sample);
    return Math.max(this.toPerformanceTime(audioTime), chunk ? chunk.at : -Infinity);
  }

  // A new run: no chunk pushed yet.
  forgetPushes() {
    this.pushed = []; // {end: the sample after the chunk, at: performance.now() when it was pushed}
  }

  notePush(chunk) {
    const end = (this.pushed.length ? this.pushed[this.pushed.length - 1].end : 0) + chunk.length;
    this.pushed.push({ end, at: performance.now() });
  }

  // At a click (a user gesture: browsers keep an AudioContext suspended until one). One start at a
  // time: a click while an earlier start still loads the worklet waits for it (it would find the
  // context made and its node not yet there).
  start(sampleRate) {
    const begin = () => this.begin(sampleRate);
    this.starting = (this.starting || Promise.resolve()).then(begin, begin);
    return this.starting;
  }

  on(type, callback) {
    (this.listeners[type] = this.listeners[type] || []).push(callback);
  }

  emit(type, data) {
    for (const callback of this.listeners[type] || []) callback(data);
  }

  // The context runs at the engine's rate (a new engine with another rate gets a new context).
  async open(sampleRate) {
    if (this.context && this.context.sampleRate !== sampleRate) {
      this.disconnect();
      await this.context.close();
      this.context = null;
    }
    const made = !this.context;
    if (made) this.context = new AudioContext({ sampleRate, latencyHint: "interactive" });
    return made;
  }
}

// The player of a secure context (https, localhost): the streaming worklet.
export class WorkletPlayer extends Events {
  async begin(sampleRate) {
    if (await this.open(sampleRate)) {
      await this.context.audioWorklet.addModule(new URL("./worklet.js", import.meta.url));
      this.node = new AudioWorkletNode(this.context, "stream-player", { outputChannelCount: [1] });
      this.node.connect(this.context.destination);
      this.node.port.onmessage = (event) => this.emit(event.data.type, event.data);
    }
    await this.context.resume();
    this.node.port.postMessage({ type: AudioMessage.RESET });
    this.forgetPushes();
  }

  disconnect() {
    this.node.disconnect();
  }

  push(chunk) {
    this.notePush(chunk);
    this.node.port.postMessage({ type: AudioMessage.CHUNK, chunk }, [chunk.buffer]);
  }

  // Samples to have queued before playing on where the queue runs dry (pace.js).
  lead(samples) {
    this.node.port.postMessage({ type: AudioMessage.LEAD, samples });
  }

  end() {
    this.node.port.postMessage({ type: AudioMessage.END });
  }

  stop() {
    if (this.node) this.node.port.postMessage({ type: AudioMessage.RESET });
  }
}

// The player where there is no AudioWorklet (plain http from another host is not a secure context):
// each chunk an AudioBufferSourceNode, started where the one before ends, with the worklet's
// messages (FIRST_AUDIO, POSITION per chunk, STALLED, DRAINED) worked out from the schedule. It
// plays each chunk as soon as it comes: it does not wait for a lead.
export class ScheduledPlayer extends Events {
  async begin(sampleRate) {
    await this.open(sampleRate);
    await this.context.resume();
    this.reset();
  }

  reset() {
    this.forgetPushes();
    for (const source of this.sources || []) source.stop();
    this.sources = new Set();
    this.next = 0; // audio-clock time where the next chunk starts
    this.ended = false;
    this.heard = false;
    this.playing = false;
    this.rendered = 0;
    this.audible = 0;
    this.stalls = 0;
    this.starved = 0;
  }

  disconnect() {
    this.reset();
  }

  push(chunk) {
    this.notePush(chunk);
    const now = this.context.currentTime;
    if (this.playing && this.next < now) {
      this.stalls += 1;
      this.starved += Math.round((now - this.next) * this.context.sampleRate);
      this.emit(AudioMessage.STALLED, { rendered: this.rendered, lead: 0 });
    }
    const at = Math.max(this.next, now);
    const buffer = this.context.createBuffer(1, chunk.length, this.context.sampleRate);
    buffer.copyToChannel(chunk, 0);
    const source = this.context.createBufferSource();
    source.buffer = buffer;
    source.connect(this.context.destination);
    source.onended = () => {
      this.sources.delete(source);
      this.drained();
    };
    source.start(at);
    this.sources.add(source);
    this.playing = true;
    this.next = at + buffer.duration;
    const first = chunk.findIndex((sample) => sample !== 0);
    if (!this.heard && first >= 0) {
      this.heard = true;
      this.emit(AudioMessage.FIRST_AUDIO, {
        time: at + first / this.context.sampleRate,
        sample: this.rendered + first,
      });
    }
    for (const sample of chunk) if (sample !== 0) this.audible += 1;
    this.rendered += chunk.length;
    this.emit(AudioMessage.POSITION, { rendered: this.rendered, time: this.next });
  }

  end() {
    this.ended = true;
    this.drained();
  }

  lead() {}

  // DRAINED once the run has ended and its last chunk has played.
  drained() {
    if (!this.playing || !this.ended || this.sources.size > 0) return;
    this.playing = false;
    this.emit(AudioMessage.DRAINED, {
      time: Math.max(this.next, this.context.currentTime),
      rendered: this.rendered,
      audible: this.audible,
      stalls: this.stalls,
      starved: this.starved,
    });
  }

  stop() {
    this.reset();
  }
}

// Plays the engines' Float32Array chunks as they come, and tells (by events) when the first audible
// sample left the speakers (TTFA), what is sounding, and how a run played out.
export function createPlayer() {
  // Chromium defines AudioWorkletNode outside a secure context too, but no AudioWorklet to load one.
  return typeof AudioWorklet === "undefined" ? new ScheduledPlayer() : new WorkletPlayer();
}

// A 16-bit mono WAV file of float32 chunks, for the download link.
export function wavBlob(chunks, sampleRate) {
  const samples = chunks.reduce((n, c) => n + c.length, 0);
  const buffer = new ArrayBuffer(44 + samples * 2);
  const view = new DataView(buffer);
  const text = (offset, s) => [...s].forEach((ch, i) => view.setUint8(offset + i, ch.charCodeAt(0)));
  text(0, "RIFF");
  view.setUint32(4, 36 + samples * 2, true);
  text(8, "WAVEfmt ");
  view.setUint32(16, 16, true);
  view.setUint16(20, 1, true);
  view.setUint16(22, 1, true);
  view.setUint32(24, sampleRate, true);
  view.setUint32(28, sampleRate * 2, true);
  view.setUint16(32, 2, true);
  view.setUint16(34, 16, true);
  text(36, "data");
  view.setUint32(40, samples * 2, true);
  let offset = 44;
  for (const chunk of chunks) {
    for (let i = 0; i < chunk.length; i++, offset += 2) {
      const s = Math.max(-1, Math.min(1, chunk[i]));
      view.setInt16(offset, Math.trunc(s * 32767), true);
    }
  }
  return new Blob([buffer], { type: "audio/wav" });
}
