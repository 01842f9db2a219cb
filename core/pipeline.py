"""One stream's two halves on two threads: the flow LM makes the frames on a thread of its own while
the caller's thread decodes them, as the server's scheduler (server/scheduler.py) does for many
streams at once. NumPy and the compiled kernels let go of the GIL inside their products, so the two
halves run on two cores, each with one BLAS thread (as the server's): on english int8 the command
line's real-time factor went from 0.31 to 0.21, the server's single stream (README, "Speed"); with
BLAS's own threads beside the flow thread it stayed at 0.33. The audio is `TTSModel.stream`'s under
one BLAS thread, sample for sample.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Iterator, NamedTuple, Optional

import numpy as np

from .portable.decoding import decoded
from .portable.generation import Frame, Generation
from .portable.model import TTSModel
from .portable.options import GenerationOptions
from .portable.voice_state import VoiceSource

# Frames the flow LM may make ahead of the decoder: enough to keep both busy.
AHEAD = 2


class _Failed(NamedTuple):
    error: BaseException


_END = object()


def stream(
    model: TTSModel, text: str, voice: VoiceSource, options: Optional[GenerationOptions] = None, **overrides: Any
) -> Iterator[np.ndarray]:
    """`model.stream(text, voice, options)` with the flow LM on a second thread: the same float32
    chunks, sooner. Options are checked now; closing the iterator stops the flow LM within a frame."""
    return _decoded(model, model.generation(text, voice, options, **overrides))


def _decoded(model: TTSModel, generation: Generation) -> Iterator[np.ndarray]:
    frames = model.step(generation)
    handoff: queue.Queue = queue.Queue(AHEAD)
    stop = threading.Event()
    one_thread = _one_blas_thread()

    def make() -> None:
        try:
            for frame in frames:
                handoff.put(frame)
                if stop.is_set():
                    return
            handoff.put(_END)
        except BaseException as error:  # the caller's thread raises it
            handoff.put(_Failed(error))

    def handed_over() -> Iterator[Frame]:
        while True:
            item = handoff.get()
            if item is _END:
                return
            if isinstance(item, _Failed):
                raise item.error
            yield item

    thread = threading.Thread(target=make, name="pocket-tts-flow-lm", daemon=True)
    thread.start()
    try:
        yield from decoded(model.decoder(generation.speed), handed_over())
    finally:
        stop.set()
        while thread.is_alive():  # unblock a flow thread waiting to hand over a frame
            try:
                handoff.get(timeout=0.05)
            except queue.Empty:
                pass
        if one_thread is not None:
            one_thread.restore_original_limits()


def _one_blas_thread() -> Any:
    """One BLAS thread for the whole process while a stream runs (BLAS's own threads would compete
    with the flow thread for the cores); None where threadpoolctl (the [cli] extra) is missing."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return None
    return threadpool_limits(1)
