"""The server's scheduler (continuous batching): streams that run together, join and leave mid-way,
each with its own options, give the audio they get alone; one that goes away stops and lets go of
its slot while the others go on; full slots refuse at once."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import List

import numpy as np
import pytest

from core.portable.synthesis.generation import alone
from server.errors import ServiceError
from server.relay import Relay
from server.scheduler import PROMPT_ROWS, SPLIT_AT, Audio, Scheduler, Stream, _Made
from server.slots import Busy, Slots
from tests.support.metrics import nmse_db

LONG = {"temperature": 0.0, "eos_threshold": 1e9}
# A hang shows as a failure after this long, never as a slow pass.
GUARD = 120


@pytest.fixture
def scheduler(model):
    scheduler = Scheduler()
    yield scheduler
    scheduler.close()


def start(scheduler: Scheduler, model, text: str, voice, slots: Slots = None, **options):
    """A generation submitted as the server does: under a slot of `slots` when given, which the
    request holds until its consumer is done with the chunks (the scheduler holds it meanwhile too)."""
    slot = slots.take() if slots is not None else None
    relay = Relay(asyncio.get_running_loop(), scheduler.wake)
    generation = model.generation(text, voice, **options)
    if slot is not None:
        slot.on_release(relay.abandon)
    scheduler.submit(generation, relay, slot.hold() if slot is not None else lambda: None)

    async def delivered():
        try:
            async for item in relay.items():
                if isinstance(item, Audio):
                    yield item.pcm
        finally:
            if slot is not None:
                slot.release()

    return generation, delivered()


async def collect(chunks) -> np.ndarray:
    return np.concatenate([chunk async for chunk in chunks])


def test_one_stream_alone_gives_the_core_audio(model, voice, scheduler) -> None:
    options = dict(temperature=0.0, max_tokens=6, eos_threshold=1e9, max_frames=14)
    text = "First part [pause:50ms] second part, with a chunk split. And a last one."

    async def run() -> np.ndarray:
        return await collect(start(scheduler, model, text, voice, **options)[1])

    assert np.array_equal(asyncio.run(asyncio.wait_for(run(), GUARD)), model.generate(text, voice, **options))


def test_streams_joining_mid_way_with_their_own_options_get_their_audio_alone(model, voice, scheduler) -> None:
    requests = [
        ("The first stream is running already.", dict(LONG, max_frames=16)),
        (
            "The second joins a few frames later, seeded.",
            dict(temperature=0.5, seed=3, max_frames=10, eos_threshold=1e9),
        ),
        (
            "A newcomer with a long text, longer than the slice of rows a step reads while others run, so that "
            "it takes two steps or more to read it all.",
            dict(LONG, max_frames=8),
        ),
    ]

    async def run() -> List[np.ndarray]:
        first = start(scheduler, model, *requests[0][:1], voice, **requests[0][1])[1]
        received = [await first.__anext__() for _ in range(3)]  # it runs: the others join mid-way
        second = start(scheduler, model, requests[1][0], voice, **requests[1][1])[1]
        third = start(scheduler, model, requests[2][0], voice, **requests[2][1])[1]
        rest = await asyncio.gather(collect(first), collect(second), collect(third))
        return [np.concatenate(received + [rest[0]])] + list(rest[1:])

    assert len(model.tokenizer.encode(requests[2][0])) > PROMPT_ROWS  # one chunk, read a slice a step
    got = asyncio.run(asyncio.wait_for(run(), GUARD))
    for (text, options), audio in zip(requests, got):
        alone = model.generate(text, voice, **options)
        assert audio.shape == alone.shape and nmse_db(audio, alone) < -90


def test_streams_decoded_in_two_halves_each_get_their_audio_alone(model, voice, scheduler, monkeypatch) -> None:
    """From SPLIT_AT streams a step's frames are decoded on two threads, half each: every stream
    still gets its own audio, whichever half it falls in as others end."""
    texts = [f"Stream number {i} says its own words." for i in range(SPLIT_AT + 2)]
    frames = [6 + 2 * i for i in range(len(texts))]  # they end one after another: the halves change
    calls = []
    split = scheduler._decode_step
    monkeypatch.setattr(scheduler, "_decode_step", lambda d, f: (calls.append(len(f)), split(d, f))[1])

    async def run() -> List[np.ndarray]:
        streams = [
            start(scheduler, model, text, voice, **dict(LONG, max_frames=n))[1] for text, n in zip(texts, frames)
        ]
        return await asyncio.gather(*(collect(chunks) for chunks in streams))

    got = asyncio.run(asyncio.wait_for(run(), GUARD))
    assert max(calls) >= SPLIT_AT
    for text, n, audio in zip(texts, frames, got):
        alone = model.generate(text, voice, **dict(LONG, max_frames=n))
        assert audio.shape == alone.shape and nmse_db(audio, alone) < -90


class _Heard:
    """A relay that writes down what it is handed, in order, into `log` (shared by streams)."""

    def __init__(self, name: str, log: list):
        self.name, self.log = name, log
        self.abandoned = threading.Event()
        self.full = False

    def put(self, item) -> None:  # noqa: ANN001 - an Audio
        self.log.append((self.name, item.pcm))

    def skip(self) -> None:
        self.log.append((self.name, None))

    def note(self, item) -> None:  # noqa: ANN001 - Words or Said: not what this test is about
        pass

    def fail(self, error: BaseException) -> None:
        self.log.append((self.name, error))


def test_a_newcomers_first_frame_is_decoded_and_heard_before_the_steps_other_frames(model, voice, scheduler) -> None:
    """A step holding a running stream's frame and a newcomer's first: the newcomer, who hears
    nothing yet, gets its audio from a pass of its own, before the running stream's frame is decoded;
    each gets the audio it would alone."""
    running = model.generation("The first stream is running already.", voice, **dict(LONG, max_frames=8))
    newcomer = model.generation("A newcomer joins.", voice, **dict(LONG, max_frames=4))
    running_frames, newcomer_frames = alone(model, running), alone(model, newcomer)
    running_decoder, newcomer_decoder = model.decoder(running.speed), model.decoder(newcomer.speed)
    first = next(running_frames)
    running_decoder.decode(first)
    second, newcomers_first = next(running_frames), next(newcomer_frames)
    assert first.first and not second.first and newcomers_first.first
    want = {
        "running": model.decoder(running.speed),
        "newcomer": model.decoder(newcomer.speed).decode(newcomers_first),
    }
    want["running"].decode(first)
    want["running"] = want["running"].decode(second)
    log: list = []
    passes: list = []
    decode = scheduler._decode_step
    scheduler._decode_step = lambda d, f: (passes.append([frame.first for frame in f]), decode(d, f))[1]
    made = [
        _Made(Stream(scheduler, _Heard("running", log), lambda: None), running, running_decoder, None, second),
        _Made(
            Stream(scheduler, _Heard("newcomer", log), lambda: None), newcomer, newcomer_decoder, None, newcomers_first
        ),
    ]
    scheduler._steps.put((made, []))
    deadline = time.monotonic() + GUARD
    while len(log) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert passes == [[True], [False]]
    assert [name for name, _ in log] == ["newcomer", "running"]
    for name, pcm in log:
        assert np.array_equal(pcm, want[name])


def test_a_stream_that_goes_away_stops_and_frees_its_slot(model, voice, scheduler) -> None:
    slots = Slots(3)

    async def run():
        generation, leaving = start(
            scheduler, model, "I will not be heard to the end.", voice, slots, **LONG, max_frames=3000
        )
        staying = start(scheduler, model, "I stay to the end.", voice, slots, **LONG, max_frames=25)[1]
        await leaving.__anext__()
        await leaving.aclose()  # the client went away
        audio = await collect(staying)
        while slots.taken:  # the last frames in flight are dropped, then the slot is free
            await asyncio.sleep(0.01)
        return generation, audio

    generation, audio = asyncio.run(asyncio.wait_for(run(), GUARD))
    assert audio.shape == (25 * model.frame_size,) and slots.taken == 0
    assert not generation.done  # dropped long before its 3000 frames


def test_streams_running_or_opened_at_shutdown_end_shutting_down(model, voice, scheduler) -> None:
    """Closing the scheduler ends what runs, and refuses what comes after, with the one refusal
    every front answers a shutdown with (not a fault of ours: a 500)."""
    slots = Slots(2)

    async def run() -> List[str]:
        running = start(scheduler, model, "I am cut by the shutdown.", voice, slots, **LONG, max_frames=3000)[1]
        await running.__anext__()
        await asyncio.to_thread(scheduler.close)
        late = start(scheduler, model, "Too late.", voice, slots, **LONG, max_frames=4)[1]
        codes = []
        for chunks in (running, late):
            with pytest.raises(ServiceError) as refused:
                await collect(chunks)
            codes.append(refused.value.code)
        return codes

    assert asyncio.run(asyncio.wait_for(run(), GUARD)) == ["shutting_down", "shutting_down"]
    assert slots.taken == 0  # both slots let go of: the scheduler's hold and the request's


def test_full_slots_refuse_at_once_and_take_the_next_when_free(model, voice, scheduler) -> None:
    slots = Slots(3)

    async def run():
        running = [start(scheduler, model, f"Stream {i}.", voice, slots, **LONG, max_frames=3000)[1] for i in range(3)]
        for chunks in running:
            await chunks.__anext__()
        with pytest.raises(Busy):
            start(scheduler, model, "One too many.", voice, slots)
        await running[0].aclose()
        while slots.taken == 3:
            await asyncio.sleep(0.01)
        audio = await collect(start(scheduler, model, "Now there is room.", voice, slots, **LONG, max_frames=4)[1])
        for chunks in running[1:]:
            await chunks.aclose()
        return audio

    assert asyncio.run(asyncio.wait_for(run(), GUARD)).shape == (4 * model.frame_size,)


def test_a_stream_whose_client_does_not_read_waits_while_the_others_go_on(model, voice, scheduler) -> None:
    """Backpressure: a stream makes at most a relay's worth of chunks ahead of its client; one
    nobody reads stops there (its slot held, its memory bounded) while another runs to its end, and
    goes on when its client reads again."""
    from server.relay import LIMIT

    async def run():
        unread_generation, unread = start(scheduler, model, "Nobody reads me yet.", voice, **LONG, max_frames=60)
        audio = await collect(start(scheduler, model, "I am read to the end.", voice, **LONG, max_frames=40)[1])
        made = 60 - unread_generation.frames_left
        rest = await collect(unread)
        return audio, made, rest

    audio, made, rest = asyncio.run(asyncio.wait_for(run(), GUARD))
    assert audio.shape == (40 * model.frame_size,)
    assert made <= LIMIT + 2  # the chunks it may hold, one step in flight and one being decoded
    assert rest.shape == (60 * model.frame_size,)
