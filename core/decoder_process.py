"""A model's Mimi decoder in a process of its own, for the streams core/pipeline.py runs: there it
shares no GIL with the flow LM's thread. Two threads of one process hand the GIL to each other at
every NumPy call and kernel; english int8 on the AVX2 kernels (this 2-core machine), a flow-LM step
of 9.9 ms and a decoder frame of 10.5 ms took 11.7 and 13.4 ms side by side on two threads, and
10.4 and 11.3 in two processes (docs/measurements.md#against-the-machines-limits).

The process is started (`python -m core.decoder_process`, so that no caller's `__main__` is run
again) when a model's first stream has its first chunk, so that its start-up competes with no
first chunk; it is given the decoder's prepared parameters and the kernel set the model's runtime
binds, and runs one BLAS thread: its audio is the caller's thread's, sample for sample. A stream
that starts while it is starting, or while another stream holds it, decodes on its own thread as
before; one that holds it hands its decoder state over at the first frame after it is ready, so a
long generation moves there mid-stream. From then on each frame goes there as the flow LM makes it
(HandingDecoder.offer), so that the process finds the next one waiting when it finishes one: AVX2
on a Zen 4, against asking frame by frame, the stream's real-time factor 0.889x (16 rounds,
docs/measurements.md#speed-per-kernel-set). The process ends when the model is collected or the
caller's process ends (its input closes).
"""

from __future__ import annotations

import collections
import os
import pickle
import struct
import sys
import threading
import weakref
from typing import Any, BinaryIO, Callable, Deque, Optional

import numpy as np

from . import native
from .portable.errors import PocketTTSError
from .portable.network import mimi, ops
from .portable.synthesis.decoding import FrameDecoder
from .portable.synthesis.generation import Frame

# What Mimi's decoding reads of its parameters (mimi.decode_streams): the encoder stays behind.
DECODER_PARAMS = ("quantizer", "upsample", "decoder_transformer", "decoder")
READY = "ready"
_LENGTH = struct.Struct("<Q")


def _send(pipe: BinaryIO, item: Any) -> None:
    data = pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
    pipe.write(_LENGTH.pack(len(data)))
    pipe.write(data)
    pipe.flush()


def _receive(pipe: BinaryIO) -> Any:
    header = pipe.read(_LENGTH.size)
    if len(header) < _LENGTH.size:
        raise EOFError("the pipe closed")
    (length,) = _LENGTH.unpack(header)
    data = pipe.read(length)
    if len(data) < length:
        raise EOFError("the pipe closed mid-message")
    return pickle.loads(data)


class DecoderProcess:
    """The decoder process of one model: started at construction (on a thread, which returns at
    once); `ready` is set once it can decode, `claim`/`release` give it to one stream at a time."""

    def __init__(self, model: Any):
        self.ready = threading.Event()
        self._holder = threading.Lock()
        self._process: Optional[Any] = None  # the subprocess.Popen, once it is up
        p = model.params["mimi"]
        setup = (
            model.mimi_spec,
            {key: p[key] for key in DECODER_PARAMS if key in p},
            model.runtime.backend.instruction_set,
        )
        threading.Thread(target=self._start, args=(setup,), name="pocket-tts-decoder-start", daemon=True).start()

    def _start(self, setup: Any) -> None:
        # Imported here: the browser's workers import this package too, and start without subprocess.
        import subprocess

        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "core.decoder_process"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
            )
        except OSError:
            return  # no interpreter to start (an embedded one): the streams decode on their threads
        weakref.finalize(self, _close, process)
        try:
            _send(process.stdin, setup)
            if _receive(process.stdout) != READY:
                raise EOFError("the decoder process did not start")
        except (OSError, EOFError, pickle.UnpicklingError):
            _close(process)
            return
        self._process = process
        self.ready.set()

    def claim(self) -> bool:
        """Whether the calling stream may use the process (until it calls `release`)."""
        return self._holder.acquire(blocking=False)

    def release(self) -> None:
        self._holder.release()

    def send(self, latent: np.ndarray, fresh: bool, state: Optional[mimi.DecoderState]) -> None:
        """Asks for the audio of `latent` [1, latent_dim] on the process's decoder state, which `state`
        replaces where given, and a new one replaces where `fresh` (a text chunk's first): `receive`
        gives it ([frame_size]), in the order asked."""
        process = self._running()
        self._exchanging(lambda: _send(process.stdin, (latent, fresh, state)))

    def receive(self) -> np.ndarray:
        """The audio of the earliest frame asked for and not yet received."""
        process = self._running()
        reply = self._exchanging(lambda: _receive(process.stdout))
        if isinstance(reply, str):
            raise PocketTTSError(f"the decoder process failed: {reply}")
        return reply

    def _running(self) -> Any:
        process = self._process
        assert process is not None and process.stdin is not None and process.stdout is not None
        return process

    def _exchanging(self, exchange: Callable[[], Any]) -> Any:
        try:
            return exchange()
        except BaseException as error:
            # Whatever stopped the exchange half-way (an ended process, a KeyboardInterrupt) leaves
            # an answer or a question in the pipes: no later stream may read it as its own.
            self.ready.clear()
            _close(self._running())
            if isinstance(error, (OSError, EOFError, ValueError, pickle.UnpicklingError)):  # ValueError: a closed pipe
                raise PocketTTSError(f"the decoder process ended mid-stream ({error})") from None
            raise


def _close(process: Any) -> None:
    """Ends the process: its input closes, and it returns when it reads that."""
    try:
        if process.stdin is not None:
            process.stdin.close()
    except OSError:
        pass


class HandingDecoder(FrameDecoder):
    """A stream's decoder that decodes on its own thread until `process` is ready, then hands its
    state over and has the process decode the rest of the stream's frames.

    The thread that makes the frames may `offer` each as it is made: once the state is in the
    process, the frames offered go there at once, in order, so that the process finds the next
    frame waiting when it finishes one, where it would wait for the caller to take its audio and
    ask again. `close` takes the audio of the frames sent that the stream did not take."""

    def __init__(self, model: Any, speed: float, process: DecoderProcess, gain_db: Optional[float] = None):
        super().__init__(model, speed, gain_db)
        self.process = process
        self.handed = False
        self._order = threading.Lock()  # frames go out in their order, from either thread
        self._unsent: Deque[Frame] = collections.deque()  # frames offered, not yet gone to the process
        self._ahead = 0  # frames gone to the process that this decoder was not yet asked for

    def offer(self, frame: Frame) -> None:
        if frame.latent is None:
            return
        with self._order:
            self._unsent.append(frame)
            if self.handed and self.process.ready.is_set():
                try:
                    self._send_unsent()
                except PocketTTSError:
                    pass  # the process ended: the answers owed before this frame say so

    def mimi_step(self, frame: Frame) -> np.ndarray:
        here = False
        with self._order:
            if self._ahead:
                self._ahead -= 1
            else:  # not sent ahead: it is the first frame of _unsent, where frames are offered
                if self._unsent:
                    self._unsent.popleft()
                here = not self.handed and not self.process.ready.is_set()
                if not here:
                    fresh = frame.first or (not self.handed and self.state is None)
                    state = None if fresh or self.handed else self.state
                    self.handed, self.state = True, None
                    self.process.send(frame.latent[None], fresh, state)
                    self._send_unsent()
        if here:
            return super().mimi_step(frame)
        return self.process.receive()

    def close(self) -> None:
        with self._order:
            ahead, self._ahead = self._ahead, 0
        for _ in range(ahead):
            try:
                self.process.receive()
            except PocketTTSError:
                return  # the process was given up: nothing is left in its pipes

    def _send_unsent(self) -> None:
        while self._unsent:
            frame = self._unsent.popleft()
            self.process.send(frame.latent[None], frame.first, None)
            self._ahead += 1


def main() -> None:
    """The process: the setup (Mimi's spec, its decoder's parameters, the kernel set), then a frame
    in, its audio out, until its input closes."""
    commands, answers = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing printed may fall into the answers
    spec, p, kernels = _receive(commands)
    backend = native.backend(kernels)
    _send(answers, READY)
    state = None
    while True:
        try:
            latent, fresh, handed = _receive(commands)
        except EOFError:
            return
        if handed is not None:
            state = handed
        elif fresh or state is None:
            state = mimi.init_decoder_state(spec, p)
        try:
            with ops.using(backend):
                answer = mimi.decode_step(spec, p, latent, state)  # [frame_size]
        except Exception as error:  # the caller raises it
            answer = f"{type(error).__name__}: {error}"
        _send(answers, answer)


if __name__ == "__main__":
    main()
