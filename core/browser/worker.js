// The in-browser engine: a classic Web Worker that boots Pyodide, links the WebAssembly SIMD kernels
// to Pyodide's own memory, writes `core` (and num2words, for its text normalization) into
// site-packages from the site's wheels (unpacked at build), loads its part of the model bundle and
// runs the very same core.TTSModel the server uses (core/browser/engine.py).
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
// protocol.js, which the site serves from its root (this file is browser/worker.js there). Every
// failure becomes an ERROR message: the page never waits on a silent worker.

"use strict";

importScripts("../protocol.js");
const { engine: EngineMessage, frames: FrameMessage } = globalThis.PocketProtocol;

let pyodide = null;
let engine = null;
let role = null;
let port = null; // to the decoder worker, or from the flow worker
let handover = null; // the port to a decoder worker that takes over from the next request ("both")
let cacheName = null;
// Whether this worker stores what it fetches in the Cache API itself: not where a service worker
// already does, nor where neither exists (plain http from another host is not a secure context;
// there the browser's HTTP cache is all there is).
let useCacheApi = true;
let networkFetch = null; // the browser's own fetch (boot routes self.fetch through the cache)
let store = null; // the folder where this worker keeps the model's files (openStore), or null
let modelKeeper = null; // what keeps them: "private file system", "Cache API" or "HTTP cache"
let running = null; // the flow side's current request (see pump)
// The voice-cloning part ({name, url, size}, from site.json): the flow side fetches and loads it on
// the first voice upload (`cloning`, a Promise from then on), not at boot.
let cloningPart = null;
let cloning = null;
const stopped = new Set(); // requests the decoder side drops
const decodeQueue = []; // frames and ends the decoder side has yet to handle
let decoding = false;
let shipped = 0; // compiled modules written at boot (tools/compiled.py)

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
        return post({ type: EngineMessage.CHECK, id: message.id, report: JSON.parse(engine.check_kernels()) });
      case EngineMessage.HEAP:
        return post({ type: EngineMessage.HEAP, id: message.id, bytes: pyodide._module.HEAPU8.length });
      case EngineMessage.MODULES:
        return post({ type: EngineMessage.MODULES, id: message.id, report: { shipped, ...JSON.parse(pythonModule("core.browser.engine").compiled_modules()) } });
      default:
        throw new Error(`unknown message type: ${message.type}`);
    }
  } catch (error) {
    fail(message.id, error);
  }
};

// Newer Pyodide releases expose the file system as pyodide.FS; 0.17 as pyodide._module.FS.
const fileSystem = () => pyodide.FS || pyodide._module.FS;

let importModule = null; // importlib.import_module

// The Python module `name`, imported (a PyProxy). Its functions are called through it, not with
// runPython: that parses and compiles its code at each call, and tokenizes it where it ends with an
// expression (to look for a trailing semicolon), and the first tokenize compiles tokenize's regexes,
// ~20 ms of a worker's start.
function pythonModule(name) {
  if (importModule === null) importModule = pyodide._module.builtins.get("__import__")("importlib").import_module;
  return importModule(name);
}

async function boot({ site, role: myRole, cached, port: myPort, kernels: kernelBuild }) {
  role = myRole;
  port = myPort || null;
  useCacheApi = !cached && typeof caches !== "undefined";
  const base = new URL("../", self.location.href);
  const url = (path) => new URL(path, base).href;
  const pyodideBase = url(site.pyodide);
  cacheName = "pocket-tts-" + site.version;
  // Pyodide fetches its own files: route those through the cache too.
  networkFetch = self.fetch.bind(self);
  self.fetch = (input, init) => {
    const target = typeof input === "string" ? input : input.url;
    return target.startsWith(base.href) ? cachedResponse(target, networkFetch) : networkFetch(input, init);
  };
  const timings = {};
  const bootStart = performance.now();
  store = await openStore(site.version);
  modelKeeper = store ? "private file system" : typeof caches !== "undefined" ? "Cache API" : "HTTP cache";
  // The model's files come from the store where it holds them whole; the others download while
  // Python starts, their bytes waiting in JS memory until Python is ready.
  let stage = "Starting Python (Pyodide)";
  const cloningName = site.model.voice_cloning || null;
  if (cloningName && site.model.roles[cloningName].includes(role)) {
    cloningPart = { name: cloningName, url: url(site.model.path + cloningName), size: site.model.files[cloningName] };
  }
  const files = Object.entries(site.model.files).filter(
    ([name]) => site.model.roles[name].includes(role) && name !== cloningName,
  );
  const total = files.reduce((n, [, size]) => n + size, 0);
  const received = new Map();
  const say = progressMessages(undefined, total);
  const progress = () => say(stage, [...received.values()].reduce((n, bytes) => n + bytes, 0));
  const downloads = Promise.all(
    files.map(async ([name, size]) => [name, await modelFile(name, url(site.model.path + name), size, (bytes) => {
      received.set(name, bytes);
      progress();
    })]),
  ).then(async (data) => {
    timings.download_ms = performance.now() - bootStart;
    if (store && role === "both" && data.every(([, file]) => file.kept)) await dropOtherStores(store);
    return data;
  });
  downloads.catch(() => {}); // awaited below; a failure is reported there
  const packages = fetchBytes(url(site.packages));
  packages.catch(() => {});
  // The modules compiled ahead of time (tools/compiled.py), where the site has them and this browser
  // can gunzip them; without them Python compiles each module from source, as it would anyway.
  const compiled = site.compiled && typeof DecompressionStream !== "undefined"
    ? fetchBytes(url(site.compiled)).then(gunzip)
    : Promise.resolve(null);
  compiled.catch(() => {});
  // NumPy's libraries compile while Python starts, each streamed from its own file (tools/pyodide.py):
  // the browser's code cache keeps their compiled code for the next visit.
  const libraries = new Map(
    Object.entries(site.libraries || {}).map(([path, name]) => [path, compileLibrary(pyodideBase + name)]),
  );
  progress();
  // Each phase of the start-up on its own (the page's load record and the e2e report show them):
  // `phase` adds the time since the last one under its name.
  let mark = bootStart;
  const phase = (name) => {
    const now = performance.now();
    timings[name] = now - mark;
    mark = now;
  };
  importScripts(pyodideBase + "pyodide.js");
  phase("pyodide_js_ms");
  const memory = await capturingMemory(() => loadPyodide({ indexURL: pyodideBase }), timings);
  phase("python_init_ms"); // Pyodide's own start: its files, the wasm compile (wasm_compile_ms), the stdlib
  // No .pyc written from here on: the file system lives as long as the worker, and every .pyc in it
  // is then one the site shipped (core.browser.engine.compiled_modules counts them).
  pythonModule("sys").dont_write_bytecode = true;
  timings.pyodide_ms = mark - bootStart;

  const numpyStart = mark;
  stage = "Loading NumPy";
  progress();
  useCompiledLibraries(libraries);
  await pyodide.loadPackage(["numpy"]);
  pyodide._module.reportUndefinedSymbols(); // once, for the libraries linked with allowUndefined
  readOnFirstUse(site.libraries_on_first_use || {}, pyodideBase);
  phase("packages_ms");
  // The wheels' files (core's and num2words's, pure Python), unpacked at build (tools/site.py):
  // written as they are, which costs less than unzipping the wheels here, or loading micropip and
  // the packages it imports to do the same.
  writePackages(await packages);
  phase("wheels_ms");
  const modules = await compiled;
  shipped = modules ? writeCompiled(modules) : 0;
  phase("compiled_ms");
  // loadPackage reports failures on the console only: check that the import really works.
  const numpyVersion = pythonModule("numpy").__version__;
  phase("numpy_import_ms");
  const engineModule = pythonModule("core.browser.engine");
  phase("core_import_ms");
  const kernels = await linkKernels(memory, chooseKernels(site, kernelBuild, url));
  phase("kernels_ms");
  timings.numpy_ms = mark - numpyStart; // NumPy, our wheels and modules, the imports, the kernels

  stage = "Downloading the model";
  progress();
  const model = await downloads;
  phase("download_wait_ms");
  // The weights files (.safetensors at the bundle's top) go straight into Python's memory, each
  // read from the store or copied from its downloaded pieces once (core.browser.engine.reserve),
  // and the model's tensors are views of them; the rest (the manifest, config, tokenizer, voices)
  // into the file system.
  fileSystem().mkdirTree("/model/voices");
  for (const [name, file] of model) {
    const path = "/model/" + name;
    if (!/^[^/]+\.safetensors$/.test(name)) {
      fileSystem().writeFile(path, file.bytes(), { canOwn: true });
      continue;
    }
    const address = engineModule.reserve(path, file.size);
    file.readInto(new Uint8Array(pyodide._module.HEAPU8.buffer, address, file.size));
  }
  timings.model_stored = model.filter(([, file]) => file.stored).length;
  phase("model_copy_ms");

  stage = "Loading the model";
  progress();
  engine = engineModule.BrowserEngine("/model", role);
  const info = JSON.parse(engine.info());
  phase("load_ms");
  info.numpy = numpyVersion;
  info.python = pythonModule("sys").version.split(" ")[0];
  info.kernels = kernels;
  info.model_store = modelKeeper;
  info.heap_bytes = pyodide._module.HEAPU8.length;
  if (role === "decoder") port.onmessage = (event) => queueForDecoding(event.data);
  post({ type: EngineMessage.READY, info, timings });
}

// The bytes of a .gz file, gunzipped unless the host already did: some send a .gz file with
// `Content-Encoding: gzip` (the server's static files, Apache), and the browser decodes it.
async function gunzip(bytes) {
  if (bytes[0] !== 0x1f || bytes[1] !== 0x8b) return bytes;
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

// The files of a listing (a line of JSON, [[..., size], ...], then the files one after another:
// tools/site.py, tools/compiled.py): [entry, bytes] for each.
function listedFiles(data) {
  const newline = data.indexOf(10);
  const entries = JSON.parse(new TextDecoder().decode(data.subarray(0, newline)));
  let offset = newline + 1;
  return entries.map((entry) => {
    const size = entry[entry.length - 1];
    offset += size;
    return [entry, data.subarray(offset - size, offset)];
  });
}

const madeFolders = new Set(); // by writeFile: each looked up once, not at each of its files

function writeFile(path, bytes) {
  const folder = path.slice(0, path.lastIndexOf("/"));
  if (!madeFolders.has(folder)) fileSystem().mkdirTree(folder);
  madeFolders.add(folder);
  fileSystem().writeFile(path, bytes);
}

// Writes the wheels' files ([[path, size], ...]: tools/site.py) into site-packages.
function writePackages(data) {
  for (const [[path], bytes] of listedFiles(data)) writeFile(path, bytes);
  // Python caches what each folder on sys.path holds, checked by the folder's mtime: a package
  // written within the same tick as its last look would stay unseen without invalidate_caches.
  pythonModule("importlib").invalidate_caches();
}

// Writes the compiled modules ([[source path, .pyc path, size], ...]: tools/compiled.py) into the
// file system, each where its source is (a .pyc without one would make a package of its folder);
// returns how many.
function writeCompiled(data) {
  let written = 0;
  for (const [[source, path], bytes] of listedFiles(data)) {
    if (fileSystem().analyzePath(source).exists) {
      writeFile(path, bytes);
      written += 1;
    }
  }
  return written;
}

// A library's compiled WebAssembly.Module, streamed from `url`; its bytes where this browser cannot
// compile a response as it streams (the library's instantiation compiles them then).
function compileLibrary(url) {
  const compiling = WebAssembly.compileStreaming
    ? WebAssembly.compileStreaming(cachedResponse(url)).catch(() => fetchBytes(url))
    : fetchBytes(url);
  compiling.catch(() => {}); // awaited at NumPy's load; a failure is reported there
  return compiling;
}

// NumPy's package holds its libraries empty (tools/pyodide.py): Pyodide's loader of shared libraries
// (its preload plugin for .so files, which instantiates each in turn with Pyodide's dynamic linker)
// gets each one's compiled module instead, in the same order. Those of what the page's NumPy leaves
// for first use (tools/pyodide.ON_FIRST_USE) are neither fetched nor linked here: see readOnFirstUse.
//
// Each library is linked with allowUndefined (boot looks the symbols still undefined up once, after
// the package): Pyodide's loader looks up every symbol of its global offset table after each
// library (8 times), and none of NumPy's libraries leaves one undefined (measured: the table had
// no unresolved entry after any of them).
function useCompiledLibraries(libraries) {
  const module = pyodide._module;
  const plugin = module.preloadPlugins.find((candidate) => candidate.canHandle("library.so"));
  plugin.handle = function (bytes, name, onload, onerror) {
    if (!libraries.has(name)) return onload();
    const compiled = libraries.get(name);
    this.asyncWasmLoadPromise = this.asyncWasmLoadPromise
      .then(() => compiled)
      .then((library) => module.loadWebAssemblyModule(library, { loadAsync: true, nodelete: true, allowUndefined: true }))
      .then(
        (exports) => {
          module.preloadedWasm[name] = exports;
          onload();
        },
        (error) => {
          console.warn(`cannot load ${name}:`, error);
          onerror();
        },
      );
  };
}

// The libraries of what the page's NumPy leaves for first use ({path in the file system: [file name,
// size]}), empty files in NumPy's package: each one's bytes are downloaded when the file is first
// read, which only Python's dlopen does (an import of numpy.linalg, say; a stat only asks its size).
// The download is synchronous, as dlopen is; through the service worker, which keeps it. Where it
// fails (offline before a first use), the read throws and dlopen, which catches it, makes the import
// fail with that message.
function readOnFirstUse(files, base) {
  const fs = fileSystem();
  for (const [path, [name, size]] of Object.entries(files)) {
    // In place of the package's empty file (whose reads go through its packed data): a plain one.
    fs.unlink(path);
    const slash = path.lastIndexOf("/");
    const node = fs.createDataFile(path.slice(0, slash), path.slice(slash + 1), new Uint8Array(0), true, false, true);
    let bytes = null;
    const read = () => bytes || (bytes = downloadedNow(base + name, size));
    Object.defineProperty(node, "contents", { get: read, set: (value) => (bytes = value), configurable: true });
    Object.defineProperty(node, "usedBytes", { get: () => size, set: () => {}, configurable: true });
  }
}

function downloadedNow(url, size) {
  const request = new XMLHttpRequest();
  request.open("GET", url, false);
  request.responseType = "arraybuffer";
  try {
    request.send();
  } catch (error) {
    throw new Error(`${url} could not be downloaded: ${error.message}`);
  }
  if (request.status !== 200 || request.response.byteLength !== size) {
    throw new Error(`${url} could not be downloaded: ${request.status} ${request.statusText}`);
  }
  return new Uint8Array(request.response);
}

// Runs `load` (Pyodide's boot) while catching the WebAssembly.Memory it creates: Pyodide 0.17 keeps
// it in a closure, and the kernels must import that very memory to work on NumPy's arrays. Its
// streaming fetch and compile of pyodide.asm.wasm go into timings.wasm_compile_ms.
async function capturingMemory(load, timings) {
  const NativeMemory = WebAssembly.Memory;
  const nativeStreaming = WebAssembly.instantiateStreaming;
  let memory = null;
  WebAssembly.Memory = function (descriptor) {
    const created = new NativeMemory(descriptor);
    if (memory === null) memory = created;
    return created;
  };
  WebAssembly.Memory.prototype = NativeMemory.prototype;
  WebAssembly.instantiateStreaming = async (source, imports) => {
    const start = performance.now();
    try {
      return await nativeStreaming.call(WebAssembly, source, imports);
    } finally {
      timings.wasm_compile_ms = performance.now() - start;
    }
  };
  try {
    pyodide = await load();
  } finally {
    WebAssembly.Memory = NativeMemory;
    WebAssembly.instantiateStreaming = nativeStreaming;
  }
  return pyodide._module.wasmMemory || memory;
}

// A module of one function, f32x4.relaxed_madd of its three v128 arguments: valid where the browser
// has relaxed SIMD, so the page picks the build before downloading either.
const RELAXED_PROBE = new Uint8Array([
  0, 97, 115, 109, 1, 0, 0, 0, 1, 8, 1, 96, 3, 123, 123, 123, 1, 123, 3, 2, 1, 0, 10, 13, 1, 11, 0, 32, 0, 32, 1,
  32, 2, 253, 133, 2, 11,
]);

// Which kernel build to link: {url, name}. The relaxed-SIMD one (fused multiply-adds) where this browser
// validates relaxed SIMD, else the WebAssembly SIMD one; `build` "simd" (the page's ?kernels=simd)
// forces the latter.
function chooseKernels(site, build, url) {
  const relaxed = site.kernels_relaxed && build !== "simd" && WebAssembly.validate(RELAXED_PROBE);
  return relaxed
    ? { url: url(site.kernels_relaxed), name: "WebAssembly relaxed SIMD" }
    : { url: url(site.kernels), name: "WebAssembly SIMD" };
}

// Instantiates the kernels on Pyodide's memory and installs them under core.portable.ops; returns what runs
// the products (the build's name, or why NumPy runs them alone: the page says so).
async function linkKernels(memory, build) {
  try {
    if (!memory || memory.buffer !== pyodide._module.HEAPU8.buffer) throw new Error("Pyodide's memory was not found");
    const bytes = await (await cachedResponse(build.url)).arrayBuffer();
    const { instance } = await WebAssembly.instantiate(bytes, { env: { memory } });
    pyodide.registerJsModule("pocket_kernels", Object.fromEntries(Object.entries(instance.exports)));
    pythonModule("core.browser.engine").install_kernels();
    return build.name;
  } catch (error) {
    return "NumPy only, without acceleration: " + String((error && error.message) || error);
  }
}

// A response for `url` from the Cache API of this site version, fetched and stored the first time
// (kept there, not in the HTTP cache as well).
async function cachedResponse(url, fromNetwork = self.fetch, keep = useCacheApi) {
  if (!keep) {
    const response = await fromNetwork(url);
    if (!response.ok) throw new Error(`cannot download ${url}: ${response.status} ${response.statusText}`);
    return response;
  }
  const cache = await caches.open(cacheName);
  const hit = await cache.match(url);
  if (hit) return hit;
  const response = await fromNetwork(url, { cache: "no-store" });
  if (!response.ok) throw new Error(`cannot download ${url}: ${response.status} ${response.statusText}`);
  await cache.put(url, response.clone());
  return response;
}

// The bytes of `url` (through the cache) as they came, {parts, size}, reporting the bytes received
// so far; each piece also handed to `writer` (storeWriter) as it comes.
async function fetchParts(url, onProgress, response, writer) {
  const reader = (await (response || cachedResponse(url))).body.getReader();
  const parts = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
    size += value.length;
    if (writer) writer.write(value);
    if (onProgress) onProgress(size);
  }
  return { parts, size };
}

function joined({ parts, size }) {
  return parts.length === 1 ? parts[0] : copiedInto(new Uint8Array(size), parts);
}

// `view` with `parts` written one after another from its start.
function copiedInto(view, parts) {
  let offset = 0;
  for (const part of parts) {
    view.set(part, offset);
    offset += part.length;
  }
  return view;
}

// The bytes of `url` (through the cache), reporting the bytes received so far.
async function fetchBytes(url, onProgress) {
  return joined(await fetchParts(url, onProgress));
}

// The model's files are this worker's to keep, not the service worker's (sw.js hands them on as
// they download, unkept): in a folder of the site's version in the origin's private file system,
// where the browser gives workers one, read from there straight into Python's memory on the next
// visit, with no copy in JS memory and nothing through the service worker (which answered them from
// the Cache API alongside Pyodide's own files, and slowed those: docs/page.md); else in the site's
// Cache API cache; else (plain http from another host) in the browser's HTTP cache.
const STORE = "pocket-tts-model-";

// This site version's folder for the model's files, or null where there is none to have.
async function openStore(version) {
  const storage = self.navigator && navigator.storage;
  if (typeof FileSystemSyncAccessHandle === "undefined" || !storage || !storage.getDirectory) return null;
  try {
    const root = await storage.getDirectory();
    return { root, name: STORE + version, folder: await root.getDirectoryHandle(STORE + version, { create: true }) };
  } catch (error) {
    return null; // the API without the storage behind it (private browsing in some browsers)
  }
}

// The other site versions' folders, once this version's files are all stored: best effort (a
// folder that another page of an older version still reads is left for the next time).
async function dropOtherStores({ root, name }) {
  try {
    const others = [];
    for await (const [entry, handle] of root.entries()) {
      if (handle.kind === "directory" && entry.startsWith(STORE) && entry !== name) others.push(entry);
    }
    await Promise.all(others.map((entry) => root.removeEntry(entry, { recursive: true }).catch(() => {})));
  } catch (error) {
    console.warn("the model of another site version was not dropped:", error);
  }
}

// The model's file `name` of `size` bytes (as site.json has it): from the store where it holds the
// whole file, else downloaded from `url` (reporting the bytes so far) and kept as it comes.
// -> {size, stored (read from the store), kept (in the store now), bytes(), readInto(view)}.
async function modelFile(name, url, size, onProgress) {
  const access = await openStored(name, size);
  if (access) {
    onProgress(size);
    return storedFile(name, access, size);
  }
  const writer = await storeWriter(name, size);
  // Where a store exists, the HTTP cache keeps no second copy; where none does, the Cache API (if
  // any) keeps the file, since the service worker does not.
  const fromNetwork = store ? (target) => networkFetch(target, { cache: "no-store" }) : networkFetch;
  let pieces = null;
  try {
    pieces = await fetchParts(url, onProgress, cachedResponse(url, fromNetwork, modelKeeper === "Cache API"), writer);
  } finally {
    if (writer) writer.close(pieces !== null);
  }
  return {
    size: pieces.size,
    stored: false,
    kept: Boolean(writer && writer.whole),
    bytes: () => joined(pieces),
    readInto: (view) => copiedInto(view, pieces.parts),
  };
}

// OPFS names cannot hold "/" (voices/NAME.safetensors).
const storeName = (name) => encodeURIComponent(name);

// A read-only handle on the stored file `name` if it is whole, else null: not stored, cut short, or
// being written by another page's worker right now (then this one downloads it).
async function openStored(name, size) {
  if (!store) return null;
  try {
    const handle = await store.folder.getFileHandle(storeName(name));
    const access = await handle.createSyncAccessHandle({ mode: "read-only" });
    if (access.getSize() === size) return access;
    access.close();
  } catch (error) {
    // not stored (NotFoundError), or locked by a writer (NoModificationAllowedError)
  }
  return null;
}

function storedFile(name, access, size) {
  const readInto = (view) => {
    try {
      if (access.read(view, { at: 0 }) !== size) throw new Error(`the stored ${name} ended early`);
    } finally {
      access.close();
    }
  };
  return {
    size,
    stored: true,
    kept: true,
    bytes: () => {
      const bytes = new Uint8Array(size);
      readInto(bytes);
      return bytes;
    },
    readInto,
  };
}

// A writer of the file `name` into the store, each piece as its download comes; null where it cannot
// be written (another page's worker writes it now). close(downloaded) keeps the file only when it is
// whole (`whole`): a failed write (no room left) or a download cut short leaves nothing behind.
async function storeWriter(name, size) {
  if (!store) return null;
  let access = null;
  try {
    const handle = await store.folder.getFileHandle(storeName(name), { create: true });
    access = await handle.createSyncAccessHandle();
    access.truncate(0);
  } catch (error) {
    if (access) access.close();
    return null;
  }
  let at = 0;
  let failed = false;
  const writer = {
    whole: false,
    write(piece) {
      if (failed) return;
      try {
        at += access.write(piece, { at });
      } catch (error) {
        failed = true;
        console.warn(`${name} was not stored:`, error);
      }
    },
    close(downloaded) {
      writer.whole = downloaded && !failed && at === size;
      try {
        if (writer.whole) access.flush();
        else access.truncate(0);
      } finally {
        access.close();
      }
      if (!writer.whole) store.folder.removeEntry(storeName(name)).catch(() => {});
    },
  };
  return writer;
}

// A zero-delay pause that lets queued messages (a Stop, more text) in between two frames.
function yieldToEvents() {
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => resolve();
    channel.port2.postMessage(null);
  });
}

function stop(id) {
  stopped.add(id);
  if (!running || running.id !== id) return;
  running.stopped = true;
  if (!running.pumping) {
    engine.cancel(); // a text stream waiting for text: nothing else would drop it
    running = null;
  }
}

// The flow side. A request is {id, stopped, ended, pumping}: `ended` once no more text can come
// (at once for SPEAK; at END for a text stream). Its frames go to the decoder side: the other
// worker, or this one ("both").
function toDecoder(message) {
  if (role === "both") decodeNow(message);
  else port.postMessage(message);
}

// A "both" worker's decoding moves to the decoder worker behind `decoderPort`, between two requests:
// the one under way (if any) is decoded here to its end.
function handOver(decoderPort) {
  if (role !== "both" && role !== "flow") throw new Error(`a ${role} worker has no frames to hand over`);
  handover = decoderPort;
}

function begin(id, answer, ended) {
  const started = JSON.parse(answer);
  if (started.error) throw new Error(started.error);
  if (handover) {
    role = "flow";
    port = handover;
    handover = null;
  }
  running = { id, stopped: false, ended, pumping: false }; // a newer request replaces this one
  return running;
}

async function speak({ id, text, voice, options, words }) {
  if (!engine) throw new Error("the model is not loaded yet");
  await pump(begin(id, engine.start(text, voice || "", JSON.stringify(options || {}), Boolean(words)), true));
}

function openStream({ id, voice, options, words }) {
  if (!engine) throw new Error("the model is not loaded yet");
  begin(id, engine.open_stream(voice || "", JSON.stringify(options || {}), Boolean(words)), false);
}

// TEXT, FLUSH and END of the running text stream: new segments join the queue that pump() says.
async function streamText({ type, id, text }) {
  const request = running;
  if (!request || request.id !== id || request.stopped || request.ended) return; // stopped, or replaced
  const answer = JSON.parse(type === EngineMessage.TEXT ? engine.push(text) : engine.flush());
  if (answer.error) {
    request.stopped = true;
    engine.cancel();
    throw new Error(answer.error);
  }
  if (type === EngineMessage.END) request.ended = true;
  await pump(request);
}

// Hands on the request's segments and frames, one frame per turn of the event loop (so that a
// Stop or more text gets in), until nothing is queued: then, once the text has ended, its END.
async function pump(request) {
  if (request.pumping) return; // the loop under way takes what was just queued
  request.pumping = true;
  try {
    for (;;) {
      if (running !== request) return;
      if (request.stopped) {
        engine.cancel();
        return;
      }
      const item = engine.next_frame();
      if (item === undefined || item === null) break;
      const parsed = JSON.parse(item);
      if ("segment" in parsed) {
        const { segment: text, spoken, speed } = parsed;
        toDecoder({ type: FrameMessage.SEGMENT, id: request.id, text, spoken, speed });
      } else toDecoder({ type: FrameMessage.FRAME, id: request.id, frame: item });
      await yieldToEvents();
    }
  } finally {
    request.pumping = false;
  }
  if (!request.ended) return; // until more text comes
  running = null;
  toDecoder({ type: FrameMessage.END, id: request.id });
}

// The decoder side: frames in order, one per turn of the event loop, so that a Stop gets in.
function queueForDecoding(message) {
  decodeQueue.push(message);
  if (!decoding) decodeAll();
}

async function decodeAll() {
  decoding = true;
  try {
    while (decodeQueue.length > 0) {
      decodeNow(decodeQueue.shift());
      await yieldToEvents();
    }
  } finally {
    decoding = false;
  }
}

// One message of the flow side: a generation begins (its segment is announced with its first
// audio), one of its frames (its END last, which gives out what the speed change held back), or
// the request's end. `decoded` is the request being decoded: {id, samples (sent so far), start
// (the samples before the generation being decoded), segment (announced with the next audio or
// word, or null)}.
let decoded = null;

function decodeNow({ type, id, frame, text, spoken, speed }) {
  if (stopped.has(id)) return;
  try {
    if (decoded && decoded.id !== id) decoded = null; // a request replaced by a newer one
    if (type === FrameMessage.END) {
      decoded = null;
      post({ type: EngineMessage.DONE, id });
      return;
    }
    if (type === FrameMessage.SEGMENT) {
      engine.begin(speed);
      decoded = decoded || { id, samples: 0 };
      decoded.segment = { text, spoken };
      decoded.start = decoded.samples;
    } else {
      const audio = engine.decode(frame);
      sendWords(JSON.parse(engine.take_words()));
      sendAudio(audio);
    }
  } catch (error) {
    stopped.add(id);
    decoded = null;
    fail(id, error);
  }
}

// A frame's audio: none (undefined) while the speed change gathers its first few ms.
function sendAudio(proxy) {
  if (proxy === undefined) return;
  const buffer = proxy.getBuffer("f32");
  const chunk = buffer.data.slice(); // a copy: buffer.data views the whole wasm heap
  buffer.release();
  proxy.destroy();
  announce();
  decoded.samples += chunk.length;
  post({ type: EngineMessage.CHUNK, id: decoded.id, chunk }, [chunk.buffer]);
}

// A frame's word events (before its audio), in samples of the request.
function sendWords(events) {
  if (events.length === 0) return;
  announce();
  const { id, start } = decoded;
  for (const { kind, word, index, sample, start: begins, end } of events) {
    const times = kind === "start" ? { start_sample: start + sample } : { start_sample: start + begins, end_sample: start + end };
    post({ type: EngineMessage.WORD, id, kind, word, index, ...times });
  }
}

// The generation's SEGMENT, before its first audio or word.
function announce() {
  const { id, segment } = decoded;
  if (!segment) return;
  post({ type: EngineMessage.SEGMENT, id, text: segment.text, spoken: segment.spoken, start_sample: decoded.start });
  decoded.segment = null;
}

async function addVoice({ id, samples, sampleRate }) {
  if (!engine) throw new Error("the model is not loaded yet");
  if (cloningPart) {
    cloning = cloning || loadCloning(id);
    try {
      await cloning;
    } catch (error) {
      cloning = null; // the next upload tries again
      throw error;
    }
  }
  fileSystem().writeFile("/tmp/voice.f32", new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength));
  const result = JSON.parse(engine.add_voice("/tmp/voice.f32", sampleRate));
  if (result.error) throw new Error(result.error);
  post({ type: EngineMessage.VOICE, id, voice: result.voice });
}

// The voice-cloning part, on the first upload: downloaded (through the cache, with progress for the
// upload `id`), then added to the loaded model. Its last PROGRESS says the voice itself is next.
async function loadCloning(id) {
  const { name, url, size } = cloningPart;
  const progress = progressMessages(id, size);
  progress("Downloading the voice-cloning part", 0);
  const file = await modelFile(name, url, size, (loaded) => progress("Downloading the voice-cloning part", loaded));
  fileSystem().writeFile("/model/" + name, file.bytes(), { canOwn: true });
  progress("Loading the voice-cloning part", size);
  await yieldToEvents(); // the page hears of it before the load holds this worker
  const result = JSON.parse(engine.add_cloning());
  if (result.error) throw new Error(result.error);
  progress("Cloning the voice", size);
}

function normalizeText({ id, text }) {
  if (!engine) throw new Error("the model is not loaded yet");
  const result = JSON.parse(engine.normalize(text));
  if (result.error) throw new Error(result.error);
  post({ type: EngineMessage.NORMALIZE, id, text: result.text });
}
