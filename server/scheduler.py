"""Continuous batching: every running generation advances together, frame by frame.

Two threads, as the two halves of a frame: the flow thread steps all running generations at once
(core.generation.advance: one pass through the flow LM for all of them, so its weights are read
once per step, not once per stream), and the decoder thread turns each step's frames into audio in
one pass through Mimi's decoder (core.model.decode_together). Streams join and leave between steps;
a newcomer reads its text a slice at a time while others are running (PROMPT_ROWS rows a step), so
that a long text does not hold up their frames; alone, it reads it at once. The core stays
single-threaded; NumPy releases the GIL inside its products, so the two threads use two cores.

Each stream keeps its own options (they live in its core Generation), hands its audio to its
consumer through a Relay, and stops within a step when the consumer goes away. A slot is taken
while a stream runs: `submit` raises Busy at once when all are taken.
"""

from __future__ import annotations

import queue
import threading
from typing import List, Optional, Tuple

from core import TTSModel
from core.generation import Frame, Generation, advance
from core.model import FrameDecoder, decode_together
from server.relay import Relay

# Rows of a newcomer's text read per step while other streams run. Measured on english with 4
# streams running and a 41-token newcomer (their frames ~45 ms apart): read at once, the newcomer's
# first byte came after 228 ms and the others' longest gap was 133 ms; 32 rows a step: 310 / 99 ms;
# 16: 374 / 100 ms; 8: 410 / 67 ms.
PROMPT_ROWS = 32
# Steps the flow thread may run ahead of the decoder: enough to keep both busy, and no more (a
# newcomer's first frame waits behind them).
AHEAD = 1


class Busy(Exception):
    """Every generation slot is taken."""

    retry_after = 1


class _Stream:
    def __init__(self, generation: Generation, decoder: FrameDecoder, relay: Relay):
        self.generation = generation
        self.decoder = decoder
        self.relay = relay


class Scheduler:
    def __init__(self, model: TTSModel, max_streams: int):
        self.model = model
        self.max_streams = max_streams
        self._lock = threading.Condition()
        self._joining: List[_Stream] = []
        self._taken = 0  # slots of streams admitted and not yet released
        self._steps: queue.Queue[Optional[Tuple[List[Tuple[_Stream, Frame]], List[_Stream]]]] = queue.Queue(AHEAD)
        self._stopping = False
        self._threads = [
            threading.Thread(target=self._flow, name="pocket-tts-flow-lm", daemon=True),
            threading.Thread(target=self._decode, name="pocket-tts-decoder", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    @property
    def active(self) -> int:
        """Streams running (or waiting for their first step)."""
        with self._lock:
            return self._taken

    @property
    def running(self) -> bool:
        """Whether both threads are alive (a health check: a thread that died cannot step again)."""
        return not self._stopping and all(thread.is_alive() for thread in self._threads)

    def submit(self, generation: Generation, relay: Relay) -> None:
        """Run a generation, handing its chunks to `relay`; Busy at once when every slot is taken."""
        with self._lock:
            if self._taken >= self.max_streams:
                raise Busy()
            self._taken += 1
            self._joining.append(_Stream(generation, self.model.decoder(), relay))
            self._lock.notify()

    def close(self) -> None:
        """Stop both threads (the streams still running get an error)."""
        with self._lock:
            self._stopping = True
            self._lock.notify()
        for thread in self._threads:
            thread.join()

    def _release(self) -> None:
        with self._lock:
            self._taken -= 1

    def _flow(self) -> None:
        running: List[_Stream] = []
        while True:
            with self._lock:
                while not running and not self._joining and not self._stopping:
                    self._lock.wait()
                if self._stopping:
                    break
                running += self._joining
                self._joining = []
            gone = [s for s in running if s.relay.abandoned.is_set()]
            running = [s for s in running if not s.relay.abandoned.is_set()]
            # Alone, a newcomer reads its text at once; beside others, a slice a step.
            prompt_rows = PROMPT_ROWS if len(running) > 1 else None
            try:
                frames = advance(self.model, [s.generation for s in running], prompt_rows)
            except Exception as error:  # a fault in the model code: every stream of the step gets it
                for stream in running:
                    stream.relay.fail(error)
                self._steps.put(([], running + gone))
                running = []
                continue
            made = [(s, f) for s, f in zip(running, frames) if f is not None]
            done = [s for s in running if s.generation.done]
            running = [s for s in running if not s.generation.done]
            self._steps.put((made, done + gone))
        self._steps.put(None)
        for stream in running + self._joining:
            stream.relay.fail(RuntimeError("the server is shutting down"))

    def _decode(self) -> None:
        while True:
            step = self._steps.get()
            if step is None:
                return
            made, finished = step
            made = [(s, f) for s, f in made if not s.relay.abandoned.is_set()]
            try:
                pcm = decode_together([s.decoder for s, _ in made], [f for _, f in made])
            except Exception as error:
                for stream, _ in made:
                    stream.relay.fail(error)
                pcm = []
            for (stream, _), chunk in zip(made, pcm):
                stream.relay.put(chunk)
            for stream in finished:
                stream.relay.close()
                self._release()
