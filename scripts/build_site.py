"""Build the static site: the web UI with both engines, runnable from any static file server.

    .venv/bin/python -m scripts.build_site --model english_2m_2026-10 --out build/site

Writes to OUT: the web UI (web/), the worker (browser/worker.js), Pyodide (vendored from npm,
scripts/vendor_pyodide.py), `core` and the worker's Python half packed as core.zip, the model as
an int8 bundle in model/ (core.bundle.export: weights, config JSON, tokenizer, voice states), and
site.json, which tells the page where everything is. `python -m server --site OUT` serves the same
folder, so one page offers both the server and the in-browser engine.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Dict, List

from scripts.vendor_pyodide import vendor

ROOT = Path(__file__).resolve().parent.parent


def pack_python(out: Path) -> None:
    """core/ and browser/*.py in one zip that Pyodide imports from (zipimport)."""
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for package in ("core", "browser"):
            for path in sorted((ROOT / package).iterdir()):
                if path.suffix in (".py", ".json"):
                    archive.write(path, f"{package}/{path.name}")


def build(model: str, out: Path, voices: List[str], int8: bool) -> Dict[str, object]:
    from core.bundle import export

    if out.exists() and not (out / "site.json").exists() and any(out.iterdir()):
        raise SystemExit(f"{out} exists and is not a site built here: choose an empty or new folder")
    out.mkdir(parents=True, exist_ok=True)
    print(f"[1/4] web UI and worker -> {out}", file=sys.stderr)
    for path in (ROOT / "web").iterdir():
        shutil.copy(path, out / path.name)
    (out / "browser").mkdir(exist_ok=True)
    shutil.copy(ROOT / "browser" / "worker.js", out / "browser" / "worker.js")
    print("[2/4] Pyodide 0.17.1 with NumPy", file=sys.stderr)
    pyodide_bytes = vendor(out / "pyodide")
    print("[3/4] core.zip", file=sys.stderr)
    pack_python(out / "core.zip")
    print(f"[4/4] model bundle of {model} ({'int8' if int8 else 'float32'})", file=sys.stderr)
    report = export(model, str(out / "model"), voices, int8=int8)
    files = {
        str(p.relative_to(out / "model")): p.stat().st_size for p in sorted((out / "model").rglob("*")) if p.is_file()
    }
    digest = hashlib.sha256()
    for path in sorted(out.rglob("*")):
        if path.is_file() and path.name != "site.json":
            digest.update(path.name.encode())
            digest.update(str(path.stat().st_size).encode())
    digest.update((out / "core.zip").read_bytes())
    digest.update((out / "model" / "model.safetensors").read_bytes()[: 1 << 20])
    site = {
        "format": "pocket-tts-numpy-site",
        "version": digest.hexdigest()[:16],
        "pyodide": "pyodide/",
        "core": "core.zip",
        "model": {"path": "model/", "name": report["bundle"], "files": files},
    }
    (out / "site.json").write_text(json.dumps(site, indent=1))
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    gzipped = sum(len(gzip.compress(p.read_bytes(), 6)) for p in out.rglob("*") if p.is_file())
    return {
        "site": str(out),
        "bytes": total,
        "gzip_bytes": gzipped,
        "pyodide_bytes": pyodide_bytes,
        "model_bytes": sum(files.values()),
        "voices": report["voices"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="catalog name, config .yaml/.json, or bundle folder")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "site")
    parser.add_argument("--voice", action="append", default=[], help="voice to bundle (repeatable)")
    parser.add_argument("--float32", action="store_true", help="float32 weights instead of int8")
    args = parser.parse_args()
    report = build(args.model, args.out, args.voice, not args.float32)
    print(
        f"site: {args.out} {report['bytes'] / 1e6:.1f} MB ({report['gzip_bytes'] / 1e6:.1f} MB gzipped): "
        f"Pyodide {report['pyodide_bytes'] / 1e6:.1f} MB, model {report['model_bytes'] / 1e6:.1f} MB, "
        f"voices: {', '.join(report['voices']) or 'none'}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
