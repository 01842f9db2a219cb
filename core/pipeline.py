"""One stream's two halves on two threads where that pays, the runner of every Python caller on
CPython (core/host.py's runtime: it runs TTSModel.stream, and so `generate` and the command
line): the flow LM makes the frames on a thread of its own while the caller's thread decodes them,
as the server's scheduler (server/scheduler.py) does for many streams at once, or has the model's
decoder process decode them once there is one (core/decoder_process.py: there the decoder shares
no GIL with the flow thread; a model's first stream starts it). NumPy and the
compiled kernels let go of the GIL inside their products, so the two halves run on two cores, each
with one BLAS thread (as the server's): on english int8 the command line's real-time factor is
0.21 this way against 0.31 on one thread (docs/measurements.md#speed), and 0.33 with BLAS's own
threads beside the flow thread. The audio is the one-thread runner's under one BLAS thread, sample
for sample.
"""

from __future__ import annotations

import itertools
import queue
import threading
import weakref
from typing import Callable, Iterator, NamedTuple, Optional

import numpy as np

from . import decoder_process, threads
from .portable.model import TTSModel, one_thread
from .portable.network import ops
from .portable.synthesis.decoding import FrameDecoder, decoded
from .portable.synthesis.generation import Frame, Generation, alone

# Frames the flow LM may make ahead of the decoder: enough to keep both busy.
AHEAD = 2
# Each model's decoder process (core/decoder_process.py), once its first stream has started one.
_processes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_starting = threading.Lock()
# The flow LM's size (its transformer's weights, about 12 d_model^2 a layer) from which a thread of
# its own pays. Real-time factor with the second thread / on one (this 2-core machine, 125 frames):
# english (75M) 0.35 / 0.50, english_18m (25M) 0.10 / 0.14, english_7m (4.8M) 0.10 / 0.085,
# english_2m (1.2M) 0.053 / 0.040: for small ones, handing each frame over costs more than it saves.
PAYS_FROM = 8_000_000


class _Failed(NamedTuple):
    error: BaseException


_END = object()


def pays(model: TTSModel) -> bool:
    """Whether a thread of its own pays for the model's flow LM: on the compiled kernels, for one
    large enough. On NumPy alone it does not (english int8 bundle, this machine: real-time factor
    0.33 against 0.31 on one thread with two BLAS threads, first chunk 115-139 ms against 73-77)."""
    spec = model.flow_spec.transformer
    compiled = not isinstance(model.runtime.backend, ops.NumpyBackend)
    return compiled and 12 * spec.num_layers * spec.d_model**2 >= PAYS_FROM


def run(model: TTSModel, generation: Generation) -> Iterator[np.ndarray]:
    """`generation`'s audio, chunk by chunk: its frames made on a thread of its own where that pays
    (`pays`), else on the caller's (one_thread)."""
    return _two_threads(model, generation) if pays(model) else one_thread(model, generation)


def _decoder_process(model: TTSModel) -> Optional[decoder_process.DecoderProcess]:
    """The model's decoder process where one was started (`_start_decoder_process`)."""
    with _starting:
        return _processes.get(model)


def decoder_process_ready(model: TTSModel, timeout: float) -> bool:
    """Whether `model` has a decoder process that decodes, waiting up to `timeout` seconds for one
    that is starting (False at once where its streams have started none): for a benchmark, whose
    streams are to be measured as those that follow a model's first run."""
    process = _decoder_process(model)
    return process is not None and process.ready.wait(timeout)


def _start_decoder_process(model: TTSModel) -> None:
    with _starting:
        if model not in _processes:
            _processes[model] = decoder_process.DecoderProcess(model)


def _two_threads(model: TTSModel, generation: Generation) -> Iterator[np.ndarray]:
    """The frames on a thread of its own (which the first chunk asked for starts), decoded on the
    caller's thread or the model's decoder process (core/decoder_process.py) where this stream
    holds it; closing the iterator stops that thread within a frame."""
    process = _decoder_process(model)
    if process is not None and process.claim():
        handing = decoder_process.HandingDecoder(model, generation.speed, process, generation.gain_db)
        try:
            yield from _two_threads_with(model, generation, handing, handing.offer)
        finally:
            try:
                handing.close()
            finally:
                process.release()  # even where a KeyboardInterrupt cut the close short
    else:
        yield from _two_threads_with(model, generation, model.decoder(generation.speed, generation.gain_db))


def _two_threads_with(
    model: TTSModel, generation: Generation, decoder: FrameDecoder, made: Optional[Callable[[Frame], None]] = None
) -> Iterator[np.ndarray]:
    """`made`, where given, is told of each frame on the flow thread as soon as it is made."""
    frames = alone(model, generation)
    handoff: queue.Queue = queue.Queue(AHEAD)
    stop = threading.Event()
    # The first frame decodes alone: the flow thread waits until the decoder asks for the second.
    # Beside a flow LM making the next frames, the two threads' handovers of the GIL slow it by a
    # third (docs/measurements.md#against-the-machines-limits), and in the decoder's process the
    # flow LM's step, which streams its weights through the shared cache, slows it too; the flow LM,
    # several times faster than real time, has the first chunk's whole duration to catch up.
    # english int8, this machine, same run: first chunk of a short text 38 ms against 41 with a flow
    # thread that does not wait, the same real-time factor; in the decoder's process, AVX2, the API's
    # streams alternating (paired medians of 14-16), 0.93-0.96x (medium text), 0.97x (short), the
    # real-time factor 0.97-1.03x.
    first_decoded = threading.Event()

    def make() -> None:
        try:
            for index, frame in enumerate(frames):
                if made is not None:
                    made(frame)
                handoff.put(frame)
                if index == 0:
                    first_decoded.wait()
                if stop.is_set():
                    return
            handoff.put(_END)
        except BaseException as error:  # the caller's thread raises it
            handoff.put(_Failed(error))

    def handed_over() -> Iterator[Frame]:
        for index in itertools.count():
            if index == 1:
                first_decoded.set()
                _start_decoder_process(model)
            item = handoff.get()
            if item is _END:
                return
            if isinstance(item, _Failed):
                raise item.error
            yield item

    with threads.one_blas_thread():  # BLAS's own threads would compete with the flow thread
        thread = threading.Thread(target=make, name="pocket-tts-flow-lm", daemon=True)
        thread.start()
        try:
            yield from decoded(decoder, handed_over())
        finally:
            stop.set()
            first_decoded.set()
            while thread.is_alive():  # unblock a flow thread waiting to hand over a frame
                try:
                    handoff.get(timeout=0.05)
                except queue.Empty:
                    pass
