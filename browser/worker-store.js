// The in-browser engine's downloads (worker.js): every file of the site through this version's cache
// (the Cache API, or the service worker's where one keeps the site), and the model's files kept by
// the worker itself, in the origin's private file system where the browser has one.

"use strict";

// Where this worker keeps what it fetches, set at boot:
//   cacheName    this site version's Cache API cache
//   useCacheApi  whether this worker stores what it fetches in the Cache API itself: not where a
//                service worker already does, nor where neither exists (plain http from another
//                host is not a secure context; there the browser's HTTP cache is all there is)
//   networkFetch the browser's own fetch (boot routes self.fetch through the cache)
//   store        the folder where this worker keeps the model's files (openStore), or null
//   keeper       what keeps them: "private file system", "Cache API" or "HTTP cache"
const keeping = { cacheName: null, useCacheApi: true, networkFetch: null, store: null, keeper: null };

// A response for `url` from the Cache API of this site version, fetched and stored the first time
// (kept there, not in the HTTP cache as well).
async function cachedResponse(url, fromNetwork = self.fetch, keep = keeping.useCacheApi) {
  if (!keep) {
    const response = await fromNetwork(url);
    if (!response.ok) throw new Error(`cannot download ${url}: ${response.status} ${response.statusText}`);
    return response;
  }
  const cache = await caches.open(keeping.cacheName);
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
  const fromNetwork = keeping.store
    ? (target) => keeping.networkFetch(target, { cache: "no-store" })
    : keeping.networkFetch;
  let pieces = null;
  try {
    pieces = await fetchParts(
      url,
      onProgress,
      cachedResponse(url, fromNetwork, keeping.keeper === "Cache API"),
      writer,
    );
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
  if (!keeping.store) return null;
  try {
    const handle = await keeping.store.folder.getFileHandle(storeName(name));
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
  if (!keeping.store) return null;
  let access = null;
  try {
    const handle = await keeping.store.folder.getFileHandle(storeName(name), { create: true });
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
      if (!writer.whole) keeping.store.folder.removeEntry(storeName(name)).catch(() => {});
    },
  };
  return writer;
}
