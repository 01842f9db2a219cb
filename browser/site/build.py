"""The static site: the web UI with both engines, runnable from any static file server. Built by
`pocket-tts-numpy build-site` (browser/site/command.py) and by the end-to-end runs (e2e/harness.py).

Writes to OUT: the web UI (web/, at the site's root), the in-browser engine (browser/'s JavaScript:
the page's half, the workers and their messages, under browser/), the service worker (sw.js: a
reload downloads nothing, and the site works offline), Pyodide (vendored from npm,
browser/site/pyodide.py), our modules the page runs (the page's Python halves and what they import
of core, nothing of the server nor of this builder) and num2words's wheel, which core's text
normalization imports, in one file (site-packages.bin, which the worker fetches while Python starts
and writes into site-packages), the modules a worker imports compiled for its Python 3.8
(browser/site/compiled.py; where a Python 3.8 with NumPy 1.17.5 is at hand), the WebAssembly kernels
(core/portable/network/kernels.wasm and kernels-relaxed.wasm: the worker picks one), the model as an int8
bundle in model/ (core.export.write_bundle: a weights file per part, config JSON, tokenizer, voice
states), and site.json, which tells the page where everything is, which worker needs which model
file, and which file is the voice-cloning part (fetched on the first voice upload, not on a cold
visit). `python -m server --site OUT` serves the same folder, so one page offers both engines.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import importlib.metadata
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import core.browser
from core.browser.site import compiled, num2words_wheel
from core.browser.site.pyodide import ON_FIRST_USE, SITE_PACKAGES, libraries, tarball_cached, vendor
from core.files import NewFolder, check_replaceable
from core.portable.network import kernels
from core.portable.synthesis.options import MAX_TEXT
from core.portable.text.normalize import LANGUAGE_CODES
from core.portable.weights import catalog
from core.portable.weights.bundle import MANIFEST
from core.ui import web_folder

BROWSER = Path(core.browser.__file__).resolve().parent
PACKAGES = "site-packages.bin"
# Which worker roles (browser/worker.js) need a file of the bundle; the rest need them all.
PART_ROLES = {"flow_lm": ["flow", "both"], "voice_cloning": ["flow", "both"], "decoder": ["decoder", "both"]}
ALL_ROLES = ["flow", "decoder", "both"]


def shell() -> List[str]:
    """The page, fetched before the service worker controls it (the service worker caches it at
    install): the UI's files and the in-browser engine's page half with its messages."""
    return sorted(path.name for path in web_folder().iterdir() if path.is_file()) + [
        f"browser/{name}" for name in core.browser.PAGE
    ]


def worker_script() -> str:
    """The worker as the site ships it: worker.js with the files of its jobs where the
    importScripts that loads them stood (the same scripts in the same order: classic worker scripts
    share one global scope), so that a first visit fetches one file, not five one after another."""
    main, *jobs = core.browser.WORKER
    loading = "importScripts(" + ", ".join(f'"{name}"' for name in ("protocol.js", *jobs)) + ");\n"
    script = (BROWSER / main).read_text()
    if script.count(loading) != 1:
        raise SystemExit(f"browser/{main} does not load its jobs' files with: {loading.strip()}")
    inlined = "".join(f"\n// {name}\n\n" + (BROWSER / name).read_text() for name in jobs)
    return script.replace(loading, 'importScripts("protocol.js");\n' + inlined)


def index_html() -> str:
    """The page as the site ships it: web/index.html with the in-browser engine's page half
    preloaded beside the UI's modules (the page imports it once site.json says the site has a
    model; where the server serves the UI alone, it is never asked for)."""
    page = (web_folder() / "index.html").read_text()
    preloads = "".join(f'  <link rel="modulepreload" href="browser/{name}">\n' for name in core.browser.PAGE)
    if page.count("</head>") != 1:
        raise SystemExit("web/index.html has no </head> to put the browser engine's preloads before")
    return page.replace("</head>", preloads + "</head>")


def page_modules() -> Dict[str, bytes]:
    """Our modules the page can import, each at its path in Pyodide's site-packages: its Python
    halves (core.browser.PYTHON),
    the modules they import (at module level or inside functions) and theirs in turn, with their
    packages' __init__ and core.portable's catalog.json. Nothing of the server, of this builder or
    of the UI."""
    found: Dict[str, Path] = {}
    todo = list(core.browser.PYTHON)
    while todo:
        name = todo.pop()
        if name in found:
            continue
        spec = importlib.util.find_spec(name)
        found[name] = Path(spec.origin)
        package = name if spec.submodule_search_locations is not None else name.rpartition(".")[0]
        todo += [parent for parent in _parents(name) if parent not in found]
        todo += [target for target in _imported(found[name], package) if target not in found]
    files = {SITE_PACKAGES + _site_path(name, path): path.read_bytes() for name, path in found.items()}
    catalog = Path(importlib.util.find_spec("core.portable.weights").origin).with_name("catalog.json")
    files[SITE_PACKAGES + "core/portable/weights/catalog.json"] = catalog.read_bytes()
    return dict(sorted(files.items()))


def _parents(name: str) -> Iterator[str]:
    parts = name.split(".")
    return (".".join(parts[:end]) for end in range(1, len(parts)))


def _site_path(name: str, path: Path) -> str:
    folder = name.replace(".", "/")
    return f"{folder}/__init__.py" if path.name == "__init__.py" else f"{folder}.py"


def _imported(path: Path, package: str) -> Iterator[str]:
    """The modules of ours (core.*) that the module at `path`, of `package`, imports anywhere."""
    for node in ast.walk(ast.parse(path.read_bytes())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] == "core" and _is_module(name):
                yield name


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a name imported from a module, not a module of its own
        return False


def dependency_wheels(out: Path) -> List[Path]:
    """The wheels of what core imports beyond NumPy (num2words, pure Python), at the version this
    environment runs, so that the page normalizes text as the server does, trimmed to the
    languages core speaks (browser/site/num2words_wheel.py). num2words declares docopt, which only its
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
    template = (BROWSER / core.browser.SERVICE_WORKER).read_text()
    values = {"FILES": files, "SHELL": shell() + ["site.json"], "COMPRESSED": compressed, "HANDED_ON": handed_on}
    for name, value in values.items():
        placeholder = f"/* @{name}@ */ []"
        if template.count(placeholder) != 1:
            raise SystemExit(f"{core.browser.SERVICE_WORKER} has no {placeholder} to fill in")
        template = template.replace(placeholder, json.dumps(value))
    return template.replace("@VERSION@", version)


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


def site_packages(ours: Dict[str, bytes], wheels: List[Path]) -> List[Tuple[str, bytes]]:
    """Every file the worker writes into Pyodide's site-packages (browser/worker-boot.js): `ours`
    (page_modules) and each file of `wheels`, (path, bytes) at its path there. Unzipped here, not in
    the page: the worker's Python unzipped wheels at every start, importing zipfile to do it (~40 ms
    of each worker's start)."""
    files = list(ours.items())
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            files += [(SITE_PACKAGES + i.filename, archive.read(i)) for i in archive.infolist() if not i.is_dir()]
    return files


def check(model: str, out: Path, voices: List[str]) -> None:
    """A PocketTTSError or SystemExit now, before any work, for what would fail later: `out` that is
    neither empty nor a site built here, unchanged since (core.files.check_replaceable), a missing
    tool (lz4, npm where Pyodide is not cached), a model that cannot be had (its files are fetched
    now: offline, an error naming them), a voice it does not have."""
    from core import hub
    from core.portable.voices import sources as voice_sources
    from core.portable.weights import sources

    check_replaceable(str(out))
    import lz4.block  # noqa: F401  (Pyodide's packed standard library is read with it: the `site` extra)

    if not tarball_cached() and shutil.which("npm") is None:
        raise SystemExit("error: building the site needs npm once, to fetch Pyodide 0.17.1 (then it is cached)")
    voice_sources.check_before_loading(model, voices)
    sources.resolve(model, hub.fetch)


def build(
    model: str, out: Path, voices: List[str], int8: bool = True, python38: Optional[Path] = None
) -> Dict[str, object]:
    """The site of `model` in `out` (see the module's docstring), built beside it and put in its
    place when whole (core.files.NewFolder): an error leaves `out` as it was (no half-built folder),
    and a rebuild replaces a site built here only while it holds the files the last build wrote,
    unchanged. `python38`: a Python 3.8 with NumPy 1.17.5 that compiles the
    page's modules ahead of time (browser/site/compiled.py); without one the page compiles them
    itself at every start."""
    check(model, out, voices)
    out = out.resolve()
    with NewFolder(str(out)) as building:
        if (out / "pyodide").is_dir():  # the last build's Pyodide (checked unchanged), reused where it is current
            shutil.copytree(out / "pyodide", Path(building.path) / "pyodide")
        report = _build(model, Path(building.path), voices, int8, python38)
        building.publish()
    return dict(report, site=str(out))


def _build(model: str, out: Path, voices: List[str], int8: bool, python38: Optional[Path]) -> Dict[str, object]:
    from core.export import write_bundle

    out.mkdir(parents=True, exist_ok=True)
    print(f"[1/5] web UI, the in-browser engine and the kernels -> {out}", file=sys.stderr)
    for path in web_folder().iterdir():
        shutil.copy(path, out / path.name)
    (out / "index.html").write_text(index_html())
    (out / "browser").mkdir(exist_ok=True)
    for name in core.browser.PAGE:
        shutil.copy(BROWSER / name, out / "browser" / name)
    (out / "browser" / core.browser.WORKER[0]).write_text(worker_script())
    wasm = Path(kernels.__file__).parent
    for name in ("kernels.wasm", "kernels-relaxed.wasm"):
        shutil.copy(wasm / name, out / name)
    print("[2/5] Pyodide 0.17.1 with NumPy", file=sys.stderr)
    pyodide_bytes = vendor(out / "pyodide")
    print(f"[3/5] our modules the page runs and num2words's wheel: {PACKAGES}", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        files = site_packages(page_modules(), dependency_wheels(Path(tmp)))
    (out / PACKAGES).write_bytes(compiled.listing(files))
    modules = compiled.archive(dict(files), out, out / "pyodide", python38)
    print(
        f"      and the modules a worker imports, compiled for Python 3.8: {modules.name}"
        if modules
        else "      no Python 3.8 with NumPy 1.17.5 (--python38; scripts/test.sh makes .venv-py38): the page "
        "compiles its modules from source on every visit",
        file=sys.stderr,
    )
    print(f"[4/5] model bundle of {model} ({'int8' if int8 else 'float32'})", file=sys.stderr)
    (out / "model").mkdir()
    report = write_bundle(model, str(out / "model"), voices, int8=int8)
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
            "name": model,
            "files": files,
            "roles": roles,
            "voice_cloning": cloning_file(out / "model"),
            "max_text": MAX_TEXT,  # characters of text a generation may take
            "timed_models": catalog.timed_models(),  # the catalog's models that time words
        },
    }
    (out / "site.json").write_text(json.dumps(site, indent=1))
    twins = {name + ".gz" for name in compressed}
    site_files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    # The model's files are the workers' to keep (browser/worker.js), not the service worker's.
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
