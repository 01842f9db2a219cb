// Browser mode, the in-browser engine's page half: Pyodide in Web Workers (worker.js beside this
// module) runs the model in this tab. The same speak() contract as the page's server engine
// (web/server-engine.js), plus boot() for the one-time start (with progress).
//
// The first worker ("both": the flow LM and the Mimi decoder) boots alone, so that it has the CPU to
// itself and the page can speak as soon as it is ready. Where the machine has two cores, a second
// worker (the decoder) boots once the first has had a pause (no request for IDLE_MS: at once if the
// visitor does not click, after the first run if they do), and from the next request on the first
// worker sends it each frame through a MessageChannel (HANDOVER): the two halves of every frame
// then run on two cores. Booting both at once, as the page did before, made the first audio wait
// for two Pythons starting on two cores, and twice as long where the two cores are shared; booting
// the second at the first's ready made a visitor's first click share the CPU with it. The
// messages: protocol.js.

import "./protocol.js";

const { engine: EngineMessage } = globalThis.PocketProtocol;

// The workers and their start:
//   workers  {flow, decoder}: the same Worker twice until the decoder worker joins
//   booted   Promise of the first worker's {info, timings, phases, workers}
//   joined   Promise of the same record once every worker is up (phases.decoder added)
//   broken   why the workers can no longer be used (one failed after it started)
const pool = { workers: null, booted: null, joined: null, broken: null };
// The requests: the next one's id, and those under way (id -> {onChunk, onSegment, onWord,
// resolve, reject}).
const requests = { nextId: 1, pending: new Map() };
// The requests that keep the first worker working (texts said, text streams, voice uploads), and
// the decoder worker's start while it waits for a pause in them (see boot).
const IDLE_MS = 1000;
const idle = { working: 0, startDecoder: null, timer: null };

// Whether two workers run here (one per half of each frame).
export function twoWorkers() {
  return (navigator.hardwareConcurrency || 1) >= 2;
}

// The service worker that keeps the site's files (a reload downloads nothing; offline works). The
// workers boot once it controls the page, so that everything they fetch goes through it: at once
// where it already does (a returning visit), while the browser checks for a newer sw.js. Where none
// will control this page, they boot without it and keep the files in the Cache API themselves.
async function serviceWorker() {
  if (!("serviceWorker" in navigator)) return false; // not a secure context (plain http to another host)
  try {
    const registered = navigator.serviceWorker.register(new URL("../sw.js", import.meta.url));
    if (navigator.serviceWorker.controller) {
      registered.catch((error) => console.warn("the service worker was not updated:", error));
      return true;
    }
    return await controlled(await registered);
  } catch (error) {
    console.warn("no service worker:", error);
    return false;
  }
}

// Whether a service worker of `registration` takes control of this page: one still installing or
// activating does when it activates (it claims the site's pages); none does where it fails to
// install (redundant), nor after a hard reload, which bypasses an active one for this page's life.
function controlled(registration) {
  const container = navigator.serviceWorker;
  return new Promise((resolve) => {
    container.addEventListener("controllerchange", () => resolve(true), { once: true });
    const active = registration && registration.active;
    const coming =
      registration &&
      (registration.installing || registration.waiting || (active && active.state === "activating" ? active : null));
    if (!coming) return resolve(Boolean(container.controller));
    coming.addEventListener("statechange", () => {
      if (coming.state === "redundant" || coming.state === "activated") resolve(Boolean(container.controller));
    });
  });
}

function start(siteInfo, role, cached, port, onProgress) {
  const worker = new Worker(new URL("worker.js", import.meta.url));
  let up = false;
  const ready = new Promise((resolve, reject) => {
    worker.onerror = (event) => {
      const why = event.message || "it stopped";
      if (!up) reject(new Error(`the in-browser engine failed to start: ${why}`));
      else failed(new Error(`the in-browser engine stopped (${why}): reload the page to start it again`));
    };
    worker.onmessage = (event) => {
      const message = event.data;
      if (message.type === EngineMessage.PROGRESS && message.id === undefined) onProgress(message);
      else if (message.type === EngineMessage.READY) {
        up = true;
        resolve(message);
      } else if (message.type === EngineMessage.ERROR && message.id === undefined) reject(new Error(message.message));
      else route(message);
    };
  });
  // ?kernels=simd on the page forces the WebAssembly SIMD kernels where relaxed SIMD would run.
  const kernels = new URLSearchParams(self.location.search).get("kernels");
  worker.postMessage({ type: EngineMessage.BOOT, site: siteInfo, role, cached, port, kernels }, port ? [port] : []);
  return { worker, ready };
}

export function boot(siteInfo, onProgress) {
  if (pool.booted) return pool.booted;
  pool.booted = (async () => {
    const cached = await serviceWorker();
    const first = start(siteInfo, "both", cached, null, onProgress);
    pool.workers = { flow: first.worker, decoder: first.worker };
    const { info, timings } = await first.ready;
    const load = { info: { ...info, heap_bytes: [info.heap_bytes] }, timings, phases: { both: timings }, workers: 1 };
    pool.joined = twoWorkers()
      ? new Promise((resolve) => {
          idle.startDecoder = () => {
            load.decoder_started_at_ms = performance.now(); // since the page was opened
            resolve(addDecoder(siteInfo, cached, load));
          };
          whenIdle();
        })
      : Promise.resolve(load);
    return load;
  })();
  pool.booted.catch(() => {
    pool.booted = null;
  });
  return pool.booted;
}

// The boot's record once every worker of this machine is up: with two cores, after the decoder
// worker has joined (or failed to: the first worker then goes on decoding, and the record says one).
export async function allWorkers() {
  await pool.booted;
  return pool.joined;
}

// `request` (a Promise) keeps the first worker working until it settles: the decoder worker waits.
function work(request) {
  idle.working += 1;
  clearTimeout(idle.timer);
  const settled = () => {
    idle.working -= 1;
    whenIdle();
  };
  request.then(settled, settled);
  return request;
}

// Starts the decoder worker (if it waits) once no request has kept the first worker working for IDLE_MS.
function whenIdle() {
  if (!idle.startDecoder || idle.working > 0) return;
  clearTimeout(idle.timer);
  idle.timer = setTimeout(() => {
    const begin = idle.startDecoder;
    idle.startDecoder = null;
    if (begin) begin();
  }, IDLE_MS);
}

// The decoder worker, booted once the first has had a pause (boot); from then on the first
// worker's next request sends its frames there.
async function addDecoder(siteInfo, cached, load) {
  const channel = new MessageChannel();
  const decoder = start(siteInfo, "decoder", cached, channel.port2, () => {});
  try {
    const { info, timings } = await decoder.ready;
    pool.workers.flow.postMessage({ type: EngineMessage.HANDOVER, port: channel.port1 }, [channel.port1]);
    pool.workers = { flow: pool.workers.flow, decoder: decoder.worker };
    load.phases.decoder = timings;
    load.info.heap_bytes.push(info.heap_bytes);
    load.workers = 2;
  } catch (error) {
    console.warn("the decoder worker did not start: the first worker goes on decoding", error);
    decoder.worker.terminate();
  }
  return load;
}

function route(message) {
  const request = requests.pending.get(message.id);
  if (!request) return;
  if (message.type === EngineMessage.CHUNK) {
    request.onChunk(message.chunk);
    return;
  }
  if (message.type === EngineMessage.SEGMENT) {
    const { text, spoken, start_sample: startSample } = message;
    if (request.onSegment) request.onSegment({ text, spoken, start_sample: startSample });
    return;
  }
  if (message.type === EngineMessage.WORD || message.type === EngineMessage.WORD_END) {
    const { id, ...event } = message; // the word event of every wire (docs/word-timestamps.md)
    if (request.onWord) request.onWord(event);
    return;
  }
  if (message.type === EngineMessage.PROGRESS) {
    if (request.onProgress) request.onProgress(message);
    return;
  }
  requests.pending.delete(message.id); // every other reply is the request's last
  if (message.type === EngineMessage.ERROR) {
    stopEverywhere(message.id);
    request.reject(new Error(message.message));
  } else if (message.type === EngineMessage.DONE) request.resolve();
  else if (message.type === EngineMessage.VOICE) request.resolve(message.voice);
  else if (message.type === EngineMessage.NORMALIZE) request.resolve(message.text);
  else if (message.type === EngineMessage.CHECK) request.resolve(message.report);
  else if (message.type === EngineMessage.HEAP) request.resolve(message.bytes);
  else if (message.type === EngineMessage.MODULES) request.resolve(message.report);
}

// A worker failed after it started: every request waiting on the workers fails with `error`, and
// so does every later one (a worker that failed cannot be trusted with more).
function failed(error) {
  pool.broken = error;
  for (const request of requests.pending.values()) request.reject(error);
  requests.pending.clear();
}

function stopEverywhere(id) {
  for (const worker of distinctWorkers()) worker.postMessage({ type: EngineMessage.STOP, id });
}

// Says `text`: onChunk(Float32Array) for each piece of audio; with `words` (the model times them),
// onWord(event) for each word's start (before the audio that starts it) and end: the word events
// of every wire (docs/word-timestamps.md), {type: "word" | "word_end", word, index, start_sample,
// end_sample (word_end)}, in samples of the run.
export function speak({ text, voice, signal, onChunk, onWord, options, words }) {
  const id = requests.nextId++;
  return work(
    new Promise((resolve, reject) => {
      if (pool.broken) return reject(pool.broken);
      requests.pending.set(id, { onChunk, onWord, resolve, reject });
      signal.addEventListener("abort", () => {
        stopEverywhere(id);
        requests.pending.delete(id);
        reject(new DOMException("stopped", "AbortError"));
      });
      pool.workers.flow.postMessage({
        type: EngineMessage.SPEAK,
        id,
        text,
        voice,
        options: options || {},
        words: Boolean(words),
      });
    }),
  );
}

// A text stream: text that arrives in pieces (an LLM's reply, a user typing), said segment by
// segment as core's segmenter finds each complete, in the flow worker. The same contract in both
// engines (server-engine.js speaks it over the server's WebSocket):
//   append(text)  a piece of text (any split, inside words too)
//   flush()       say what is buffered now (the writer paused)
//   end()         no more text: say the rest; `done` resolves once all the audio has been sent
//   cancel()      stop now (barge-in): nothing more comes; `done` rejects with an AbortError
// onSegment({text, spoken, start_sample}) comes before each segment's first chunk: the segment as
// given, as read (normalized), and the samples sent before it; with `words`, onWord as for speak,
// in samples of the stream.
export function textStream({ voice, options, onChunk, onSegment, onWord, words }) {
  const id = requests.nextId++;
  const done = work(
    new Promise((resolve, reject) => {
      if (pool.broken) reject(pool.broken);
      else requests.pending.set(id, { onChunk, onSegment, onWord, resolve, reject });
    }),
  );
  const send = (message) => {
    if (requests.pending.has(id)) pool.workers.flow.postMessage({ ...message, id });
  };
  send({ type: EngineMessage.STREAM, voice, options: options || {}, words: Boolean(words) });
  return {
    append: (text) => send({ type: EngineMessage.TEXT, text }),
    flush: () => send({ type: EngineMessage.FLUSH }),
    end: () => send({ type: EngineMessage.END }),
    cancel: () => {
      const request = requests.pending.get(id);
      if (!request) return;
      requests.pending.delete(id);
      stopEverywhere(id);
      request.reject(new DOMException("cancelled", "AbortError"));
    },
    done,
  };
}

// What normalization makes of `text` (numbers, dates, currency... as words), in the flow worker.
export function normalize(text) {
  const id = requests.nextId++;
  return new Promise((resolve, reject) => {
    requests.pending.set(id, { resolve, reject });
    pool.workers.flow.postMessage({ type: EngineMessage.NORMALIZE, id, text });
  });
}

// A recording decoded by the browser (any format it plays), mixed to mono, cloned in the worker.
// The first upload fetches and loads the voice-cloning part first: onProgress({stage, loaded, total}).
export async function uploadVoice(file, sampleRate, onProgress) {
  const context = new OfflineAudioContext(1, 1, sampleRate);
  const decoded = await context.decodeAudioData(await file.arrayBuffer());
  const samples = new Float32Array(decoded.length);
  for (let c = 0; c < decoded.numberOfChannels; c++) {
    const channel = decoded.getChannelData(c);
    for (let i = 0; i < samples.length; i++) samples[i] += channel[i] / decoded.numberOfChannels;
  }
  const id = requests.nextId++;
  return work(
    new Promise((resolve, reject) => {
      if (pool.broken) return reject(pool.broken);
      requests.pending.set(id, { resolve, reject, onProgress });
      pool.workers.flow.postMessage({ type: EngineMessage.VOICE, id, samples, sampleRate: decoded.sampleRate }, [
        samples.buffer,
      ]);
    }),
  );
}

// The workers, once each (one or two).
function distinctWorkers() {
  return pool.workers.flow === pool.workers.decoder ? [pool.workers.flow] : [pool.workers.flow, pool.workers.decoder];
}

// Asks each worker a question the worker answers with one message of the same type.
function askEach(type) {
  return Promise.all(
    distinctWorkers().map((worker) => {
      const id = requests.nextId++;
      return new Promise((resolve, reject) => {
        requests.pending.set(id, { resolve, reject });
        worker.postMessage({ type, id });
      });
    }),
  );
}

// The kernels against NumPy in each worker (browser/kernel_check.py): [report] per worker.
export const checkKernels = () => askEach(EngineMessage.CHECK);

// The WebAssembly heap of each worker, in bytes (it only grows: the peak so far).
export const heapBytes = () => askEach(EngineMessage.HEAP);

// How the modules compiled ahead of time served each worker: [{shipped, used, stale}] per worker.
export const compiledModules = () => askEach(EngineMessage.MODULES);
