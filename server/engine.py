"""The server's generation engine: one loaded model, the voices it has prepared, and a bounded
number of generations running at once off the event loop.

Each generation runs the two-thread pipelined stream (server/pipeline.py) in a worker thread and
hands its chunks to the event loop through a queue. Closing the async iterator (a client that went
away) stops the generation within a frame, and its slot is freed only once the worker is done, so
the count of running generations is always true. When every slot is taken, a new request gets
`Busy` at once (a 503 with Retry-After), instead of waiting in an unbounded queue.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import threading
from collections import OrderedDict
from typing import Any, AsyncIterator, Dict, List, Optional

import numpy as np

from core import TTSModel, VoiceError, VoiceState
from server import pipeline

# Uploaded voices kept ready, by content hash (each is a few MB of KV cache for the big model).
UPLOAD_CACHE = 32
# OpenAI's voice names, each mapped to a predefined voice of the same register when the model has
# predefined voices (the catalog models), else to the server's default voice.
OPENAI_VOICES = {
    "alloy": "alba",
    "ash": "marius",
    "ballad": "javert",
    "coral": "cosette",
    "echo": "jean",
    "fable": "fantine",
    "onyx": "charles",
    "nova": "eponine",
    "sage": "azelma",
    "shimmer": "vera",
    "verse": "paul",
}
_DONE = object()


class Busy(Exception):
    """Every generation slot is taken."""

    retry_after = 1


class Engine:
    def __init__(self, model: TTSModel, default_voice: Optional[str], max_concurrent: int):
        self.model = model
        self.max_concurrent = max_concurrent
        self.active = 0
        self._lock = threading.Lock()
        self._voices: OrderedDict[str, VoiceState] = OrderedDict()
        self.default_voice_name = default_voice if default_voice is not None else model.default_voice
        # Loaded now: a voice that cannot be loaded fails at startup, not on the first request.
        self.default_voice = model.voice_state(self.default_voice_name)

    # Voices

    def voice_names(self) -> List[str]:
        return sorted(self.model.voices)

    def voice(self, name: Optional[str]) -> VoiceState:
        """ "default"/None, a predefined voice, an OpenAI voice name, or an uploaded voice's id."""
        if name is None or name == "default":
            return self.default_voice
        if name in OPENAI_VOICES:
            mapped = OPENAI_VOICES[name]
            return self.voice(mapped) if mapped in self.model.voices else self.default_voice
        with self._lock:
            if name in self._voices:
                self._voices.move_to_end(name)
                return self._voices[name]
        if name.startswith("upload:"):
            raise VoiceError(f"unknown uploaded voice {name!r} (uploads are kept for a while only): upload it again")
        if name not in self.model.voices:
            known = ", ".join(["default"] + self.voice_names() + sorted(OPENAI_VOICES))
            raise VoiceError(f"unknown voice {name!r}: use one of {known}, or upload one")
        state = self.model.voice_state(name)
        with self._lock:
            self._voices[name] = state
        return state

    def upload(self, data: bytes, filename: str = "upload") -> str:
        """Encode an uploaded recording (any format soundfile reads); returns its voice id.

        The id is the content hash, so the same upload is encoded only once.
        """
        key = "upload:" + hashlib.sha256(data).hexdigest()[:24]
        with self._lock:
            if key in self._voices:
                self._voices.move_to_end(key)
                return key
        if not data:
            raise VoiceError(f"the uploaded voice {filename!r} is empty")
        import soundfile

        try:
            samples, rate = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=True)
        except Exception as e:  # soundfile raises its own types for every unreadable input
            raise VoiceError(f"cannot decode the uploaded voice {filename!r} (wav, flac, ogg or mp3): {e}") from None
        if samples.shape[0] == 0:
            raise VoiceError(f"the uploaded voice {filename!r} has no audio")
        state = self.model.voice_state(samples.T, sample_rate=int(rate))
        with self._lock:
            self._voices[key] = state
            while sum(k.startswith("upload:") for k in self._voices) > UPLOAD_CACHE:
                oldest = next(k for k in self._voices if k.startswith("upload:"))
                del self._voices[oldest]
        return key

    # Generation

    async def chunks(self, text: str, voice: VoiceState, options: Dict[str, Any]) -> AsyncIterator[np.ndarray]:
        """PCM chunks of one generation, produced in a worker thread.

        Bad input raises here, before any audio; `Busy` when every slot is taken. Abandoning the
        iterator stops the generation within a frame.
        """
        with self._lock:
            if self.active >= self.max_concurrent:
                raise Busy()
            self.active += 1
        try:
            stream = pipeline.stream(self.model, text, voice, **options)
        except BaseException:
            self._release()
            raise
        loop = asyncio.get_running_loop()
        items: asyncio.Queue[Any] = asyncio.Queue()
        stop = threading.Event()

        def hand_over(item: Any) -> None:
            try:
                loop.call_soon_threadsafe(items.put_nowait, item)
            except RuntimeError:  # the event loop is gone (server shutting down)
                stop.set()

        def work() -> None:
            try:
                for chunk in stream:
                    if stop.is_set():
                        break
                    hand_over(chunk)
            except BaseException as error:  # re-raised in the event loop
                hand_over(error)
            finally:
                stream.close()
                self._release()
                hand_over(_DONE)

        threading.Thread(target=work, name="pocket-tts-generation", daemon=True).start()
        return _relay(items, stop)

    def _release(self) -> None:
        with self._lock:
            self.active -= 1


async def _relay(items: asyncio.Queue[Any], stop: threading.Event) -> AsyncIterator[np.ndarray]:
    try:
        while True:
            item = await items.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
