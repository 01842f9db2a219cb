"""The two-thread CPython streamer gives the core's audio and stops when its reader goes away."""

from __future__ import annotations

import threading
import time

import numpy as np

from server import pipeline


def test_pipelined_stream_equals_the_core_stream(model, voice) -> None:
    options = dict(temperature=0.0, eos_threshold=float("inf"), max_frames=20)
    text = "First part [pause:50ms] second part, with a chunk split. And a last one."
    expected = model.generate(text, voice, max_tokens=8, **options)
    chunks = list(pipeline.stream(model, text, voice, max_tokens=8, **options))
    assert np.array_equal(np.concatenate(chunks), expected)  # the same operations, frame by frame


def test_bad_input_fails_before_any_thread(model, voice) -> None:
    import pytest

    from core import TextError

    before = threading.active_count()
    with pytest.raises(TextError):
        pipeline.stream(model, "   ", voice)
    assert threading.active_count() == before


def test_closing_the_stream_stops_the_generation(model, voice) -> None:
    stream = pipeline.stream(
        model, "A long text that would go on.", voice, eos_threshold=float("inf"), max_frames=10_000
    )
    next(stream)
    start = time.monotonic()
    stream.close()
    assert time.monotonic() - start < 5
    assert not [t for t in threading.enumerate() if t.name == "pocket-tts-flow-lm"]
