"""The page's Python modules compiled ahead of time, for Pyodide 0.17's Python 3.8: without them, each
worker compiles every module it imports from source on every visit (numpy's alone cost ~0.3 s of
a worker's start-up).

`archive(wheels, out)` (run by tools/site.py on the building Python) starts a Python 3.8 with
NumPy 1.17.5 (the .venv-py38 that scripts/test.sh makes) on this module; it imports what a worker
imports (numpy, and core.browser.engine from the site's wheels, which brings num2words) and
compiles every module that came from the wheels, NumPy or the standard library. Each one is a
checked-hash .pyc (PEP 552) at the path Pyodide's file system gives its source, so Python uses
it only where its source is byte for byte the one it was compiled from, and compiles the source
as before where it is not. The standard library's modules are compiled from Pyodide's own
sources (3.8.2, read out of pyodide.asm.data: tools/pyodide.py), not from the later 3.8 here,
whose files differ in 41 of them (and those Pyodide leaves out are left out). The
archive is one gzip file: a line of JSON, [[source path, .pyc path, size], ...], then the files one
after another; the worker writes each whose source its file system has (Pyodide leaves out some
of the standard library, ctypes for one: a .pyc there would make an empty package of it) before
it imports numpy and core (core/browser/worker.js).
"""

from __future__ import annotations

import gzip
import importlib
import importlib.util
import json
import os
import py_compile
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path
from typing import List, Optional, Tuple

from tools.pyodide import packaged_files

ROOT = Path(__file__).resolve().parent.parent
PYTHON38 = ROOT / ".venv-py38" / "bin" / "python"
NUMPY = "1.17.5"  # Pyodide 0.17.1's
STDLIB = "/lib/python3.8/"  # where Pyodide's file system keeps them
SITE_PACKAGES = STDLIB + "site-packages/"
IMPORTS = ("numpy", "core.browser.engine")  # what a worker imports (core/browser/worker.js)
NAME = "python-3.8.pyc.gz"


def interpreter() -> Optional[str]:
    """A Python 3.8 with NumPy 1.17.5, or None."""
    if not PYTHON38.exists():
        return None
    check = f"import sys, numpy; print(sys.version_info[:2] == (3, 8) and numpy.__version__ == {NUMPY!r})"
    done = subprocess.run([str(PYTHON38), "-c", check], capture_output=True, text=True)
    return str(PYTHON38) if done.returncode == 0 and done.stdout.strip() == "True" else None


def archive(wheels: List[Path], out: Path, pyodide: Path) -> Optional[Path]:
    """Write out/NAME from the site's wheels and the standard library of the Pyodide in `pyodide`;
    None (and nothing written) without a Python 3.8 with NumPy 1.17.5, where the page compiles its
    modules itself as before."""
    python = interpreter()
    if python is None:
        return None
    target = out / NAME
    with tempfile.TemporaryDirectory() as stdlib:
        for path, data in packaged_files(pyodide, STDLIB).items():
            if path.endswith(".py") and not path.startswith(SITE_PACKAGES):
                copy = Path(stdlib) / path[len(STDLIB) :]
                copy.parent.mkdir(parents=True, exist_ok=True)
                copy.write_bytes(data)
        command = [python, "-m", "tools.compiled", str(target), stdlib, *map(str, wheels)]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"compiling the page's modules failed: {done.stderr.strip()[-1000:]}")
    return target


def read(path: Path) -> List[Tuple[str, str, bytes]]:
    """The (source path, .pyc path, .pyc bytes) of an archive."""
    data = gzip.decompress(path.read_bytes())
    header, _, body = data.partition(b"\n")
    files, offset = [], 0
    for source, pyc, size in json.loads(header):
        files.append((source, pyc, body[offset : offset + size]))
        offset += size
    return files


def pyodide_path(source: str, roots: List[Tuple[str, str]]) -> Optional[str]:
    for root, target in roots:
        if source.startswith(root + os.sep):
            return target + os.path.relpath(source, root).replace(os.sep, "/")
    return None


def compile_imports(target: Path, stdlib: str, wheels: List[str]) -> None:
    """Under Python 3.8: import IMPORTS from the unpacked wheels and write the archive, the standard
    library's modules compiled from Pyodide's sources in `stdlib` (those Pyodide lacks left out)."""
    with tempfile.TemporaryDirectory() as unpacked:
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as archive_file:
                archive_file.extractall(unpacked)
        sys.path.insert(0, unpacked)
        # What a fresh interpreter has imported before anything runs (Pyodide's start imports them too).
        fresh = subprocess.run([sys.executable, "-c", "import sys; print(' '.join(sys.modules))"], capture_output=True)
        before = set(fresh.stdout.decode().split())
        for name in IMPORTS:
            importlib.import_module(name)
        numpy_home = os.path.dirname(os.path.dirname(sys.modules["numpy"].__file__))
        homes = [(unpacked, SITE_PACKAGES), (numpy_home, SITE_PACKAGES), (sysconfig.get_paths()["stdlib"], STDLIB)]
        roots = [(os.path.realpath(home), target) for home, target in homes]
        files = []
        for name in sorted(set(sys.modules) - before):
            source = getattr(sys.modules[name], "__file__", None) or ""
            path = pyodide_path(os.path.realpath(source), roots) if source.endswith(".py") else None
            if path is None:
                continue
            if not path.startswith(SITE_PACKAGES):
                source = os.path.join(stdlib, path[len(STDLIB) :])
                if not os.path.exists(source):
                    continue
            compiled = os.path.join(unpacked, "compiled.pyc")
            checked = py_compile.PycInvalidationMode.CHECKED_HASH
            py_compile.compile(source, compiled, dfile=path, doraise=True, invalidation_mode=checked)
            with open(compiled, "rb") as f:
                files.append((path, importlib.util.cache_from_source(path), f.read()))
    header = json.dumps([[source, pyc, len(data)] for source, pyc, data in files]).encode()
    target.write_bytes(gzip.compress(header + b"\n" + b"".join(data for _, _, data in files), 9, mtime=0))


if __name__ == "__main__":
    compile_imports(Path(sys.argv[1]), sys.argv[2], sys.argv[3:])
