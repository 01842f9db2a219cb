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
Server to client: binary frames of 16-bit little-endian mono PCM at the engine's rate (or at the
start's rate and format), and JSON text frames {"type": "started", "sample_rate": R},
{"type": "segment", "text": ..., "spoken": ..., "start_sample": N} (before a segment's first audio;
`spoken`: the text as the model reads it, normalized; N: where its audio begins), with `"words":
true` in `start` {"type": "word", "word": ..., "index": I, "start_sample": N} (before the audio
that starts it) and {"type": "word_end", "word", "index", "start_sample", "end_sample"} (word
timestamps), {"type": "done", "samples": N} (N: all the samples sent) and {"type": "error",
"error": {...}} (OpenAI's shape, with `status`, the HTTP status the same error gets from the HTTP
routes). Every sample count is at R, a position in the audio the client received: what a
resampler held when a cancel cut its speech was never sent, and is never counted.

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
from litestar.di import NamedDependency

from core import audio_formats
from server import errors
from server.access import Caller
from server.engine import ServerEngine
from server.errors import ServiceError
from server.frames import BadFrame, Fatal, FrameSocket, Turn, word_event
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
from server.session import Event, Session, Started, WordEnd, WordStart

PATH = "/v1/audio/speech/stream"


@websocket(PATH)
async def speech_stream(
    socket: WebSocket,
    engine: NamedDependency[ServerEngine],
    caller: NamedDependency[Caller],
    client_timeout: NamedDependency[float],
) -> None:
    """Speak text as it arrives (see server/websocket.py for the frames)."""
    await _Connection(socket, engine, caller, client_timeout).serve()


class _Connection(FrameSocket):
    """One session for the whole connection, a turn for each speech (a cancel starts the next);
    its audio in the start's format and rate."""

    path = PATH
    start = StreamStart()

    # Reading the client's frames

    async def _read(self) -> None:
        while True:
            message = await self._receive()
            try:
                frame = self._frame(message, CLIENT_FRAMES, ClientFrame)
            except BadFrame as bad:
                if bad.kind == "start" and self.turn is None:  # the connection cannot speak as asked
                    raise Fatal(bad.error) from None
                await self._send_error(bad.error)
                continue
            if self.turn is None:
                await self._open(frame if isinstance(frame, StreamStart) else StreamStart())
                if isinstance(frame, StreamStart):
                    continue
            await self._handle(frame)

    async def _open(self, start: StreamStart) -> None:
        """The connection's session (a bad voice or option, or no free slot, ends it), then `started`."""
        try:
            session = await Session.open(
                self.engine,
                start.voice,
                start.options(),
                self.clock,
                caller=self.caller,
                words=start.words,
                model=start.model_name,
                pronunciations=start.pronunciations,
            )
        except ServiceError as e:
            raise Fatal(e) from None
        self.start = start
        self.turn = self._turn(session, 0)
        await self._send_json({"type": "started", "sample_rate": self.turn.output.rate, "format": start.format})
        self._begin(self.turn)

    def _turn(self, session: Session, sent: int) -> Turn:
        """A speech of the connection's session, `sent` samples into its audio; its resampler fresh."""
        return Turn(session, audio_formats.Output(self.start.format, session.sample_rate, self.start.sample_rate), sent)

    async def _handle(self, frame: Any) -> None:
        session = self.turn.session
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
        """Stop what is being said within a frame, drop the text buffered, answer `done`: the turn
        is cut before `done`, so that no audio follows the cancel (its sender may be running through
        audio already queued, which reaches no wait). What its resampler held is dropped, never
        counted: the next turn's audio follows what was sent. A turn all said (after `end`) sends
        its own `done`, and the connection ends."""
        turn = self.turn
        ending = turn.session.ending
        if not await self._stop(turn):
            return
        await self._send_json({"type": "done", "samples": turn.sent})
        if ending:
            self.closing.set()
            return
        self.turn = self._turn(turn.session, turn.sent)
        self._begin(self.turn)

    # Sending the speech: every sample count a position in the audio the client received

    async def _send_audio(self, turn: Turn, data: bytes) -> None:
        await self._send(bytes=data)

    async def _send_event(self, turn: Turn, event: Event) -> None:
        at = turn.at
        if isinstance(event, Started):
            segment = {"type": "segment", "text": event.text, "spoken": event.spoken}
            await self._send_json(dict(segment, start_sample=at(event.start_sample)))
        elif isinstance(event, (WordStart, WordEnd)):
            await self._send_json(word_event(event, at))

    async def _send_end(self, turn: Turn) -> None:
        await self._send_json({"type": "done", "samples": turn.sent})
        self.closing.set()

    async def _send_error(self, error: ServiceError) -> None:
        detail = msgspec.structs.asdict(error_detail(error.status, error.message, error.param, error.code))
        await self._send_json({"type": "error", "error": dict(detail, status=error.status)})
