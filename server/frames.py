"""What every WebSocket front of the engine shares (server/websocket.py, server/livekit_ws.py): a
connection's tasks, its outcome and its close, reading a client's JSON frames within a size,
sending within the client timeout, and its turns: each speech sent to the client, from its start to
its end or its cut, with its sample counts at the client's rate."""

from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable, Optional, Sequence

import anyio
import msgspec
from litestar import WebSocket

from core import audio_formats
from server import errors, reading
from server.access import Caller
from server.engine import ServerEngine
from server.errors import NORMAL, ServiceError
from server.session import Audio, Clock, Done, Event, Session, WordEnd, WordStart

# Bytes of one client frame: a piece of text of MAX_TEXT characters, each escaped, fits.
MAX_FRAME = 64 * 1024
log = logging.getLogger("pocket_tts.server")


def word_event(event: WordStart | WordEnd, at: Callable[[int], int] = int) -> dict:
    """A word event as every wire sends it (the WebSocket, POST /stream/words, the page's workers;
    docs/word-timestamps.md): {type: "word", word, index, start_sample} where a word begins, before
    the audio that starts it, and {type: "word_end", word, index, start_sample, end_sample} where it
    ends. Sample offsets at the output rate, each through `at` (a turn's position in what the client
    received)."""
    if isinstance(event, WordStart):
        return {"type": "word", "word": event.word, "index": event.index, "start_sample": at(event.sample)}
    word = {"type": "word_end", "word": event.word, "index": event.index, "start_sample": at(event.start)}
    return dict(word, end_sample=at(event.end))


class Gone(Exception):
    """The client went away, or stopped taking what is sent: nothing more is sent."""


class Fatal(Exception):
    """A refusal that ends the connection: its error frame, then the close."""

    def __init__(self, error: ServiceError):
        super().__init__(error.message)
        self.error = error


class BadFrame(Exception):
    """A frame that cannot be taken: the connection goes on, unless it was to be the start."""

    def __init__(self, error: ServiceError, kind: Optional[str] = None):
        super().__init__(error.message)
        self.error, self.kind = error, kind


class Turn:
    """A speech on its way to the client, from its start to its end (its `Done`, or a cut): its
    session, its audio out (the client's format and rate) and the samples of the connection's audio
    sent so far, at that rate. The connection's reader and the task that sends it each hold the
    turn: neither takes it from the other (FrameSocket._stop ends it, in one place)."""

    def __init__(self, session: Session, output: audio_formats.Output, sent: int = 0):
        self.session = session
        self.output = output
        self.sent = sent
        self.done = False  # all was said (its `Done` came): what is left is its end, sent whatever comes
        self.sender = anyio.CancelScope()  # the task that sends it
        self.ended = anyio.Event()  # that task's end
        self._origin = (sent, session.sent)  # where its audio begins: in the client's samples, in the session's

    def at(self, sample: int) -> int:
        """A sample of the session's audio, as a position in the audio the client receives: what
        was sent before this turn (a cut turn's audio as far as it was sent, what its resampler
        held never counted), then this turn's audio at the client's rate."""
        sent, said = self._origin
        return sent + self.output.samples(sample - said)


class FrameSocket:
    """What every WebSocket front of the engine shares: the connection's tasks (the reader, the
    idle and lifetime clock, the sender of the speech), its outcome (a normal end; a refusal: its
    error, then a close with its kind's code; the client gone) and sending within the client
    timeout; the turn under way (`turn`), sent by a task of its own (`_begin`) and ended (`_stop`).
    A front says how it reads (`_read`), sends a turn's audio (`_send_audio`), its other events
    (`_send_event`) and its end (`_send_end`), and writes an error (`_send_error`)."""

    path = ""  # the front's route, in the log

    def __init__(self, socket: WebSocket, engine: ServerEngine, caller: Caller, timeout: float):
        self.socket = socket
        self.engine = engine
        self.caller = caller
        self.timeout = timeout
        self.clock = Clock(timeout)
        self.turn: Optional[Turn] = None  # set by the reader alone
        self.closing = anyio.Event()
        self.outcome: Optional[BaseException] = None
        self.group: Any = None

    async def serve(self) -> None:
        """The connection, served until it ends."""
        await self.socket.accept()
        try:
            try:
                async with anyio.create_task_group() as group:
                    self.group = group
                    group.start_soon(self._guarded, self._read)
                    group.start_soon(self._guarded, self._expire)
                    await self.closing.wait()
                    group.cancel_scope.cancel()
            finally:
                if self.turn is not None:  # its slot is free before the client hears the end
                    await self.turn.session.close_and_free()
            if self.outcome is None:
                await self._close(NORMAL)
            elif isinstance(self.outcome, Fatal):
                error = self.outcome.error
                await self._send_error(error)
                await self._close(error.kind.close, error.message)
        except Gone:
            pass

    async def _guarded(self, work: Callable[[], Awaitable[None]]) -> None:
        """Run a task of the connection; its end by an error (or a normal end: None) closes it."""
        try:
            await work()
            return
        except (Fatal, Gone) as error:
            outcome: Optional[BaseException] = error
        except ServiceError as error:
            outcome = Fatal(error)
        except Exception as error:  # a fault of ours: the operator's log gets the traceback
            log.error("%s failed", self.path, exc_info=error)
            outcome = Fatal(errors.unexpected(error, "stream"))
        if self.outcome is None:
            self.outcome = outcome
        self.closing.set()

    async def _expire(self) -> None:
        raise Fatal(await self.clock.expired())

    async def _read(self) -> None:
        raise NotImplementedError

    async def _send_audio(self, turn: Turn, data: bytes) -> None:
        raise NotImplementedError

    async def _send_event(self, turn: Turn, event: Event) -> None:
        """An event of the speech other than its audio and its end (none is sent unless a front says)."""

    async def _send_end(self, turn: Turn) -> None:
        raise NotImplementedError

    async def _send_error(self, error: ServiceError) -> None:
        raise NotImplementedError

    async def _receive(self) -> dict:
        try:
            message = await self.socket.receive()
        except Exception:  # the connection is already gone
            raise Gone() from None
        if message["type"] == "websocket.disconnect":
            raise Gone()
        return message

    def _frame(self, message: dict, kinds: Sequence[str], schema: Any) -> Any:
        """A client frame: a JSON text frame of at most MAX_FRAME bytes (a Fatal for one larger),
        an object whose `type` is one of `kinds`, decoded strictly as `schema`; a BadFrame (with
        its kind, where it has one) for anything else."""
        text = message.get("text")
        if text is None:
            error = ServiceError(errors.BINARY_FRAME, "send JSON text frames; binary frames are the server's audio")
            raise BadFrame(error)
        if len(text) > MAX_FRAME // 4 and len(text.encode()) > MAX_FRAME:
            raise Fatal(ServiceError(errors.FRAME_TOO_LARGE, f"a frame may hold at most {MAX_FRAME} bytes"))
        try:
            value = msgspec.json.decode(text)
        except msgspec.DecodeError as e:
            raise BadFrame(ServiceError(errors.INVALID_JSON, f"malformed JSON: {e}")) from None
        except RecursionError:
            raise BadFrame(ServiceError(errors.INVALID_JSON, "malformed JSON: nested too deeply")) from None
        kind = value.get("type") if isinstance(value, dict) else None
        if kind not in kinds:
            message_text = f"a frame is a JSON object whose type is one of {', '.join(kinds)}"
            raise BadFrame(ServiceError(errors.UNKNOWN_TYPE, message_text, "type"))
        try:
            return reading.decode(text, schema, f"{kind} frame")
        except ServiceError as e:
            raise BadFrame(e, kind) from None

    def _begin(self, turn: Turn) -> None:
        """`turn` sent by a task of its own, until its end or its cut."""

        async def send() -> None:
            try:
                with turn.sender:
                    await self._send_turn(turn)
            finally:
                turn.ended.set()

        self.group.start_soon(self._guarded, send)

    async def _send_turn(self, turn: Turn) -> None:
        async for event in turn.session.events():
            if isinstance(event, Audio):
                await self._send_samples(turn, turn.output.chunk(event.pcm))
            elif isinstance(event, Done):
                turn.done = True
                await self._send_samples(turn, turn.output.end())
                await turn.session.close_and_free()  # its slot is free before the client hears it is over
                await self._send_end(turn)
            else:
                await self._send_event(turn, event)

    async def _send_samples(self, turn: Turn, data: bytes) -> None:
        if data:
            # Counted as it is handed to the socket, which writes it at once (what may wait after
            # is a full socket's drain): a cut during that wait does not take it back.
            turn.sent += turn.output.samples_in(data)
            await self._send_audio(turn, data)

    async def _stop(self, turn: Turn) -> bool:
        """`turn` over: cut (its speech stops within a frame, its sender at once: nothing more of
        it is sent), unless all of it was said, whose end (what the resampler held, the front's
        last frame) is sent first. Returns whether it was cut."""
        cut = not turn.done
        if cut:
            turn.session.cancel()
            turn.sender.cancel()
        await turn.ended.wait()
        return cut

    async def _send_json(self, payload: dict) -> None:
        await self._send(text=msgspec.json.encode(payload).decode())

    async def _send(self, **data: Any) -> None:
        """One frame, taken by the client within the timeout, or the client is dropped."""
        try:
            with anyio.fail_after(self.timeout):
                await self.socket.send({"type": "websocket.send", **data})
        except Exception:  # not taken in time (TimeoutError), or the connection is gone
            raise Gone() from None

    async def _close(self, code: int, reason: str = "") -> None:
        try:
            with anyio.fail_after(self.timeout):
                await self.socket.close(code, reason.encode()[:120].decode(errors="ignore"))  # a close's limit: 123
        except Exception:  # as in _send
            raise Gone() from None
