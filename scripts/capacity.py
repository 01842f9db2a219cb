"""Server capacity: how many concurrent streams stay real time, measured as a user would
(tools/capacity.py says how).

    .venv/bin/python -m scripts.capacity                        # english and english_2m_2026-10
    .venv/bin/python -m scripts.capacity --models english --streams 1 2 4 6
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tools.capacity import DEFAULT_COUNTS, ROOT, measure, save


def main() -> None:
    """One model and one kind of weights at a time (`scripts.bench --capacity` does them all)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(DEFAULT_COUNTS))
    parser.add_argument("--streams", nargs="+", type=int, help="the N to try (default: per model)")
    parser.add_argument("--int8", action="store_true", help="serve an int8 bundle of the fixture weights")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "bench")
    args = parser.parse_args()
    rows = []
    for model in args.models:
        print(f"capacity of {model}", file=sys.stderr)
        counts = args.streams or DEFAULT_COUNTS.get(model, [1, 2, 4, 8])
        rows += measure(model, counts, args.int8, lambda m: print(m, file=sys.stderr))
    print(save(rows, args.out))


if __name__ == "__main__":
    main()
