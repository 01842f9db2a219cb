// The site's service worker: after the first visit, every file of the site comes from this
// version's cache, so a reload downloads nothing and the site works with the network gone.
// browser/site/build.py writes it as sw.js at the site's root with the five constants below filled
// in (a valid script as it is, for the linters: each list empty); a new build has a new version,
// so the browser installs the new worker, which drops the old version's files. The model's files are the page's workers' to keep (browser/worker-store.js: in
// the origin's private file system), so this worker hands them on as they download, unkept.
// Requests for anything else (the server's API in server mode) pass through.
// A file with a gzip twin (NAME.gz: Pyodide's files, the tokenizer) is downloaded as the twin and
// gunzipped here (DecompressionStream): the cache keeps, and the page gets, the file itself.

const VERSION = "@VERSION@";
const FILES = /* @FILES@ */ []; // paths relative to the site's root
const SHELL = /* @SHELL@ */ []; // the page itself, fetched before this worker controls it: cached at install
const COMPRESSED = /* @COMPRESSED@ */ []; // the files with a gzip twin
const HANDED_ON = /* @HANDED_ON@ */ []; // the model's files: downloaded (as their twin where they have one), never cached here
const CACHE = "pocket-tts-" + VERSION;

const root = new URL("./", self.location.href);
const cached = new Set(FILES.map((path) => new URL(path, root).href));
cached.add(root.href);
const handedOn = new Set(HANDED_ON.map((path) => new URL(path, root).href));
const twins = new Set(
  typeof DecompressionStream === "undefined" ? [] : COMPRESSED.map((path) => new URL(path, root).href),
);
// The type the page needs where it matters: WebAssembly compiles while it streams only as application/wasm.
const TYPES = { wasm: "application/wasm", js: "text/javascript", json: "application/json" };

// Downloads of this version's files bypass the HTTP cache: a file of the same name from the previous
// version must not come back from there, and what this worker stores must not be written twice.
const fresh = (url) => fetch(url, { cache: "no-store" });

self.addEventListener("install", (event) => {
  const shell = [root.href, ...SHELL.map((path) => new URL(path, root).href)];
  event.waitUntil(
    caches
      .open(CACHE)
      .then((cache) =>
        Promise.all(
          shell.map(async (url) => {
            const response = await fresh(url);
            if (!response.ok) throw new Error(`${url}: ${response.status}`);
            await cache.put(url, response);
          }),
        ),
      )
      .then(() => self.skipWaiting()),
  );
});

self.addEventListener("activate", (event) => {
  event.waitUntil(dropOtherVersions().then(() => self.clients.claim()));
});

// The caches of the site's other versions. Dropped at activation, and again at each visit of the
// page: a request the previous worker was still serving may have stored into its version's cache
// after the drop. Only by the newest worker: an older one still serves what its pages asked
// before the new version activated (a late worker's downloads, a navigation), and would drop the
// new version's cache while that one installs.
function dropOtherVersions() {
  return caches.keys().then((names) => {
    if (!newest()) return;
    return Promise.all(names.filter((n) => n.startsWith("pocket-tts-") && n !== CACHE).map((n) => caches.delete(n)));
  });
}

// Whether this is the site's newest service worker: the active one, with none installing or waiting.
function newest() {
  const registration = self.registration;
  if (registration.installing || registration.waiting) return false;
  return !self.serviceWorker || registration.active === self.serviceWorker;
}

// Per file, the request being served: the next one for the same file waits until it is cached (two
// workers boot at once and ask for the same Pyodide files; they are downloaded once).
const busy = new Map();

self.addEventListener("fetch", (event) => {
  const url = event.request.url.split(/[?#]/)[0];
  if (event.request.method === "GET" && handedOn.has(url) && twins.has(url)) return event.respondWith(download(url));
  if (event.request.method !== "GET" || !cached.has(url)) return;
  if (event.request.mode === "navigate") event.waitUntil(dropOtherVersions());
  event.respondWith(serve(event, url));
});

function serve(event, url) {
  const previous = busy.get(url) || Promise.resolve();
  let release;
  const done = new Promise((resolve) => (release = resolve));
  busy.set(url, done);
  done.then(() => busy.get(url) === done && busy.delete(url));
  return previous.then(async () => {
    try {
      // Looked up and stored without caches.open, which would create this version's cache again
      // after a newer worker dropped it (a request still under way when the new version activates:
      // that left an old version's files behind, and made tests/browser/test_e2e.py's new-version test flaky).
      const hit = await caches.match(url, { cacheName: CACHE });
      if (hit) {
        release();
        return hit;
      }
      const response = await download(url);
      if (response.status !== 200 || !newest() || !(await caches.has(CACHE))) {
        release();
        return response;
      }
      // WebAssembly is stored first, then served from the cache: the browser keeps what it compiles
      // from a cached response in its code cache, so the next visit skips compiling it (compiled
      // from a response made here, the second visit compiled everything again; the third did not).
      // Where it cannot be stored (no room left), it is downloaded again and answered as it comes.
      if (url.endsWith(".wasm")) {
        try {
          await caches.open(CACHE).then((cache) => cache.put(url, response));
          const stored = await caches.match(url, { cacheName: CACHE });
          if (stored) return stored;
        } catch (error) {
          console.warn(`${url} was not stored:`, error);
        } finally {
          release();
        }
        return download(url);
      }
      // Stored while the page reads it (a model file shows its download progress as it arrives).
      const copy = response.clone();
      const stored = caches
        .open(CACHE)
        .then((cache) => cache.put(url, copy))
        .finally(release);
      event.waitUntil(stored);
      return response;
    } catch (error) {
      release();
      throw error;
    }
  });
}

// The file at `url` from the network: as its gzip twin where it has one.
function download(url) {
  return twins.has(url) ? gunzipped(url) : fresh(url);
}

// The file at `url`, downloaded as its gzip twin: its bytes gunzipped as they arrive, unless the
// host already decoded them (some send a .gz file with Content-Encoding: gzip). Where the host has
// no twin (a deploy that left the .gz files out), the file itself.
async function gunzipped(url) {
  const response = await fresh(url + ".gz");
  if (response.status !== 200) return fresh(url);
  const reader = response.body.getReader();
  let head = new Uint8Array(0);
  let done = false;
  while (head.length < 2 && !done) {
    const next = await reader.read();
    done = next.done;
    if (next.value) head = concatenated(head, next.value);
  }
  const body = new ReadableStream({
    start(controller) {
      if (head.length > 0) controller.enqueue(head);
      if (done) controller.close();
    },
    async pull(controller) {
      const next = await reader.read();
      if (next.done) controller.close();
      else controller.enqueue(next.value);
    },
    cancel: (reason) => reader.cancel(reason),
  });
  const gzipped = head[0] === 0x1f && head[1] === 0x8b;
  const type = TYPES[url.split(".").pop()] || "application/octet-stream";
  return new Response(gzipped ? body.pipeThrough(new DecompressionStream("gzip")) : body, {
    status: 200,
    headers: { "Content-Type": type },
  });
}

function concatenated(a, b) {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
