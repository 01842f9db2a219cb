// The in-browser engine: a classic Web Worker that boots Pyodide, links the WebAssembly SIMD kernels
// to Pyodide's own memory, writes `core` (and num2words, for its text normalization) into
// site-packages from the site's wheels (unpacked at build), loads its part of the model bundle and
// runs the very same core.TTSModel the server uses (browser/engine.py).
//
// A worker has a role, given at boot: "flow" (the flow LM and voice cloning: text -> latent frames),
// "decoder" (the Mimi decoder: frames -> audio), or "both". The page boots a "both" worker first,
// and, with two cores, a decoder worker after it: once that one is up (HANDOVER), the first worker
// becomes "flow" at its next request and sends each frame (a few dozen floats) straight to the
// decoder worker through a MessagePort, so the two halves of every frame run on two cores, as the
// server's scheduler runs them on two threads (server/scheduler.py).
//
// A request is a text to say (SPEAK) or a text stream (STREAM, then TEXT pieces, FLUSH, END: text
// arriving as an LLM writes it or a user types), said one generation after another: the whole text,
// or each segment once core's segmenter finds it complete. Every generation's audio is announced
// by a SEGMENT message (its text, the text it is read as, the sample it starts at).
//
// The messages (to and from the page, and between the two workers) are named and described in
// protocol.js. Every failure becomes an ERROR message: the page never waits on a silent worker.
//
// This file holds the worker's shared state and its message loop; the rest is one file per job,
// loaded below into the same global scope (classic worker scripts): worker-boot.js (the start:
// Pyodide, our packages, the model's files into Python), worker-link.js (NumPy's libraries and the
// kernels linked to Pyodide's memory), worker-store.js (downloads through the cache, the model's
// files kept in the origin's private file system), worker-requests.js (texts and text streams
// frame by frame, the decoder side, voices, normalization).

"use strict";

importScripts("protocol.js", "worker-store.js", "worker-link.js", "worker-boot.js", "worker-requests.js");
const { engine: EngineMessage, frames: FrameMessage } = globalThis.PocketProtocol;

// The worker's Python and its part of the model: Pyodide, the engine (browser/engine.py) and the
// role it runs, the port to the decoder worker (or from the flow worker), the compiled modules
// written at boot (browser/site/compiled.py), and importlib.import_module once looked up.
const worker = { pyodide: null, engine: null, role: null, port: null, shipped: 0, importModule: null };

const post = (message, transfer) => self.postMessage(message, transfer || []);

// (stage, loaded) -> a PROGRESS message (for request `id`, or the boot's) at each new stage, at the
// last byte and at most every PROGRESS_MS between, not at each of a download's pieces (~2000 for
// the model): every message costs this worker and the page's status line a turn (one at each
// percent of the model took ~20 ms of a returning visit's start, read from the cache).
const PROGRESS_MS = 100;
function progressMessages(id, total) {
  let said = { stage: null, at: -Infinity };
  return (stage, loaded) => {
    const now = performance.now();
    if (stage === said.stage && loaded < total && now - said.at < PROGRESS_MS) return;
    said = { stage, at: now };
    post({ type: EngineMessage.PROGRESS, id, stage, loaded, total });
  };
}

function fail(id, error) {
  post({ type: EngineMessage.ERROR, id, message: String((error && error.message) || error) });
}

self.onmessage = async (event) => {
  const message = event.data;
  try {
    switch (message.type) {
      case EngineMessage.BOOT:
        return await boot(message);
      case EngineMessage.SPEAK:
        return await speak(message);
      case EngineMessage.STREAM:
        return openStream(message);
      case EngineMessage.TEXT:
      case EngineMessage.FLUSH:
      case EngineMessage.END:
        return await streamText(message);
      case EngineMessage.HANDOVER:
        return handOver(message.port);
      case EngineMessage.STOP:
        return stop(message.id);
      case EngineMessage.NORMALIZE:
        return normalizeText(message);
      case EngineMessage.VOICE:
        return await addVoice(message);
      case EngineMessage.CHECK:
        return post({ type: EngineMessage.CHECK, id: message.id, report: JSON.parse(worker.engine.check_kernels()) });
      case EngineMessage.HEAP:
        return post({ type: EngineMessage.HEAP, id: message.id, bytes: worker.pyodide._module.HEAPU8.length });
      case EngineMessage.MODULES:
        return post({
          type: EngineMessage.MODULES,
          id: message.id,
          report: { shipped: worker.shipped, ...JSON.parse(pythonModule("core.browser.engine").compiled_modules()) },
        });
      default:
        throw new Error(`unknown message type: ${message.type}`);
    }
  } catch (error) {
    fail(message.id, error);
  }
};

// Newer Pyodide releases expose the file system as pyodide.FS; 0.17 as pyodide._module.FS.
const fileSystem = () => worker.pyodide.FS || worker.pyodide._module.FS;

// The Python module `name`, imported (a PyProxy). Its functions are called through it, not with
// runPython: that parses and compiles its code at each call, and tokenizes it where it ends with an
// expression (to look for a trailing semicolon), and the first tokenize compiles tokenize's regexes,
// ~20 ms of a worker's start.
function pythonModule(name) {
  if (worker.importModule === null)
    worker.importModule = worker.pyodide._module.builtins.get("__import__")("importlib").import_module;
  return worker.importModule(name);
}
