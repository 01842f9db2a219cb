"""`pocket-tts-numpy build-site --model english_2m_2026-10 --out build/site` (or `python -m
core.browser.site`): the static site, the web UI with both engines, runnable from any static file
server (build.py says what it holds).

It needs the `site` extra (pip install "pocket-tts-numpy[site]"). Its inputs are checked before it
builds (the model is fetched first: offline, an error naming the files), and it builds beside OUT,
which it replaces only when the new site is whole.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional

# Where scripts/test.sh makes the Python 3.8 with NumPy 1.17.5 that compiles the page's modules.
PYTHON38 = Path(".venv-py38") / "bin" / "python"


def build_site(argv: Optional[List[str]] = None, prog: str = "python -m core.browser.site") -> int:
    """build the static site (the web UI with the in-browser engine)"""
    parser = argparse.ArgumentParser(prog=prog, description=str(build_site.__doc__))
    parser.add_argument("--model", required=True, help="catalog name, config .yaml/.json, or bundle folder")
    parser.add_argument(
        "--out", type=Path, default=Path("build") / "site", help="the site's folder (default: %(default)s)"
    )
    parser.add_argument("--voice", action="append", default=[], help="voice to bundle (repeatable)")
    parser.add_argument("--float32", action="store_true", help="float32 weights instead of int8")
    parser.add_argument(
        "--python38",
        type=Path,
        help="a Python 3.8 with NumPy 1.17.5 that compiles the page's modules ahead of time, so that the page "
        f"does not at every start (default: {PYTHON38} where it exists)",
    )
    args = parser.parse_args(argv)
    from core.extras import install_hint
    from core.portable.errors import PocketTTSError

    python38 = args.python38 or (PYTHON38 if PYTHON38.exists() else None)
    try:
        from core.browser.site.build import build

        report = build(args.model, args.out, args.voice, not args.float32, python38)
    except PocketTTSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as e:
        print(install_hint(e, prog), file=sys.stderr)
        return 1
    print(
        f"site: {args.out} {report['bytes'] / 1e6:.1f} MB (a first visit downloads "
        f"{sum(report['download_bytes'].values()) / 1e6:.1f} MB, gzip twins where they pay): "
        f"Pyodide {report['pyodide_bytes'] / 1e6:.1f} MB, model {report['model_bytes'] / 1e6:.1f} MB, "
        f"voices: {', '.join(report['voices']) or 'none'}",
        file=sys.stderr,
    )
    return 0
