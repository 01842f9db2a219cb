"""Two-thread streaming for CPython: the flow LM generates frames in a worker thread while the
caller's thread decodes them with Mimi, so the two halves of each frame overlap on two cores.

NumPy releases the GIL inside its array operations, so the threads really run in parallel; BLAS
should then use one thread per caller (OPENBLAS_NUM_THREADS=1, or threadpoolctl), or the two
halves fight over the cores. Frames are decoded one by one, exactly as `model.stream` does, so the
audio is the same to the bit whatever the timing (the official package batches queued frames,
whose rounding then depends on the machine's load). The core itself stays single-threaded; this
adapter is for CPython only.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Iterator

import numpy as np

from core import TTSModel
from core.generation import Frame

_DONE = object()


def stream(model: TTSModel, text: str, voice: Any, **options: Any) -> Iterator[np.ndarray]:
    """Like `model.stream` (same options; bad input raises here, before any work)."""
    return _pipelined(model, model.frames(text, voice, **options))


def _pipelined(model: TTSModel, frames: Iterator[Frame]) -> Iterator[np.ndarray]:
    items: queue.Queue[Any] = queue.Queue()
    stop = threading.Event()
    # The first frame is decoded before the next one is computed: the two halves share the GIL, and
    # running ahead then would only delay the first audio (for the small models, by 2-3x).
    first_decoded = threading.Event()

    def produce() -> None:
        try:
            for frame in frames:
                if stop.is_set():
                    break
                items.put(frame)
                first_decoded.wait()
        except BaseException as error:  # handed to the consumer, which re-raises it
            items.put(error)
        finally:
            frames.close()
            items.put(_DONE)

    worker = threading.Thread(target=produce, name="pocket-tts-flow-lm", daemon=True)
    worker.start()
    decoder = model.decoder()
    try:
        while True:
            item = items.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            chunk = decoder.decode([item])
            first_decoded.set()
            yield chunk
    finally:
        # Closing the stream (a client that went away) stops the generation within a frame.
        stop.set()
        first_decoded.set()
        worker.join()
