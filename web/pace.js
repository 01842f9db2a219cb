// How fast the engine makes a Generate run's audio against how fast it plays, and how far ahead the
// player waits for it once it has fallen behind: a slow device (or connection) then pauses once,
// long enough for the rest to play without a break, instead of stuttering at every chunk.
//
// With `rate` seconds of making for each second of audio (over 1 and steady), playing on with `lead`
// seconds queued and `remaining` still to make never runs dry when lead >= remaining * (rate - 1):
// the queue shrinks by (1 - 1 / rate) of each second played. `remaining` is estimated from the text
// (CHARS_PER_SECOND), and never below a quarter of what was made already.

// Characters of text per second of speech at speed 1 (english, the official voices: 13-16).
const CHARS_PER_SECOND = 14;
// Audio made before its rate is trusted (the first chunk's own wait excluded).
const MEASURE_SECONDS = 0.5;
// The longest wait for audio the player is asked for, and the shortest: a queue run dry before the
// rate is known (or by a hiccup of an engine that keeps up) waits this much rather than stutter.
const MAX_LEAD_SECONDS = 30;
const MIN_LEAD_SECONDS = 0.5;

export class Pace {
  constructor(textLength, speed, sampleRate) {
    this.sampleRate = sampleRate;
    this.expected = (textLength / CHARS_PER_SECOND / speed) * sampleRate; // samples
    this.first = null; // {samples, at} when the first chunk came
    this.rate = null; // seconds of making per second of audio, once measured
  }

  // After each chunk (`samples` received so far, at `now` ms): the samples to have queued before
  // playing on where the queue runs dry.
  lead(samples, now) {
    const least = MIN_LEAD_SECONDS * this.sampleRate;
    if (this.first === null) this.first = { samples, at: now };
    const made = (samples - this.first.samples) / this.sampleRate;
    if (made < MEASURE_SECONDS) return least;
    this.rate = (now - this.first.at) / 1000 / made;
    const remaining = Math.max(this.expected - samples, 0.25 * samples);
    const needed = remaining * Math.max(this.rate - 1, 0);
    return Math.round(Math.min(Math.max(needed, least), MAX_LEAD_SECONDS * this.sampleRate));
  }
}
