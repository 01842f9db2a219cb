"""Time to first audio with the level on (`loudness`) and off, on the same model, voice and text,
in turns, on this machine: what the option costs a stream once its voice is measured, and what
the voice's one measurement costs the first stream that asks for a level.

    .venv/bin/python -m scripts.bench_loudness                  # english, float and int8, 9 rounds
    .venv/bin/python -m scripts.bench_loudness --repeats 15 --models english_2m_2026-10

Needs the fixtures of scripts/test.sh (build/reference: random weights of the real architectures).
Each round measures both, the order swapped every round so machine drift falls on both alike;
the table gives medians and the spread, with the processor. Written into
docs/measurements.md#loudness.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Dict, List, Optional

from e2e import measured
from scripts.bench import TEXTS
from scripts.bundles import REFERENCE, int8_bundle

TARGET = -18.0


def first_chunk_and_rtf(model, voice, text: str, loudness: Optional[float]) -> tuple:
    """Seconds to the first chunk of `model.stream`, and the real-time factor of the whole."""
    start = time.perf_counter()
    first, samples = None, 0
    for chunk in model.stream(text, voice, loudness=loudness, seed=0):
        if first is None:
            first = time.perf_counter() - start
        samples += chunk.shape[0]
    return first, (time.perf_counter() - start) / (samples / model.sample_rate)


def measure(source: str, voice_path: str, text: str, repeats: int) -> Dict[str, object]:
    from core import TTSModel

    model = TTSModel.load(source)
    voice = model.voice_state(voice_path)
    list(model.stream("Warm up.", voice, seed=0))
    start = time.perf_counter()
    model.voice_loudness(voice)  # what the first leveled stream of a voice pays, once
    once = time.perf_counter() - start
    runs: Dict[str, List[tuple]] = {"off": [], "on": []}
    for round_ in range(repeats):
        order = ("off", "on") if round_ % 2 == 0 else ("on", "off")
        for name in order:
            runs[name].append(first_chunk_and_rtf(model, voice, text, TARGET if name == "on" else None))
        print(f"  round {round_ + 1}/{repeats}", file=sys.stderr)
    return {"once": once, **{name: list(zip(*values)) for name, values in runs.items()}}


def row(label: str, result: Dict[str, object]) -> str:
    def ms(values) -> str:
        return f"{1000 * statistics.median(values):.1f} ({1000 * min(values):.1f}-{1000 * max(values):.1f})"

    off, on = result["off"], result["on"]
    return (
        f"| {label} | {ms(off[0])} | {ms(on[0])} | {statistics.median(off[1]):.3f} | "
        f"{statistics.median(on[1]):.3f} | {1000 * result['once']:.0f} |"
    )


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["english"], help="fixtures of build/reference")
    parser.add_argument("--repeats", type=int, default=9, help="rounds (default: %(default)s)")
    parser.add_argument("--text", choices=sorted(TEXTS), default="medium")
    args = parser.parse_args(argv)
    print(f"on {measured.machine()}", file=sys.stderr)
    lines = [
        f"Text: {args.text}; voice: the fixture's voice state; level {TARGET:g} LUFS against none; "
        "medians (min-max) of first-chunk latency, medians of RTF.",
        "",
        "| model | first chunk, off (ms) | first chunk, on (ms) | RTF, off | RTF, on | voice measured, once (ms) |",
        "|---|---|---|---|---|---|",
    ]
    for name in args.models:
        voice = str(REFERENCE / name / "voice_state.safetensors")
        for label, source in ((name, str(REFERENCE / name / "config.yaml")), (f"{name} int8", str(int8_bundle(name)))):
            print(f"{label}:", file=sys.stderr)
            lines.append(row(label, measure(source, voice, TEXTS[args.text], args.repeats)))
    table = "\n".join(lines)
    print(table)
    measured.record("measurements.md", "loudness", table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
