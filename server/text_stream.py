"""The WebSocket at /v1/audio/speech/stream: text that arrives in pieces (an LLM's reply, a few
tokens at a time) spoken segment by segment, each as soon as it is complete.

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
normalized; N: the samples sent before it), {"type": "done", "samples": N} (N: all the samples
sent) and {"type": "error", "error": {...}} (OpenAI's shape, with `status`, the HTTP status the
same error gets from the HTTP routes).

The text goes through the model's text stream (core.portable.model.TextStream: its segmenter, one
generation per segment, one noise generator through them), so the audio is what POST /stream makes
of the whole text whenever the segments are its chunks. The segments run in the scheduler one after
another, each submitted as soon as the one before has made all its frames (not once it has been
heard), so that their audio follows without a gap wherever generation is faster than real time.

A connection holds one of the engine's slots from its first frame to its close (Busy: an error
frame, then close 1013). Its limits, as the HTTP routes': at most MAX_STREAM_TEXT characters of
text and REQUEST_SECONDS of audio; frames of at most MAX_FRAME bytes; no frame for `timeout` seconds
while nothing is being spoken closes it; a send the client does not take within `timeout` seconds
(it stopped reading: its audio is held by the relay, then by the socket) drops it without a close.
A fatal error is an error frame, then a close (1008; 1009 for a frame too large, 1011 for a fault of
ours); a bad frame that is not the start is an error frame, and the connection goes on. The work
that is not I/O (tokenizing, normalizing, preparing a voice) runs in worker threads.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import time
from typing import Any, Awaitable, Callable, List, Optional, Tuple

import anyio
import msgspec
import numpy as np
from litestar import WebSocket, websocket

from core import LimitError, PocketTTSError, VoiceError
from core.portable.audio import pcm16
from core.portable.generation import Generation
from core.portable.model import Segment, TextStream
from core.portable.options import REQUEST_SECONDS
from server.engine import ServerEngine
from server.relay import Relay
from server.schemas import (
    CLIENT_FRAMES,
    MAX_TEXT,
    ClientFrame,
    StreamCancel,
    StreamEnd,
    StreamFlush,
    StreamStart,
    StreamText,
    error_detail,
)
from server.slots import Busy, Slot

PATH = "/v1/audio/speech/stream"
# Characters of text a connection may send in all: about REQUEST_SECONDS of speech.
MAX_STREAM_TEXT = 2 * MAX_TEXT
# Bytes of one client frame: a piece of text of MAX_TEXT characters, each escaped, fits.
MAX_FRAME = 64 * 1024
# Close codes (RFC 6455): normal, policy violation, message too big, internal error, try again later.
NORMAL, POLICY, TOO_BIG, INTERNAL, TRY_LATER = 1000, 1008, 1009, 1011, 1013
log = logging.getLogger("pocket_tts.server")


class _Fatal(Exception):
    """An error that ends the connection: its error frame, then the close."""

    def __init__(self, status: int, message: str, code: str, close: int = POLICY, param: Optional[str] = None):
        super().__init__(message)
        self.status, self.message, self.code, self.close, self.param = status, message, code, close, param


class _Gone(Exception):
    """The client went away, or stopped taking what is sent: nothing more is sent."""


class _BadFrame(Exception):
    def __init__(self, message: str, code: str, param: Optional[str] = None, kind: Optional[str] = None):
        super().__init__(message)
        self.message, self.code, self.param, self.kind = message, code, param, kind


@websocket(PATH)
async def speech_stream(socket: WebSocket) -> None:
    """Speak text as it arrives (see server/text_stream.py for the frames)."""
    state = socket.app.state
    await _Connection(socket, state.engine, state.client_timeout).serve()


class _Speech:
    """What a connection says until it is cancelled: its segments' generations in order, their
    relays in order, and the tasks that run them (cancelled together)."""

    def __init__(self) -> None:
        self.generations: asyncio.Queue[Optional[Segment]] = asyncio.Queue()
        self.relays: asyncio.Queue[Optional[Tuple[Segment, Relay]]] = asyncio.Queue()
        self.submitted: List[Relay] = []
        self.scope = anyio.CancelScope()
        self.ended = asyncio.Event()

    def stop(self) -> None:
        self.scope.cancel()
        for relay in self.submitted:
            relay.abandon()

    @property
    def stopped(self) -> bool:
        """Whether it was stopped: its tasks send nothing more, even in a step that was already due
        to run (cancellation reaches a task only at its next wait)."""
        return self.scope.cancel_called


class _Connection:
    def __init__(self, socket: WebSocket, engine: ServerEngine, timeout: float):
        self.socket = socket
        self.engine = engine
        self.timeout = timeout
        self.loop = asyncio.get_running_loop()
        self.slot: Optional[Slot] = None
        self.text: Optional[TextStream] = None
        self.start = StreamStart()
        self.rng: Optional[np.random.Generator] = None
        self.received = 0  # characters of text
        self.sent = 0  # samples of audio
        self.frames_made = 0  # frames the finished segments made (their audio, before the speed change)
        self.ending = False  # `end` came: no more text
        self.unsent = 0  # segments not yet all sent
        self.quiet_since = time.monotonic()  # the last frame, or the end of the last speech
        self.closing = asyncio.Event()
        self.outcome: Optional[BaseException] = None
        self.speech = _Speech()
        self.group: Any = None

    async def serve(self) -> None:
        await self.socket.accept()
        try:
            try:
                async with anyio.create_task_group() as group:
                    self.group = group
                    group.start_soon(self._guarded, self._read)
                    await self.closing.wait()
                    group.cancel_scope.cancel()
            finally:
                self.speech.stop()
                if self.slot is not None:
                    self.slot.release()
            if self.outcome is None:
                await self._close(NORMAL)
            elif isinstance(self.outcome, _Fatal):
                fatal = self.outcome
                await self._send_error(fatal.status, fatal.message, fatal.code, fatal.param)
                await self._close(fatal.close, fatal.message)
        except _Gone:
            pass

    async def _guarded(self, work: Callable[[], Awaitable[None]]) -> None:
        """Run a task of the connection; its end by an error (or a normal end: None) closes it."""
        try:
            await work()
            return
        except (_Fatal, _Gone) as error:
            outcome: Optional[BaseException] = error
        except Exception as error:  # a fault of ours: the operator's log gets the traceback
            log.error("%s failed", PATH, exc_info=error)
            if isinstance(error, MemoryError):
                outcome = _Fatal(503, "the server ran out of memory for this stream", "out_of_memory", INTERNAL)
            else:
                outcome = _Fatal(500, f"internal error: {type(error).__name__}", "internal_error", INTERNAL)
        if self.outcome is None:
            self.outcome = outcome
        self.closing.set()

    def _finish(self) -> None:
        """The connection is done (after `end`, its `done` sent)."""
        self.closing.set()

    # Reading the client's frames

    async def _read(self) -> None:
        while True:
            try:
                frame = await self._next_frame()
            except _BadFrame as bad:
                if bad.kind == "start":  # the connection cannot speak as asked
                    raise _Fatal(400, bad.message, bad.code, param=bad.param) from None
                await self._send_error(400, bad.message, bad.code, bad.param)
                continue
            if self.slot is None:
                await self._open(frame if isinstance(frame, StreamStart) else StreamStart())
                if isinstance(frame, StreamStart):
                    continue
            await self._handle(frame)

    async def _next_frame(self) -> Any:
        """The client's next frame, parsed; an idle client (nothing being spoken) is closed."""
        while True:
            idle = self.unsent == 0 and not self.ending
            wait = max(0.0, self.quiet_since + self.timeout - time.monotonic()) if idle else self.timeout
            with anyio.move_on_after(wait):
                message = await self._receive()
                self.quiet_since = time.monotonic()
                return self._parse(message)
            if self.unsent == 0 and not self.ending and time.monotonic() >= self.quiet_since + self.timeout:
                raise _Fatal(408, f"no frame for {self.timeout:g} s while nothing was being spoken", "idle_timeout")

    async def _receive(self) -> dict:
        try:
            message = await self.socket.receive()
        except Exception:  # the connection is already gone
            raise _Gone() from None
        if message["type"] == "websocket.disconnect":
            raise _Gone()
        return message

    def _parse(self, message: dict) -> Any:
        text = message.get("text")
        if text is None:
            raise _BadFrame("send JSON text frames; binary frames are the server's audio", "binary_frame")
        if len(text) > MAX_FRAME // 4 and len(text.encode()) > MAX_FRAME:
            raise _Fatal(413, f"a frame may hold at most {MAX_FRAME} bytes", "frame_too_large", TOO_BIG)
        try:
            value = msgspec.json.decode(text)
        except msgspec.DecodeError as e:
            raise _BadFrame(f"malformed JSON: {e}", "invalid_json") from None
        kind = value.get("type") if isinstance(value, dict) else None
        if kind not in CLIENT_FRAMES:
            raise _BadFrame(
                f"a frame is a JSON object whose type is one of {', '.join(CLIENT_FRAMES)}", "unknown_type", "type"
            )
        try:
            return msgspec.convert(value, type=ClientFrame)
        except msgspec.ValidationError as e:
            found = re.search(r"`\$\.(\w+)|field `(\w+)`", str(e))
            param = next((name for name in found.groups() if name), None) if found else None
            raise _BadFrame(f"invalid {kind} frame: {e}", "invalid_value", param, kind) from None

    async def _open(self, start: StreamStart) -> None:
        """The connection's slot, voice and options (bad ones end it), then `started`."""
        try:
            self.slot = self.engine.admit()
        except Busy:
            message = "the server is busy: every generation slot is taken, retry shortly"
            raise _Fatal(503, message, "busy", TRY_LATER) from None
        self.start = start
        try:
            self.text = await anyio.to_thread.run_sync(self._text_stream)
        except VoiceError as e:
            raise _Fatal(400, str(e), "unknown_voice", param="voice") from None
        except PocketTTSError as e:
            raise _Fatal(400, str(e), "invalid_value") from None
        await self._send_json({"type": "started", "sample_rate": self.engine.sample_rate})
        self._begin_speech()

    def _text_stream(self) -> TextStream:
        """A text stream for what the connection may still make (blocking: the voice may need to be
        prepared). The first one draws the connection's noise generator; the ones after a cancel
        go on with it."""
        options = self.start.options()
        options.check_request()
        voice = self.engine.voice(self.start.voice)
        seconds = REQUEST_SECONDS - self.frames_made / self.engine.model.config.mimi.frame_rate
        if seconds <= 0:
            raise LimitError(f"this stream has made the {REQUEST_SECONDS:g} s of audio it may make")
        if self.rng is None:
            self.rng = np.random.default_rng(options.seed)
        return self.engine.model.text_stream(voice, options, rng=self.rng, max_seconds=seconds)

    async def _handle(self, frame: Any) -> None:
        if isinstance(frame, StreamStart):
            await self._send_error(400, "start must be the first frame", "unexpected_start", "type")
        elif self.ending and not isinstance(frame, StreamCancel):
            await self._send_error(400, "the text has ended: only cancel may follow end", "after_end", "type")
        elif isinstance(frame, StreamText):
            self.received += len(frame.text)
            if self.received > MAX_STREAM_TEXT:
                raise _Fatal(413, f"a stream may send at most {MAX_STREAM_TEXT} characters of text", "text_too_long")
            await self._speak(self.text.push, frame.text)
        elif isinstance(frame, StreamFlush):
            await self._speak(self.text.flush)
        elif isinstance(frame, StreamEnd):
            await self._speak(self.text.flush)
            self.ending = True
            self.speech.generations.put_nowait(None)
        elif isinstance(frame, StreamCancel):
            await self._cancel()

    async def _speak(self, make: Callable[..., List[Segment]], *args: Any) -> None:
        """Queue the segments a piece (or a flush) completes."""
        try:
            made = await anyio.to_thread.run_sync(make, *args)
        except LimitError as e:
            raise _Fatal(400, str(e), "audio_limit") from None
        except PocketTTSError as e:
            raise _Fatal(400, str(e), type(e).__name__, param="text") from None
        for segment in made:
            self.unsent += 1
            self.speech.generations.put_nowait(segment)

    async def _cancel(self) -> None:
        """Stop what is being said within a frame, drop the text buffered, answer `done`."""
        self.speech.stop()
        await self.speech.ended.wait()  # `done` after its last audio
        self.unsent = 0
        self.quiet_since = time.monotonic()
        await self._send_json({"type": "done", "samples": self.sent})
        if self.ending:
            self._finish()
            return
        self.text = await anyio.to_thread.run_sync(self._text_stream_after_cancel)
        self._begin_speech()

    def _text_stream_after_cancel(self) -> TextStream:
        try:
            return self._text_stream()
        except LimitError as e:
            raise _Fatal(400, str(e), "audio_limit") from None

    # Speaking: generations to the scheduler one after another, their audio to the client in order

    def _begin_speech(self) -> None:
        self.speech = _Speech()
        speech = self.speech

        async def run() -> None:
            try:
                with speech.scope:
                    async with anyio.create_task_group() as group:
                        group.start_soon(self._guarded, functools.partial(self._produce, speech))
                        group.start_soon(self._guarded, functools.partial(self._send_audio, speech))
            finally:
                speech.ended.set()

        self.group.start_soon(self._guarded, run)

    async def _produce(self, speech: _Speech) -> None:
        """Submit each segment once the one before has made all its frames."""
        while True:
            segment = await speech.generations.get()
            if segment is None:
                speech.relays.put_nowait(None)
                return
            relay = Relay(self.loop, self.engine.scheduler.wake)
            made = asyncio.Event()
            speech.submitted.append(relay)
            self.engine.scheduler.submit(segment.generation, relay, self._on_release(segment.generation, made))
            speech.relays.put_nowait((segment, relay))
            await made.wait()
            speech.submitted.remove(relay)

    def _on_release(self, generation: Generation, made: asyncio.Event) -> Callable[[], None]:
        """What the scheduler calls once it has dropped a generation (done, or abandoned): the
        connection's slot was held for it until then, and its frames count against the limit."""
        let_go = self.slot.hold()
        budget = generation.budget

        def released() -> None:
            let_go()

            def count() -> None:
                self.frames_made += budget - generation.budget
                made.set()

            try:
                self.loop.call_soon_threadsafe(count)
            except RuntimeError:  # the event loop is gone (the server is shutting down)
                pass

        return released

    async def _send_audio(self, speech: _Speech) -> None:
        while True:
            item = await speech.relays.get()
            if item is None:
                await self._send_json({"type": "done", "samples": self.sent})
                self._finish()
                return
            segment, relay = item
            said = False
            async for chunk in relay.items():
                if speech.stopped:
                    return
                if not chunk.shape[0]:  # a speed change holds back its first few ms
                    continue
                if not said:
                    segment_frame = {"type": "segment", "text": segment.text, "spoken": segment.spoken}
                    await self._send_json(dict(segment_frame, start_sample=self.sent))
                    said = True
                await self._send(bytes=pcm16(chunk))
                self.sent += chunk.shape[0]
            self.unsent -= 1
            if self.unsent == 0:
                self.quiet_since = time.monotonic()

    # Sending

    async def _send_json(self, payload: dict) -> None:
        await self._send(text=msgspec.json.encode(payload).decode())

    async def _send_error(self, status: int, message: str, code: str, param: Optional[str] = None) -> None:
        error = msgspec.structs.asdict(error_detail(status, message, param, code))
        await self._send_json({"type": "error", "error": dict(error, status=status)})

    async def _send(self, **data: Any) -> None:
        """One frame, taken by the client within the timeout, or the client is dropped."""
        try:
            with anyio.fail_after(self.timeout):
                await self.socket.send({"type": "websocket.send", **data})
        except Exception:  # not taken in time (TimeoutError), or the connection is gone
            raise _Gone() from None

    async def _close(self, code: int, reason: str = "") -> None:
        try:
            with anyio.fail_after(self.timeout):
                await self.socket.close(code, reason.encode()[:120].decode(errors="ignore"))  # a close's limit: 123
        except Exception:  # as in _send
            raise _Gone() from None
