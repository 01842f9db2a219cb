"""The page's Python modules compiled ahead of time, for Pyodide 0.17's Python 3.8: without them, each
worker compiles every module it imports from source on every visit (numpy's alone cost ~0.3 s of
a worker's start-up, Python's and Pyodide's own start ~0.3 s more).

`archive(packages, out, pyodide, python38)` (run by browser/site/build.py) runs compile_page.py on a
Python 3.8 with NumPy 1.17.5 (scripts/test.sh makes one, .venv-py38), which imports what Pyodide's
start imports and what a worker imports (numpy, and the page's Python from the site's files,
which brings core and num2words), and compiles every module that came from those files, NumPy or
the standard library, and each of Pyodide's packages. Each one is a checked-hash .pyc (PEP 552) at
the path Pyodide's file system gives its source, so Python uses it only where its source is byte
for byte the one it was compiled from, and compiles the source as before where it is not. The
standard library's modules are compiled from Pyodide's own sources (3.8.2, read out of
pyodide.asm.data: browser/site/pyodide.py), not from the later 3.8 there, whose files differ in
41 of them (and those Pyodide leaves out are left out); NumPy's from the page's NumPy package
(patched: browser/site/patches/numpy.patch), imported there as pip's NumPy with the package's
Python files over it.

Those of Pyodide's own files go into its own package (browser/site/pyodide.add_to_runtime): Pyodide
writes them with its standard library, before Python starts; so does GENERATED
(browser/site/patches.py), the functions namedtuple and dataclasses write as source while those
imports run (recorded in a fresh Python 3.8), compiled, and REGEXES, what sre_compile makes of
each regular expression they and the reading of a first text compile. The others (NumPy's, ours)
make the archive, one gzip file: a line of JSON, [[source path, .pyc path, size], ...], then the
files one after another; the worker writes each whose source its file system has before it
imports numpy and core (browser/worker-boot.js).
"""

from __future__ import annotations

import gzip
import json
import pickle
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import core.browser
from core.browser.site.patches import GENERATED, PYODIDE_PATCHES, REGEXES, SITE_PACKAGES, STDLIB, patched
from core.browser.site.pyodide import add_to_runtime, package_files, packaged_files

NUMPY = "1.17.5"  # Pyodide 0.17.1's
IMPORTS = ("numpy",) + core.browser.PYTHON  # what a worker imports (browser/worker-boot.js)
NAME = "python-3.8.pyc.gz"
COMPILER = Path(__file__).resolve().with_name("compile_page.py")
# Python's own: a worker's regular expressions are compiled ahead by those of the Python that builds
# the site, which must be the page's (3.8.2's, Pyodide's standard library, patched) byte for byte.
SRE = ("sre_compile.py", "sre_parse.py", "sre_constants.py")

# A text whose reading compiles what a first text's does beyond the rules (numbers, a date, a time,
# money, a URL, an e-mail address, initials, a pause).
FIRST_TEXT = (
    "Hello, Dr. Smith! On 12/03/2026 at 10:30 am, the U.S. team paid $4.50 (20%) for 3 items [pause:0.5s] "
    "see https://example.com/a?b=1 or write to a.b@example.org; version 1.2.25 is out."
)


def interpreter(python: Optional[Path]) -> Optional[str]:
    """`python` where it is a Python 3.8 with NumPy 1.17.5, else None."""
    if python is None or not Path(python).exists():
        return None
    check = f"import sys, numpy; print(sys.version_info[:2] == (3, 8) and numpy.__version__ == {NUMPY!r})"
    done = subprocess.run([str(python), "-c", check], capture_output=True, text=True)
    return str(python) if done.returncode == 0 and done.stdout.strip() == "True" else None


def archive(packages: Dict[str, bytes], out: Path, pyodide: Path, python38: Optional[Path]) -> Optional[Path]:
    """Write out/NAME from the site's files (`packages`: path in Pyodide's site-packages -> bytes),
    and add the .pyc files of Pyodide's own modules (its standard library and its `pyodide`
    packages) to its package in `pyodide` (add_to_runtime); None (nothing written, Pyodide's
    package as it came) where `python38` is not a Python 3.8 with NumPy 1.17.5, and the page
    compiles its modules itself as before."""
    python = interpreter(python38)
    if python is None:
        script = pyodide / "pyodide.asm.js"
        if script.exists() and "/__pycache__/" in script.read_text():  # added by an earlier build
            add_to_runtime(pyodide, {})
        return None
    runtime = packaged_files(pyodide, STDLIB)
    _check_sre(python, runtime)
    numpy = package_files(pyodide, "numpy")
    with tempfile.TemporaryDirectory() as folder:
        stdlib, site = Path(folder, "stdlib"), Path(folder, "site-packages")
        for root, files in ((stdlib, {**runtime, **numpy}), (site, packages)):
            prefix = STDLIB if root is stdlib else SITE_PACKAGES
            for path, data in files.items():
                if root is site or path.endswith(".py"):
                    copy = root / path[len(prefix) :]
                    copy.parent.mkdir(parents=True, exist_ok=True)
                    copy.write_bytes(data)
        task = {
            "out": str(Path(folder, "compiled.pickle")),
            "stdlib": str(stdlib),
            "packages": str(site),
            "stdlib_path": STDLIB,
            "site_packages_path": SITE_PACKAGES,
            "generated": GENERATED,
            "regexes": REGEXES,
            "imports": list(IMPORTS),
            "first_text": FIRST_TEXT,
        }
        Path(folder, "task.json").write_text(json.dumps(task))
        done = subprocess.run([python, str(COMPILER), str(Path(folder, "task.json"))], capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"compiling the page's modules failed: {done.stderr.strip()[-1000:]}")
        files: List[Tuple[str, str, bytes]] = pickle.loads(Path(task["out"]).read_bytes())
    add_to_runtime(pyodide, {pyc: data for source, pyc, data in files if source in runtime})
    target = out / NAME
    target.write_bytes(_archived([(source, pyc, data) for source, pyc, data in files if source not in runtime]))
    return target


def _check_sre(python: str, runtime: Dict[str, bytes]) -> None:
    """The regular expressions are compiled ahead by `python`'s sre modules: they must be the page's
    (Pyodide's, patched) byte for byte, or its patterns would compile differently."""
    where = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])"], capture_output=True, text=True
    )
    here = {STDLIB + name: Path(where.stdout.strip(), name).read_bytes() for name in SRE}
    for name, data in patched(here, PYODIDE_PATCHES).items():
        if runtime.get(name) != data:
            raise SystemExit(
                f"{name} of {python} differs from the page's (Pyodide's): its patterns would compile differently"
            )


def _archived(files: List[Tuple[str, str, bytes]]) -> bytes:
    """The archive's bytes: the listing of `files`, gzipped."""
    return gzip.compress(listing(files), 9, mtime=0)


def listing(files: Sequence[Tuple[Any, ...]]) -> bytes:
    """The files the worker writes into its file system as it reads them (browser/worker-boot.js
    listedFiles), each (name, ..., bytes): a line of JSON, [[name, ..., size], ...], then the files
    one after another. Here (source path, .pyc path, .pyc); the site's packages (path, bytes):
    browser/site/build.py."""
    header = json.dumps([[*names, len(data)] for *names, data in files]).encode()
    return header + b"\n" + b"".join(row[-1] for row in files)


def parse(data: bytes) -> List[Tuple[Any, ...]]:
    """The (name, ..., bytes) of each file of a listing."""
    header, _, body = data.partition(b"\n")
    files, offset = [], 0
    for *names, size in json.loads(header):
        files.append((*names, body[offset : offset + size]))
        offset += size
    return files


def read(path: Path) -> List[Tuple[str, str, bytes]]:
    """The (source path, .pyc path, .pyc bytes) of an archive."""
    return parse(gzip.decompress(path.read_bytes()))
