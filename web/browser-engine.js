// Browser mode: the Pyodide worker (browser/worker.js) runs the model in this tab. The same
// speak() contract as server-engine.js, plus boot() for the one-time start (with progress).

export const sampleRate = 24000;

let worker = null;
let booted = null; // Promise of {info, timings}
let nextId = 1;
const pending = new Map(); // id -> {onChunk, resolve, reject}

// The site's description (site.json, written by scripts/build_site.py), or null when this page is
// served without the in-browser engine.
export async function site() {
  try {
    const response = await fetch("site.json", { cache: "no-cache" });
    return response.ok ? await response.json() : null;
  } catch {
    return null;
  }
}

export function boot(siteInfo, onProgress) {
  if (booted) return booted;
  booted = new Promise((resolve, reject) => {
    worker = new Worker("browser/worker.js");
    worker.onerror = (event) => reject(new Error(event.message || "the worker failed to start"));
    worker.onmessage = (event) => {
      const message = event.data;
      if (message.type === "progress") onProgress(message);
      else if (message.type === "ready") resolve(message);
      else if (message.type === "error" && message.id === undefined) reject(new Error(message.message));
      else route(message);
    };
    worker.postMessage({ type: "boot", site: siteInfo });
  });
  booted.catch(() => {
    booted = null;
  });
  return booted;
}

function route(message) {
  const request = pending.get(message.id);
  if (!request) return;
  if (message.type === "chunk") request.onChunk(message.chunk);
  else if (message.type === "voice") {
    pending.delete(message.id);
    request.resolve(message.voice);
  } else if (message.type === "done") {
    pending.delete(message.id);
    request.resolve();
  } else if (message.type === "error") {
    pending.delete(message.id);
    request.reject(new Error(message.message));
  }
}

export function speak({ text, voice, signal, onChunk, options }) {
  const id = nextId++;
  return new Promise((resolve, reject) => {
    pending.set(id, { onChunk, resolve, reject });
    signal.addEventListener("abort", () => {
      worker.postMessage({ type: "stop", id });
      pending.delete(id);
      reject(new DOMException("stopped", "AbortError"));
    });
    worker.postMessage({ type: "speak", id, text, voice, options: options || {} });
  });
}

// A recording decoded by the browser (any format it plays), mixed to mono, cloned in the worker.
export async function uploadVoice(file) {
  const context = new OfflineAudioContext(1, 1, sampleRate);
  const decoded = await context.decodeAudioData(await file.arrayBuffer());
  const samples = new Float32Array(decoded.length);
  for (let c = 0; c < decoded.numberOfChannels; c++) {
    const channel = decoded.getChannelData(c);
    for (let i = 0; i < samples.length; i++) samples[i] += channel[i] / decoded.numberOfChannels;
  }
  const id = nextId++;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject });
    worker.postMessage({ type: "voice", id, samples, sampleRate: decoded.sampleRate }, [samples.buffer]);
  });
}
