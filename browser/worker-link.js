// The in-browser engine's linking (worker.js): NumPy's libraries compiled while Python starts and
// handed to Pyodide's loader, those the page's NumPy leaves for first use read when first opened,
// and the WebAssembly kernels instantiated on Pyodide's own memory.

"use strict";

// A library's compiled WebAssembly.Module, streamed from `url`; its bytes where this browser cannot
// compile a response as it streams (the library's instantiation compiles them then).
function compileLibrary(url) {
  const compiling = WebAssembly.compileStreaming
    ? WebAssembly.compileStreaming(cachedResponse(url)).catch(() => fetchBytes(url))
    : fetchBytes(url);
  compiling.catch(() => {}); // awaited at NumPy's load; a failure is reported there
  return compiling;
}

// NumPy's package holds its libraries empty (browser/site/pyodide.py): Pyodide's loader of shared libraries
// (its preload plugin for .so files, which instantiates each in turn with Pyodide's dynamic linker)
// gets each one's compiled module instead, in the same order. Those of what the page's NumPy leaves
// for first use (browser/site/pyodide.ON_FIRST_USE) are neither fetched nor linked here: see readOnFirstUse.
//
// Each library is linked with allowUndefined (boot looks the symbols still undefined up once, after
// the package): Pyodide's loader looks up every symbol of its global offset table after each
// library (8 times), and none of NumPy's libraries leaves one undefined (measured: the table had
// no unresolved entry after any of them).
function useCompiledLibraries(libraries) {
  const module = worker.pyodide._module;
  const plugin = module.preloadPlugins.find((candidate) => candidate.canHandle("library.so"));
  plugin.handle = function (bytes, name, onload, onerror) {
    if (!libraries.has(name)) return onload();
    const compiled = libraries.get(name);
    this.asyncWasmLoadPromise = this.asyncWasmLoadPromise
      .then(() => compiled)
      .then((library) =>
        module.loadWebAssemblyModule(library, { loadAsync: true, nodelete: true, allowUndefined: true }),
      )
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
    worker.pyodide = await load();
  } finally {
    WebAssembly.Memory = NativeMemory;
    WebAssembly.instantiateStreaming = nativeStreaming;
  }
  return worker.pyodide._module.wasmMemory || memory;
}

// A module of one function, f32x4.relaxed_madd of its three v128 arguments: valid where the browser
// has relaxed SIMD, so the page picks the build before downloading either.
const RELAXED_PROBE = new Uint8Array([
  0, 97, 115, 109, 1, 0, 0, 0, 1, 8, 1, 96, 3, 123, 123, 123, 1, 123, 3, 2, 1, 0, 10, 13, 1, 11, 0, 32, 0, 32, 1, 32, 2,
  253, 133, 2, 11,
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

// Instantiates the kernels on Pyodide's memory for the worker's model (core.browser.engine.runtime); returns what runs
// the products (the build's name, or why NumPy runs them alone: the page says so).
async function linkKernels(memory, build) {
  try {
    if (!memory || memory.buffer !== worker.pyodide._module.HEAPU8.buffer)
      throw new Error("Pyodide's memory was not found");
    const bytes = await (await cachedResponse(build.url)).arrayBuffer();
    const { instance } = await WebAssembly.instantiate(bytes, { env: { memory } });
    worker.pyodide.registerJsModule("pocket_kernels", Object.fromEntries(Object.entries(instance.exports)));
    pythonModule("core.browser.engine").linked_kernels(); // bound and checked now: its error is the page's to show
    return build.name;
  } catch (error) {
    return "NumPy only, without acceleration: " + String((error && error.message) || error);
  }
}
