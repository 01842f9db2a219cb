"""A session of the engine: the one thing every front drives (the HTTP routes, the WebSocket, the
Wyoming server), so that none keeps its own copy of the rules.

A session holds one of the engine's slots from `open` to `close`, one voice and one set of options,
one noise generator and one audio budget (core.portable.synthesis.budget: REQUEST_SECONDS of audio after the
speed change, for everything it says), and one speech at a time: its generations, said one after
another by the scheduler into one relay. It says a whole text (`say`: a request, chunked as the
official package chunks it) or text that arrives in pieces (`push`, `flush`: a segment as soon as
each is complete, core.portable.synthesis.text_stream); `end` says there is no more; `cancel` stops the
speech within a frame, drops the text buffered, and starts a new speech for what comes next.
`events()` gives out the speech: each segment's start (`Segment`) before its first audio, its audio
(`Audio`, never empty), its end (`Said`), then `Done` once the text has ended and all is said; a
session whose words are timed (`words`) gives out each word's events too (core.portable.synthesis.timestamps
WordStart, WordEnd, in samples of the session's audio), a word's start before the audio it starts.

Who opens it (its `caller`: server/access.py) decides which voices it may use and which slots it
may take. Its text is what the front received, SSML markup included (`ssml`): the session counts
it before anything reads it, and reads it (markup, segments, normalization) off the event loop.

Its limits, whoever drives it: MAX_TEXT characters a `say`, MAX_STREAM_TEXT characters pushed in
all (both counted as received, markup included), the budget (a text stream whose budget runs out
while it still has something to say ends with `audio_limit`; more text after it is refused the
same way); every refusal is a ServiceError of the one vocabulary (server/errors.py). A front that
holds a connection open (the WebSocket, Wyoming) also keeps a `Clock`: a connection that speaks
nothing for `idle` seconds, whatever else it sends, or that is open for LIFETIME seconds, is closed.
"""

from __future__ import annotations

import asyncio
import functools
import math
import time
from typing import Any, AsyncIterator, Callable, List, Mapping, NamedTuple, Optional, Protocol, Union

import anyio
import numpy as np

from core import PocketTTSError, TextError
from core.portable.synthesis.options import MAX_TEXT, REQUEST_SECONDS, GenerationOptions
from core.portable.synthesis.text_stream import Segment, TextStream
from core.portable.synthesis.timestamps import WordEnd, WordStart, shifted
from core.portable.text.prepare import check_text
from server import errors
from server.access import KEY_HOLDER, Caller
from server.errors import ServiceError
from server.relay import Relay
from server.scheduler import Audio, Said, Stream, Words
from server.slots import Slot

MAX_STREAM_TEXT = 2 * MAX_TEXT  # characters a text stream may push in all: about REQUEST_SECONDS of speech
LIFETIME = 3 * REQUEST_SECONDS  # seconds a connection may stay open, whatever it does
# Seconds a closed session's slot may take to be free: the scheduler lets go of it within a step.
FREE_SECONDS = 5.0


class WholeText(NamedTuple):
    """A whole text a session says (a request's, a Wyoming synthesize's, an MCP call's), as
    received, checked: only `whole_text` makes one. `field`: what the front calls it, in errors."""

    text: str
    field: str


def whole_text(text: object, field: str = "text", empty: Optional[str] = None) -> WholeText:
    """The one check of a whole text, before any work (the session's slot, its voice): something
    to speak (core.portable.text.prepare.check_text; `empty_text` about `field`, in `empty`'s words
    where the API a front mirrors has its own), at most MAX_TEXT characters as received, markup
    included (`text_too_long`)."""
    try:
        checked = check_text(text)
    except TextError as e:
        raise ServiceError(errors.EMPTY_TEXT, empty or str(e), field) from None
    if len(checked) > MAX_TEXT:
        raise ServiceError(errors.TEXT_TOO_LONG, f"{field} is longer than {MAX_TEXT} characters", field)
    return WholeText(checked, field)


class Started(NamedTuple):
    """A segment begins: its text as received, as the model reads it, and the samples before it."""

    text: str
    spoken: str
    start_sample: int


class Done(NamedTuple):
    """All is said (after `end`); `samples`: all the samples the session gave out."""

    samples: int


# What a session gives out: Audio and Said are the scheduler's own items, passed on as they come.
Event = Union[Started, Audio, Said, Done, WordStart, WordEnd]


class Clock:
    """The idle and lifetime rules of a connection: only speech keeps it open. It is idle while
    nothing is being said (from its opening, and from the end of each speech); text that completes
    no segment, flushes of nothing, malformed or refused frames do not count. `expired()` waits for
    the moment it must close and returns the refusal to close it with."""

    def __init__(self, idle: float, lifetime: Optional[float] = None):
        self.idle = idle
        self.lifetime = LIFETIME if lifetime is None else lifetime
        self.opened = self.quiet_since = time.monotonic()
        self._speaking = 0
        self._changed = asyncio.Event()

    @property
    def speaking(self) -> bool:
        return self._speaking > 0

    def started(self, segments: int) -> None:
        """`segments` more are on their way to the client."""
        if segments:
            self._speaking += segments
            self._changed.set()

    def ended(self, segments: int = 1) -> None:
        """`segments` were said (or dropped)."""
        self._speaking = max(0, self._speaking - segments)
        if not self._speaking:
            self.quiet_since = time.monotonic()
        self._changed.set()

    def _deadline(self) -> float:
        idle = math.inf if self.speaking else self.quiet_since + self.idle
        return min(idle, self.opened + self.lifetime)

    async def expired(self) -> ServiceError:
        while True:
            wait = self._deadline() - time.monotonic()
            if wait <= 0:
                break
            self._changed.clear()
            with anyio.move_on_after(wait):
                await self._changed.wait()
        if time.monotonic() >= self.opened + self.lifetime:
            return ServiceError(errors.SESSION_EXPIRED, f"a connection may stay open at most {self.lifetime:g} s")
        return ServiceError(errors.IDLE_TIMEOUT, f"nothing was said for {self.idle:g} s")


class Engine(Protocol):
    """What a session uses of its engine (server.engine.ServerEngine is one): a slot for its
    caller, its text prepared, a scheduler stream for its speech, and the wake-up of that stream."""

    @property
    def sample_rate(self) -> int: ...

    def admit(self, caller: Caller) -> Slot: ...

    def pick_model(self, selector: Optional[str]) -> str: ...

    def text_stream(
        self,
        voice: Optional[str],
        options: GenerationOptions,
        seconds: float,
        caller: Caller,
        ssml: bool,
        words: bool,
        model: Optional[str],
        pronunciations: Optional[Mapping[str, str]],
    ) -> TextStream: ...

    def open_stream(self, relay: Relay, release: Callable[[], None]) -> Stream: ...

    def wake(self) -> None: ...


class _Speech:
    """What the session says until it is cancelled: a scheduler stream and the relay it fills."""

    def __init__(self, engine: Engine, hold: Callable[[], None]):
        self.relay = Relay(asyncio.get_running_loop(), engine.wake)
        self.stream = engine.open_stream(self.relay, hold)
        self.ending = False


class Session:
    def __init__(self, engine: Engine, slot: Slot, text: TextStream, clock: Optional[Clock]):
        self.engine = engine
        self.slot = slot
        self.clock = clock
        self._text = text
        self._received = 0  # characters pushed
        self._unsaid = 0  # segments given to the speech and not yet said
        self.sent = 0  # samples given out
        self.closed = False
        self._speech = _Speech(engine, slot.hold())

    @classmethod
    async def open(
        cls,
        engine: Engine,
        voice: Optional[str],
        options: GenerationOptions,
        clock: Optional[Clock] = None,
        slot: Optional[Slot] = None,
        caller: Caller = KEY_HOLDER,
        ssml: bool = False,
        words: bool = False,
        model: Optional[str] = None,
        pronunciations: Optional[Mapping[str, str]] = None,
    ) -> Session:
        """A session of `engine` (server.engine.ServerEngine) for `caller`, with `voice` and
        `options` (checked against the ranges a request may ask for), its text SSML if `ssml`, its
        words timed if `words`: its slot first (`busy` when there is none for `caller`; or `slot`,
        taken already: it is the session's now), then its voice (one `caller` may use, prepared off
        the event loop: it may need a download or a clone). `model`: the served model (a name or
        a language; None: the server's default), loaded off the event loop if it is not;
        `pronunciations`: the request's words to say otherwise (checked off the event loop)."""
        try:
            options.check_request()
            engine.pick_model(model)
        except (PocketTTSError, ServiceError) as e:
            if slot is not None:
                slot.release()
            raise (e if isinstance(e, ServiceError) else errors.from_core(e)) from None
        slot = slot if slot is not None else engine.admit(caller)
        try:
            prepare = functools.partial(
                engine.text_stream, voice, options, REQUEST_SECONDS, caller, ssml, words, model, pronunciations
            )
            text = await anyio.to_thread.run_sync(prepare)
            return cls(engine, slot, text, clock)
        except PocketTTSError as e:
            slot.release()
            raise errors.from_core(e) from None
        except BaseException:
            slot.release()
            raise

    @property
    def sample_rate(self) -> int:
        return self.engine.sample_rate

    @property
    def loudness(self) -> Optional[float]:
        """The LUFS its audio is brought to (the request's, else the server's --loudness), None:
        the model's own level. A whole file levels itself to it again by its own measure."""
        return self._text.options.loudness

    # Text in

    async def say(self, text: WholeText) -> None:
        """A whole text (checked by `whole_text`), as one generation (chunked as the official
        package chunks it)."""
        self._add([await self._off_loop(self._text.say, text.text, field=text.field)])

    async def push(self, piece: str) -> int:
        """A piece of text as received (any split); the segments it completes are said. Returns
        their count."""
        self._received += len(_text_of(piece, "text"))
        if self._received > MAX_STREAM_TEXT:
            raise ServiceError(
                errors.TEXT_TOO_LONG, f"a stream may send at most {MAX_STREAM_TEXT} characters of text", "text"
            )
        return self._add(await self._off_loop(self._text.push, piece))

    async def flush(self) -> int:
        """Say what is buffered now, complete or not. Returns the segments it made."""
        return self._add(await self._off_loop(self._text.flush))

    async def end(self) -> None:
        """No more text: the rest is said, then `Done`."""
        self._add(await self._off_loop(self._text.end))
        self._speech.ending = True
        self._speech.stream.end()

    @property
    def ending(self) -> bool:
        return self._speech.ending

    def cancel(self) -> None:
        """Stop what is being said (within a frame: its generations make nothing more, its audio not
        yet taken is dropped), drop the text buffered; what comes next is a new speech. What the
        stopped generations did not make stays in the budget."""
        if self.closed:
            return
        self._text.cancel()
        self._speech.relay.abandon()
        if self.clock is not None:
            self.clock.ended(self._unsaid)
        self._unsaid = 0
        self._speech = _Speech(self.engine, self.slot.hold())

    def close(self) -> None:
        """The session is over (any number of calls): its speech stops, its slot is free once the
        scheduler has let go of it."""
        if self.closed:
            return
        self.closed = True
        self._text.cancel()
        self._speech.relay.abandon()
        if self.clock is not None:  # what it did not say is not being said: the connection is idle again
            self.clock.ended(self._unsaid)
        self.slot.release()

    async def close_and_free(self) -> None:
        """`close`, then wait (off the event loop, at most FREE_SECONDS) until the scheduler has let
        go of the slot: a connection's next session, asked for at once, then finds it free."""
        self.close()
        await anyio.to_thread.run_sync(self.slot.freed.wait, FREE_SECONDS)

    # Speech out

    async def events(self) -> AsyncIterator[Event]:
        """The speech's events, as the scheduler makes them, until `Done` (after `end`) or until the
        speech is cancelled (no `Done` then)."""
        speech, current, start = self._speech, None, 0
        async for item in speech.relay.items():
            if isinstance(item, Said):
                self._unsaid -= 1
                if self.clock is not None:
                    self.clock.ended()
                if item.cut and self._unsaid > 0:  # the rest of the text cannot be said
                    _as_ours(self._text.budget.refuse_more)
                yield item
                continue
            if item.tag is not current:
                current, start = item.tag, self.sent
                yield Started(current.text, current.spoken, start)
            if isinstance(item, Words):
                for event in item.events:
                    yield shifted(event, start)
                continue
            yield item
            self.sent += item.pcm.shape[0]  # once the front has taken it (not when a cancel cut it off)
        if speech.relay.closed:
            yield Done(self.sent)

    async def audio(self) -> AsyncIterator[np.ndarray]:
        """The speech's audio alone (a request's body)."""
        async for event in self.events():
            if isinstance(event, Audio):
                yield event.pcm

    # Inside

    def _add(self, segments: List[Segment]) -> int:
        for segment in segments:
            self._speech.stream.add(segment.generation, segment)
        self._unsaid += len(segments)
        if self.clock is not None:
            self.clock.started(len(segments))
        return len(segments)

    async def _off_loop(self, work: Any, *args: Any, field: str = "text") -> Any:
        """Text work (normalizing, tokenizing) in a worker thread."""
        return await anyio.to_thread.run_sync(functools.partial(_as_ours, work, *args, field=field))


def _text_of(text: object, field: str) -> str:
    if not isinstance(text, str):
        raise ServiceError(errors.INVALID_VALUE, f"{field} must be a string, not {type(text).__name__}", field)
    return text


def _as_ours(work: Any, *args: Any, field: str = "text") -> Any:
    """work(*args), the core's refusals as ours (`field`: what the front calls its text)."""
    try:
        return work(*args)
    except PocketTTSError as e:
        raise errors.from_core(e, field) from None
