// AudioWorklet processor: plays float32 chunks as they arrive, and reports the first audible sample,
// where playback is (so that the page shows what is sounding by this clock, not by when the audio
// was made) and, once a run has ended, how it played out. Its messages are named in audio-protocol.js:
// importing it sets globalThis.PocketAudioProtocol in the worklet's own scope.

import "./audio-protocol.js";

const AudioMessage = globalThis.PocketAudioProtocol;
// POSITION every this many render quanta (128 samples each: about 43 ms at 24 kHz).
const POSITION_QUANTA = 8;

class StreamPlayer extends AudioWorkletProcessor {
  constructor() {
    super();
    this.reset();
    this.port.onmessage = (event) => {
      const message = event.data;
      if (message.type === AudioMessage.RESET) this.reset();
      else if (message.type === AudioMessage.CHUNK) {
        this.queue.push(message.chunk);
        this.queued += message.chunk.length;
        this.playing = true;
      } else if (message.type === AudioMessage.END) this.ended = true;
      else if (message.type === AudioMessage.LEAD) this.lead = message.samples;
    };
  }

  // Nothing queued, nothing played: the state before a run.
  reset() {
    this.queue = [];
    this.offset = 0; // read position in queue[0]
    this.ended = false; // the run has no more audio
    this.heard = false; // FIRST_AUDIO has been posted
    this.playing = false; // a run is under way (DRAINED not posted yet)
    this.rendered = 0;
    this.audible = 0;
    this.stalls = 0;
    this.starvedSamples = 0; // of silence played while the queue was dry
    this.starved = false; // the queue ran dry: silence until `lead` samples are queued again
    this.queued = 0; // samples in the queue not played yet
    this.lead = 0;
    this.quanta = 0;
  }

  process(inputs, outputs) {
    const out = outputs[0][0];
    let written = 0;
    if (this.starved && ((this.queued > 0 && this.queued >= this.lead) || this.ended)) this.starved = false;
    while (!this.starved && written < out.length && this.queue.length > 0) {
      const chunk = this.queue[0];
      const n = Math.min(out.length - written, chunk.length - this.offset);
      out.set(chunk.subarray(this.offset, this.offset + n), written);
      for (let i = 0; i < n; i++) if (chunk[this.offset + i] !== 0) this.audible++;
      this.rendered += n;
      if (!this.heard) {
        for (let i = 0; i < n; i++) {
          if (chunk[this.offset + i] !== 0) {
            this.heard = true;
            this.port.postMessage({
              type: AudioMessage.FIRST_AUDIO,
              time: currentTime + (written + i) / sampleRate,
              sample: this.rendered - n + i,
            });
            break;
          }
        }
      }
      written += n;
      this.offset += n;
      this.queued -= n;
      if (this.offset === chunk.length) {
        this.queue.shift();
        this.offset = 0;
      }
    }
    out.fill(0, written);
    if (this.playing && this.quanta++ % POSITION_QUANTA === 0) {
      const time = currentTime + written / sampleRate;
      this.port.postMessage({ type: AudioMessage.POSITION, rendered: this.rendered, time });
    }
    if (this.playing && (this.queue.length === 0 || this.starved)) {
      if (this.ended && this.queue.length === 0) {
        this.playing = false;
        this.port.postMessage({
          type: AudioMessage.DRAINED,
          time: currentTime + written / sampleRate,
          rendered: this.rendered,
          audible: this.audible,
          stalls: this.stalls,
          starved: this.starvedSamples,
        });
      } else if (written < out.length) {
        this.starvedSamples += out.length - written;
        if (!this.starved) {
          this.stalls++;
          this.port.postMessage({ type: AudioMessage.STALLED, rendered: this.rendered, lead: this.lead });
        }
        this.starved = true;
      }
    }
    return true;
  }
}

registerProcessor("stream-player", StreamPlayer);
