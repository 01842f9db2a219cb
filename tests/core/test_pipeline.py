"""The flow LM on a thread of its own (core/pipeline.py), the runner of every Python caller on
CPython: the one-thread runner's audio, sample for sample, letting go of its thread and its BLAS
limit however it ends; and what every entry of the API runs."""

from __future__ import annotations

import sys
import threading
import types
from types import SimpleNamespace

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from core import LimitError, Runtime, TTSModel, native, pipeline, threads
from core.portable import model as portable_model
from tests.support.paths import TINY_CONFIG, VOICE_24K

OPTIONS = {"temperature": 0.7, "seed": 5, "max_frames": 12, "eos_threshold": 1e9}
TEXT = "Two halves. Then a second sentence."


@pytest.fixture(scope="module")
def model():
    return TTSModel.load(str(TINY_CONFIG))


def _blas_threads():
    return [pool["num_threads"] for pool in threadpool_info()]


@pytest.fixture
def pays(monkeypatch):
    """The tiny model as if a thread of its own paid for its flow LM, its decoder on the caller's
    thread (tests/core/test_decoder_process.py tests the decoder's process)."""
    monkeypatch.setattr(pipeline, "pays", lambda model: True)
    monkeypatch.setattr(pipeline, "_start_decoder_process", lambda model: None)


def test_every_python_caller_runs_the_flow_lm_on_a_thread_of_its_own(model, pays) -> None:
    """On CPython with two cores or more, core's runtime runs TTSModel.audio on the pipeline:
    generate and stream run it (a second thread while the stream runs), with the
    one-thread runner's audio."""
    assert model.runtime.runner is pipeline.run
    voice = model.voice_state(str(VOICE_24K))
    with threadpool_limits(1):
        want = list(portable_model.one_thread(model, model.generation(TEXT, voice, **OPTIONS)))
    threads = threading.active_count()
    chunks = model.stream(TEXT, voice, **OPTIONS)
    got = [next(chunks)]
    assert threading.active_count() == threads + 1
    got += list(chunks)
    assert len(got) == len(want) == 12 and all(np.array_equal(a, b) for a, b in zip(got, want))
    assert np.array_equal(model.generate(TEXT, voice, **OPTIONS), np.concatenate(want))
    assert threading.active_count() == threads


def test_the_first_frame_decodes_alone(model, monkeypatch, pays) -> None:
    """The flow thread makes the second frame only once the decoder asks for it, so the first
    chunk's decoding never shares the GIL with the flow LM; the audio is the same."""
    voice = model.voice_state(str(VOICE_24K))
    with threadpool_limits(1):
        want = list(portable_model.one_thread(model, model.generation(TEXT, voice, **OPTIONS)))
    second_asked, seen = threading.Event(), []
    step, decoded = pipeline.alone, pipeline.decoded

    def stepping(model, generation):
        for index, frame in enumerate(step(model, generation)):
            yield frame
            if index == 0:
                second_asked.set()

    def decoding(decoder, frames):
        for index, chunk in enumerate(decoded(decoder, frames)):
            if index == 0:  # a flow thread that did not wait would ask for the second frame by now
                seen.append(second_asked.wait(0.5))
            yield chunk

    monkeypatch.setattr(pipeline, "alone", stepping)
    monkeypatch.setattr(pipeline, "decoded", decoding)
    got = list(model.stream(TEXT, voice, **OPTIONS))
    assert seen == [False] and second_asked.is_set()
    assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want))


def test_the_thread_pays_for_a_large_flow_lm_on_the_compiled_kernels(model, monkeypatch) -> None:
    """Where the flow LM is small, or the products run on NumPy alone (whose BLAS threads itself),
    handing each frame over costs more than it saves."""
    assert not pipeline.pays(model)
    monkeypatch.setattr(pipeline, "PAYS_FROM", 0)
    assert not pipeline.pays(SimpleNamespace(flow_spec=model.flow_spec, runtime=Runtime()))
    kernels = native.backend()
    if isinstance(kernels, native.NativeKernels):
        assert pipeline.pays(SimpleNamespace(flow_spec=model.flow_spec, runtime=Runtime(kernels)))


def test_a_small_model_runs_on_the_callers_thread(model) -> None:
    """Where the flow LM is small, handing each frame over costs more than it saves."""
    assert not pipeline.pays(model)
    threads = threading.active_count()
    chunks = model.stream(TEXT, str(VOICE_24K), **OPTIONS)
    next(chunks)
    assert threading.active_count() == threads
    chunks.close()


def test_closing_early_stops_the_flow_thread_and_restores_blas(model, pays) -> None:
    """BLAS runs on one thread while a stream runs and gets its threads back after it, stream after
    stream (threadpoolctl's view of the libraries is made once, at the first)."""
    with threadpool_limits(2):
        before, threads = _blas_threads(), threading.active_count()
        for _ in range(2):
            chunks = model.stream("Stop me early.", str(VOICE_24K), **dict(OPTIONS, max_frames=200))
            next(chunks)
            assert {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"} == {1}
            chunks.close()
            assert threading.active_count() == threads and _blas_threads() == before


def test_bad_input_fails_before_any_thread_and_errors_reach_the_caller(model, monkeypatch, pays) -> None:
    threads = threading.active_count()
    with pytest.raises(LimitError):
        model.stream("Hi.", str(VOICE_24K), max_frames=10**9)
    assert threading.active_count() == threads

    def broken(*args, **kwargs):
        raise RuntimeError("a fault in the flow LM")

    monkeypatch.setattr("core.portable.synthesis.generation.advance", broken)
    with pytest.raises(RuntimeError, match="a fault in the flow LM"):
        list(model.stream("Hi.", str(VOICE_24K), **OPTIONS))
    assert threading.active_count() == threads


def test_blas_libraries_are_looked_up_again_only_after_more_modules_were_imported(monkeypatch) -> None:
    """threadpoolctl's lookup of the BLAS libraries (milliseconds in a process with the model loaded)
    runs at a stream's start only where modules were imported since the last: a new BLAS comes with
    one (NumPy's, SciPy's, torch's)."""
    monkeypatch.setattr(threads, "_controller", None)
    views = []
    for _ in range(3):
        with threads.one_blas_thread():
            assert {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"} == {1}
            views.append(threads._controller[1])
    assert views[0] is views[1] is views[2]
    monkeypatch.setitem(sys.modules, "a_module_with_its_own_blas", types.ModuleType("a_module_with_its_own_blas"))
    with threads.one_blas_thread():
        assert threads._controller[1] is not views[0]
