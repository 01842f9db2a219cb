"""Home Assistant's Wyoming protocol (server/wyoming_*.py), driven by the `wyoming` package's own
client (AsyncTcpClient, as Home Assistant's integration uses it) against the server in this
process (so a test can hold its work where it likes) and against `python -m server --wyoming`:
describe, both modes of synthesis, SSML, every refusal, a client that goes away, many at once,
text at an LLM's pace, the voices folder, and what discovery would announce (never sent).

Nothing here asserts a duration: client and server are synchronized by their events (a paced
sender sleeps to look like an LLM; the audio does not depend on it)."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple

import numpy as np
import pytest
from wyoming.audio import AudioChunk, AudioStart
from wyoming.client import AsyncTcpClient
from wyoming.event import Event
from wyoming.info import Describe, Info
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeTextFormat,
    SynthesizeVoice,
)

from core.portable.audio.pcm import pcm16, wav_bytes
from core.portable.synthesis.options import REQUEST_SECONDS, GenerationOptions
from core.portable.text.ssml import SsmlStream, to_markup
from e2e.harness import free_port
from server import session, wyoming_discovery
from server.access import GUEST, KEY_HOLDER, Access
from server.engine import ServerEngine
from server.voice_folder import VoiceFolder
from tests.support.checks import pcm_close
from tests.support.paths import ROOT, TINY_CONFIG, VOICE_22K, VOICE_24K
from tests.support.processes import tiny_server
from tests.support.serving import GUARD, Held, until, wyoming_serving

# Deterministic syntheses (the protocol carries no options: the server's own), and sentences that
# are chunks of their own, so that a stream's segments are its whole text's chunks.
OPTIONS = GenerationOptions(temperature=0.0, max_tokens=8)
TEXT = "Hello there. This is a test, of the stream. And now a third sentence!"
SENTENCES = ["Hello there.", "This is a test, of the stream.", "And now a third sentence!"]
NEVER_ENDS = GenerationOptions(temperature=0.0, eos_threshold=100.0)


@pytest.fixture
def engine(model):
    engine = ServerEngine(model, str(VOICE_24K), max_concurrent=4)
    yield engine
    engine.close()


def serve(
    engine: ServerEngine,
    body: Callable[[int], Awaitable[Any]],
    options: GenerationOptions = OPTIONS,
    timeout: float = 30.0,
    folder: Optional[Path] = None,
) -> Any:
    """Run `body(port)` against a Wyoming server of `engine` in this process's event loop."""

    if folder is not None:  # as `--voices-dir` gives the engine one (ServerEngine's voices_dir)
        engine.voices.folder = VoiceFolder(folder)
    return wyoming_serving(engine, body, options, timeout)


async def heard(client: AsyncTcpClient, last: str) -> Tuple[List[Event], bytes]:
    """The events until one of type `last` (or an error), and the audio they carried."""
    events: List[Event] = []
    while True:
        event = await client.read_event()
        assert event is not None, [e.type for e in events]
        events.append(event)
        if event.type in (last, "error"):
            audio = b"".join(AudioChunk.from_event(e).audio for e in events if e.type == "audio-chunk")
            return events, audio


def kinds(events: List[Event]) -> List[str]:
    """The event types, a run of audio chunks as one "chunks"."""
    out: List[str] = []
    for event in events:
        kind = "chunks" if event.type == "audio-chunk" else event.type
        if not (kind == "chunks" and out and out[-1] == "chunks"):
            out.append(kind)
    return out


async def synthesize(port: int, text: str, **fields: Any) -> Tuple[List[Event], bytes]:
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Synthesize(text=text, **fields).event())
        return await heard(client, "audio-stop")


async def eventually(condition: Callable[[], bool], what: str) -> None:
    """`until`, for a test body that shares the server's event loop."""
    for _ in range(int(GUARD / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


def alone(engine: ServerEngine, text: str, options: GenerationOptions = OPTIONS) -> bytes:
    """The 16-bit audio the model makes of `text` alone, with the server's default voice."""
    return pcm16(engine.model.generate(text, engine.voices.voice(None), options, max_seconds=REQUEST_SECONDS))


def streamed_alone(engine: ServerEngine, pieces: List[str], options: GenerationOptions = OPTIONS) -> bytes:
    chunks = engine.model.stream(pieces, engine.voices.voice(None), options)
    return b"".join(pcm16(chunk) for chunk in chunks)


# describe


def test_describe_lists_one_program_and_every_voice(engine, tmp_path) -> None:
    shutil.copy(VOICE_22K, tmp_path / "grandpa.wav")
    (tmp_path / "notes.txt").write_text("not a recording")
    engine.voices.upload(VOICE_24K.read_bytes(), "me.wav")

    async def body(port: int) -> Info:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(Describe().event())
            return Info.from_event(await client.read_event())

    info = serve(engine, body, folder=tmp_path)
    assert len(info.tts) == 1 and not info.asr
    program = info.tts[0]
    assert program.name == "pocket-tts-numpy" and program.installed and program.version
    assert program.supports_synthesize_streaming and "Kyutai" in program.description + program.attribution.name
    names = [voice.name for voice in program.voices]
    assert names[0] == "voice_24000" and "grandpa" in names and "notes" not in names
    assert [name for name in names if name.startswith("upload:")] == engine.voices.uploaded()
    assert all(voice.languages == ["en"] and voice.installed for voice in program.voices)
    assert "Kyutai" in program.voices[0].attribution.name


# synthesize


def test_synthesize_is_the_models_audio_as_it_is_made(engine) -> None:
    events, audio = serve(engine, lambda port: synthesize(port, TEXT))
    assert kinds(events) == ["audio-start", "chunks", "audio-stop"]
    start = AudioStart.from_event(events[0])
    assert (start.rate, start.width, start.channels) == (24000, 2, 1)
    assert pcm_close(audio, alone(engine, TEXT))
    assert engine.active == 0


def test_the_first_chunk_comes_after_the_first_frame_not_the_whole_text(engine, monkeypatch) -> None:
    """The decoding is held after its first step: the first chunk still reaches the client."""
    import server.scheduler

    steps: List[int] = []
    original = server.scheduler.decode_together
    held = Held(original)

    def first_then_held(decoders, frames):
        steps.append(len(frames))
        return original(decoders, frames) if sum(steps) == 1 else held(decoders, frames)

    monkeypatch.setattr(server.scheduler, "decode_together", first_then_held)

    async def body(port: int) -> List[str]:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(Synthesize(text="A long text that goes on. " * 10).event())
            first = [(await client.read_event()).type, (await client.read_event()).type]
            held.release.set()
            await heard(client, "audio-stop")
            return first

    assert serve(engine, body, NEVER_ENDS) == ["audio-start", "audio-chunk"]


def test_ssml_breaks_are_pauses_and_other_tags_are_dropped(engine) -> None:
    ssml = '<speak><prosody rate="slow">Hello</prosody> <break time="500ms"/> there &amp; back.</speak>'
    events, audio = serve(engine, lambda port: synthesize(port, ssml, text_format=SynthesizeTextFormat.SSML))
    assert kinds(events) == ["audio-start", "chunks", "audio-stop"]
    assert pcm_close(audio, alone(engine, 'Hello <break time="500ms"/> there & back.'))


# streaming


async def stream(
    client: AsyncTcpClient, pieces: List[str], pace: float = 0.0, text_format: Optional[str] = None
) -> None:
    await client.write_event(SynthesizeStart(text_format=text_format).event())
    for piece in pieces:
        await client.write_event(SynthesizeChunk(text=piece).event())
        if pace:
            await asyncio.sleep(pace)  # the pace of an LLM; the audio does not depend on it
    # Home Assistant sends the whole text too, for servers without streaming: not said again.
    await client.write_event(Synthesize(text="".join(pieces)).event())
    await client.write_event(SynthesizeStop().event())


def pieces_of(text: str, size: int = 3) -> List[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def test_a_stream_is_spoken_sentence_by_sentence_as_its_whole_text(engine) -> None:
    async def body(port: int) -> Tuple[List[Event], bytes]:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await stream(client, pieces_of(TEXT))
            return await heard(client, "synthesize-stopped")

    events, audio = serve(engine, body)
    assert kinds(events) == ["audio-start", "chunks", "audio-stop"] * 3 + ["synthesize-stopped"]
    assert pcm_close(audio, alone(engine, TEXT))  # each sentence is a chunk of the whole text


def test_a_sentence_is_spoken_before_the_text_after_it_is_sent(engine) -> None:
    async def body(port: int) -> List[str]:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(SynthesizeStart().event())
            await client.write_event(SynthesizeChunk(text="Hello there. Th").event())
            first, _ = await heard(client, "audio-stop")  # before the rest of the text exists
            await client.write_event(SynthesizeChunk(text="e end.").event())
            await client.write_event(SynthesizeStop().event())
            rest, _ = await heard(client, "synthesize-stopped")
            return kinds(first + rest)

    assert serve(engine, body) == ["audio-start", "chunks", "audio-stop"] * 2 + ["synthesize-stopped"]


def test_text_at_an_llms_pace_with_ssml_split_anywhere(engine) -> None:
    ssml = 'Hello there. <break time="300ms"/>This is a test, of the stream. And now a third &amp; last!'

    async def body(port: int) -> Tuple[List[Event], bytes]:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await stream(client, pieces_of(ssml), pace=0.03, text_format="ssml")
            return await heard(client, "synthesize-stopped")

    events, audio = serve(engine, body)
    segments = engine.model.text_stream(engine.voices.voice(None), OPTIONS).push(to_markup(ssml) + " ")
    assert kinds(events) == ["audio-start", "chunks", "audio-stop"] * len(segments) + ["synthesize-stopped"]
    assert pcm_close(audio, streamed_alone(engine, [to_markup(ssml)]))


# many at once


def test_many_clients_at_once_each_get_their_audio_alone(engine) -> None:
    texts = [f"Client number {i} speaks its own words." for i in range(4)]

    async def body(port: int) -> List[bytes]:
        async def one(text: str) -> bytes:
            async with AsyncTcpClient("127.0.0.1", port) as client:
                await stream(client, [text[:10], text[10:]])
                return (await heard(client, "synthesize-stopped"))[1]

        return list(await asyncio.gather(*(one(text) for text in texts)))

    for text, audio in zip(texts, serve(engine, body)):
        assert pcm_close(audio, alone(engine, text))
    assert engine.active == 0


# refusals: error events, the connection going on after a refused synthesis


@pytest.mark.parametrize(
    "event, code",
    [
        (Synthesize(text="Hi.", voice=SynthesizeVoice(name="nobody")).event(), "unknown_voice"),
        (Synthesize(text="Hi.", voice=SynthesizeVoice(language="fr")).event(), "unknown_voice"),
        (Synthesize(text="   ").event(), "empty_text"),
        (Synthesize(text="x" * 5001).event(), "text_too_long"),
        (Synthesize(text="Hi [pause:soon].").event(), "invalid_text"),
        (SynthesizeChunk(text="Hi.").event(), "unexpected_event"),
        (SynthesizeStop().event(), "unexpected_event"),
        (Event(type="synthesize", data={"voice": {"name": "x"}}), "invalid_request"),
    ],
)
def test_a_refused_request_is_an_error_event_and_the_connection_goes_on(engine, event, code) -> None:
    async def body(port: int) -> Tuple[Event, List[str]]:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(event)
            error = await client.read_event()
            events, _ = await synthesize_on(client, "Still here.")
            return error, kinds(events)

    error, after = serve(engine, body)
    assert error.type == "error" and error.data["code"] == code, error
    assert after == ["audio-start", "chunks", "audio-stop"] and engine.active == 0


async def synthesize_on(client: AsyncTcpClient, text: str) -> Tuple[List[Event], bytes]:
    await client.write_event(Synthesize(text=text).event())
    return await heard(client, "audio-stop")


def test_the_languages_voice_and_a_second_stream_at_once(engine) -> None:
    async def body(port: int) -> Tuple[List[str], str]:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            events, _ = await synthesize_on(client, "Hi.")  # the default
            await client.write_event(Synthesize(text="Hi.", voice=SynthesizeVoice(language="en_US")).event())
            by_language, _ = await heard(client, "audio-stop")
            await client.write_event(SynthesizeStart().event())
            await client.write_event(SynthesizeStart().event())
            error = await client.read_event()
            return kinds(by_language), error.data["code"]

    assert serve(engine, body) == (["audio-start", "chunks", "audio-stop"], "unexpected_event")


def test_busy_and_the_audio_limit_are_error_events(model, monkeypatch) -> None:
    engine = ServerEngine(model, str(VOICE_24K), max_concurrent=1)
    monkeypatch.setattr(session, "REQUEST_SECONDS", 1.0)

    async def body(port: int) -> Tuple[str, str, int]:
        async with AsyncTcpClient("127.0.0.1", port) as first, AsyncTcpClient("127.0.0.1", port) as second:
            await first.write_event(SynthesizeStart().event())
            await first.write_event(SynthesizeChunk(text="One sentence here. Another one. ").event())
            await second.write_event(Synthesize(text="Me too.").event())
            busy = await second.read_event()
            events, audio = await heard(first, "synthesize-stopped")
            return busy.data["code"], events[-1].data.get("code", events[-1].type), len(audio) // 2

    try:
        busy, limit, samples = serve(engine, body, NEVER_ENDS)
    finally:
        engine.close()
    assert busy == "busy" and limit == "audio_limit" and samples <= 12 * 1920


def sending(data: bytes) -> Callable[[int], Awaitable[List[Event]]]:
    """A client that sends `data` as it is, then reads every event until the server closes."""

    async def body(port: int) -> List[Event]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(data)
        await writer.drain()
        client = AsyncTcpClient("127.0.0.1", port)
        client._reader, client._writer = reader, writer
        events = []
        while (event := await client.read_event()) is not None:
            events.append(event)
        writer.close()
        return events

    return body


@pytest.mark.parametrize(
    "data, code",
    [
        (b"not json\n", "invalid_json"),
        (b'{"data": {}}\n', "invalid_json"),  # no type
        (b'{"type": "synthesize", "data_length": "many"}\n', "invalid_json"),
        (json.dumps({"type": "synthesize", "data_length": 10**9}).encode() + b"\n", "frame_too_large"),
        (b'{"type": "synthesize", "data": {"text": "' + b"x" * 100_000 + b'"}}\n', "frame_too_large"),
    ],
)
def test_a_malformed_or_oversized_event_is_an_error_then_the_close(engine, data, code) -> None:
    events = serve(engine, sending(data))
    assert [event.type for event in events] == ["error"] and events[0].data["code"] == code
    assert engine.active == 0


def test_a_client_that_goes_away_mid_stream_frees_its_slot_at_once(engine) -> None:
    async def body(port: int) -> int:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(SynthesizeStart().event())
            await client.write_event(SynthesizeChunk(text="This goes on and on. ").event())
            while (await client.read_event()).type != "audio-chunk":
                pass
            busy = engine.active
        await eventually(lambda: engine.active == 0, "the slot is free once the client is gone")
        return busy

    assert serve(engine, body, NEVER_ENDS) == 1


@pytest.mark.parametrize("refused_first", [False, True])
@pytest.mark.slow
def test_a_connection_that_says_nothing_is_closed_whatever_else_it_sends(engine, refused_first) -> None:
    """Events that are not speech (unknown ones, a stream ended by a refusal) keep no connection open."""

    async def body(port: int) -> List[Event]:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            events = []
            if refused_first:  # a sentence being said, its stream ended by a refusal (too much text)
                await client.write_event(SynthesizeStart().event())
                await client.write_event(SynthesizeChunk(text="This goes on and on. ").event())
                while (await client.read_event()).type != "audio-chunk":
                    pass
                await client.write_event(SynthesizeChunk(text="x" * session.MAX_STREAM_TEXT).event())
            for _ in range(int(GUARD / 0.2)):
                try:
                    await client.write_event(Event(type="noise"))
                except ConnectionError:  # closed by the server since the last read: what it sent is still to read
                    while (event := await client.read_event()) is not None:
                        events.append(event)
                    return events
                try:
                    event = await asyncio.wait_for(client.read_event(), 0.2)
                except asyncio.TimeoutError:
                    continue
                if event is None:
                    return events
                events.append(event)
            raise AssertionError("the server never closed the connection")

    events = [event for event in serve(engine, body, NEVER_ENDS, timeout=1.0) if event.type == "error"]
    codes = [event.data["code"] for event in events]
    assert codes == (["text_too_long"] if refused_first else []) + ["idle_timeout"], events
    until(lambda: engine.active == 0, "the slot is free once the scheduler lets go of the refused speech")


def test_connections_beyond_the_cap_get_an_error(model) -> None:
    async def body(port: int) -> Optional[Event]:
        async with AsyncTcpClient("127.0.0.1", port), AsyncTcpClient("127.0.0.1", port) as second:
            await second.write_event(Describe().event())
            return await second.read_event()

    engine = ServerEngine(model, str(VOICE_24K), max_concurrent=4, max_connections=1)
    try:
        refused = serve(engine, body)
    finally:
        engine.close()
    assert refused is not None and refused.type == "error" and refused.data["code"] == "too_many_connections"


# the boundary: text counted as it arrives, read off the event loop, events out of order


def test_text_inside_an_open_tag_counts_against_the_streams_limit(engine) -> None:
    """SSML that never closes its tag says nothing, yet every character of it counts: the stream
    is refused once it has sent MAX_STREAM_TEXT characters, markup included."""
    piece = "a" * 4000

    async def body(port: int) -> Tuple[int, Event]:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(SynthesizeStart(text_format=SynthesizeTextFormat.SSML).event())
            await client.write_event(SynthesizeChunk(text="<x").event())
            for sent in range(1, 250):
                await client.write_event(SynthesizeChunk(text=piece).event())
                try:
                    event = await asyncio.wait_for(client.read_event(), 0.05 if sent < 3 else GUARD)
                except asyncio.TimeoutError:
                    continue
                return sent, event
            raise AssertionError("never refused")

    sent, error = serve(engine, body)
    assert error.type == "error" and error.data["code"] == "text_too_long", error
    assert 2 + sent * len(piece) > session.MAX_STREAM_TEXT >= 2 + (sent - 1) * len(piece)
    assert engine.active == 0


def test_ssml_is_read_off_the_event_loop(engine, monkeypatch) -> None:
    """The markup of a whole text and of a stream is read in the session's worker threads, never
    in the thread that runs the event loop (the one every front answers from)."""
    readers: List[int] = []
    push = SsmlStream.push
    monkeypatch.setattr(
        SsmlStream, "push", lambda self, piece: readers.append(threading.get_ident()) or push(self, piece)
    )
    ssml = SynthesizeTextFormat.SSML

    async def body(port: int) -> List[str]:
        events, _ = await synthesize(port, "<speak>Hello <break time='100ms'/> there.</speak>", text_format=ssml)
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(SynthesizeStart(text_format=ssml).event())
            await client.write_event(SynthesizeChunk(text="<speak>One. <brea").event())
            await client.write_event(SynthesizeChunk(text="k/>Two.</speak>").event())
            await client.write_event(SynthesizeStop().event())
            streamed, _ = await heard(client, "synthesize-stopped")
        return kinds(events) + kinds(streamed)

    loop_thread = threading.get_ident()
    assert serve(engine, body)[-1] == "synthesize-stopped"
    assert len(readers) >= 3 and loop_thread not in readers


def test_text_after_stop_and_a_second_stop_are_after_end_and_the_stream_goes_on(engine) -> None:
    async def body(port: int) -> Tuple[List[str], List[str], bytes]:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(SynthesizeStart().event())
            await client.write_event(SynthesizeChunk(text=SENTENCES[0] + " ").event())
            await client.write_event(SynthesizeStop().event())
            await client.write_event(SynthesizeChunk(text="And more after the end.").event())
            await client.write_event(SynthesizeStop().event())
            events, audio = [], b""
            while not events or events[-1].type != "synthesize-stopped":
                events.append(await client.read_event())
            audio = b"".join(AudioChunk.from_event(e).audio for e in events if e.type == "audio-chunk")
            errors = [e.data["code"] for e in events if e.type == "error"]
            return errors, [kind for kind in kinds(events) if kind != "error"], audio

    errors, spoken, audio = serve(engine, body)
    assert errors == ["after_end", "after_end"]
    assert spoken[0] == "audio-start" and spoken[-2:] == ["audio-stop", "synthesize-stopped"], spoken
    assert pcm_close(audio, streamed_alone(engine, [SENTENCES[0]]))  # nothing after the end was said


def test_a_second_synthesis_is_refused_and_the_first_ends_with_its_audio_stop(engine) -> None:
    async def body(port: int) -> Tuple[List[str], bytes]:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(Synthesize(text=SENTENCES[1]).event())
            await client.write_event(Synthesize(text="Me as well.").event())
            await client.write_event(SynthesizeStart().event())
            events, audio = await heard(client, "audio-stop")
            while len([e for e in events if e.type == "error"]) < 2 or events[-1].type != "audio-stop":
                events.append(await client.read_event())
            audio = b"".join(AudioChunk.from_event(e).audio for e in events if e.type == "audio-chunk")
            return [e.data["code"] for e in events if e.type == "error"], audio

    refused, audio = serve(engine, body)
    assert refused == ["unexpected_event", "unexpected_event"]
    assert pcm_close(audio, alone(engine, SENTENCES[1]))
    assert engine.active == 0


def test_a_fault_of_ours_in_a_handler_is_an_error_event_and_the_connection_goes_on(engine, monkeypatch) -> None:
    def broken() -> List[str]:
        raise RuntimeError("a bug")

    async def body(port: int) -> Tuple[Event, List[str]]:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(Describe().event())
            error = await client.read_event()
            monkeypatch.undo()
            events, _ = await synthesize_on(client, "Still here.")
            return error, kinds(events)

    monkeypatch.setattr(engine.voices, "names", broken)
    error, after = serve(engine, body)
    assert error.type == "error" and error.data["code"] == "internal_error" and "a bug" not in error.data["text"]
    assert after == ["audio-start", "chunks", "audio-stop"]


def test_a_voices_folder_removed_while_serving_is_a_folder_without_voices(engine, tmp_path) -> None:
    folder = tmp_path / "voices"
    folder.mkdir()
    shutil.copy(VOICE_22K, folder / "grandpa.wav")

    async def body(port: int) -> Tuple[List[str], Event, List[str]]:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            shutil.rmtree(folder)
            await client.write_event(Describe().event())
            info = Info.from_event(await client.read_event())
            await client.write_event(Synthesize(text="Hi.", voice=SynthesizeVoice(name="grandpa")).event())
            error = await client.read_event()
            events, _ = await synthesize_on(client, "Still here.")
            return [voice.name for voice in info.tts[0].voices], error, kinds(events)

    names, error, after = serve(engine, body, folder=folder)
    assert "grandpa" not in names and engine.voices.default_name in names
    assert error.type == "error" and error.data["code"] == "unknown_voice"
    assert after == ["audio-start", "chunks", "audio-stop"]


# the boundary: who asks (a server with an API key: Wyoming's callers are guests)


@pytest.fixture
def keyed(model):
    """An engine with an API key and two slots (one for guests), a key holder's upload in it."""
    engine = ServerEngine(model, str(VOICE_24K), max_concurrent=2, access=Access("sesame"))
    noise = np.random.default_rng(5).standard_normal(24000).astype(np.float32) * 0.1
    engine.voices.upload(wav_bytes(noise, 24000), "theirs.wav")
    yield engine
    engine.close()


def test_a_guest_never_sees_nor_uses_a_key_holders_upload(keyed, tmp_path) -> None:
    shutil.copy(VOICE_22K, tmp_path / "grandpa.wav")
    [upload] = keyed.voices.uploaded()

    async def body(port: int) -> Tuple[List[str], Event, List[str]]:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(Describe().event())
            info = Info.from_event(await client.read_event())
            await client.write_event(Synthesize(text="Hi.", voice=SynthesizeVoice(name=upload)).event())
            refused = await client.read_event()
            events, _ = await synthesize_on(client, "Hi.")
            await client.write_event(Synthesize(text="Hi.", voice=SynthesizeVoice(name="grandpa")).event())
            folder, _ = await heard(client, "audio-stop")
            return [voice.name for voice in info.tts[0].voices], refused, kinds(events) + kinds(folder)

    names, refused, spoken = serve(keyed, body, folder=tmp_path)
    assert upload not in names and "grandpa" in names
    assert refused.type == "error" and refused.data["code"] == "unknown_voice"
    assert "upload:" not in refused.data["text"].replace(repr(upload), "")  # no other upload named either
    assert spoken == ["audio-start", "chunks", "audio-stop"] * 2  # the default, and the folder's recording
    assert keyed.voices.uploaded(GUEST) == [keyed.voices.uploaded()[1]]  # the folder's, open to guests


def test_guests_hold_their_share_of_the_slots_and_key_holders_the_rest(keyed) -> None:
    async def body(port: int) -> Tuple[str, int]:
        async with AsyncTcpClient("127.0.0.1", port) as first, AsyncTcpClient("127.0.0.1", port) as second:
            await first.write_event(SynthesizeStart().event())
            await eventually(lambda: keyed.active == 1, "the first guest's slot")
            await second.write_event(SynthesizeStart().event())
            refused = await second.read_event()
            held = keyed.generations.slots.taken_by_guests
            await asyncio.to_thread(lambda: keyed.admit(KEY_HOLDER).release())  # a key holder still gets one
            return refused.data["code"], held

    assert serve(keyed, body) == ("busy", 1)


def test_without_a_key_wyoming_may_use_every_voice_and_slot(model) -> None:
    engine = ServerEngine(model, str(VOICE_24K), max_concurrent=2)
    [upload] = [engine.voices.upload(wav_bytes(np.full(24000, 0.1, np.float32), 24000))]

    async def body(port: int) -> Tuple[List[str], int]:
        async with AsyncTcpClient("127.0.0.1", port) as first, AsyncTcpClient("127.0.0.1", port) as second:
            await first.write_event(Describe().event())
            info = Info.from_event(await first.read_event())
            for client in (first, second):
                await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name=upload)).event())
            await eventually(lambda: engine.active == 2, "both slots")
            return [voice.name for voice in info.tts[0].voices], engine.active

    try:
        names, active = serve(engine, body)
    finally:
        engine.close()
    assert upload in names and active == 2


# the voices folder


def test_a_recording_of_the_folder_is_a_voice_cloned_once(engine, tmp_path, monkeypatch) -> None:
    noise = np.random.default_rng(3).standard_normal(24000 * 2).astype(np.float32) * 0.1
    (tmp_path / "grandpa.wav").write_bytes(wav_bytes(noise, 24000))  # a voice unlike the default's
    shutil.copy(tmp_path / "grandpa.wav", tmp_path / "same_again.flac.wav")  # the same samples, another name
    clones: List[str] = []
    clone = engine.model.clone_voice
    monkeypatch.setattr(engine.model, "clone_voice", lambda *args: clones.append(args[2]) or clone(*args))

    async def body(port: int) -> List[bytes]:
        spoken = []
        for name in ("grandpa", "same_again.flac", "grandpa"):
            events, audio = await synthesize(port, "Hi there.", voice=SynthesizeVoice(name=name))
            assert kinds(events) == ["audio-start", "chunks", "audio-stop"], events
            spoken.append(audio)
        return spoken

    spoken = serve(engine, body, folder=tmp_path)
    assert len(clones) == 1 and spoken[0] == spoken[1] == spoken[2]
    assert not pcm_close(spoken[0], alone(engine, "Hi there."))  # not the default voice


# discovery (what would be announced: nothing is sent)


def test_discovery_announces_the_wyoming_service_as_home_assistant_looks_for_it(monkeypatch) -> None:
    import socket

    import wyoming.zeroconf

    registered: List[Any] = []

    class Recorded:
        async def async_register_service(self, info: Any) -> None:
            registered.append(info)

    monkeypatch.setattr(wyoming.zeroconf, "AsyncZeroconf", Recorded)
    host, port = wyoming_discovery.announced_address("tcp://192.168.1.20:10200")
    asyncio.run(wyoming_discovery.announce(port, "pocket-tts", host))
    assert wyoming_discovery.announced_address("tcp://0.0.0.0:10200") == (None, 10200)
    info = registered[0]
    assert info.type == "_wyoming._tcp.local." and info.name == "pocket-tts._wyoming._tcp.local."
    assert info.port == 10200 and info.addresses == [socket.inet_aton("192.168.1.20")]
    assert info.properties == {}


# python -m server --wyoming


ONE = ["audio-start", "chunks", "audio-stop"]
SPOKEN = ONE + ["unknown_voice"] + ONE * 2 + ["synthesize-stopped"]


@pytest.mark.slow
def test_the_command_line_serves_wyoming_beside_http_and_alone(tmp_path) -> None:
    shutil.copy(VOICE_22K, tmp_path / "grandpa.wav")
    port = free_port()

    async def describe_and_say() -> Tuple[List[str], List[str]]:
        """Describe, a whole text, a refused one, and a stream: what Home Assistant does."""
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(Describe().event())
            voices = [voice.name for voice in Info.from_event(await client.read_event()).tts[0].voices]
            events, _ = await synthesize_on(client, "Hello.")
            await client.write_event(Synthesize(text="Hi.", voice=SynthesizeVoice(name="nobody")).event())
            refused = await client.read_event()
            await stream(client, ["Hello the", "re. And bye."])
            streamed, _ = await heard(client, "synthesize-stopped")
            return voices, kinds(events) + [refused.data["code"]] + kinds(streamed)

    with tiny_server("--wyoming", f"tcp://127.0.0.1:{port}", "--voices-dir", str(tmp_path)) as url:
        voices, events = asyncio.run(asyncio.wait_for(describe_and_say(), GUARD))
        assert voices == ["voice_24000", "grandpa"] and events == SPOKEN
        import httpx

        assert httpx.get(url + "/health", timeout=GUARD).json()["status"] == "ok"
    command = [sys.executable, "-m", "server", "--model", str(TINY_CONFIG), "--voice", str(VOICE_24K)]
    process = subprocess.Popen(command + ["--wyoming", f"tcp://127.0.0.1:{port}", "--no-http"], cwd=ROOT)
    try:

        async def when_up() -> Tuple[List[str], List[str]]:
            while True:
                try:
                    return await describe_and_say()
                except OSError:
                    await asyncio.sleep(0.1)

        voices, events = asyncio.run(asyncio.wait_for(when_up(), GUARD))
        assert voices == ["voice_24000"] and events == SPOKEN
    finally:
        process.terminate()
        assert process.wait(GUARD) == 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["--no-http"], "go with --wyoming URI"),
        (["--wyoming", "http://x:1"], "--wyoming takes tcp://HOST:PORT or unix://PATH"),
        (["--wyoming", "unix:///tmp/w.sock", "--zeroconf"], "--zeroconf announces a tcp://HOST:PORT"),
    ],
)
def test_the_command_lines_wyoming_flags_are_checked(args, message) -> None:
    done = subprocess.run([sys.executable, "-m", "server", *args], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2 and message in done.stderr


def test_a_voices_dir_that_is_no_folder_is_one_line(tmp_path) -> None:
    command = [sys.executable, "-m", "server", "--model", str(TINY_CONFIG), "--wyoming", "tcp://127.0.0.1:1"]
    done = subprocess.run(command + ["--voices-dir", str(tmp_path / "none")], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 1 and done.stderr.strip().splitlines()[-1].startswith("error: --voices-dir")


def test_events_of_the_sample_exchange_are_what_the_package_reads(engine) -> None:
    """The server's events decode as the package's own types (what Home Assistant reads)."""
    events, _ = serve(engine, lambda port: synthesize(port, "Hi."))
    parsed: Dict[str, Any] = {"audio-start": AudioStart, "audio-chunk": AudioChunk}
    for event in events[:-1]:
        parsed[event.type].from_event(event)
    assert np.frombuffer(AudioChunk.from_event(events[1]).audio, "<i2").size == 1920
