"""The official package as the reference: snippets run in its environment (.venv-ref), and the
parity report the run prints at its end (tests/conftest.py) and writes to build/parity-report.md."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import List, Tuple

from tests.support.paths import ROOT

# (model, stage, NMSE dB, max abs, bar dB) of every parity comparison, and (model, ours' int8 NMSE,
# the official int8's, int8 bytes, float32 bytes): the report's rows.
REPORT: List[Tuple[str, str, float, float, float]] = []
INT8_REPORT: List[Tuple[str, float, float, int, int]] = []


def run_reference(python: Path, code: str, *args: str) -> str:
    """Run a snippet with the official package; returns its stdout."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    done = subprocess.run([str(python), "-c", code, *args], capture_output=True, text=True, env=env, cwd=ROOT)
    if done.returncode != 0:
        raise AssertionError(f"reference snippet failed:\n{done.stderr[-3000:]}")
    return done.stdout


def record(model: str, stage: str, nmse: float, max_abs: float, bar: float) -> None:
    REPORT.append((model, stage, nmse, max_abs, bar))


def record_int8(model: str, ours_nmse: float, official_nmse: float, int8_bytes: int, float_bytes: int) -> None:
    INT8_REPORT.append((model, ours_nmse, official_nmse, int8_bytes, float_bytes))
