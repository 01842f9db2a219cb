"""Continuous batching: every running generation advances together, frame by frame.

A session's speech is a `Stream`: its generations said one after another (a request: one; a text
stream: one per segment, added as its text completes them), all handed to one Relay. Two threads,
as the two halves of a frame: the flow thread steps the current generation of every stream at once
(core.portable.synthesis.generation.advance: one pass through the flow LM for all of them, so its weights are
read once per step, not once per stream), and the decoder thread turns each step's frames into
audio in one pass through Mimi's decoder (core.portable.synthesis.decoding.decode_together). The decoder is
the larger half (english: ~10 ms a stream, the flow LM's step ~15 ms for all), so from SPLIT_AT
streams a step's decoding is split in two, the second half on a third thread: the decoder then uses
the time the flow thread leaves on both cores. A generation's END frame comes through the decoder
like any other (its audio is what the speed change held back), then a `Said` note (the words a
frame times, `Words`, come before its audio); a stream's next
generation starts at the step after its END. Streams join and leave between steps; a newcomer reads
its text a slice at a time while others are running (PROMPT_ROWS rows a step), so that a long text
does not hold up their frames; alone, it reads it at once. The core stays single-threaded; NumPy
releases the GIL inside its products, so the two threads use two cores. Streams of several models
(server/served_models.py) run side by side: a step advances each model's generations together,
and decodes together the frames of models that share one Mimi codec.

A stream whose relay is full (its client reads slower than it is made, or not at all) is not
stepped until the client catches up: the others go on. A stream whose relay is abandoned is dropped
at the next step, whatever it was doing (waiting for text included). Admission is the caller's
(server/slots.py): `open` takes a function to call once the scheduler has let go of the stream.
"""

from __future__ import annotations

import collections
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Deque, Dict, List, NamedTuple, Optional, Tuple

import numpy as np

from core.portable.synthesis.decoding import FrameDecoder, decode_together
from core.portable.synthesis.generation import Frame, Generation, advance
from core.portable.synthesis.timestamps import WordEvent
from server import errors
from server.relay import Relay

# Rows of a newcomer's text read per step while other streams run. Measured on english with 4
# streams running and a 41-token newcomer (their frames ~45 ms apart): read at once, the newcomer's
# first byte came after 228 ms and the others' longest gap was 133 ms; 32 rows a step: 310 / 99 ms;
# 16: 374 / 100 ms; 8: 410 / 67 ms.
PROMPT_ROWS = 32
# Steps the flow thread may run ahead of the decoder: enough to keep both busy, and no more (a
# newcomer's first frame waits behind them).
AHEAD = 1
# Streams from which a step's decoding is split over two threads (below, one pass is cheaper).
SPLIT_AT = 4


class Audio(NamedTuple):
    """A chunk of a generation's audio (never empty); `tag`: what the generation was added with."""

    tag: Any
    pcm: np.ndarray


class Words(NamedTuple):
    """The word events a frame of a generation made (core.portable.synthesis.timestamps), in samples of the
    generation's audio; handed on before the frame's audio."""

    tag: Any
    events: List[WordEvent]


class Said(NamedTuple):
    """A generation's end, after its last audio; `cut`: its session's budget ran out first."""

    tag: Any
    cut: bool


class _Made(NamedTuple):
    """A frame of a step, with what it needs on the decoder thread."""

    stream: Stream
    generation: Generation
    decoder: FrameDecoder
    tag: Any
    frame: Frame


class Stream:
    """One session's speech: generations said one after another into one relay. `add` and `end`
    may be called from any thread; the rest is the scheduler's."""

    def __init__(self, scheduler: Scheduler, relay: Relay, release: Callable[[], None]):
        self._scheduler = scheduler
        self.relay = relay
        self.release = release
        self._queue: Deque[Tuple[Generation, Any]] = collections.deque()
        self._ended = False
        # The generation being said (the flow thread's): its tag and its decoder.
        self.generation: Optional[Generation] = None
        self.tag: Any = None
        self.decoder: Optional[FrameDecoder] = None

    def add(self, generation: Generation, tag: Any = None) -> None:
        """Say `generation` after those added before it; its audio comes tagged with `tag`."""
        with self._scheduler.lock:
            self._queue.append((generation, tag))
            self._scheduler.lock.notify()

    def end(self) -> None:
        """No more generations: once the last is said, the relay closes and the stream is let go."""
        with self._scheduler.lock:
            self._ended = True
            self._scheduler.lock.notify()

    # The flow thread's, under the scheduler's lock

    def _move_on(self) -> None:
        """Take the next generation once the current one has given its END."""
        if (self.generation is None or self.generation.finished) and self._queue:
            self.generation, self.tag = self._queue.popleft()
            self.decoder = self.generation.model.decoder(self.generation.speed, self.generation.gain_db)
        elif self.generation is not None and self.generation.finished:
            self.generation = None

    @property
    def _saying(self) -> bool:
        return self.generation is not None and not self.generation.finished

    @property
    def _said_all(self) -> bool:
        return self._ended and not self._saying and not self._queue

    @property
    def _movable(self) -> bool:
        """Whether a step would do something for it: make a frame, drop it (its client left), or end it."""
        if self.relay.abandoned.is_set() or self._said_all:
            return True
        return (self._saying or bool(self._queue)) and not self.relay.full


class Scheduler:
    def __init__(self) -> None:
        self.lock = threading.Condition()
        self._joining: List[Stream] = []
        self._steps: queue.Queue[Optional[Tuple[List[_Made], List[Stream]]]] = queue.Queue(AHEAD)
        self._stopping = False
        self._threads = [
            threading.Thread(target=self._flow, name="pocket-tts-flow-lm", daemon=True),
            threading.Thread(target=self._decode, name="pocket-tts-decoder", daemon=True),
        ]
        self._second_decoder = ThreadPoolExecutor(1, thread_name_prefix="pocket-tts-decoder-2")
        for thread in self._threads:
            thread.start()

    @property
    def running(self) -> bool:
        """Whether both threads are alive (a health check: a thread that died cannot step again)."""
        return not self._stopping and all(thread.is_alive() for thread in self._threads)

    def open(self, relay: Relay, release: Callable[[], None] = lambda: None) -> Stream:
        """A new stream handing its audio to `relay` (whose consumer must `wake` this scheduler as it
        takes it); `release` is called once the scheduler has dropped the stream."""
        stream = Stream(self, relay, release)
        with self.lock:
            if self._stopping:
                relay.fail(errors.shutting_down())
                release()
                return stream
            self._joining.append(stream)
            self.lock.notify()
        return stream

    def submit(self, generation: Generation, relay: Relay, release: Callable[[], None] = lambda: None) -> Stream:
        """A stream of one generation (a request)."""
        stream = self.open(relay, release)
        stream.add(generation)
        stream.end()
        return stream

    def wake(self) -> None:
        """A consumer took a chunk or left: a stream that waited for it may move again."""
        with self.lock:
            self.lock.notify()

    def close(self) -> None:
        """Stop both threads (the streams still running, and any opened after, get `shutting_down`)."""
        with self.lock:
            self._stopping = True
            self.lock.notify()
        for thread in self._threads:
            thread.join()
        self._second_decoder.shutdown()

    def _flow(self) -> None:
        running: List[Stream] = []
        while True:
            with self.lock:
                while not self._stopping and not self._joining and not any(s._movable for s in running):
                    self.lock.wait()
                if self._stopping:
                    break
                running += self._joining
                self._joining = []
                for stream in running:
                    stream._move_on()
                leaving = [s for s in running if s.relay.abandoned.is_set() or s._said_all]
            running = [s for s in running if s not in leaving]
            stepping = [s for s in running if s._saying and not s.relay.full]
            # Alone, a newcomer reads its text at once; beside others, a slice a step.
            prompt_rows = PROMPT_ROWS if len(stepping) > 1 else None
            try:
                frames = _advanced([s.generation for s in stepping], prompt_rows)
            except Exception as error:  # a fault in the model code: every stream of the step gets it
                for stream in stepping:
                    stream.relay.fail(error)
                self._steps.put(([], stepping + leaving))
                running = [s for s in running if s not in stepping]
                continue
            made = [_Made(s, s.generation, s.decoder, s.tag, f) for s, f in zip(stepping, frames) if f is not None]
            for item in made:
                item.stream.relay.reserve()
            if made or leaving:  # a step of newcomers reading their text, or of streams waiting for text, makes nothing
                self._steps.put((made, leaving))
        self._steps.put(None)
        for stream in running + self._joining:
            stream.relay.fail(errors.shutting_down())
            stream.release()

    def _decode(self) -> None:
        while True:
            step = self._steps.get()
            if step is None:
                return
            made, leaving = step
            made = [item for item in made if not item.stream.relay.abandoned.is_set()]
            # A chunk's first frame (a newcomer's first audio) is decoded and handed on before the
            # step's other frames, whose listeners have audio in hand. english int8, this 2-core
            # machine, a newcomer's first byte while N streams run: N = 8, 171 ms (227 in one pass
            # with theirs), N = 12, 170 (308). Each first frame in a pass of its own measured no
            # better for streams started together (8: median 225 ms against 266-290, 12: 316
            # against 233-354: within the machine's noise).
            firsts = [item for item in made if item.frame.first]
            for group in (firsts, [item for item in made if not item.frame.first]):
                if group:
                    self._hand_on(group)
            for stream in leaving:  # let go first: its consumer, told it is over, may take the slot again
                stream.release()
                stream.relay.close()

    def _hand_on(self, made: List[_Made]) -> None:
        """Decode `made` (frames of different streams) and hand each its audio and notes: the frames
        of models that share a Mimi codec in one pass."""
        codecs: Dict[int, List[_Made]] = {}
        for item in made:
            codecs.setdefault(id(item.decoder.model.params["mimi"]), []).append(item)
        for group in codecs.values():
            self._hand_on_decoded(group)

    def _hand_on_decoded(self, made: List[_Made]) -> None:
        try:
            pcm = self._decode_step([item.decoder for item in made], [item.frame for item in made])
        except Exception as error:
            for item in made:
                item.stream.relay.fail(error)
                item.generation.stop()
            return
        for item, chunk in zip(made, pcm):
            events = item.decoder.take_words()
            if events:  # counted for nothing: a frame makes a few at most
                item.stream.relay.note(Words(item.tag, events))
            if chunk is None:
                item.stream.relay.skip()
            else:
                item.stream.relay.put(Audio(item.tag, chunk))
            if item.frame.end:
                item.stream.relay.note(Said(item.tag, item.generation.cut))

    def _decode_step(self, decoders: List[FrameDecoder], frames: List[Frame]) -> List[Optional[np.ndarray]]:
        """decode_together, in two halves on two threads from SPLIT_AT streams (streams share no state)."""
        if len(frames) < SPLIT_AT:
            return decode_together(decoders, frames)
        half = len(frames) // 2
        second = self._second_decoder.submit(decode_together, decoders[half:], frames[half:])
        try:
            first = decode_together(decoders[:half], frames[:half])
        finally:
            rest = second.result()
        return first + rest


def _advanced(generations: List[Generation], prompt_rows: Optional[int]) -> List[Optional[Frame]]:
    """One step of every generation (core.portable.synthesis.generation.advance), each model's
    generations stepped together."""
    frames: List[Optional[Frame]] = [None] * len(generations)
    models: Dict[int, List[int]] = {}
    for i, generation in enumerate(generations):
        models.setdefault(id(generation.model), []).append(i)
    for indexes in models.values():
        made = advance(generations[indexes[0]].model, [generations[i] for i in indexes], prompt_rows)
        for i, frame in zip(indexes, made):
            frames[i] = frame
    return frames
