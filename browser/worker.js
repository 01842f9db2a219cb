// The in-browser engine: a classic Web Worker that boots Pyodide, installs `core` from core.zip,
// loads the model bundle (cached with the Cache API, so a reload does not download it again), and
// generates speech with the very same core.TTSModel the server uses (browser/engine.py).
//
// Messages in: {type: "boot", site} (site: the parsed site.json, URLs relative to the site root),
// {type: "speak", id, text, voice, options}, {type: "stop", id}, {type: "voice", id, samples,
// sampleRate}. Messages out: {type: "progress", stage, loaded, total}, {type: "ready", info,
// timings}, {type: "chunk", id, chunk} (Float32Array, transferred), {type: "done", id},
// {type: "voice", id, voice}, {type: "error", id, message}. Every failure becomes an "error"
// message: the page never waits on a silent worker.

"use strict";

let pyodide = null;
let engine = null;
let running = null; // {id, stopped}
let cacheName = null;

const post = (message, transfer) => self.postMessage(message, transfer || []);

self.onmessage = async (event) => {
  const message = event.data;
  try {
    if (message.type === "boot") await boot(message.site);
    else if (message.type === "speak") await speak(message);
    else if (message.type === "stop") {
      if (running && running.id === message.id) running.stopped = true;
    } else if (message.type === "voice") addVoice(message);
  } catch (error) {
    post({ type: "error", id: message.id, message: String((error && error.message) || error) });
  }
};

// Newer Pyodide releases expose the file system as pyodide.FS; 0.17 as pyodide._module.FS.
const fileSystem = () => pyodide.FS || pyodide._module.FS;

async function boot(site) {
  const base = new URL("../", self.location.href);
  const pyodideBase = new URL(site.pyodide, base).href;
  cacheName = "pocket-tts-" + site.version;
  // Pyodide fetches its own runtime and packages: route those through the Cache API too, so that
  // a reload needs no network for them either (the HTTP cache may not keep 20 MB files).
  const networkFetch = self.fetch.bind(self);
  self.fetch = (input, init) => {
    const url = typeof input === "string" ? input : input.url;
    return url.startsWith(pyodideBase) ? cachedResponse(url, networkFetch) : networkFetch(input, init);
  };
  const timings = {};
  let start = performance.now();
  post({ type: "progress", stage: "Starting Python (Pyodide)" });
  importScripts(pyodideBase + "pyodide.js");
  pyodide = await loadPyodide({ indexURL: pyodideBase });
  timings.pyodide_ms = performance.now() - start;

  start = performance.now();
  post({ type: "progress", stage: "Loading NumPy" });
  await pyodide.loadPackage(["numpy"]);
  // loadPackage reports failures on the console only: check that the import really works.
  const numpyVersion = pyodide.runPython("import numpy\nnumpy.__version__");
  timings.numpy_ms = performance.now() - start;

  start = performance.now();
  const core = await fetchBytes(new URL(site.core, base).href);
  fileSystem().writeFile("/tmp/core.zip", core);
  pyodide.runPython("import sys\nsys.path.insert(0, '/tmp/core.zip')\nimport core, browser.engine");
  fileSystem().mkdir("/model");
  const files = Object.entries(site.model.files);
  let loaded = 0;
  const total = files.reduce((n, [, size]) => n + size, 0);
  for (const [name, size] of files) {
    const data = await fetchBytes(new URL(site.model.path + name, base).href, (bytes) =>
      post({ type: "progress", stage: "Downloading the model", loaded: loaded + bytes, total }));
    loaded += size;
    const path = "/model/" + name;
    if (name.includes("/")) fileSystem().mkdirTree(path.slice(0, path.lastIndexOf("/")));
    fileSystem().writeFile(path, data);
  }
  timings.download_ms = performance.now() - start;

  start = performance.now();
  post({ type: "progress", stage: "Loading the model" });
  pyodide.runPython("import browser.engine\n_engine = browser.engine.Engine('/model')");
  engine = pyodide.globals.get("_engine");
  const info = JSON.parse(engine.info());
  timings.load_ms = performance.now() - start;
  info.numpy = numpyVersion;
  info.python = pyodide.runPython("import sys\nsys.version.split()[0]");
  post({ type: "ready", info, timings });
}

// A response for `url` from the Cache API of this site version, fetched and stored the first time.
async function cachedResponse(url, networkFetch = self.fetch) {
  const cache = await caches.open(cacheName);
  const hit = await cache.match(url);
  if (hit) return hit;
  const response = await networkFetch(url);
  if (!response.ok) throw new Error(`cannot download ${url}: ${response.status} ${response.statusText}`);
  await cache.put(url, response.clone());
  return response;
}

// The bytes of `url` (through the cache), reporting the bytes received so far.
async function fetchBytes(url, onProgress) {
  const reader = (await cachedResponse(url)).body.getReader();
  const parts = [];
  let received = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
    received += value.length;
    if (onProgress) onProgress(received);
  }
  const bytes = new Uint8Array(received);
  let offset = 0;
  for (const part of parts) {
    bytes.set(part, offset);
    offset += part.length;
  }
  return bytes;
}

// A zero-delay pause that lets queued messages (a Stop) in between two frames.
function yieldToEvents() {
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => resolve();
    channel.port2.postMessage(null);
  });
}

async function speak({ id, text, voice, options }) {
  if (!engine) throw new Error("the model is not loaded yet");
  const started = JSON.parse(engine.start(text, voice || "", JSON.stringify(options || {})));
  if (started.error) throw new Error(started.error);
  const mine = { id, stopped: false };
  running = mine; // a newer request replaces this one: the loop below then ends quietly
  try {
    for (;;) {
      if (running !== mine) return;
      if (mine.stopped) {
        engine.cancel();
        break;
      }
      const proxy = engine.step();
      if (proxy === undefined || proxy === null) break;
      const buffer = proxy.getBuffer("f32");
      const chunk = buffer.data.slice(); // a copy: buffer.data views the whole wasm heap
      buffer.release();
      proxy.destroy();
      post({ type: "chunk", id, chunk }, [chunk.buffer]);
      await yieldToEvents();
    }
  } finally {
    if (running === mine) running = null;
  }
  post({ type: "done", id });
}

function addVoice({ id, samples, sampleRate }) {
  if (!engine) throw new Error("the model is not loaded yet");
  fileSystem().writeFile("/tmp/voice.f32", new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength));
  const result = JSON.parse(engine.add_voice("/tmp/voice.f32", sampleRate));
  if (result.error) throw new Error(result.error);
  post({ type: "voice", id, voice: result.voice });
}
