"""How long the tests take: the quick loop (`pytest -m "not slow"`) and, with --full, all of pytest,
with the slowest tests of the quick loop (the ones to mark slow, or to make faster, when it grows).

    .venv/bin/python -m scripts.test_loop            # the quick loop
    .venv/bin/python -m scripts.test_loop --full     # and all of pytest, as scripts/test.sh runs it

Needs the environments and fixtures of scripts/test.sh. Writes the table into docs/tests.md; stops
with pytest's status if a test fails.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from typing import List, Tuple

from e2e import measured
from scripts.bundles import ROOT

SLOWEST = 8


def run(arguments: List[str]) -> Tuple[float, str, List[str]]:
    """(seconds, pytest's summary line, its slowest calls) of one pytest run, its output streamed."""
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--durations={SLOWEST}", *arguments]
    print("running", " ".join(command[1:]), file=sys.stderr, flush=True)
    start = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    seconds = time.monotonic() - start
    sys.stderr.write(done.stdout[-3000:])
    if done.returncode != 0:
        raise SystemExit(f"pytest failed (exit status {done.returncode}): no table written")
    lines = done.stdout.splitlines()
    summary = next(line.strip("= ") for line in reversed(lines) if re.search(r"\d+ passed", line))
    slowest = [line for line in lines if re.match(r"^\d+\.\d+s (call|setup|teardown) ", line)][:SLOWEST]
    return seconds, re.sub(r" in [\d.]+s.*$", "", summary), slowest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="all of pytest too (as scripts/test.sh runs it)")
    args = parser.parse_args()
    rows = [('`pytest -m "not slow"` (the quick loop)', *run(["-q", "-m", "not slow"]))]
    if args.full:
        rows.append(("`pytest --require-full-reference` (all)", *run(["-q", "--require-full-reference"])))
    lines = ["| run | tests | wall time |", "|---|---|---|"]
    lines += [
        f"| {name} | {summary} | {seconds / 60:.1f} min ({seconds:.0f} s) |" for name, seconds, summary, _ in rows
    ]
    lines += ["", "The quick loop's slowest steps:", "", "```"] + rows[0][3] + ["```"]
    measured.record("tests.md", "test loop", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
