"""What word timestamps cost: each frame's scores alone, and the real-time factor of a whole
generation with and without them (same text, voice and frames, rounds alternating), on the parity
fixtures with timestamp heads (scripts/make_word_reference.py writes their configs). Writes its
table into docs/measurements.md.

    .venv/bin/python -m scripts.bench_words
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from core import TTSModel
from core.portable.synthesis import generation as generation_module
from core.portable.synthesis import timestamps
from e2e import measured

REFERENCE = Path(__file__).resolve().parent.parent / "build" / "reference"
TEXT = "The first sentence is short. The second one, which has a comma, is a bit longer; it goes on."
OPTIONS = {"temperature": 0.0, "eos_threshold": float("inf"), "normalize": False}


def score_cost(model: TTSModel, voice: object) -> tuple:
    """Median ms of one frame's scores, timed in a real generation; its heads, and its first
    chunk's units and text tokens."""
    times = []
    scores = timestamps.unit_scores

    def timed(*args: object) -> np.ndarray:
        start = time.perf_counter()
        out = scores(*args)
        times.append(time.perf_counter() - start)
        return out

    timestamps.unit_scores = timed
    try:
        generation = model.generation(TEXT, voice, first_word=0, **OPTIONS)
        frames = [frame for frame in generation_module.alone(model, generation) if frame.scores is not None]
    finally:
        timestamps.unit_scores = scores
    chunk = frames[0].words
    return 1000 * statistics.median(times), len(chunk.units), len(generation.heads), chunk.token_to_unit.shape[0]


def rtf(model: TTSModel, voice: object, words: bool) -> float:
    start = time.perf_counter()
    samples = 0
    for item in model.stream(TEXT, voice, words=words, **OPTIONS):
        if isinstance(item, np.ndarray):
            samples += item.shape[0]
    return (time.perf_counter() - start) / (samples / model.sample_rate)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["english", "english_2m_2026-10"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-docs", action="store_true", help="print the table only")
    args = parser.parse_args()
    lines = [
        "| model | heads | units of a chunk | text tokens | scores of a frame (ms) | RTF without words "
        "| RTF with words |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in args.models:
        config = REFERENCE / name / "config_words.yaml"
        if not config.exists():
            sys.exit(f"{config} is missing: run scripts.make_word_reference first (scripts/test.sh does)")
        model = TTSModel.load(str(config))
        voice = model.voice_state(str(REFERENCE / name / "voice_state.safetensors"))
        per_frame, units, heads, tokens = score_cost(model, voice)
        rtf(model, voice, True)  # warm-up
        plain, timed = [], []
        for _ in range(args.rounds):
            plain.append(rtf(model, voice, False))
            timed.append(rtf(model, voice, True))
        without, with_words = statistics.median(plain), statistics.median(timed)
        print(f"{name}: {per_frame:.3f} ms a frame, RTF {without:.3f} -> {with_words:.3f}", file=sys.stderr)
        lines.append(f"| {name} | {heads} | {units} | {tokens} | {per_frame:.3f} | {without:.3f} | {with_words:.3f} |")
    table = "\n".join(lines) + f"\n\nMedians of {args.rounds} alternating rounds; the text: {TEXT!r}."
    print(table)
    if not args.no_docs:
        measured.record("measurements.md", "word timestamps cost", table)


if __name__ == "__main__":
    main()
