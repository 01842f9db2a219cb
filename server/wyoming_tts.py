"""Home Assistant's Wyoming protocol (the `wyoming` package's events), one connection at a time, on
the engine every front shares: one model, one scheduler, so Wyoming's syntheses step together with
the HTTP routes' and the WebSocket's. The listener that accepts the connections, beside the HTTP
app or alone, is server/wyoming_server.py; the voices and the `info` answer,
server/wyoming_voices.py; discovery by multicast DNS, server/wyoming_discovery.py.

    describe                                   -> info: one TTS program, its voices, streaming
    synthesize {text, voice?, text_format?}    -> audio-start, audio-chunk (16-bit mono PCM, as each
                                                  frame is made), audio-stop
    synthesize-start {voice?, text_format?}, synthesize-chunk {text}*, synthesize-stop
                                               -> for each sentence as soon as it is complete:
                                                  audio-start, audio-chunk*, audio-stop; then
                                                  synthesize-stopped

A synthesis is a session of the engine (server/session.py): its slot, its audio and text limits
(the text counted as it arrives, SSML markup included, and read off the event loop), its segments
(core's segmenter, as the WebSocket's), the connection's idle and lifetime rules; a client that
goes away frees its slot at once. A connection takes its place in the process's one pool of
connections (server/pool.py) when it is accepted, and is refused then when there is none. The
protocol carries no credentials: on a server with an API key its callers are guests
(server/access.py). Every refusal is an `error` event (its text and code from the one
vocabulary, server/errors.py), never a silently closed connection, a fault of ours included; the
connection goes on after a refused synthesis or an event out of order (which leaves the
synthesis under way as it was), and is closed after one that ends it (idle, lifetime, an event
too large or malformed). Events out of order: a `synthesize-chunk` or `synthesize-stop` after
`synthesize-stop` (`after_end`), outside a stream, or a synthesis asked for while one is under
way (`unexpected_event`). A voice is asked for by name or by language (server/wyoming_voices.py).
`text_format: ssml` reads <break> as a pause and drops other tags (core.portable.text.ssml). While a
stream is under way, the `synthesize` event Home Assistant sends beside it (the whole text, for
servers without streaming) is not said again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Optional, Protocol

import anyio
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event, async_read_event, async_write_event
from wyoming.info import Describe
from wyoming.server import AsyncEventHandler
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    SynthesizeTextFormat,
    SynthesizeVoice,
)

from core.portable.audio.pcm import pcm16
from core.portable.synthesis.options import GenerationOptions
from server import errors
from server.access import Caller
from server.engine import ServerEngine
from server.errors import ServiceError
from server.session import Audio, Clock, Done, Said, Session, Started, whole_text
from server.wyoming_voices import Voices

log = logging.getLogger("pocket_tts.server")

# Bytes of an event's data or payload (a synthesize of MAX_TEXT characters fits many times).
MAX_EVENT = 64 * 1024
# How long a connection the server ends stays half-closed: the client reads the error that ends it
# to the end, and what it sends meanwhile is read and dropped, where closing at once would answer it
# with a reset that loses the error on the client's side.
LINGER = 1.0


class Listener(Protocol):
    """What a connection reads of the listener that accepted it (server/wyoming_server.py's
    WyomingServer): named here, so that the listener imports its handler and not the reverse."""

    engine: ServerEngine
    caller: Caller
    voices: Voices
    timeout: float
    options: GenerationOptions


class _Bounded:
    """A connection's reader whose events are at most MAX_EVENT bytes (the package reads whatever
    length an event's header claims): one larger is refused before it is read."""

    def __init__(self, reader: asyncio.StreamReader):
        self._reader = reader
        self.too_large = False

    async def readline(self) -> bytes:
        try:
            return await self._reader.readline()
        except ValueError:  # a line past the stream's limit (64 KiB)
            self.too_large = True
            raise

    async def readexactly(self, n: int) -> bytes:
        if n > MAX_EVENT:
            self.too_large = True
            raise ValueError(f"an event of {n} bytes")
        return await self._reader.readexactly(n)

    def at_eof(self) -> bool:
        return self._reader.at_eof()

    def feed_eof(self) -> None:
        self._reader.feed_eof()


class _Closed(Exception):
    """The connection is over: what made it so was said (or the client is gone)."""


class _OutOfOrder(Exception):
    """An event that cannot come now: its error, and the synthesis under way goes on."""

    def __init__(self, kind: errors.Kind, message: str):
        super().__init__(message)
        self.error = ServiceError(kind, message)


class Handler(AsyncEventHandler):
    """One connection: its events in order, at most one synthesis at a time."""

    def __init__(self, server: Listener, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        super().__init__(_Bounded(reader), writer)  # type: ignore[arg-type]
        self.server = server
        self.clock = Clock(server.timeout)
        self.session: Optional[Session] = None
        self.streaming = False
        self.sender: Optional[asyncio.Task] = None
        self.writing = asyncio.Lock()  # the sender's events and the handler's, one whole event at a time
        self.ended = False  # said the error that ends it: what comes now is dropped

    async def run(self) -> None:
        """Events until the client goes, or a refusal ends the connection (said first); the
        connection's idle and lifetime rules meanwhile. A connection with no place in the
        process's pool is refused at once."""
        place = self.server.engine.connections.enter(may_use_reserve=False)
        if place is None:
            await self._say_error(errors.too_many_connections())
            self.writer.close()
            return
        watch = asyncio.ensure_future(self._watch())
        try:
            while True:
                try:
                    event = await async_read_event(self.reader)  # type: ignore[arg-type]
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                except Exception:  # the package's reader on a header it cannot read (no type, wrong lengths)
                    raise ServiceError(errors.INVALID_JSON, "a malformed event") from None
                if event is None:
                    if self.reader.too_large:
                        raise ServiceError(errors.FRAME_TOO_LARGE, f"an event may hold at most {MAX_EVENT} bytes")
                    if not self.reader.at_eof():
                        raise ServiceError(errors.INVALID_JSON, "a malformed event: not JSON")
                    return
                if not self.ended:
                    await self.handle_event(event)
        except ServiceError as error:
            await self._say_error(error)
        except _Closed:
            pass
        finally:
            place.leave()
            watch.cancel()
            await self._end_synthesis()
            self.writer.close()

    async def handle_event(self, event: Event) -> bool:
        """One event. A refusal is an `error` event: one of order leaves the synthesis under way as
        it was, any other ends it; the connection goes on either way."""
        try:
            if Describe.is_type(event.type):
                await self._write((await self.server.voices.info(self.server.caller)).event())
            elif Synthesize.is_type(event.type):
                if not self.streaming:  # in a stream, the whole text again for servers without streaming
                    await self._synthesize(Synthesize.from_event(event))
            elif SynthesizeStart.is_type(event.type):
                await self._start_stream(SynthesizeStart.from_event(event))
            elif SynthesizeChunk.is_type(event.type):
                await self._stream_text(SynthesizeChunk.from_event(event).text)
            elif SynthesizeStop.is_type(event.type):
                await self._stop_stream()
        except _Closed:
            raise
        except _OutOfOrder as refusal:
            await self._say_error(refusal.error)
        except ServiceError as error:
            await self._end_synthesis()
            await self._say_error(error)
        except (KeyError, TypeError, AttributeError, ValueError):
            await self._end_synthesis()
            await self._say_error(ServiceError(errors.INVALID_REQUEST, f"a malformed {event.type} event"))
        except Exception as error:  # a fault of ours: the operator's log gets the traceback
            log.error("wyoming %s failed", event.type, exc_info=error)
            await self._end_synthesis()
            await self._say_error(errors.unexpected(error, event.type))
        return True

    # One synthesis: a whole text, or a stream

    async def _synthesize(self, request: Synthesize) -> None:
        self._refuse_a_second()
        text = whole_text(request.text)
        session = await self._open(request.voice, request.text_format)
        await session.say(text)
        await session.end()
        await self._write(self._audio_start())
        self.sender = asyncio.ensure_future(self._send(session, per_sentence=False))

    async def _start_stream(self, request: SynthesizeStart) -> None:
        self._refuse_a_second()
        await self._open(request.voice, request.text_format)
        self.streaming = True
        self.sender = asyncio.ensure_future(self._send(self.session, per_sentence=True))

    async def _stream_text(self, text: str) -> None:
        self._in_stream("synthesize-chunk")
        if not isinstance(text, str):
            raise ServiceError(errors.INVALID_VALUE, "a synthesize-chunk's text is a string", "text")
        await self.session.push(text)

    async def _stop_stream(self) -> None:
        self._in_stream("synthesize-stop")
        await self.session.end()

    def _refuse_a_second(self) -> None:
        if self.session is not None:
            raise _OutOfOrder(errors.UNEXPECTED_EVENT, "a synthesis is already under way on this connection")

    def _in_stream(self, kind: str) -> None:
        if not self.streaming or self.session is None:
            raise _OutOfOrder(errors.UNEXPECTED_EVENT, f"{kind} outside a stream (send synthesize-start)")
        if self.session.ending:
            raise _OutOfOrder(errors.AFTER_END, f"{kind} after synthesize-stop: the stream's text has ended")

    async def _open(self, voice: Optional[SynthesizeVoice], text_format: Any) -> Session:
        engine, caller = self.server.engine, self.server.caller
        key, model = self.server.voices.key(voice)
        ssml = text_format in (SynthesizeTextFormat.SSML, SynthesizeTextFormat.SSML.value)
        # Its slot first: a voice of the folder is cloned under it.
        self.session = await Session.open(engine, key, self.server.options, self.clock, None, caller, ssml, model=model)
        return self.session

    async def _send(self, session: Session, per_sentence: bool) -> None:
        """The synthesis's audio as it is made: one audio-start/stop around it all, or around each
        sentence (a stream), then synthesize-stopped (a stream)."""
        started = False
        try:
            async for event in session.events():
                if isinstance(event, Started) and per_sentence:
                    await self._write(self._audio_start())
                    started = True
                elif isinstance(event, Audio):
                    await self._write(AudioChunk(self._rate, 2, 1, pcm16(event.pcm)).event())
                elif isinstance(event, Said) and per_sentence and started:
                    await self._write(AudioStop().event())
                    started = False
                elif isinstance(event, Done):
                    await session.close_and_free()  # its slot is free before the client hears it is over
                    self._finished(session)
                    await self._write((SynthesizeStopped() if per_sentence else AudioStop()).event())
        except ServiceError as error:
            await self._say_error(error)
        except _Closed:
            return
        except Exception as error:  # a fault of ours: the operator's log gets the traceback
            log.error("wyoming synthesis failed", exc_info=error)
            await self._say_error(errors.unexpected(error, "synthesis"))
        finally:
            self._finished(session)

    def _finished(self, session: Session) -> None:
        session.close()
        if self.session is session:
            self.session, self.streaming = None, False

    async def _end_synthesis(self) -> None:
        """Stop the synthesis under way (a refusal, or the client gone): its slot is free before the
        client hears of the refusal."""
        sender, self.sender = self.sender, None
        if self.session is not None:
            session, self.session, self.streaming = self.session, None, False
            await session.close_and_free()
        if sender is not None and sender is not asyncio.current_task():
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)

    # Writing

    @property
    def _rate(self) -> int:
        return self.server.engine.sample_rate

    def _audio_start(self) -> Event:
        return AudioStart(rate=self._rate, width=2, channels=1).event()

    async def _say_error(self, error: ServiceError) -> None:
        try:
            await self._write(Error(text=error.message, code=error.code).event())
        except _Closed:
            pass

    async def _write(self, event: Event) -> None:
        """One event, taken by the client within the timeout, or the connection is dropped."""
        try:
            with anyio.fail_after(self.server.timeout):
                async with self.writing:
                    await async_write_event(event, self.writer)
        except Exception:  # not taken in time, or the connection is gone
            self.writer.transport.abort()
            raise _Closed() from None

    async def _watch(self) -> None:
        """The idle and lifetime rules: their refusal, then the end of the connection."""
        error = await self.clock.expired()
        await self._end_synthesis()
        await self._say_error(error)
        self.ended = True
        if self.writer.can_write_eof():
            self.writer.write_eof()
            await asyncio.sleep(LINGER)
        self.writer.close()
        self.reader.feed_eof()
