// The audio side of the UI: an AudioContext at the model's rate and the streaming worklet.
// Both engines (server and in-browser) feed it Float32Array chunks; it tells when the first audible
// sample reached the output (TTFA) and when a run has played out. Its events are the worklet's
// messages (protocol.js, audio): on(AudioMessage.FIRST_AUDIO, ...), on(AudioMessage.DRAINED, ...).

import "./protocol.js";

const { audio: AudioMessage } = globalThis.PocketProtocol;

export class Player {
  constructor() {
    this.context = null;
    this.node = null;
    this.listeners = {};
  }

  // Must run in a user gesture (the click): browsers keep an AudioContext suspended until one.
  // The context runs at the engine's rate (a new engine with another rate gets a new context).
  async start(sampleRate) {
    if (this.context && this.context.sampleRate !== sampleRate) {
      this.node.disconnect();
      await this.context.close();
      this.context = null;
    }
    if (!this.context) {
      this.context = new AudioContext({ sampleRate, latencyHint: "interactive" });
      await this.context.audioWorklet.addModule(new URL("./worklet.js", import.meta.url));
      this.node = new AudioWorkletNode(this.context, "stream-player", { outputChannelCount: [1] });
      this.node.connect(this.context.destination);
      this.node.port.onmessage = (event) => this.emit(event.data.type, event.data);
    }
    await this.context.resume();
    this.node.port.postMessage({ type: AudioMessage.RESET });
  }

  push(chunk) {
    this.node.port.postMessage({ type: AudioMessage.CHUNK, chunk }, [chunk.buffer]);
  }

  end() {
    this.node.port.postMessage({ type: AudioMessage.END });
  }

  stop() {
    if (this.node) this.node.port.postMessage({ type: AudioMessage.RESET });
  }

  // Audio-clock time (s) -> performance.now() time (ms) of the moment it leaves the speakers,
  // from the context's output timestamp (which includes the output latency).
  toPerformanceTime(audioTime) {
    const stamp = this.context.getOutputTimestamp();
    return stamp.performanceTime + (audioTime - stamp.contextTime) * 1000;
  }

  on(type, callback) {
    (this.listeners[type] = this.listeners[type] || []).push(callback);
  }

  emit(type, data) {
    for (const callback of this.listeners[type] || []) callback(data);
  }
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
