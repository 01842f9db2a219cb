"""The server's generation engine: one loaded model, the voices it has prepared, and the scheduler
that runs every generation (server/scheduler.py: all running streams step together).

A generation's chunks reach the event loop through a Relay. Closing the async iterator (a client
that went away) stops the generation within a step, and its slot is freed only once the scheduler
has dropped it, so the count of running generations is always true. When every slot is taken, a
new request gets `Busy` at once (a 503 with Retry-After), instead of waiting in an unbounded queue.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import threading
from collections import OrderedDict
from typing import AsyncIterator, List, Optional

import numpy as np

from core import TTSModel, VoiceError, VoiceState
from core.options import GenerationOptions
from server.relay import Relay
from server.scheduler import Scheduler

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
class Engine:
    def __init__(self, model: TTSModel, default_voice: Optional[str], max_concurrent: int, kernels: str = "NumPy"):
        """`kernels` says what runs the model's products (server/native.py), for /health."""
        self.model = model
        self.max_concurrent = max_concurrent
        self.kernels = kernels
        self.scheduler = Scheduler(model, max_concurrent)
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

    async def chunks(self, text: str, voice: VoiceState, options: GenerationOptions) -> AsyncIterator[np.ndarray]:
        """PCM chunks of one generation, as the scheduler makes them.

        Bad input raises here, before any audio; `Busy` when every slot is taken. Abandoning the
        iterator stops the generation within a step.
        """
        generation = self.model.generation(text, voice, options)
        relay = Relay(asyncio.get_running_loop())
        self.scheduler.submit(generation, relay)
        return relay.items()
