"""The command line's stream (core/pipeline.py: the flow LM on a thread of its own) is the model's
own stream, sample for sample, and lets go of its thread and its BLAS limit however it ends."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from core import LimitError, TTSModel, pipeline

from conftest import TINY_CONFIG, VOICE_24K

OPTIONS = {"temperature": 0.7, "seed": 5, "max_frames": 12, "eos_threshold": 1e9}


@pytest.fixture(scope="module")
def model():
    return TTSModel.load(str(TINY_CONFIG))


def _blas_threads():
    return [pool["num_threads"] for pool in threadpool_info()]


def test_the_pipeline_is_the_models_stream(model) -> None:
    voice = model.voice_state(str(VOICE_24K))
    with threadpool_limits(1):
        want = list(model.stream("Two halves. Then a second sentence.", voice, **OPTIONS))
    got = list(pipeline.stream(model, "Two halves. Then a second sentence.", voice, **OPTIONS))
    assert len(got) == len(want) == 12
    assert all(np.array_equal(a, b) for a, b in zip(got, want))


def test_closing_early_stops_the_flow_thread_and_restores_blas(model) -> None:
    before, threads = _blas_threads(), threading.active_count()
    chunks = pipeline.stream(model, "Stop me early.", str(VOICE_24K), **dict(OPTIONS, max_frames=200))
    next(chunks)
    chunks.close()
    assert threading.active_count() == threads and _blas_threads() == before


def test_bad_input_fails_before_any_thread_and_errors_reach_the_caller(model, monkeypatch) -> None:
    threads = threading.active_count()
    with pytest.raises(LimitError):
        pipeline.stream(model, "Hi.", str(VOICE_24K), max_frames=10**9)
    assert threading.active_count() == threads

    def broken(*args, **kwargs):
        raise RuntimeError("a fault in the flow LM")

    monkeypatch.setattr("core.portable.model.advance", broken)
    with pytest.raises(RuntimeError, match="a fault in the flow LM"):
        list(pipeline.stream(model, "Hi.", str(VOICE_24K), **OPTIONS))
    assert threading.active_count() == threads
