"""Response bodies of a session's audio: raw PCM, a streamed WAV, OpenAI's server-sent events, a
whole file; each holds its session (and so its slot) until its last byte is handed to the server,
or its client is gone."""

from __future__ import annotations

import base64
import json
import weakref
from contextlib import asynccontextmanager
from typing import AsyncIterator, Callable, List, Optional, TypeVar

import anyio
import msgspec
import numpy as np
from litestar import Request, Response
from litestar.response import Stream

from core import audio_formats
from core.portable.audio.pcm import pcm16
from server.frames import word_event
from server.schemas import TimedWordEntry, WordsResponse
from server.session import Audio, Done, Event, Session, WholeText, WordEnd, WordStart

T = TypeVar("T")

PIECE = 64 * 1024  # bytes of a whole file sent at a time


class _Delivery:
    """A response body that closes its session once its last byte is handed to the server, or the
    client is gone (the body closed, or dropped unread: a finalizer closes it then too)."""

    def __init__(self, body: AsyncIterator[bytes], session: Session):
        self._body = body
        self._done = weakref.finalize(self, session.close)

    def __aiter__(self) -> _Delivery:
        return self

    async def __anext__(self) -> bytes:
        try:
            return await self._body.__anext__()
        except BaseException:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        try:
            await self._body.aclose()
        finally:
            self._done()


class Answer:
    """What a handler holds while it works: its session, until a response body takes it over."""

    def __init__(self, session: Session):
        self.session = session
        self.handed = False

    def body(self, chunks: AsyncIterator[bytes]) -> _Delivery:
        self.handed = True
        return _Delivery(chunks, self.session)


@asynccontextmanager
async def saying(session: Session, text: WholeText) -> AsyncIterator[Answer]:
    """A request's session saying its whole text, closed when the handler fails or returns without
    a body that holds it."""
    answer = Answer(session)
    try:
        await session.say(text)
        await session.end()
        yield answer
    finally:
        if not answer.handed:
            session.close()


async def streamed(chunks: AsyncIterator[np.ndarray], output: audio_formats.Output) -> AsyncIterator[bytes]:
    """The audio in `output`'s format and rate as it is made (a WAV stream's header first, what
    the resampler still holds last)."""
    header = output.header()
    if header:
        yield header
    async for chunk in chunks:
        data = output.chunk(chunk)
        if data:
            yield data
    tail = output.end()
    if tail:
        yield tail


async def sse(
    chunks: AsyncIterator[np.ndarray],
    sample_rate: int,
    frame_size: int,
    fmt: str,
    rate: Optional[int] = None,
    loudness: Optional[float] = None,
) -> AsyncIterator[bytes]:
    """OpenAI's speech events: base64 audio deltas, then `speech.audio.done`. A compressed file
    is brought to `loudness` (LUFS) by its own measure, as every whole file.

    PCM, G.711 and WAV deltas stream (at `rate`, None: the model's); a compressed format is
    encoded as it is made, off the event loop, and comes as one delta at the end.
    """

    def event(payload: dict) -> bytes:
        return b"data: " + json.dumps(payload).encode() + b"\n\n"

    def delta(data: bytes) -> bytes:
        # json.dumps's bytes, without its copies of a whole file's base64 (which needs no escaping)
        return b'data: {"type": "speech.audio.delta", "audio": "' + base64.b64encode(data) + b'"}\n\n'

    samples = 0

    async def counted() -> AsyncIterator[np.ndarray]:
        nonlocal samples
        async for chunk in chunks:
            samples += chunk.shape[0]
            yield chunk

    if fmt in audio_formats.STREAMED + ("wav",):
        async for data in streamed(counted(), audio_formats.Output(fmt, sample_rate, rate)):
            yield delta(data)
    else:
        file = audio_formats.WholeFile(fmt, sample_rate, rate, loudness)
        async for chunk in counted():
            await anyio.to_thread.run_sync(file.add, chunk)
        if samples:
            yield await anyio.to_thread.run_sync(lambda: delta(file.end()))
    frames = -(-samples // frame_size)  # audio of 80 ms frames (at a speed other than 1, not those generated)
    usage = {"input_tokens": 0, "output_tokens": frames, "total_tokens": frames}
    yield event({"type": "speech.audio.done", "usage": usage})


async def word_lines(session: Session) -> AsyncIterator[bytes]:
    """A session's speech as JSON lines (NDJSON): `started` (the sample rate), `audio` (base64
    16-bit PCM, as it is made), the word events of every wire (docs/word-timestamps.md: `word`, a
    word begins at `start_sample`, before its audio, and `word_end`, `start_sample` and
    `end_sample`), then `done` (`samples`: all the audio)."""
    rate = session.sample_rate

    def line(payload: dict) -> bytes:
        return json.dumps(payload, ensure_ascii=False).encode() + b"\n"

    yield line({"type": "started", "sample_rate": rate})
    async for event in session.events():
        if isinstance(event, Audio):
            yield line({"type": "audio", "audio": base64.b64encode(pcm16(event.pcm)).decode()})
        elif isinstance(event, (WordStart, WordEnd)):
            yield line(word_event(event))
        elif isinstance(event, Done):
            yield line({"type": "done", "samples": event.samples})


async def words_file(request: Request, answer: Answer) -> Response:
    """The whole audio as a WAV (base64) and its words, as JSON (server.schemas.WordsResponse),
    encoded off the event loop as `whole_file`'s, then sent under the request's session as it is."""
    session = answer.session
    rate = session.sample_rate
    file = audio_formats.WholeFile("wav", rate, loudness=session.loudness)
    words: List[TimedWordEntry] = []

    def take(event: Event) -> None:
        if isinstance(event, Audio):
            file.add(event.pcm)
        elif isinstance(event, WordEnd):
            words.append(TimedWordEntry(event.word, event.index, event.start / rate, event.end / rate))

    def answered() -> bytes:  # the WAV is dropped once its base64 is made
        return msgspec.json.encode(WordsResponse(base64.b64encode(file.end()).decode(), rate, words))

    if not await _collect(request, session.events(), take):
        return Response(b"", status_code=499)
    return _sent(answer, await anyio.to_thread.run_sync(answered), "application/json")


async def whole_file(request: Request, answer: Answer, fmt: str, rate: Optional[int] = None) -> Response:
    """The whole audio as one file in `fmt` at `rate` (None: the model's), each chunk resampled and
    encoded off the event loop as it is made (what is held is the file so far, never the samples),
    then sent a piece at a time under the request's session (a client that reads nothing holds it
    only until the client timeout)."""
    session = answer.session
    file = audio_formats.WholeFile(fmt, session.sample_rate, rate, session.loudness)
    if not await _collect(request, session.audio(), file.add):
        return Response(b"", status_code=499)
    data = await anyio.to_thread.run_sync(file.end)
    return _sent(answer, data, audio_formats.MEDIA_TYPES[fmt])


def _sent(answer: Answer, data: bytes, media_type: str) -> Stream:
    """`data` sent a piece at a time, under the answer's session."""

    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(data), PIECE):
            yield data[start : start + PIECE]

    headers = {"Content-Length": str(len(data))}
    return Stream(answer.body(pieces()), media_type=media_type, headers=headers)


async def _collect(request: Request, items: AsyncIterator[T], take: Callable[[T], None]) -> bool:
    """Each of a generation's items (its audio, or its events) handed to `take` off the event loop,
    as it is made; False if the client went away first (which stops it)."""
    gone = False
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            nonlocal gone
            while (await request.receive())["type"] != "http.disconnect":
                pass
            gone = True
            group.cancel_scope.cancel()

        group.start_soon(watch)
        async for item in items:
            await anyio.to_thread.run_sync(take, item)
        group.cancel_scope.cancel()
    if gone:
        await items.aclose()
    return not gone
