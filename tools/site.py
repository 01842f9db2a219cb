"""The static site: the web UI with both engines, runnable from any static file server. Built by
`python -m scripts.build_site` and by the end-to-end runs (e2e/harness.py).

Writes to OUT: the web UI (server/web/), the worker (core/browser/worker.js, as browser/worker.js),
the service worker (sw.js: a reload downloads nothing, and the site works offline), Pyodide (vendored from npm,
tools/pyodide.py), the files of this package's pure-Python wheel (as `pip wheel` builds it) and of
num2words's, which core's text normalization imports, unpacked into one file (site-packages.bin,
which the worker fetches while Python starts and writes into site-packages), the modules a worker
imports compiled for its Python 3.8 (tools/compiled.py; where a Python 3.8 is at hand), the
WebAssembly kernels (core/portable/kernels.wasm and kernels-relaxed.wasm: the worker picks one),
the model as an int8 bundle in model/ (core.export.export: a weights file per part, config JSON,
tokenizer, voice states), and site.json, which tells the page where everything is, which worker
needs which model file, and which file is the voice-cloning part (fetched on the first voice
upload, not on a cold visit).
`python -m server --site OUT` serves the same folder, so one page offers both engines.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.metadata
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Dict, List, Optional

from core.portable.bundle import MANIFEST
from core.portable.normalize import LANGUAGE_CODES
from tools import compiled, num2words_wheel
from tools.pyodide import ON_FIRST_USE, SITE_PACKAGES, libraries, tarball_cached, vendor

ROOT = Path(__file__).resolve().parent.parent
# The page, fetched before the service worker controls it: the service worker caches it at install.
# protocol.js (the messages' names) is also loaded by the workers (from the site's root) and the worklet.
SHELL = [
    "index.html",
    "app.js",
    "protocol.js",
    "player.js",
    "worklet.js",
    "server-engine.js",
    "browser-engine.js",
    "waveform.js",
    "style.css",
    "manifest.webmanifest",  # the web app manifest: the site can be installed as an app
    "icon.svg",
]
PACKAGES = "site-packages.bin"
# Which worker roles (core/browser/worker.js) need a file of the bundle; the rest need them all.
PART_ROLES = {"flow_lm": ["flow", "both"], "voice_cloning": ["flow", "both"], "decoder": ["decoder", "both"]}
ALL_ROLES = ["flow", "decoder", "both"]


def build_wheel(out: Path) -> Path:
    """This package as the wheel `pip wheel` builds (pure Python: it installs in Pyodide as it is),
    from a copy of the sources: setuptools would otherwise reuse what an earlier build left in build/."""
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "source"
        source.mkdir()
        for name in ("pyproject.toml", "README.md", "pocket_tts_numpy.py"):
            shutil.copy(ROOT / name, source / name)
        for package in ("core", "server"):
            shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
        done = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", tmp, str(source)],
            capture_output=True,
            text=True,
        )
        wheels = list(Path(tmp).glob("*-py3-none-any.whl"))
        if done.returncode != 0 or len(wheels) != 1:
            raise SystemExit(f"pip wheel failed: {done.stderr.strip()[-1000:]}")
        target = out / wheels[0].name
        shutil.copy(wheels[0], target)
    return target


def build_dependency_wheels(out: Path) -> List[Path]:
    """The wheels of what core imports beyond NumPy (num2words, pure Python), at the version this
    environment runs, so that the page normalizes text as the server does, trimmed to the
    languages core speaks (tools/num2words_wheel.py). num2words declares docopt, which only its
    command-line script imports; the worker unpacks the wheels it is given and resolves no
    dependency, so the site carries num2words alone."""
    requirement = f"num2words=={importlib.metadata.version('num2words')}"
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", tmp, requirement],
            capture_output=True,
            text=True,
        )
        wheels = list(Path(tmp).glob("*-py3-none-any.whl"))
        if done.returncode != 0 or len(wheels) != 1:
            raise SystemExit(f"pip wheel {requirement} failed: {done.stderr.strip()[-1000:]}")
        target = out / wheels[0].name
        shutil.copy(wheels[0], target)
    num2words_wheel.trim(target, LANGUAGE_CODES.values())
    return [target]


def model_roles(bundle: Path) -> Dict[str, List[str]]:
    """Each file of the bundle -> the worker roles that load it."""
    manifest = json.loads((bundle / MANIFEST).read_text())
    by_file = {name: PART_ROLES[part] for part, name in manifest["weights"].items()}
    by_file.update({path: PART_ROLES["flow_lm"] for path in manifest["voices"].values()})
    files = sorted(str(p.relative_to(bundle)) for p in bundle.rglob("*") if p.is_file())
    return {name: by_file.get(name, ALL_ROLES) for name in files}


def cloning_file(bundle: Path) -> Optional[str]:
    """The bundle's file of the voice-cloning part, or None where it cannot clone. The workers fetch
    it on the first voice upload, not at boot; the page knows from this name whether cloning exists."""
    manifest = json.loads((bundle / MANIFEST).read_text())
    return manifest["weights"].get("voice_cloning") if manifest.get("voice_cloning", True) else None


def service_worker(files: List[str], version: str, compressed: List[str], handed_on: List[str]) -> str:
    template = (ROOT / "core" / "browser" / "service-worker.js").read_text()
    return (
        template.replace("@VERSION@", version)
        .replace("@FILES@", json.dumps(files))
        .replace("@SHELL@", json.dumps(SHELL + ["site.json"]))
        .replace("@COMPRESSED@", json.dumps(compressed))
        .replace("@HANDED_ON@", json.dumps(handed_on))
    )


# A file gets a gzip twin (NAME.gz) where that saves at least this share of its bytes: Pyodide's
# WebAssembly, JavaScript and packages, the tokenizer; not the int8 weights, which gzip barely shrinks.
GZIP_SAVES = 0.1


def gzip_twins(out: Path) -> List[str]:
    """Writes NAME.gz beside each file of the site that gzip shrinks enough (GZIP_SAVES), for the
    service worker to download in its place: a host cannot be relied on to compress (a plain static
    server does not), and the browser's DecompressionStream can. The originals stay for a page
    without a service worker. Returns the files that have a twin, relative to `out`."""
    for stale in out.rglob("*.gz"):
        if stale.with_suffix("").is_file():
            stale.unlink()
    twins = []
    for path in sorted(p for p in out.rglob("*") if p.is_file() and p.suffix != ".gz"):
        data = path.read_bytes()
        packed = gzip.compress(data, 9, mtime=0)
        if len(packed) <= (1 - GZIP_SAVES) * len(data):
            path.with_name(path.name + ".gz").write_bytes(packed)
            twins.append(str(path.relative_to(out)))
    return twins


def unpack_wheels(wheels: List[Path], target: Path) -> None:
    """Write `target`: every file of `wheels` at its path in Pyodide's site-packages, as the worker
    writes them into its file system (core/browser/worker.js), in a listing (tools/compiled.listing:
    [[path, size], ...], then the files). Unzipped here, not in the page: the worker's Python unzipped
    them at every start, importing zipfile to do it (~40 ms of each worker's start)."""
    files = []
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            files += [(SITE_PACKAGES + i.filename, archive.read(i)) for i in archive.infolist() if not i.is_dir()]
    target.write_bytes(compiled.listing(files))


def check(model: str, out: Path, voices: List[str]) -> None:
    """A PocketTTSError or SystemExit now, before any work, for what would fail later: `out` that is
    no site built here, a missing tool (lz4, npm where Pyodide is not cached), a model that cannot
    be had (its files are fetched now: offline, an error naming them), a voice it does not have."""
    from core.portable import sources
    from core.portable import voices as voice_sources

    if out.exists() and (not out.is_dir() or (not (out / "site.json").exists() and any(out.iterdir()))):
        raise SystemExit(f"error: {out} exists and is not a site built here: choose an empty or new folder")
    try:
        import lz4.block  # noqa: F401
    except ModuleNotFoundError:
        raise SystemExit(
            "error: building the site needs lz4 (to read Pyodide's packed standard library): pip install -e '.[site]'"
        ) from None
    if not tarball_cached() and shutil.which("npm") is None:
        raise SystemExit("error: building the site needs npm once, to fetch Pyodide 0.17.1 (then it is cached)")
    voice_sources.check_before_loading(model, voices)
    sources.resolve(model)


def build(model: str, out: Path, voices: List[str], int8: bool) -> Dict[str, object]:
    """The site of `model` in `out` (see the module's docstring), built beside it and put in its
    place when whole: an error leaves `out` as it was (no half-built folder), and a rebuild
    replaces a site built here."""
    check(model, out, voices)
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".building", dir=out.parent))
    building.chmod(0o755)  # a static server's user reads it (mkdtemp makes it its owner's alone)
    try:
        if (out / "pyodide").is_dir():  # the last build's Pyodide, reused where it is current
            shutil.copytree(out / "pyodide", building / "pyodide")
        report = _build(model, building, voices, int8)
        old = out.parent / f"{building.name}.old"
        if out.exists():
            out.rename(old)
        building.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return dict(report, site=str(out))


def _build(model: str, out: Path, voices: List[str], int8: bool) -> Dict[str, object]:
    from core.export import export

    out.mkdir(parents=True, exist_ok=True)
    print(f"[1/5] web UI, workers and kernels -> {out}", file=sys.stderr)
    for path in (ROOT / "server" / "web").iterdir():
        shutil.copy(path, out / path.name)
    (out / "browser").mkdir(exist_ok=True)
    shutil.copy(ROOT / "core" / "browser" / "worker.js", out / "browser" / "worker.js")
    shutil.copy(ROOT / "core" / "portable" / "kernels.wasm", out / "kernels.wasm")
    shutil.copy(ROOT / "core" / "portable" / "kernels-relaxed.wasm", out / "kernels-relaxed.wasm")
    print("[2/5] Pyodide 0.17.1 with NumPy", file=sys.stderr)
    pyodide_bytes = vendor(out / "pyodide")
    print(f"[3/5] the package's wheel and num2words's (pip wheel), unpacked: {PACKAGES}", file=sys.stderr)
    for old in out.glob("*.whl"):  # left by a build that shipped the wheels themselves
        old.unlink()
    (out / compiled.NAME).unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        wheels = build_dependency_wheels(Path(tmp)) + [build_wheel(Path(tmp))]
        unpack_wheels(wheels, out / PACKAGES)
        modules = compiled.archive(wheels, out, out / "pyodide")
    print(
        f"      and the modules a worker imports, compiled for Python 3.8: {modules.name}"
        if modules
        else "      no Python 3.8 with NumPy 1.17.5 (.venv-py38, made by scripts/test.sh): the page compiles "
        "its modules from source on every visit",
        file=sys.stderr,
    )
    print(f"[4/5] model bundle of {model} ({'int8' if int8 else 'float32'})", file=sys.stderr)
    report = export(model, str(out / "model"), voices, int8=int8)
    roles = model_roles(out / "model")
    files = {name: (out / "model" / name).stat().st_size for name in roles}
    print("[5/5] gzip twins, site.json and the service worker", file=sys.stderr)
    (out / "sw.js").unlink(missing_ok=True)
    (out / "site.json").unlink(missing_ok=True)
    compressed = gzip_twins(out)
    digest = hashlib.sha256()
    for path in sorted(out.rglob("*")):
        if path.is_file() and path.name != "site.json":
            digest.update(str(path.relative_to(out)).encode())
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    version = digest.hexdigest()[:16]
    every_library = libraries(out / "pyodide")
    site = {
        "format": "pocket-tts-numpy-site",
        "version": version,
        "pyodide": "pyodide/",
        # NumPy's libraries, each a file in pyodide/: {path in Pyodide's file system: file name},
        # those linked at start; and those downloaded when first imported: {path: [file name, size]}
        "libraries": {path: name for path, name in every_library.items() if not ON_FIRST_USE.search(path)},
        "libraries_on_first_use": {
            path: [name, (out / "pyodide" / name).stat().st_size]
            for path, name in every_library.items()
            if ON_FIRST_USE.search(path)
        },
        "packages": PACKAGES,
        "compiled": modules.name if modules else None,
        "kernels": "kernels.wasm",
        "kernels_relaxed": "kernels-relaxed.wasm",
        "compressed": compressed,  # the files with a gzip twin (the service worker downloads that)
        "model": {
            "path": "model/",
            "name": report["bundle"],
            "files": files,
            "roles": roles,
            "voice_cloning": cloning_file(out / "model"),
        },
    }
    (out / "site.json").write_text(json.dumps(site, indent=1))
    twins = {name + ".gz" for name in compressed}
    site_files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    # The model's files are the workers' to keep (core/browser/worker.js), not the service worker's.
    model_files = ["model/" + name for name in files]
    kept = [f for f in site_files if f not in twins and f not in model_files]
    (out / "sw.js").write_text(service_worker(kept, version, compressed, model_files))
    return {
        "site": str(out),
        "bytes": sum(p.stat().st_size for p in out.rglob("*") if p.is_file() and str(p.relative_to(out)) not in twins),
        "download_bytes": download_bytes(out),
        "pyodide_bytes": pyodide_bytes,
        "model_bytes": sum(files.values()),
        "voices": report["voices"],
    }


def download_bytes(out: Path) -> Dict[str, int]:
    """What a visitor's service worker downloads of each file of the site at `out`: its gzip twin
    where it has one, else the file."""
    twins = set(json.loads((out / "site.json").read_text())["compressed"])
    sizes = {}
    for path in out.rglob("*"):
        name = str(path.relative_to(out))
        if path.is_file() and not (name.endswith(".gz") and name[:-3] in twins):
            sizes[name] = (path.with_name(path.name + ".gz") if name in twins else path).stat().st_size
    return sizes
