"""Vendor Pyodide for the static site: the files it needs, from the npm registry, offline after
(browser/site/pyodide.py says which).

    .venv/bin/python -m scripts.vendor_pyodide --out build/site/pyodide
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from core.browser.site.pyodide import FILES, vendor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    size = vendor(args.out)
    print(f"{args.out}: {len(FILES)} files, {size / 1e6:.1f} MB", file=sys.stderr)


if __name__ == "__main__":
    main()
