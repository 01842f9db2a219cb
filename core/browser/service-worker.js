// The site's service worker: after the first visit, every file of the site comes from this
// version's cache, so a reload downloads nothing and the site works with the network gone.
// scripts/build_site.py writes it as sw.js at the site's root with the three constants below filled
// in; a new build has a new version, so the browser installs the new worker, which drops the old
// version's files. Requests for anything else (the server's API in server mode) pass through.

const VERSION = "@VERSION@";
const FILES = @FILES@; // paths relative to the site's root
const SHELL = @SHELL@; // the page itself, fetched before this worker controls it: cached at install
const CACHE = "pocket-tts-" + VERSION;

const root = new URL("./", self.location.href);
const cached = new Set(FILES.map((path) => new URL(path, root).href));
cached.add(root.href);

// Downloads of this version's files revalidate whatever the HTTP cache holds: a file of the same
// name from the previous version must not come back from there.
const fresh = (url) => fetch(url, { cache: "no-cache" });

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
  event.waitUntil(
    caches
      .keys()
      .then((names) => Promise.all(names.filter((n) => n.startsWith("pocket-tts-") && n !== CACHE).map((n) => caches.delete(n))))
      .then(() => self.clients.claim()),
  );
});

// Per file, the request being served: the next one for the same file waits until it is cached (two
// workers boot at once and ask for the same Pyodide files; they are downloaded once).
const busy = new Map();

self.addEventListener("fetch", (event) => {
  const url = event.request.url.split(/[?#]/)[0];
  if (event.request.method !== "GET" || !cached.has(url)) return;
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
      const cache = await caches.open(CACHE);
      const hit = await cache.match(url);
      if (hit) {
        release();
        return hit;
      }
      const response = await fresh(url);
      if (response.status !== 200) {
        release();
        return response;
      }
      // Stored while the page reads it (a model file shows its download progress as it arrives).
      const stored = cache.put(url, response.clone()).finally(release);
      event.waitUntil(stored);
      return response;
    } catch (error) {
      release();
      throw error;
    }
  });
}
