"""The WebSocket /v1/audio/speech/stream (server/websocket.py), driven by the `websockets` library
against the app on uvicorn: text sent piece by piece is spoken segment by segment, the same audio as
POST /stream of the whole text; flush, end, cancel; speed; sample counts at any rate, across a
cancel; and its limits.

Nothing here asserts a duration: the client and the server are synchronized by their frames (the
idle timeout's test waits for the timeout, with a short one configured)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Tuple

import httpx
import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from core import audio_formats
from server import frames, session, websocket
from server.engine import ServerEngine
from server.relay import LIMIT
from tests.support.models import timed_tiny
from tests.support.paths import VOICE_24K
from tests.support.serving import GUARD, NEVER_ENDS, Held, serving, until

PATH = "/v1/audio/speech/stream"
TEXT = "Hello there. This is a test, of the stream. And now a third sentence!"
# Each sentence of TEXT is a chunk of its own at this max_tokens: then the WebSocket's segments are
# the chunks of POST /stream.
SEGMENTS = ["Hello there.", "This is a test, of the stream.", "And now a third sentence!"]
SEEDED = {"seed": 7, "max_tokens": 8}


@pytest.fixture(scope="module")
def engine(model) -> Iterator[ServerEngine]:
    engine = ServerEngine(model, str(VOICE_24K), max_concurrent=2)
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def url(engine) -> Iterator[str]:
    with serving(engine) as url:
        yield url


def ws(url: str, **kwargs: Any) -> ClientConnection:
    return connect(url.replace("http://", "ws://") + PATH, open_timeout=GUARD, **kwargs)


def send(connection: ClientConnection, kind: str, **fields: Any) -> None:
    connection.send(json.dumps({"type": kind, **fields}))


def pieces(text: str, size: int = 3) -> List[str]:
    """The text cut every `size` characters (inside words too), as an LLM's tokens come."""
    return [text[i : i + size] for i in range(0, len(text), size)]


class Heard:
    """What a client received: the JSON frames in order, the audio, and the close code."""

    def __init__(self) -> None:
        self.events: List[Dict[str, Any]] = []
        self.audio = bytearray()
        self.close_code = None

    def of(self, kind: str) -> List[Dict[str, Any]]:
        return [event for event in self.events if event["type"] == kind]

    @property
    def samples(self) -> int:
        return len(self.audio) // 2


def listen(connection: ClientConnection, heard: Heard, until_type: str = "") -> Dict[str, Any]:
    """Receive into `heard` until a JSON frame of `until_type` (returned), or the close ({})."""
    while True:
        try:
            message = connection.recv(timeout=GUARD)
        except ConnectionClosed as closed:
            heard.close_code = closed.rcvd.code if closed.rcvd is not None else None
            return {}
        if isinstance(message, bytes):
            heard.audio += message
            continue
        event = json.loads(message)
        heard.events.append(event)
        if event["type"] == until_type:
            return event


def speak_in_pieces(url: str, text: str, start: Dict[str, Any], rate: float = 40.0) -> Heard:
    """Send `start`, the text a few characters at a time at `rate` pieces a second, then `end`."""
    heard = Heard()
    with ws(url) as connection:
        send(connection, "start", **start)
        for piece in pieces(text):
            send(connection, "text", text=piece)
            time.sleep(1 / rate)  # the pace of an LLM; the audio does not depend on it
        send(connection, "end")
        listen(connection, heard)
    return heard


def test_text_in_pieces_is_spoken_segment_by_segment_as_the_whole_text_is(url) -> None:
    heard = speak_in_pieces(url, TEXT, SEEDED)
    whole = httpx.post(url + "/stream", json={"text": TEXT, **SEEDED}, timeout=GUARD)
    assert heard.events[0] == {"type": "started", "sample_rate": 24000, "format": "pcm"}
    assert [event["text"] for event in heard.of("segment")] == SEGMENTS
    assert heard.events[-1] == {"type": "done", "samples": heard.samples} and heard.close_code == 1000
    assert np.array_equal(np.frombuffer(bytes(heard.audio), "<i2"), np.frombuffer(whole.content, "<i2"))
    # Each segment's start_sample is where its audio begins: the samples sent before it.
    starts = [event["start_sample"] for event in heard.of("segment")]
    assert starts[0] == 0 and starts == sorted(starts) and starts[-1] < heard.samples


def test_the_seed_makes_reruns_the_same_and_start_is_optional(url) -> None:
    assert speak_in_pieces(url, TEXT, SEEDED).audio == speak_in_pieces(url, TEXT, SEEDED, rate=400).audio
    heard = Heard()
    with ws(url) as connection:  # no start: the default voice and options
        send(connection, "text", text="Hi there. ")
        send(connection, "end")
        listen(connection, heard)
    assert heard.events[0]["type"] == "started" and [e["text"] for e in heard.of("segment")] == ["Hi there."]
    assert heard.samples > 0 and heard.close_code == 1000


def test_flush_speaks_what_is_buffered_and_the_connection_goes_on(url) -> None:
    heard = Heard()
    with ws(url) as connection:
        send(connection, "start", temperature=0.0, max_frames=3)
        send(connection, "text", text="No sentence end yet")
        send(connection, "flush")
        assert listen(connection, heard, "segment")["text"] == "No sentence end yet"
        send(connection, "text", text="Then 2 more. ")
        assert listen(connection, heard, "segment") == {
            "type": "segment",
            "text": "Then 2 more.",
            "spoken": "Then two more.",
            "start_sample": 3 * 1920,
        }
        send(connection, "end")
        assert listen(connection, heard, "done") == {"type": "done", "samples": 6 * 1920}
        listen(connection, heard)
    assert heard.samples == 6 * 1920 and heard.close_code == 1000


def test_cancel_stops_within_a_frame_answers_done_and_takes_new_text(url, engine, monkeypatch) -> None:
    """The server's own record of what it sent: after it took the cancel, no audio before `done`;
    and the generation, which would run for minutes, is dropped."""
    sent: List[str] = []
    original_send, original_cancel = websocket._Connection._send, websocket._Connection._cancel

    async def record_send(self, **data: Any) -> None:
        await original_send(self, **data)
        sent.append("audio" if "bytes" in data else json.loads(data["text"])["type"])

    async def record_cancel(self) -> None:
        sent.append("cancel taken")
        await original_cancel(self)

    monkeypatch.setattr(websocket._Connection, "_send", record_send)
    monkeypatch.setattr(websocket._Connection, "_cancel", record_cancel)
    dropped = threading.Event()
    open_stream = engine.open_stream

    def recorded_open(relay, release):
        return open_stream(relay, lambda: (release(), dropped.set()))

    monkeypatch.setattr(engine, "open_stream", recorded_open)
    heard = Heard()
    with ws(url) as connection:
        send(connection, "start", max_frames=2000, **NEVER_ENDS)
        send(connection, "text", text="This would go on for minutes.")
        send(connection, "flush")
        listen(connection, heard, "segment")
        while heard.samples < 3 * 1920:
            heard.audio += connection.recv(timeout=GUARD)
        send(connection, "cancel")
        done = listen(connection, heard, "done")
        assert done["samples"] == heard.samples < 2000 * 1920
        assert dropped.wait(GUARD), "the generation was not dropped"
        taken = sent.index("cancel taken")
        assert sent[taken + 1 :] == ["done"]
        # Barge-in: the connection speaks new text after it (cancelled too, then the end).
        send(connection, "text", text="Something else. ")
        segment = listen(connection, heard, "segment")
        assert segment == {
            "type": "segment",
            "text": "Something else.",
            "spoken": "Something else.",
            "start_sample": done["samples"],
        }
        send(connection, "cancel")
        done = listen(connection, heard, "done")
        send(connection, "end")
        assert listen(connection, heard, "done") == done
        listen(connection, heard)
    assert heard.close_code == 1000 and not heard.of("error")


@pytest.fixture(scope="module")
def timed_url(tmp_path_factory) -> Iterator[Tuple[str, ServerEngine]]:
    """The app on the tiny model with timestamp heads (its words timed), and its engine."""
    engine = ServerEngine(timed_tiny(tmp_path_factory.mktemp("timed")), str(VOICE_24K), max_concurrent=2)
    try:
        with serving(engine) as url:
            yield url, engine
    finally:
        engine.close()


def in_order(connection: ClientConnection, got: List[Any], until: Callable[[Any], bool]) -> None:
    """Receive into `got`, in order (audio frames as bytes, JSON frames as dicts), until `until`
    holds for the last one received, or the close."""
    while True:
        try:
            message = connection.recv(timeout=GUARD)
        except ConnectionClosed:
            return
        got.append(message if isinstance(message, bytes) else json.loads(message))
        if until(got[-1]):
            return


def is_done(item: Any) -> bool:
    return isinstance(item, dict) and item["type"] == "done"


def audio_of(got: List[Any]) -> np.ndarray:
    return np.frombuffer(b"".join(item for item in got if isinstance(item, bytes)), "<i2")


def placed(got: List[Any]) -> List[Tuple[Dict[str, Any], int, Any]]:
    """Each JSON frame, the samples received before it, and the samples received once the audio
    frame after it arrived (None where a `done` came first: the turn was cut there)."""
    received, out, waiting = 0, [], []
    for item in got:
        if isinstance(item, bytes):
            received += len(item) // 2
            for index in waiting:
                out[index][2] = received
            waiting = []
            continue
        if is_done(item):
            waiting = []
        waiting.append(len(out))
        out.append([item, received, None])
    return [(frame, before, heard_next) for frame, before, heard_next in out]


def timings(frames: List[Tuple[Dict[str, Any], int, Any]]) -> List[Tuple[str, List[int]]]:
    """The sample counts of the segment and word frames, in order."""
    kinds = ("segment", "word", "word_end")
    return [
        (f["type"], [f[k] for k in ("start_sample", "end_sample") if k in f])
        for f, _, _ in frames
        if f["type"] in kinds
    ]


TIMED = {"words": True, "max_frames": 20, "normalize": False, **NEVER_ENDS}
BEFORE_CANCEL = "One two three four. Five six seven eight. Nine ten eleven. Twelve thirteen. "
AFTER_CANCEL = "Something else to say. And one more thing. "


def spoken(url: str, start: Dict[str, Any], text: str, cancel_after: int = 0) -> List[Any]:
    """`text` spoken (cut by a cancel once `cancel_after` samples are received, then AFTER_CANCEL
    spoken), then the end: what the client received, in order."""
    got: List[Any] = []
    with ws(url) as connection:
        send(connection, "start", **start)
        send(connection, "text", text=text)
        if cancel_after:
            in_order(connection, got, lambda _: audio_of(got).size >= cancel_after)
            send(connection, "cancel")
            in_order(connection, got, is_done)
            send(connection, "text", text=AFTER_CANCEL)
        send(connection, "end")
        in_order(connection, got, is_done)
        in_order(connection, got, lambda _: False)
    return got


@pytest.mark.parametrize("rate", [8000, 16000, 48000])
def test_every_sample_count_is_a_position_in_the_audio_received_across_a_cancel(timed_url, rate) -> None:
    """At a rate other than the model's the resampler holds a little of the audio until the next
    chunk (or the end), which a cancel drops unsent. Every `done` counts the samples received; the
    speech after a cancel starts where the audio received ends; each segment and word comes before
    the audio that holds its start, never pointing back into audio received, and names the place
    in the audio received of the same audio at 24 kHz."""
    url, engine = timed_url
    got = spoken(url, dict(TIMED, sample_rate=rate), BEFORE_CANCEL, cancel_after=30 * 1920 * rate // 24000)
    frames = placed(got)
    done = [(frame, before) for frame, before, _ in frames if is_done(frame)]
    assert [frame["samples"] for frame, _ in done] == [before for _, before in done] and len(done) == 2
    assert done[-1][0]["samples"] == audio_of(got).size
    cut = done[0][0]["samples"]
    starts: Dict[int, int] = {}
    for frame, before, heard_next in frames:
        samples = [frame[key] for key in ("start_sample", "end_sample") if key in frame]
        if frame["type"] in ("segment", "word"):
            assert before <= frame["start_sample"], frame  # never back into the audio received
        if frame["type"] == "word":
            starts[frame["index"]] = frame["start_sample"]
        if frame["type"] == "word_end":
            assert frame["start_sample"] == starts[frame["index"]] <= frame["end_sample"], frame
        if samples and heard_next is not None:
            assert max(samples) <= heard_next, frame  # before the audio that holds it
    after = frames[[frame for frame, _, _ in frames].index(done[0][0]) + 1 :]
    assert all(heard_next is not None for frame, _, heard_next in after if not is_done(frame))  # none cut
    # From `cut` on: AFTER_CANCEL's audio at 24 kHz resampled as a stream; its segments and words
    # where that audio has them.
    alone = spoken(url, TIMED, AFTER_CANCEL)
    output = audio_formats.Output("pcm", 24000, rate)
    model = audio_of(alone).astype(np.float32) / 32768
    expected = b"".join(output.chunk(model[i : i + 1920]) for i in range(0, model.size, 1920)) + output.end()
    heard = audio_of(got)[cut:].astype(np.int32)
    assert heard.size == len(expected) // 2
    # Resampled from 16-bit samples rather than floats: a few steps apart (a sample's shift: hundreds).
    assert np.abs(heard - np.frombuffer(expected, "<i2")).max() <= 3
    at_rate = [(kind, [round(n * rate / 24000) for n in samples]) for kind, samples in timings(placed(alone))]
    assert [(kind, [n - cut for n in samples]) for kind, samples in timings(after)] == at_rate
    until(lambda: engine.active == 0 and engine.connections.open == 0, "every slot and connection given back")


def test_speed_two_gives_half_the_samples(url) -> None:
    start = {"max_frames": 20, "max_tokens": 8, **NEVER_ENDS}
    normal = speak_in_pieces(url, TEXT, start, rate=400)
    fast = speak_in_pieces(url, TEXT, dict(start, speed=2.0), rate=400)
    assert normal.samples == 3 * 20 * 1920
    assert abs(fast.samples / normal.samples - 0.5) < 0.01
    assert [e["text"] for e in fast.of("segment")] == SEGMENTS


# Limits


def refused(url: str, *frames: Any) -> Tuple[Heard, Dict[str, Any]]:
    """Send the frames (JSON objects, or raw str/bytes) and listen to the close; the last error."""
    heard = Heard()
    with ws(url, max_size=None) as connection:
        for frame in frames:
            connection.send(frame if isinstance(frame, (str, bytes)) else json.dumps(frame))
        listen(connection, heard)
    errors = heard.of("error")
    assert errors, heard.events
    error = errors[-1]["error"]
    assert {"message", "type", "param", "code", "status"} <= set(error), error
    return heard, error


@pytest.mark.parametrize(
    "start, param",
    [
        ({"temprature": 0.5}, "temprature"),
        ({"speed": 9}, "speed"),
        ({"speed": 0.1}, "speed"),
        ({"max_frames": 7501}, "max_frames"),
        ({"normalize": "yes"}, "normalize"),
        ({"voice": "nobody"}, "voice"),
    ],
)
def test_a_bad_start_is_an_error_frame_and_a_close(url, engine, start, param) -> None:
    heard, error = refused(url, {"type": "start", **start})
    assert error["param"] == param and error["status"] == 400 and error["type"] == "invalid_request_error"
    assert heard.close_code == 1008 and not heard.of("started")
    until(lambda: engine.active == 0, "the slot is free")


def test_bad_frames_are_error_frames_and_the_connection_goes_on(url) -> None:
    heard = Heard()
    with ws(url) as connection:
        for frame in ("not json", json.dumps({"type": "shout"}), json.dumps([1, 2]), b"\x00\x01"):
            connection.send(frame)
        send(connection, "text", text=5)
        send(connection, "text", text="Hi there. ", extra=1)
        send(connection, "text", text="Still here. ")  # the first valid frame: the defaults
        send(connection, "start")  # a start only as the first
        send(connection, "end")
        send(connection, "text", text="Too late. ")
        listen(connection, heard)
    codes = [event["error"]["code"] for event in heard.of("error")]
    assert codes == [
        "invalid_json",
        "unknown_type",
        "unknown_type",
        "binary_frame",
        "invalid_value",
        "invalid_value",
        "unexpected_start",
        "after_end",
    ], codes
    assert [e["text"] for e in heard.of("segment")] == ["Still here."] and heard.close_code == 1000


def test_a_frame_too_large_or_too_much_text_ends_the_connection(url, monkeypatch) -> None:
    heard, error = refused(url, json.dumps({"type": "text", "text": "x" * frames.MAX_FRAME}))
    assert error["code"] == "frame_too_large" and error["status"] == 413 and heard.close_code == 1009
    monkeypatch.setattr(session, "MAX_STREAM_TEXT", 25)
    heard, error = refused(url, *[{"type": "text", "text": "ten chars "}] * 3)
    assert error["code"] == "text_too_long" and heard.close_code == 1008


def test_the_audio_of_a_connection_is_bounded(url, monkeypatch) -> None:
    monkeypatch.setattr(session, "REQUEST_SECONDS", 1.0)
    frames = {"type": "start", "eos_threshold": 100.0, "temperature": 0.0, "max_tokens": 8}
    heard, error = refused(url, frames, {"type": "text", "text": "One sentence here. Another one. "})
    assert error["code"] == "audio_limit" and heard.close_code == 1008
    assert heard.samples <= 12 * 1920  # a second at 12.5 frames a second


@pytest.mark.slow
def test_an_idle_connection_is_closed_and_speech_is_not_idle(engine, monkeypatch) -> None:
    """The timeout counts while nothing is being spoken: a segment held in the decoder for twice the
    timeout, with no frame from the client meanwhile, is spoken to its end; then the silence ends it."""
    import server.scheduler

    held = Held(server.scheduler.decode_together)
    monkeypatch.setattr(server.scheduler, "decode_together", held)
    with serving(engine, client_timeout=0.5) as url:
        heard = Heard()
        with ws(url) as connection:
            send(connection, "start", max_frames=5, **NEVER_ENDS)
            send(connection, "text", text="Speaking a while. ")
            assert held.entered.wait(GUARD)
            time.sleep(1.0)  # the connection's silence while its segment is being made
            held.release.set()
            listen(connection, heard)
        assert heard.samples == 5 * 1920 and [e["text"] for e in heard.of("segment")] == ["Speaking a while."]
        error = heard.of("error")[-1]["error"]
        assert error["code"] == "idle_timeout" and error["status"] == 408 and heard.close_code == 1008
    until(lambda: engine.active == 0, "the slot is free")


def test_a_connection_holds_a_slot_and_busy_is_an_error_frame(model) -> None:
    engine = ServerEngine(model, str(VOICE_24K), max_concurrent=1)
    try:
        with serving(engine) as url, ws(url) as first:
            send(first, "start")
            listen(first, Heard(), "started")
            assert engine.active == 1
            heard, error = refused(url, {"type": "start"})
            assert error["code"] == "busy" and error["status"] == 503 and heard.close_code == 1013
            assert httpx.post(url + "/generate", json={"text": "Me too."}, timeout=GUARD).status_code == 503
            first.close()
            until(lambda: engine.active == 0, "the slot is free once the client is gone")
            with ws(url) as again:
                send(again, "start", max_frames=2, temperature=0.0)
                send(again, "text", text="Hi there. ")
                send(again, "end")
                listen(again, Heard(), "done")
                assert engine.active == 0  # free before the client hears it is over: it may ask again at once
    finally:
        engine.close()


@pytest.mark.slow
def test_a_client_that_does_not_read_is_dropped_and_its_slot_freed(model, relays) -> None:
    engine = ServerEngine(model, str(VOICE_24K), max_concurrent=1)
    try:
        with serving(engine, client_timeout=1.0) as url:
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", int(url.rsplit(":", 1)[1])))
            with ws(url, sock=sock, max_queue=1) as connection:
                send(connection, "start", max_frames=7500, **NEVER_ENDS)
                send(connection, "text", text="Nobody reads this. ")
                until(lambda: relays and relays[0].full, "the generation waits for its client")
                assert relays[0].waiting <= LIMIT and engine.active == 1
                until(lambda: engine.active == 0, "the server drops the client and frees its slot")
                assert relays[0].abandoned.is_set()
    finally:
        engine.close()


def test_text_preparation_runs_off_the_event_loop(engine, url, monkeypatch) -> None:
    import core.portable.synthesis.planning

    held = Held(core.portable.synthesis.planning.split_into_chunks)
    monkeypatch.setattr(core.portable.synthesis.planning, "split_into_chunks", held)
    heard = Heard()
    with ws(url) as connection:
        send(connection, "start", max_frames=2, temperature=0.0)
        send(connection, "text", text="Held here. ")
        assert held.entered.wait(GUARD)
        try:
            assert httpx.get(url + "/health", timeout=GUARD).json()["status"] == "ok"
        finally:
            held.release.set()
        send(connection, "end")
        listen(connection, heard)
    assert heard.samples == 2 * 1920


def test_other_sites_pages_cannot_open_it(url) -> None:
    with pytest.raises(InvalidStatus) as refused_handshake:
        ws(url, origin="https://evil.example")
    assert refused_handshake.value.response.status_code == 403


# A connection is a session of the engine: its slot, budget, idle and lifetime rules are the session's


def test_a_cancel_right_after_text_leaves_no_slot_behind(engine, url) -> None:
    """The speech a cancel stops lets go of its slot however soon after its text the cancel comes
    (a segment submitted just after the stop once held a slot for good)."""
    for _ in range(6):
        with ws(url) as connection:
            send(connection, "start", max_frames=7500, **NEVER_ENDS)
            for text in ("This goes on and on. ", "And on again. "):
                send(connection, "text", text=text)
                send(connection, "cancel")
                listen(connection, Heard(), "done")
        until(lambda: engine.active == 0, "the slot is free once the connection is closed")


def test_max_frames_caps_each_segment_and_every_segment_is_spoken(url) -> None:
    heard = Heard()
    with ws(url) as connection:
        send(connection, "start", max_frames=7500, temperature=0.0, eos_threshold=-100.0)
        send(connection, "text", text="One sentence here. Another one here. A third one. ")
        send(connection, "end")
        listen(connection, heard)
    assert [e["text"] for e in heard.of("segment")] == ["One sentence here.", "Another one here.", "A third one."]
    assert not heard.of("error") and heard.close_code == 1000


def test_json_nested_deep_is_a_bad_frame_and_the_connection_goes_on(url) -> None:
    heard = Heard()
    with ws(url) as connection:
        connection.send('{"type": "text", "text": ' + "[" * 1000 + "]" * 1000 + "}")
        connection.send("[" * 10000 + "]" * 10000)
        send(connection, "text", text="Still here. ")
        send(connection, "end")
        listen(connection, heard)
    assert [event["error"]["code"] for event in heard.of("error")] == ["invalid_json", "invalid_json"]
    assert [e["text"] for e in heard.of("segment")] == ["Still here."] and heard.close_code == 1000


def pester(connection: ClientConnection, frame: str, heard: Heard) -> None:
    """Send `frame` every few tenths of a second until the server closes the connection; `heard`
    gets all it sent."""
    deadline = time.monotonic() + GUARD
    while time.monotonic() < deadline:
        try:
            connection.send(frame)
            message = connection.recv(timeout=0.2)
        except TimeoutError:
            continue
        except ConnectionClosed:
            listen(connection, heard)  # what came before the close
            return
        if isinstance(message, str):
            heard.events.append(json.loads(message))
    raise AssertionError("the server never closed the connection")


@pytest.mark.parametrize(
    "first, frame",
    [
        (None, "not json"),  # never a start: it held no slot, and every frame reset the timer
        (None, json.dumps({"type": "shout"})),
        ({"type": "start"}, json.dumps({"type": "flush"})),  # an empty flush kept its slot forever
        ({"type": "start"}, json.dumps({"type": "text", "text": "a"})),  # text that completes nothing
    ],
)
@pytest.mark.slow
def test_a_connection_that_says_nothing_is_closed_whatever_else_it_sends(engine, first, frame) -> None:
    with serving(engine, client_timeout=1.0) as url:
        heard = Heard()
        with ws(url) as connection:
            if first is not None:
                connection.send(json.dumps(first))
            pester(connection, frame, heard)
        error = heard.of("error")[-1]["error"]
        assert error["code"] == "idle_timeout" and error["status"] == 408 and heard.close_code == 1008
    until(lambda: engine.active == 0, "the slot is free")


@pytest.mark.slow
def test_a_connection_that_keeps_speaking_is_closed_at_its_lifetime(engine, monkeypatch) -> None:
    monkeypatch.setattr(session, "LIFETIME", 2.0)
    with serving(engine, client_timeout=1.0) as url:
        heard = Heard()
        with ws(url) as connection:
            send(connection, "start", max_frames=1, temperature=0.0)
            pester(connection, json.dumps({"type": "text", "text": "Hi. "}), heard)
        assert heard.of("segment") and heard.of("error")[-1]["error"]["code"] == "session_expired"
        assert heard.close_code == 1008
    until(lambda: engine.active == 0, "the slot is free")


def test_websockets_count_among_the_connections(model) -> None:
    """WebSockets hold their connection's place in the pool: with the pool full of them, a
    handshake and a request in the reserve are refused, /health there is answered."""
    engine = ServerEngine(model, str(VOICE_24K), max_concurrent=2, max_connections=3)
    try:
        with serving(engine) as url:
            with contextlib.ExitStack() as open_sockets:
                for _ in range(3):
                    open_sockets.enter_context(ws(url))
                assert engine.connections.open == 3
                with pytest.raises(InvalidStatus) as refused:
                    ws(url)
                assert refused.value.response.status_code == 503
                assert json.loads(refused.value.response.body)["error"]["code"] == "too_many_connections"
                busy = httpx.get(url + "/voices", timeout=GUARD)
                assert busy.status_code == 503 and busy.json()["error"]["code"] == "too_many_connections"
                assert httpx.get(url + "/health", timeout=GUARD).status_code == 200  # the reserve's
            until(lambda: engine.connections.open == 0, "every place given back")
            assert httpx.get(url + "/voices", timeout=GUARD).status_code == 200
    finally:
        engine.close()


def handshake(url: str, **headers: str) -> str:
    """The status line the server answers a WebSocket handshake with (`headers` added or replaced)."""
    port = int(url.rsplit(":", 1)[1])
    fields = {
        "Host": f"127.0.0.1:{port}",
        "Upgrade": "websocket",
        "Connection": "Upgrade",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version": "13",
        **headers,
    }
    request = f"GET {PATH} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items()) + "\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=GUARD) as client:
        client.sendall(request.encode())
        return client.recv(4096).decode("latin-1").split("\r\n")[0]


def test_a_handshake_under_another_host_is_refused(url) -> None:
    """DNS rebinding: a page whose own domain now points at this machine opens the WebSocket with
    its domain as Host (and as Origin)."""
    assert handshake(url).split(" ")[1] == "101"
    rebound = handshake(url, Host="evil.example:8000", Origin="http://evil.example:8000")
    assert rebound.split(" ")[1] == "421", rebound


def test_the_start_takes_a_loudness_and_a_stream_is_leveled_as_the_whole_text(url) -> None:
    """The text stream's audio brought to the level its start asks for, as POST /stream brings the
    same text (one gain from the voice, whatever the split)."""
    heard = speak_in_pieces(url, TEXT, {**SEEDED, "loudness": -18.0})
    whole = httpx.post(url + "/stream", json={"text": TEXT, **SEEDED, "loudness": -18.0}, timeout=GUARD)
    plain = speak_in_pieces(url, TEXT, SEEDED)
    assert np.array_equal(np.frombuffer(bytes(heard.audio), "<i2"), np.frombuffer(whole.content, "<i2"))
    assert heard.audio != plain.audio and heard.samples == plain.samples
