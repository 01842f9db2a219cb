"""LiveKit's Pocket TTS protocol at /tts/ws, driven by the `livekit-plugins-pocket` plugin's own
client (its protocol module, over aiohttp as the plugin opens it), against `python -m server`;
then attacked as a hostile client would: frames out of order, twice, malformed, files for voices,
a cancel at every point, and (on the app in this process, whose work a test holds where it likes)
a cancel or a config while a turn is ending; slots and connections counted after."""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import json
import logging
import sys
import threading
from pathlib import Path
from typing import Any, Dict, Iterator, List

import aiohttp
import anyio
import httpx
import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from server import livekit_ws
from server.engine import ServerEngine
from server.session import Session
from tests.support.paths import VOICE_24K
from tests.support.processes import tiny_server
from tests.support.serving import GUARD, Held, serving, until


def plugin_protocol() -> Any:
    """The plugin's protocol module, loaded from its file (the package's __init__ imports
    livekit-agents, which these tests do not need)."""
    found = importlib.util.find_spec("livekit.plugins.pocket")
    assert found is not None and found.submodule_search_locations, "pip install livekit-plugins-pocket"
    path = Path(list(found.submodule_search_locations)[0]) / "protocol.py"
    spec = importlib.util.spec_from_file_location("livekit_pocket_protocol", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


protocol = plugin_protocol()


@pytest.fixture(scope="module")
def live():
    with tiny_server("--max-concurrent", "2") as url:
        yield url


def ws_url(url: str) -> str:
    return url.replace("http://", "ws://") + "/tts/ws"


async def pieces(texts: List[str]):
    for text in texts:
        yield text


def run(body) -> Any:
    return asyncio.run(asyncio.wait_for(body(), GUARD))


def test_the_plugins_client_speaks_turns_on_one_socket_at_the_rate_it_asks(live) -> None:
    async def body() -> Any:
        async with aiohttp.ClientSession() as http:

            async def connect():
                return await http.ws_connect(ws_url(live), headers=protocol.connect_headers(None))

            socket = protocol.SessionSocket(connect, timeout=GUARD)
            turns = []
            for rate, text in ((16000, ["Hello the", "re. How are", " you?"]), (24000, ["Second turn."])):
                pcm = bytearray()
                ids = []
                config = protocol.build_config(voice=None, language="en", sample_rate=rate, normalize=True)
                await socket.speak(config, pieces(text), pcm.extend, timeout=GUARD, on_ready=ids.append)
                turns.append((bytes(pcm), ids[0], socket.last_reused))
            await socket.aclose()
            return turns

    (first, id1, reused1), (second, id2, reused2) = run(body)
    assert len(first) > 0 and len(first) % 2560 == 0  # 16 kHz: 1280 samples for each 80 ms frame
    assert len(second) > 0 and len(second) % 3840 == 0  # the model's 24 kHz: 1920 samples a frame
    assert id1 and id2 and id1 != id2 and not reused1 and reused2
    until(lambda: httpx.get(live + "/health").json()["active_generations"] == 0, "every turn's slot is free")


def test_a_cancelled_turn_ends_without_final_and_the_next_turn_speaks(live) -> None:
    async def body() -> Any:
        async with aiohttp.ClientSession() as http:

            async def connect():
                return await http.ws_connect(ws_url(live))

            socket = protocol.SessionSocket(connect, timeout=GUARD)
            heard = asyncio.Event()
            config = protocol.build_config(voice=None, language=None, sample_rate=24000, normalize=True)
            long_text = ["This sentence is one of many. " * 40]
            turn = asyncio.ensure_future(socket.speak(config, pieces(long_text), lambda _: heard.set(), timeout=GUARD))
            await heard.wait()
            turn.cancel()  # the plugin's barge-in: a cancel frame on the same socket
            with pytest.raises(asyncio.CancelledError):
                await turn
            after = bytearray()
            await socket.speak(config, pieces(["After the cancel."]), after.extend, timeout=GUARD)
            reused = socket.last_reused
            await socket.aclose()
            return bytes(after), reused

    after, reused = run(body)
    assert len(after) > 0 and reused
    until(lambda: httpx.get(live + "/health").json()["active_generations"] == 0, "the cancelled turn's slot is free")


async def frames(url: str, sent: List[Any], until_type: str = "final", binary: bool = True) -> List[Any]:
    """Send `sent` (dicts as JSON, strings as they are) on one raw socket; the server's frames until
    one of `until_type` (binary frames as their length)."""
    got: List[Any] = []
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(ws_url(url)) as ws:
            for frame in sent:
                await ws.send_str(frame if isinstance(frame, str) else json.dumps(frame))
            while True:
                message = await ws.receive(timeout=GUARD)
                if message.type == aiohttp.WSMsgType.BINARY:
                    got.append(len(message.data))
                    continue
                if message.type != aiohttp.WSMsgType.TEXT:
                    got.append(("closed", message.data))
                    return got
                payload = json.loads(message.data)
                got.append(payload)
                kind = payload.get("data", {}).get("event_type") if payload["type"] == "event" else payload["type"]
                if kind == until_type:
                    return got


def config(**data: Any) -> dict:
    return {"type": "config", "data": dict({"format": "pcm", "binary": True}, **data)}


def codes(got: List[Any]) -> List[str]:
    return [frame["data"]["code"] for frame in got if isinstance(frame, dict) and frame["type"] == "error"]


def test_out_of_order_and_malformed_frames_are_errors_and_the_connection_goes_on(live) -> None:
    hostile = [
        {"type": "text", "data": {"text": "Before any config."}},
        {"type": "flush"},
        {"type": "dance"},
        "not json",
        {"type": "text", "data": {"txt": "a misspelt field"}},
        config(voice="/etc/passwd"),
        config(voice="hf://kyutai/tts-voices/alba-mackenna/casual.wav"),
        config(voice="nobody"),
        config(language="fr"),
        config(sample_rate=12345),
        config(format="opus"),
        {"type": "ping"},
        config(sample_rate=16000, binary=False),
        config(sample_rate=16000, binary=False),  # a second config: the first turn ends without final
        {"type": "text", "data": {"text": "Spoken at last."}},
        {"type": "flush"},
        {"type": "text", "data": {"text": "After the flush."}},
    ]
    got = run(lambda: frames(live, hostile))
    assert codes(got)[:11] == [
        "unexpected_event",
        "unexpected_event",
        "unknown_type",
        "invalid_json",
        "invalid_value",
        "unknown_voice",
        "unknown_voice",
        "unknown_voice",
        "unsupported_value",
        "invalid_value",
        "invalid_value",
    ]
    assert {"type": "pong"} in got
    accepted = [f for f in got if isinstance(f, dict) and f.get("data", {}).get("event_type") == "config_accepted"]
    finals = [f for f in got if isinstance(f, dict) and f.get("data", {}).get("event_type") == "final"]
    assert (
        len(accepted) == 2 and len(finals) == 1 and finals[0]["data"]["request_id"] == accepted[1]["data"]["request_id"]
    )
    audio = [f["data"] for f in got if isinstance(f, dict) and f["type"] == "audio"]
    assert audio and all(a["sample_rate"] == 16000 and a["format"] == "pcm" for a in audio)
    assert sum(len(base64.b64decode(a["audio"])) for a in audio) % 2560 == 0
    assert not [f for f in got if isinstance(f, int)]  # binary false: no binary frame
    until(lambda: httpx.get(live + "/health").json()["active_generations"] == 0, "the turns' slots are free")


def test_too_much_text_ends_the_connection_and_frees_its_slot(live) -> None:
    from server.session import MAX_STREAM_TEXT

    flood = [config(), *[{"type": "text", "data": {"text": "x" * 5000}} for _ in range(MAX_STREAM_TEXT // 5000 + 2)]]
    got = run(lambda: frames(live, flood, until_type="never"))
    assert "text_too_long" in codes(got) and got[-1][0] == "closed"
    until(lambda: httpx.get(live + "/health").json()["active_generations"] == 0, "the slot is free")


def test_the_api_key_is_asked_before_the_upgrade() -> None:
    async def attempt(headers: dict) -> Any:
        async with aiohttp.ClientSession() as http:
            try:
                async with http.ws_connect(ws_url(url), headers=headers) as ws:
                    await ws.send_str(json.dumps({"type": "ping"}))
                    return json.loads((await ws.receive(timeout=GUARD)).data)
            except aiohttp.WSServerHandshakeError as refused:
                return refused.status

    with tiny_server("--api-key", "sesame") as url:
        assert run(lambda: attempt({})) == 401
        assert run(lambda: attempt(protocol.connect_headers("wrong"))) == 401
        assert run(lambda: attempt(protocol.connect_headers("sesame"))) == {"type": "pong"}


@pytest.mark.skipif(sys.version_info < (3, 10), reason="livekit-agents needs Python 3.10")
def test_livekit_agents_speaks_through_the_plugin(live) -> None:
    """The plugin's TTS as an agent uses it (livekit-agents): a whole text, and a stream of text
    pieces, both at the 16 kHz the TTS asks for."""
    from livekit.plugins import pocket

    async def body() -> Any:
        async with aiohttp.ClientSession() as http:
            tts = pocket.TTS(ws_url=ws_url(live), sample_rate=16000, voice="default", http_session=http)
            whole = [event.frame async for event in tts.synthesize("Hello from LiveKit Agents. And more.")]
            stream = tts.stream()
            for piece in ("Hello the", "re. How are", " you?"):
                stream.push_text(piece)
            stream.end_input()
            streamed = [event.frame async for event in stream]
            await tts.aclose()
            return whole, streamed

    whole, streamed = run(body)
    for frames in (whole, streamed):
        assert frames and all(frame.sample_rate == 16000 and frame.num_channels == 1 for frame in frames)
        assert sum(frame.samples_per_channel for frame in frames) >= 16000 // 2  # speech: the framework reframes it


def turn_audio(url: str, configured: dict, text: str) -> np.ndarray:
    """One turn (the config, the text, flush) on a raw socket: its audio, 16-bit, until its final."""

    async def body() -> bytes:
        audio = b""
        async with aiohttp.ClientSession() as http:
            async with http.ws_connect(ws_url(url)) as ws:
                for frame in (configured, {"type": "text", "data": {"text": text}}, {"type": "flush"}):
                    await ws.send_str(json.dumps(frame))
                while True:
                    message = await ws.receive(timeout=GUARD)
                    if message.type == aiohttp.WSMsgType.BINARY:
                        audio += message.data
                    elif json.loads(message.data).get("data", {}).get("event_type") == "final":
                        return audio

    return np.frombuffer(run(body), "<i2")


def test_pauses_in_the_config_says_whether_markup_is_silence(live) -> None:
    """pauses true: "[pause:2s]" is two seconds of silence (exact zeros); false, the plugin's
    default: text, spoken."""

    def longest_silence(pauses: bool) -> int:
        samples = turn_audio(live, config(pauses=pauses), "Hi [pause:2s] there.")
        zero = np.concatenate([[0], (samples == 0).astype(np.int8), [0]])
        starts, ends = np.nonzero(np.diff(zero) == 1)[0], np.nonzero(np.diff(zero) == -1)[0]
        return int((ends - starts).max()) if starts.size else 0

    assert longest_silence(True) >= 2 * 24000 and longest_silence(False) < 24000 // 10


def test_turns_sent_back_to_back_never_get_another_turns_final(live) -> None:
    """Configs sent without waiting for the turn before: whatever the timing, each `final` belongs
    to the turn whose `config_accepted` came last before it (the plugin takes any final after its
    config_accepted as its own)."""
    turns = []
    for n in range(6):
        turns += [config(), {"type": "text", "data": {"text": f"Turn {n}."}}, {"type": "flush"}]
    got = run(lambda: frames(live, turns + [{"type": "ping"}], until_type="pong"))
    current, finals = None, 0
    for frame in got:
        if isinstance(frame, dict) and frame["type"] == "event":
            if frame["data"]["event_type"] == "config_accepted":
                current = frame["data"]["request_id"]
            else:
                assert frame["data"]["request_id"] == current, got
                finals += 1
    assert current is not None and codes(got) == []
    until(lambda: httpx.get(live + "/health").json()["active_generations"] == 0, "every turn's slot is free")


# On the app in this process: a turn's work held where a test likes


@pytest.fixture(scope="module")
def engine(model) -> Iterator[ServerEngine]:
    engine = ServerEngine(model, str(VOICE_24K), max_concurrent=2)
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def here(engine) -> Iterator[str]:
    with serving(engine) as url:
        yield url


@pytest.fixture
def settled(engine) -> Iterator[None]:
    """After the test: every slot free and every connection's place given back."""
    yield
    until(lambda: engine.active == 0 and engine.connections.open == 0, "every slot and connection given back")


def raw(url: str) -> ClientConnection:
    return connect(ws_url(url), open_timeout=GUARD)


def heard_until(connection: ClientConnection, got: List[Any], until_type: str) -> Dict[str, Any]:
    """Receive into `got` (binary frames as their length, the close as ("closed", code)) until a
    frame of `until_type` (an event's `event_type`, else the frame's type), returned; {} at the close."""
    while True:
        try:
            message = connection.recv(timeout=GUARD)
        except ConnectionClosed as closed:
            got.append(("closed", closed.rcvd.code if closed.rcvd is not None else None))
            return {}
        if isinstance(message, bytes):
            got.append(len(message))
            continue
        frame = json.loads(message)
        got.append(frame)
        kind = frame["data"]["event_type"] if frame["type"] == "event" else frame["type"]
        if kind == until_type:
            return frame


def events(got: List[Any], kind: str) -> List[str]:
    """The request ids of the `kind` events, in order."""
    return [f["data"]["request_id"] for f in got if isinstance(f, dict) and f.get("data", {}).get("event_type") == kind]


def finals_are_their_turns(got: List[Any]) -> None:
    """Each `final` names the turn whose `config_accepted` came last before it, once."""
    current, finished = None, set()
    for frame in got:
        if isinstance(frame, dict) and frame["type"] == "event":
            if frame["data"]["event_type"] == "config_accepted":
                current = frame["data"]["request_id"]
            else:
                assert frame["data"]["request_id"] == current and current not in finished, got
                finished.add(current)


@pytest.mark.parametrize("freed", [False, True], ids=["before-its-slot-is-free", "after"])
@pytest.mark.parametrize("frame", [{"type": "cancel"}, config()], ids=["cancel", "config"])
def test_a_cancel_or_a_config_while_a_turn_ends_leaves_the_connection_speaking(
    here, settled, monkeypatch, caplog, frame, freed
) -> None:
    """The turn's sender held between its `Done` and its `final` (before or after it frees its
    slot), the frame taken meanwhile: the turn, all said, sends its `final`, and the connection goes
    on. A reader that cut the sender there once lost the `final` (the client waited for good), or
    found the turn's session gone and closed the connection with 1011."""
    held = Held(lambda: None)
    close_and_free = Session.close_and_free
    first = [True]

    async def held_close_and_free(self) -> None:
        # The sender's, after Done: the first on a session still open (an earlier test's
        # connection, ending meanwhile, closes a session closed already).
        hold = first and not self.closed
        if hold:
            first.clear()
        if freed:
            await close_and_free(self)
        if hold:
            await anyio.to_thread.run_sync(held)
        if not freed:
            await close_and_free(self)

    taken = threading.Event()
    handle = livekit_ws._Turns._handle

    async def taking(self, taken_frame) -> None:
        if isinstance(taken_frame, (livekit_ws.Cancel, livekit_ws.Config)) and held.entered.is_set():
            taken.set()  # the reader runs on from here to its first wait before the sender can resume
        await handle(self, taken_frame)

    monkeypatch.setattr(Session, "close_and_free", held_close_and_free)
    monkeypatch.setattr(livekit_ws._Turns, "_handle", taking)
    caplog.set_level(logging.ERROR)
    got: List[Any] = []
    with raw(here) as connection:
        for sent in (config(), {"type": "text", "data": {"text": "Ending now."}}, {"type": "flush"}):
            connection.send(json.dumps(sent))
        assert held.entered.wait(GUARD), "the turn never ended"
        connection.send(json.dumps(frame))
        assert taken.wait(GUARD), "the frame was not taken"
        held.release.set()
        heard_until(connection, got, "final")
        if frame["type"] == "cancel":
            connection.send(json.dumps(config()))
        for sent in ({"type": "text", "data": {"text": "The next turn."}}, {"type": "flush"}):
            connection.send(json.dumps(sent))
        ended = len(got)
        heard_until(connection, got, "final")
    accepted, finals = events(got, "config_accepted"), events(got, "final")
    assert len(accepted) == 2 and finals == accepted, got
    assert not codes(got) and not [f for f in got if isinstance(f, tuple)]
    assert [f for f in got[ended:] if isinstance(f, int)], "the next turn spoke"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


def test_frames_out_of_order_twice_and_at_once_leave_the_connection_speaking(here, settled, caplog) -> None:
    """A cancel before any config, flush twice, text after flush, configs back to back, a cancel
    twice, all sent at once: each frame out of order is an error frame, in the order sent, whatever
    the turns' timing; every `final` is its turn's; the last turn speaks."""
    text = {"type": "text", "data": {"text": "Some words here."}}
    flush = {"type": "flush"}
    cancel = {"type": "cancel"}
    hostile = [cancel, flush, text, config(), config(), config(), text, flush, flush, text]
    hostile += [cancel, cancel, config(sample_rate=16000), text, flush, {"type": "ping"}]
    caplog.set_level(logging.ERROR)
    got: List[Any] = []
    with raw(here) as connection:
        for frame in hostile:
            connection.send(json.dumps(frame))
        heard_until(connection, got, "pong")
        last = events(got, "config_accepted")[-1]
        if events(got, "final")[-1:] != [last]:
            heard_until(connection, got, "final")
    assert codes(got) == ["unexpected_event", "unexpected_event", "after_end", "after_end"], got
    accepted = events(got, "config_accepted")
    assert len(accepted) == 4 and events(got, "final")[-1] == accepted[-1]
    finals_are_their_turns(got)
    assert not [f for f in got if isinstance(f, tuple)]
    last = max(
        i for i, f in enumerate(got) if isinstance(f, dict) and f.get("data", {}).get("event_type") == "config_accepted"
    )
    spoken = sum(f for f in got[last:] if isinstance(f, int))
    assert spoken > 0 and spoken % 2560 == 0  # 16 kHz: 1280 samples for each 80 ms frame
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


def test_the_config_takes_a_loudness(live) -> None:
    """config's `loudness` (ours) levels the turn's audio (louder than the model's own); a level out
    of range is the config's error, `invalid_value`."""

    def peak(**extra: Any) -> int:
        return int(np.abs(turn_audio(live, config(**extra), "Hi there, a turn to level.").astype(np.int32)).max())

    assert peak(loudness=-14.0) > 4 * peak()
    got = run(lambda: frames(live, [config(loudness=-60.0)], until_type="error"))
    assert codes(got) == ["invalid_value"]
