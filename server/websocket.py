"""The WebSocket at /v1/audio/speech/stream: text that arrives in pieces (an LLM's reply, a few
tokens at a time) spoken segment by segment, each as soon as it is complete. A connection is one
session of the engine (server/session.py): its slot, budget, segments, cancellation, idle and
lifetime rules and errors are the session's; this module only reads and writes frames.

Client to server, JSON text frames (server/schemas.py):
    {"type": "start", "voice": ..., <any generation option>}   optional, and then the first frame
    {"type": "text", "text": "..."}                             any number; any split, inside words too
    {"type": "flush"}                                           speak what is buffered now
    {"type": "end"}                                             no more text: speak the rest, `done`, close
    {"type": "cancel"}                                          stop now (barge-in), drop the buffered text,
                                                                `done`; the connection takes text again
Server to client: binary frames of 16-bit little-endian mono PCM at the engine's rate, and JSON text
frames {"type": "started", "sample_rate": R}, {"type": "segment", "text": ..., "spoken": ...,
"start_sample": N} (before a segment's first audio; `spoken`: the text as the model reads it,
normalized; N: the samples sent before it), with `"words": true` in `start` {"type": "word",
"word": ..., "index": I, "start_sample": N} (before the audio that starts it) and {"type":
"word_end", "word", "index", "start_sample", "end_sample"} (word timestamps, in samples of the
stream), {"type": "done", "samples": N} (N: all the samples sent) and {"type": "error", "error":
{...}} (OpenAI's shape, with `status`, the HTTP status the same error gets from the HTTP routes).

The segments are said one after another, each as soon as the one before has made all its frames
(not once it has been heard), so that their audio follows without a gap wherever generation is
faster than real time; with the same seed the audio is what POST /stream makes of the whole text
whenever the segments are its chunks.

A refusal that ends the connection (a bad start, busy, too much text or audio, a frame too large,
idle, a fault of ours) is an error frame, then a close with its kind's close code; a bad frame that
is not the start is an error frame, and the connection goes on. A frame the client does not take
within `timeout` seconds (it stopped reading: its audio is held by the relay, then by the socket)
drops it without a close.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import WebSocket, websocket

from core import audio_formats
from server import errors
from server.errors import ServiceError
from server.frames import BadFrame, Fatal, FrameSocket
from server.guard import caller_of
from server.schemas import (
    CLIENT_FRAMES,
    ClientFrame,
    StreamCancel,
    StreamEnd,
    StreamFlush,
    StreamStart,
    StreamText,
    error_detail,
)
from server.session import Audio, Done, Session, Started, WordEnd, WordStart

PATH = "/v1/audio/speech/stream"


@websocket(PATH)
async def speech_stream(socket: WebSocket) -> None:
    """Speak text as it arrives (see server/websocket.py for the frames)."""
    await _Connection.serving(socket)


class _Connection(FrameSocket):
    """One session for the whole connection; its audio in the start's format and rate."""

    path = PATH
    start = StreamStart()
    output: audio_formats.Output

    # Reading the client's frames

    async def _read(self) -> None:
        while True:
            message = await self._receive()
            try:
                frame = self._frame(message, CLIENT_FRAMES, ClientFrame)
            except BadFrame as bad:
                if bad.kind == "start" and self.session is None:  # the connection cannot speak as asked
                    raise Fatal(bad.error) from None
                await self._send_error(bad.error)
                continue
            if self.session is None:
                await self._open(frame if isinstance(frame, StreamStart) else StreamStart())
                if isinstance(frame, StreamStart):
                    continue
            await self._handle(frame)

    async def _open(self, start: StreamStart) -> None:
        """The connection's session (a bad voice or option, or no free slot, ends it), then `started`."""
        try:
            caller = caller_of(self.socket)
            self.session = await Session.open(
                self.engine, start.voice, start.options(), self.clock, caller=caller, words=start.words
            )
        except ServiceError as e:
            raise Fatal(e) from None
        self.start = start
        self.output = audio_formats.Output(start.format, self.session.sample_rate, start.sample_rate)
        await self._send_json({"type": "started", "sample_rate": self.output.rate, "format": start.format})
        self._begin_sending()

    async def _handle(self, frame: Any) -> None:
        session = self.session
        if isinstance(frame, StreamStart):
            error = ServiceError(errors.UNEXPECTED_START, "start must be the first frame", "type")
            await self._send_error(error)
        elif session.ending and not isinstance(frame, StreamCancel):
            error = ServiceError(errors.AFTER_END, "the text has ended: only cancel may follow end", "type")
            await self._send_error(error)
        elif isinstance(frame, StreamText):
            await session.push(frame.text)
        elif isinstance(frame, StreamFlush):
            await session.flush()
        elif isinstance(frame, StreamEnd):
            await session.end()
        elif isinstance(frame, StreamCancel):
            await self._cancel()

    async def _cancel(self) -> None:
        """Stop what is being said within a frame, drop the text buffered, answer `done`: the
        speech gives out nothing more and the sender stops before `done`, so that no audio follows
        the cancel (the sender may be running through audio already queued, which reaches no wait)."""
        ending = self.session.ending
        self.session.cancel()
        await self._stop_sending()
        await self._send_json({"type": "done", "samples": self.output.samples(self.session.sent)})
        # What the resampler held of the cut speech is dropped: the next speech starts afresh.
        self.output = audio_formats.Output(self.start.format, self.session.sample_rate, self.start.sample_rate)
        if ending:
            self.closing.set()
            return
        self._begin_sending()

    async def _send_speech(self) -> None:
        out = self.output
        at = out.samples  # a count of the model's samples, at the stream's rate
        async for event in self.session.events():
            if isinstance(event, Audio):
                data = out.chunk(event.pcm)
                if data:
                    await self._send(bytes=data)
            elif isinstance(event, Started):
                segment = {"type": "segment", "text": event.text, "spoken": event.spoken}
                await self._send_json(dict(segment, start_sample=at(event.start_sample)))
            elif isinstance(event, WordStart):
                await self._send_json(
                    {"type": "word", "word": event.word, "index": event.index, "start_sample": at(event.sample)}
                )
            elif isinstance(event, WordEnd):
                word = {"type": "word_end", "word": event.word, "index": event.index, "start_sample": at(event.start)}
                await self._send_json(dict(word, end_sample=at(event.end)))
            elif isinstance(event, Done):
                tail = out.end()
                if tail:
                    await self._send(bytes=tail)
                await self.session.close_and_free()  # its slot is free before the client hears it is over
                await self._send_json({"type": "done", "samples": at(event.samples)})
                self.closing.set()

    async def _send_error(self, error: ServiceError) -> None:
        detail = msgspec.structs.asdict(error_detail(error.status, error.message, error.param, error.code))
        await self._send_json({"type": "error", "error": dict(detail, status=error.status)})
