"""Continuous batching: every running generation advances together, frame by frame.

Two threads, as the two halves of a frame: the flow thread steps all running generations at once
(core.portable.generation.advance: one pass through the flow LM for all of them, so its weights are read
once per step, not once per stream), and the decoder thread turns each step's frames into audio in
one pass through Mimi's decoder (core.portable.model.decode_together). The decoder is the larger half
(english: ~10 ms a stream, the flow LM's step ~15 ms for all), so from SPLIT_AT streams a step's
decoding is split in two, the second half on a third thread: the decoder then uses the time the
flow thread leaves on both cores. Streams join and leave between steps;
a newcomer reads its text a slice at a time while others are running (PROMPT_ROWS rows a step), so
that a long text does not hold up their frames; alone, it reads it at once. The core stays
single-threaded; NumPy releases the GIL inside its products, so the two threads use two cores.

Each stream keeps its own options (they live in its core Generation), hands its audio to its
consumer through a Relay, and stops within a step when the consumer goes away. A stream whose
relay is full (its client reads slower than it is made, or not at all) is not stepped until the
client catches up: the others go on. Admission is the caller's (server/slots.py): `submit` takes
a function to call once the scheduler has let go of the stream.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, List, Optional, Tuple

from core import TTSModel
from core.portable.generation import Frame, Generation, advance
from core.portable.model import FrameDecoder, decode_together
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


class _Stream:
    def __init__(self, generation: Generation, decoder: FrameDecoder, relay: Relay, release: Callable[[], None]):
        self.generation = generation
        self.decoder = decoder
        self.relay = relay
        self.release = release

    @property
    def movable(self) -> bool:
        """Whether a step would do something for it: make a frame, or drop it (its client left)."""
        return self.relay.abandoned.is_set() or not self.relay.full


class Scheduler:
    def __init__(self, model: TTSModel):
        self.model = model
        self._lock = threading.Condition()
        self._joining: List[_Stream] = []
        self._steps: queue.Queue[Optional[Tuple[List[Tuple[_Stream, Frame]], List[_Stream]]]] = queue.Queue(AHEAD)
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

    def submit(self, generation: Generation, relay: Relay, release: Callable[[], None] = lambda: None) -> None:
        """Run a generation, handing its chunks to `relay` (whose consumer must `wake` this scheduler
        as it takes them); `release` is called once the scheduler has dropped the stream."""
        with self._lock:
            self._joining.append(_Stream(generation, self.model.decoder(generation.speed), relay, release))
            self._lock.notify()

    def wake(self) -> None:
        """A consumer took a chunk or left: a stream that waited for it may move again."""
        with self._lock:
            self._lock.notify()

    def close(self) -> None:
        """Stop both threads (the streams still running get an error)."""
        with self._lock:
            self._stopping = True
            self._lock.notify()
        for thread in self._threads:
            thread.join()
        self._second_decoder.shutdown()

    def _flow(self) -> None:
        running: List[_Stream] = []
        while True:
            with self._lock:
                while not self._stopping and not self._joining and not any(s.movable for s in running):
                    self._lock.wait()
                if self._stopping:
                    break
                running += self._joining
                self._joining = []
            gone = [s for s in running if s.relay.abandoned.is_set()]
            running = [s for s in running if not s.relay.abandoned.is_set()]
            stepping = [s for s in running if not s.relay.full]
            # Alone, a newcomer reads its text at once; beside others, a slice a step.
            prompt_rows = PROMPT_ROWS if len(stepping) > 1 else None
            try:
                frames = advance(self.model, [s.generation for s in stepping], prompt_rows)
            except Exception as error:  # a fault in the model code: every stream of the step gets it
                for stream in stepping:
                    stream.relay.fail(error)
                self._steps.put(([], stepping + gone))
                running = [s for s in running if s not in stepping]
                continue
            made = [(s, f) for s, f in zip(stepping, frames) if f is not None]
            for stream, _ in made:
                stream.relay.reserve()
            done = [s for s in stepping if s.generation.done]
            running = [s for s in running if not s.generation.done]
            self._steps.put((made, done + gone))
        self._steps.put(None)
        for stream in running + self._joining:
            stream.relay.fail(RuntimeError("the server is shutting down"))
            stream.release()

    def _decode(self) -> None:
        while True:
            step = self._steps.get()
            if step is None:
                return
            made, finished = step
            made = [(s, f) for s, f in made if not s.relay.abandoned.is_set()]
            try:
                pcm = self._decode_step([s.decoder for s, _ in made], [f for _, f in made])
            except Exception as error:
                for stream, _ in made:
                    stream.relay.fail(error)
                pcm = []
            for (stream, _), chunk in zip(made, pcm):
                stream.relay.put(chunk)
            for stream in finished:
                self._finish(stream)

    def _decode_step(self, decoders: List[FrameDecoder], frames: List[Frame]) -> List:
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

    def _finish(self, stream: _Stream) -> None:
        """A stream's end: the audio its speed change held back (none at speed 1), then the close."""
        if stream.generation.done and not stream.relay.abandoned.is_set():
            try:
                tail = stream.decoder.finish()
            except Exception as error:
                stream.relay.fail(error)
            else:
                if tail.shape[0]:
                    stream.relay.reserve()  # the flow thread has let go of the stream: counted here
                    stream.relay.put(tail)
        stream.relay.close()
        stream.release()
