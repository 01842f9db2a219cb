"""The int8 bundles the benchmarks measure, exported once from the test fixtures (build/reference)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "build" / "reference"
OUT = ROOT / "build" / "bench"


def int8_bundle(model: str) -> Path:
    """build/bench/MODEL-int8, exported from the fixture of `model` with its voice if not there yet."""
    from core.export import export
    from core.portable.weights.bundle import is_bundle

    bundle = OUT / f"{model}-int8"
    if not is_bundle(str(bundle)):
        print(f"  exporting the int8 bundle of {model}", file=sys.stderr)
        export(
            str(REFERENCE / model / "config.yaml"), str(bundle), [str(REFERENCE / model / "voice_state.safetensors")]
        )
    return bundle
