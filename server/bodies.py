"""Response bodies of a session's audio: raw PCM, a streamed WAV, OpenAI's server-sent events, a
whole file; each holds its session (and so its slot) until its last byte is handed to the server,
or its client is gone."""

from __future__ import annotations

import base64
import json
import weakref
from contextlib import asynccontextmanager
from typing import AsyncIterator, List, Optional

import anyio
import numpy as np
from litestar import Request, Response
from litestar.response import Stream

from core.portable.audio import pcm16, wav_header
from server import audio_out
from server.session import Session

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
async def saying(session: Session, text: str, field: str = "text") -> AsyncIterator[Answer]:
    """A request's session saying its whole text (`field`: what the route calls it), closed when the
    handler fails or returns without a body that holds it."""
    answer = Answer(session)
    try:
        await session.say(text, field)
        await session.end()
        yield answer
    finally:
        if not answer.handed:
            session.close()


async def pcm_bytes(chunks: AsyncIterator[np.ndarray]) -> AsyncIterator[bytes]:
    async for chunk in chunks:
        yield pcm16(chunk)


async def wav_stream(chunks: AsyncIterator[np.ndarray], sample_rate: int) -> AsyncIterator[bytes]:
    yield wav_header(sample_rate)
    async for chunk in chunks:
        yield pcm16(chunk)


async def sse(chunks: AsyncIterator[np.ndarray], sample_rate: int, frame_size: int, fmt: str) -> AsyncIterator[bytes]:
    """OpenAI's speech events: base64 audio deltas, then `speech.audio.done`.

    PCM and WAV deltas stream; a compressed format comes as one delta at the end.
    """

    def event(payload: dict) -> bytes:
        return b"data: " + json.dumps(payload).encode() + b"\n\n"

    samples = 0
    kept: List[np.ndarray] = []
    if fmt == "wav":
        yield event({"type": "speech.audio.delta", "audio": base64.b64encode(wav_header(sample_rate)).decode()})
    async for chunk in chunks:
        samples += chunk.shape[0]
        if fmt in ("pcm", "wav"):
            yield event({"type": "speech.audio.delta", "audio": base64.b64encode(pcm16(chunk)).decode()})
        else:
            kept.append(chunk)
    if kept:
        data = await anyio.to_thread.run_sync(audio_out.encode_chunks, kept, sample_rate, fmt)
        yield event({"type": "speech.audio.delta", "audio": base64.b64encode(data).decode()})
    frames = -(-samples // frame_size)  # audio of 80 ms frames (at a speed other than 1, not those generated)
    usage = {"input_tokens": 0, "output_tokens": frames, "total_tokens": frames}
    yield event({"type": "speech.audio.done", "usage": usage})


async def whole_file(request: Request, answer: Answer, fmt: str) -> Response:
    """The whole audio as one file in `fmt`, joined and encoded off the event loop, then sent a
    piece at a time under the request's session (a client that reads nothing holds it only until
    the client timeout)."""
    session = answer.session
    chunks = await _collect(request, session.audio())
    if chunks is None:
        return Response(b"", status_code=499)
    data = await anyio.to_thread.run_sync(audio_out.encode_chunks, chunks, session.sample_rate, fmt)

    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(data), PIECE):
            yield data[start : start + PIECE]

    headers = {"Content-Length": str(len(data))}
    return Stream(answer.body(pieces()), media_type=audio_out.MEDIA_TYPES[fmt], headers=headers)


async def _collect(request: Request, chunks: AsyncIterator[np.ndarray]) -> Optional[List[np.ndarray]]:
    """All the audio of a generation, chunk by chunk; None if the client went away first (which stops it)."""
    parts: List[np.ndarray] = []
    gone = False
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            nonlocal gone
            while (await request.receive())["type"] != "http.disconnect":
                pass
            gone = True
            group.cancel_scope.cancel()

        group.start_soon(watch)
        async for chunk in chunks:
            parts.append(chunk)
        group.cancel_scope.cancel()
    if gone:
        await chunks.aclose()
        return None
    return parts
