"""Build the static site: the web UI with both engines, runnable from any static file server
(tools/site.py says what it holds).

    .venv/bin/python -m scripts.build_site --model english_2m_2026-10 --out build/site

It needs the `site` extra (pip install -e ".[site]"). Its inputs are checked before it builds (the
model is fetched first: offline, an error naming the files), and it builds beside OUT, which it
replaces only when the new site is whole.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from core.portable.errors import PocketTTSError
from tools.site import ROOT, build


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="catalog name, config .yaml/.json, or bundle folder")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "site")
    parser.add_argument("--voice", action="append", default=[], help="voice to bundle (repeatable)")
    parser.add_argument("--float32", action="store_true", help="float32 weights instead of int8")
    args = parser.parse_args()
    try:
        report = build(args.model, args.out, args.voice, not args.float32)
    except PocketTTSError as e:
        raise SystemExit(f"error: {e}") from None
    print(
        f"site: {args.out} {report['bytes'] / 1e6:.1f} MB (a first visit downloads "
        f"{sum(report['download_bytes'].values()) / 1e6:.1f} MB, gzip twins where they pay): "
        f"Pyodide {report['pyodide_bytes'] / 1e6:.1f} MB, model {report['model_bytes'] / 1e6:.1f} MB, "
        f"voices: {', '.join(report['voices']) or 'none'}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
