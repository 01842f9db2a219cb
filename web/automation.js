// The page's automation API, window.pocketTTS: what the page records of its runs, and the calls that
// drive it without a mouse. Automation reads and calls them (tests/browser/, e2e/).
//
// Records (the page's modules append to them):
//   runs     every finished Generate run: {mode, started_at_ms (since the page opened), ttfc_ms,
//            ttfa_ms, total_ms, audio_ms, rtf (seconds of making per second of audio, from the
//            second chunk on: pace.js; null under a second of audio), words}
//   played   every run that played out: {samples, audible, stalls} (samples the worklet rendered,
//            how many not silent, how often playback waited for audio)
//   current  the Generate run under way: {mode, samples received so far, playing once its player is
//            up}, null when none
//   uploads  every voice upload: {mode, ms, part_ms} (ms until the voice was ready, of which part_ms
//            fetching and loading the voice-cloning part: the first upload in the browser)
//   streams  every text stream that ended (see textStream in text-stream.js)
//   words    the words of the run playing: {word, index, start_sample, end_sample, heard_at, lit_at}
//   load     the in-browser model's start-up: {total_ms, ready_at_ms (since the page opened), phases
//            (each worker's start-up phase by phase: browser/worker-boot.js), model_store and
//            model_stored (where the workers keep the model's files, and how many the first worker
//            read from there), ...}
//   ready    the page has started; failed: why the page, or the engine it switched to, could not
// Calls:
//   collect({mode, text, voice, options})       all the audio of one generation, not played
//   collectWords({mode, text, voice, options})  its word events and sample count, not played
//   textStream({mode, voice, options, play, onSegment, onChunk})  a text stream (text-stream.js says how)
//   normalize(text)                             what the in-browser engine reads `text` as

export const records = {
  runs: [],
  played: [],
  uploads: [],
  streams: [],
  ready: false,
  words: [],
  current: null,
  failed: null,
  load: null,
};

// window.pocketTTS: the records, and the calls over the page's `engines` ({server, browser}: the
// browser's is null until the page imports it) and its text streams.
export function expose(engines, textStream) {
  window.pocketTTS = Object.assign(records, {
    collect: (request) => collect(engines, request),
    collectWords: (request) => collectWords(engines, request),
    textStream,
    normalize: (text) => engines.browser.normalize(text),
  });
}

// All the audio of one generation, without playing it (for automated comparisons).
async function collect(engines, { mode, text, voice, options }) {
  const chunks = [];
  await engines[mode].speak({
    text,
    voice,
    options,
    signal: new AbortController().signal,
    onChunk: (c) => chunks.push(c),
  });
  return chunks.flatMap((c) => Array.from(c));
}

// The word events of one generation (not played), as the engine gave them (the shape of every
// wire: {type: "word" | "word_end", word, index, start_sample, end_sample}), and its samples.
async function collectWords(engines, { mode, text, voice, options }) {
  const words = [];
  let samples = 0;
  await engines[mode].speak({
    text,
    voice,
    options,
    words: true,
    signal: new AbortController().signal,
    onChunk: (c) => (samples += c.length),
    onWord: (event) => words.push(event),
  });
  return { words, samples };
}
