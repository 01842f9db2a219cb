"""The decoder's process (core/decoder_process.py): the caller's audio sample for sample, whether a
stream decodes there from its first frame or hands its state over mid-stream; one stream at a
time; a process that fails or ends never takes a stream's audio with it unannounced; it ends with
its model."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from core import PocketTTSError, TTSModel, decoder_process, pipeline
from core.portable import model as portable_model
from core.portable.synthesis.decoding import decoded
from core.portable.synthesis.generation import alone
from tests.support.paths import TINY_CONFIG, VOICE_24K

# Two text chunks (the second decodes from a fresh state) and a pause between them.
TEXT = "Two halves make one. [pause:200ms] Then a second sentence, long enough to be a chunk of its own."
OPTIONS = {"temperature": 0.7, "seed": 5}


@pytest.fixture(scope="module")
def voice(model):
    return model.voice_state(str(VOICE_24K))


@pytest.fixture(scope="module")
def process(model):
    started = decoder_process.DecoderProcess(model)
    assert started.ready.wait(60)
    return started


def _frames(model, voice):
    return list(alone(model, model.generation(TEXT, voice, **OPTIONS)))


def _want(model, voice):
    with threadpool_limits(1):
        return [chunk for chunk in portable_model.one_thread(model, model.generation(TEXT, voice, **OPTIONS))]


def _same(got, want) -> None:
    assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want))


def test_the_process_decodes_a_stream_as_the_callers_thread_does(model, voice, process) -> None:
    frames = _frames(model, voice)
    assert sum(frame.first for frame in frames) == 2 and any(frame.latent is None for frame in frames)
    calls = []
    send = process.send

    def counted(*args):
        calls.append(args[1])
        return send(*args)

    process.send = counted
    try:
        got = list(decoded(decoder_process.HandingDecoder(model, 1.0, process), frames))
    finally:
        del process.send
    assert len(calls) == sum(frame.latent is not None for frame in frames) and calls.count(True) == 2
    _same(got, _want(model, voice))


def test_a_stream_hands_its_decoder_state_over_when_the_process_is_ready(model, voice, process) -> None:
    """Frames decoded on the caller's thread until the process is ready, then there, with the state
    they left: mid-chunk, the audio of one decoder."""
    frames = _frames(model, voice)
    process.ready.clear()
    decoder = decoder_process.HandingDecoder(model, 1.0, process)

    def becoming_ready():
        for index, frame in enumerate(frames):
            if index == 3:
                process.ready.set()
            yield frame

    try:
        got = list(decoded(decoder, becoming_ready()))
    finally:
        process.ready.set()
    assert decoder.handed and not frames[3].first
    _same(got, _want(model, voice))


def test_one_stream_at_a_time_holds_the_process(process) -> None:
    assert process.claim()
    try:
        assert not process.claim()
    finally:
        process.release()
    assert process.claim()
    process.release()


def test_the_models_streams_start_it_and_use_it(model, voice, monkeypatch) -> None:
    """The first stream starts the model's process after its first chunk; while one stream holds
    it, another decodes on its own thread; every stream's audio is the caller's."""
    monkeypatch.setattr(pipeline, "pays", lambda model: True)
    want = _want(model, voice)
    fresh = TTSModel.load(str(TINY_CONFIG))
    chunks = fresh.stream(TEXT, voice, **OPTIONS)
    got = [next(chunks)]
    assert pipeline._decoder_process(fresh) is None
    assert not pipeline.decoder_process_ready(fresh, 60)  # none started: no wait
    got += list(chunks)
    _same(got, want)
    started = pipeline._decoder_process(fresh)
    assert started is not None and pipeline.decoder_process_ready(fresh, 60) and started.ready.is_set()
    first = fresh.stream(TEXT, voice, **OPTIONS)
    got = [next(first)]
    assert not started.claim()  # the first stream holds it
    _same(list(fresh.stream(TEXT, voice, **OPTIONS)), want)
    got += list(first)
    _same(got, want)
    assert started.claim()
    started.release()


def test_a_failure_in_the_process_is_the_callers_error(model, process) -> None:
    with pytest.raises(PocketTTSError, match="the decoder process failed: ValueError"):
        process.send(np.zeros((1, 3), np.float32), True, None)
        process.receive()
    assert process.ready.is_set()


def test_a_process_that_ended_fails_its_stream_and_no_later_one(model, voice) -> None:
    """A stream whose state is in a process that ended cannot go on (its error says why); the
    streams after it decode on their own threads."""
    process = decoder_process.DecoderProcess(model)
    assert process.ready.wait(60)
    frames = _frames(model, voice)
    decoder = decoder_process.HandingDecoder(model, 1.0, process)
    chunks = decoded(decoder, iter(frames))
    next(chunks)
    process._process.kill()
    process._process.wait(30)
    with pytest.raises(PocketTTSError, match="the decoder process ended mid-stream"):
        list(chunks)
    assert not process.ready.is_set()
    _same(list(decoded(decoder_process.HandingDecoder(model, 1.0, process), frames)), _want(model, voice))


def test_without_an_interpreter_to_start_streams_decode_on_their_threads(model, voice, monkeypatch) -> None:
    monkeypatch.setattr(decoder_process.sys, "executable", "/nonexistent/python")
    process = decoder_process.DecoderProcess(model)
    for thread in threading.enumerate():
        if thread.name == "pocket-tts-decoder-start":
            thread.join(30)
    assert not process.ready.is_set()
    _same(
        list(decoded(decoder_process.HandingDecoder(model, 1.0, process), _frames(model, voice))), _want(model, voice)
    )


def test_the_process_ends_with_its_model() -> None:
    fresh = TTSModel.load(str(TINY_CONFIG))
    process = decoder_process.DecoderProcess(fresh)
    assert process.ready.wait(60)
    child = process._process
    del process, fresh
    gc.collect()
    assert child.wait(30) == 0


def test_an_exchange_cut_half_way_leaves_nothing_for_the_next_stream(model, voice, monkeypatch) -> None:
    """A KeyboardInterrupt between a frame sent and its audio read: the answer still in the pipe
    must never be read as another frame's, so the process is given up."""
    process = decoder_process.DecoderProcess(model)
    assert process.ready.wait(60)

    def interrupted(pipe):
        raise KeyboardInterrupt

    monkeypatch.setattr(decoder_process, "_receive", interrupted)
    with pytest.raises(KeyboardInterrupt):
        process.send(_frames(model, voice)[0].latent[None], True, None)
        process.receive()
    monkeypatch.undo()
    assert not process.ready.is_set() and process._process.wait(30) == 0


def _sends(process, monkeypatch) -> list:
    """The frames' `fresh` flags as the process is sent them."""
    sent = []
    send = process.send

    def counted(*args):
        sent.append(args[1])
        return send(*args)

    monkeypatch.setattr(process, "send", counted)
    return sent


def test_frames_offered_as_they_are_made_go_ahead_once_the_state_is_there(model, voice, process, monkeypatch) -> None:
    """The thread that makes the frames offers each as it is made: none goes before the stream's
    state is in the process, then each goes at once, in order, two frames ahead of the caller
    here; the audio is still the caller's thread's."""
    frames = _frames(model, voice)
    sent = _sends(process, monkeypatch)
    decoder = decoder_process.HandingDecoder(model, 1.0, process)
    ahead = []

    def made_two_ahead():
        offered = 0
        for index, frame in enumerate(frames):
            while offered < min(index + 3, len(frames)):
                before = len(sent)
                decoder.offer(frames[offered])
                ahead.append(len(sent) - before)
                offered += 1
            yield frame

    got = list(decoded(decoder, made_two_ahead()))
    _same(got, _want(model, voice))
    latent = [frame.latent is not None for frame in frames]
    assert ahead[:3] == [0, 0, 0]  # offered before the first frame handed the state over
    assert sum(ahead) == sum(latent) - 3 and len(sent) == sum(latent) and sent.count(True) == 2


def test_a_stream_closed_with_frames_ahead_leaves_their_audio_to_no_one(model, voice, process) -> None:
    frames = [frame for frame in _frames(model, voice) if frame.latent is not None]
    decoder = decoder_process.HandingDecoder(model, 1.0, process)
    decoder.mimi_step(frames[0])
    for frame in frames[1:4]:
        decoder.offer(frame)
    decoder.close()
    assert process.ready.is_set()
    _same(
        list(decoded(decoder_process.HandingDecoder(model, 1.0, process), _frames(model, voice))), _want(model, voice)
    )


def test_the_answers_come_in_the_order_asked_a_failed_frame_among_them(model, voice, process) -> None:
    latent = _frames(model, voice)[0].latent[None]
    process.send(latent, True, None)
    want = process.receive()
    process.send(latent, True, None)
    process.send(np.zeros((1, 3), np.float32), False, None)
    process.send(latent, True, None)
    np.testing.assert_array_equal(process.receive(), want)
    with pytest.raises(PocketTTSError, match="the decoder process failed: ValueError"):
        process.receive()
    np.testing.assert_array_equal(process.receive(), want)
    assert process.ready.is_set()


def test_a_stream_closed_mid_way_leaves_the_next_its_own_audio(model, voice, monkeypatch) -> None:
    """Closed after a few chunks, while its flow thread may have sent frames ahead: the next
    stream's audio is still its own."""
    monkeypatch.setattr(pipeline, "pays", lambda model: True)
    fresh = TTSModel.load(str(TINY_CONFIG))
    list(fresh.stream(TEXT, voice, **OPTIONS))  # starts the process
    assert pipeline.decoder_process_ready(fresh, 60)
    for _ in range(3):
        chunks = fresh.stream(TEXT, voice, **OPTIONS)
        for _ in range(4):
            next(chunks)
        chunks.close()
    _same(list(fresh.stream(TEXT, voice, **OPTIONS)), _want(model, voice))


def test_a_streams_flow_thread_sends_its_frames_as_it_makes_them(model, voice, monkeypatch) -> None:
    """In a model's stream that holds the process from its first frame, the frames after the
    first go to the process from the flow thread that made them; the audio is the caller's."""
    monkeypatch.setattr(pipeline, "pays", lambda model: True)
    fresh = TTSModel.load(str(TINY_CONFIG))
    list(fresh.stream(TEXT, voice, **OPTIONS))  # starts the process
    assert pipeline.decoder_process_ready(fresh, 60)
    process, senders = pipeline._decoder_process(fresh), []
    send = process.send

    def recorded(*args):
        senders.append(threading.current_thread().name)
        return send(*args)

    monkeypatch.setattr(process, "send", recorded)
    _same(list(fresh.stream(TEXT, voice, **OPTIONS)), _want(model, voice))
    frames = _frames(model, voice)
    assert len(senders) == sum(frame.latent is not None for frame in frames)
    assert senders[0] == threading.current_thread().name and "pocket-tts-flow-lm" in senders


def test_a_process_that_ends_while_frames_are_ahead_fails_that_stream_alone(model, voice, monkeypatch) -> None:
    """Killed mid-stream while its flow thread sends frames ahead: that stream raises why (its
    close takes no answer from a process that is gone, and hangs on none), the process is free
    again, and the next streams decode on their own threads."""
    monkeypatch.setattr(pipeline, "pays", lambda model: True)
    fresh = TTSModel.load(str(TINY_CONFIG))
    list(fresh.stream(TEXT, voice, **OPTIONS))  # starts the process
    assert pipeline.decoder_process_ready(fresh, 60)
    process = pipeline._decoder_process(fresh)
    chunks = fresh.stream(TEXT, voice, **OPTIONS)
    next(chunks)
    process._process.kill()
    process._process.wait(30)
    with pytest.raises(PocketTTSError, match="the decoder process ended mid-stream"):
        list(chunks)
    assert not process.ready.is_set() and process.claim()
    process.release()
    _same(list(fresh.stream(TEXT, voice, **OPTIONS)), _want(model, voice))


def test_a_close_cut_short_still_frees_the_process(model, voice, monkeypatch) -> None:
    monkeypatch.setattr(pipeline, "pays", lambda model: True)
    fresh = TTSModel.load(str(TINY_CONFIG))
    list(fresh.stream(TEXT, voice, **OPTIONS))
    assert pipeline.decoder_process_ready(fresh, 60)
    process = pipeline._decoder_process(fresh)

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(decoder_process.HandingDecoder, "close", interrupted)
    chunks = fresh.stream(TEXT, voice, **OPTIONS)
    next(chunks)
    with pytest.raises(KeyboardInterrupt):
        chunks.close()
    assert process.claim()
    process.release()
