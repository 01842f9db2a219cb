// The in-browser engine's start (worker.js): Pyodide with NumPy (its libraries: worker-link.js), our
// packages and the modules compiled ahead of time written into its file system, the kernels linked,
// then this worker's part of the model, its files downloaded meanwhile (worker-store.js) and
// copied straight into Python's memory.

"use strict";

async function boot({ site, role: myRole, cached, port: myPort, kernels: kernelBuild }) {
  worker.role = myRole;
  worker.port = myPort || null;
  keeping.useCacheApi = !cached && typeof caches !== "undefined";
  const base = new URL("../", self.location.href);
  const url = (path) => new URL(path, base).href;
  const pyodideBase = url(site.pyodide);
  keeping.cacheName = "pocket-tts-" + site.version;
  // Pyodide fetches its own files: route those through the cache too.
  keeping.networkFetch = self.fetch.bind(self);
  self.fetch = (input, init) => {
    const target = typeof input === "string" ? input : input.url;
    return target.startsWith(base.href)
      ? cachedResponse(target, keeping.networkFetch)
      : keeping.networkFetch(input, init);
  };
  const timings = {};
  const bootStart = performance.now();
  keeping.store = await openStore(site.version);
  keeping.keeper = keeping.store ? "private file system" : typeof caches !== "undefined" ? "Cache API" : "HTTP cache";
  // The model's files come from the store where it holds them whole; the others download while
  // Python starts, their bytes waiting in JS memory until Python is ready.
  let stage = "Starting Python (Pyodide)";
  const cloningName = site.model.voice_cloning || null;
  if (cloningName && site.model.roles[cloningName].includes(worker.role)) {
    cloning.part = { name: cloningName, url: url(site.model.path + cloningName), size: site.model.files[cloningName] };
  }
  const files = Object.entries(site.model.files).filter(
    ([name]) => site.model.roles[name].includes(worker.role) && name !== cloningName,
  );
  const total = files.reduce((n, [, size]) => n + size, 0);
  const received = new Map();
  const say = progressMessages(undefined, total);
  const progress = () =>
    say(
      stage,
      [...received.values()].reduce((n, bytes) => n + bytes, 0),
    );
  const downloads = Promise.all(
    files.map(async ([name, size]) => [
      name,
      await modelFile(name, url(site.model.path + name), size, (bytes) => {
        received.set(name, bytes);
        progress();
      }),
    ]),
  ).then(async (data) => {
    timings.download_ms = performance.now() - bootStart;
    if (keeping.store && worker.role === "both" && data.every(([, file]) => file.kept))
      await dropOtherStores(keeping.store);
    return data;
  });
  downloads.catch(() => {}); // awaited below; a failure is reported there
  const packages = fetchBytes(url(site.packages));
  packages.catch(() => {});
  // The modules compiled ahead of time (browser/site/compiled.py), where the site has them and this browser
  // can gunzip them; without them Python compiles each module from source, as it would anyway.
  const compiled =
    site.compiled && typeof DecompressionStream !== "undefined"
      ? fetchBytes(url(site.compiled)).then(gunzip)
      : Promise.resolve(null);
  compiled.catch(() => {});
  // NumPy's libraries compile while Python starts, each streamed from its own file (browser/site/pyodide.py):
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
  await worker.pyodide.loadPackage(["numpy"]);
  worker.pyodide._module.reportUndefinedSymbols(); // once, for the libraries linked with allowUndefined
  readOnFirstUse(site.libraries_on_first_use || {}, pyodideBase);
  phase("packages_ms");
  // The wheels' files (core's and num2words's, pure Python), unpacked at build (browser/site/build.py):
  // written as they are, which costs less than unzipping the wheels here, or loading micropip and
  // the packages it imports to do the same.
  writePackages(await packages);
  phase("wheels_ms");
  const modules = await compiled;
  worker.shipped = modules ? writeCompiled(modules) : 0;
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
    file.readInto(new Uint8Array(worker.pyodide._module.HEAPU8.buffer, address, file.size));
  }
  timings.model_stored = model.filter(([, file]) => file.stored).length;
  phase("model_copy_ms");

  stage = "Loading the model";
  progress();
  worker.engine = engineModule.BrowserEngine("/model", worker.role);
  const info = JSON.parse(worker.engine.info());
  phase("load_ms");
  info.numpy = numpyVersion;
  info.python = pythonModule("sys").version.split(" ")[0];
  info.kernels = kernels;
  info.model_store = keeping.keeper;
  info.heap_bytes = worker.pyodide._module.HEAPU8.length;
  if (worker.role === "decoder") worker.port.onmessage = (event) => queueForDecoding(event.data);
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
// browser/site/build.py, browser/site/compiled.py): [entry, bytes] for each.
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

// Writes the wheels' files ([[path, size], ...]: browser/site/build.py) into site-packages.
function writePackages(data) {
  for (const [[path], bytes] of listedFiles(data)) writeFile(path, bytes);
  // Python caches what each folder on sys.path holds, checked by the folder's mtime: a package
  // written within the same tick as its last look would stay unseen without invalidate_caches.
  pythonModule("importlib").invalidate_caches();
}

// Writes the compiled modules ([[source path, .pyc path, size], ...]: browser/site/compiled.py) into the
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
