"""The parity tables: every stage of every fixture model against the official pocket-tts 4.0.1, and
the int8 bundles' error beside the official `quantize=True`, measured by the tests themselves.

    .venv/bin/python -m scripts.parity

Runs the parity tests and the int8 comparison (tests/core/test_parity.py, tests/core/test_sources.py; the
fixtures of scripts/test.sh must exist), which write build/parity-report.md, then puts its two
tables into docs/measurements.md#parity. Stops with the tests' status if any fails.
"""

from __future__ import annotations

import subprocess
import sys

from e2e import measured
from scripts.bundles import ROOT

REPORT = ROOT / "build" / "parity-report.md"
INT8_HEADING = "int8 against the official float32 audio"


def main() -> None:
    REPORT.unlink(missing_ok=True)
    tests = ["tests/core/test_parity.py", "tests/core/test_sources.py::test_int8_error_side_by_side_with_the_official"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--require-full-reference", *tests], cwd=ROOT
    )
    if done.returncode != 0 or not REPORT.exists():
        raise SystemExit(f"the parity tests failed (exit status {done.returncode}): no table written")
    body = REPORT.read_text().split("\n", 2)[2]  # without its title
    parity, _, int8 = body.partition(INT8_HEADING)
    measured.record("measurements.md", "parity", parity)
    measured.record("measurements.md", "int8 error", INT8_HEADING + int8)


if __name__ == "__main__":
    main()
