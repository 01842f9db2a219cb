"""The server's generation engine: one loaded model, the voices it has prepared, and the scheduler
that runs every generation (server/scheduler.py: all running streams step together).

A generation's chunks reach the event loop through a Relay. Closing the async iterator (a client
that went away) stops the generation within a step, and its slot is freed only once the scheduler
has dropped it, so the count of running generations is always true. When every slot is taken, a
new request gets `Busy` at once (a 503 with Retry-After), instead of waiting in an unbounded queue.
"""

from __future__ import annotations

import asyncio
import io
import threading
from typing import AsyncIterator, Optional, Protocol

import numpy as np

from core import TTSModel, VoiceError, VoiceState
from core.options import GenerationOptions
from core.voices import RECORDING, VoiceRegistry
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


class Recordings(Protocol):
    """Uploaded recordings (the bytes as uploaded) by voice id, shared by the servers behind one
    address (server/cluster.py); a dict in one process."""

    def get(self, key: str) -> Optional[bytes]: ...

    def __setitem__(self, key: str, data: bytes) -> None: ...


class ServerEngine:
    """The server's engine: one model, its voices (core.voices.VoiceRegistry behind a lock: request
    threads share it), and the scheduler that runs the generations."""

    def __init__(
        self,
        model: TTSModel,
        default_voice: Optional[str],
        max_concurrent: int,
        kernels: str = "NumPy",
        recordings: Optional[Recordings] = None,
    ):
        """`kernels` says what runs the model's products (server/native.py), for /health. The default
        voice is loaded now: one that cannot load fails at startup, not on the first request.
        `recordings`: where uploads go for the other servers behind the same address, and where this
        one finds the recording of a voice id that another server cloned."""
        self.model = model
        self.max_concurrent = max_concurrent
        self.kernels = kernels
        self.recordings = recordings
        self._lock = threading.Lock()
        aliases = {name: mapped if mapped in model.voices else "default" for name, mapped in OPENAI_VOICES.items()}
        self.voices = VoiceRegistry(model, default_voice, UPLOAD_CACHE, aliases)
        self.scheduler = Scheduler(model, max_concurrent)

    @property
    def default_voice_name(self) -> str:
        return str(self.voices.default_name)

    def voice(self, name: Optional[str]) -> VoiceState:
        """ "default"/None, a predefined voice, an OpenAI voice name, or an uploaded voice's id (one
        uploaded to another server is cloned here from `recordings`: this may take a second, so call
        it off the event loop)."""
        with self._lock:
            try:
                return self.voices.get(name)
            except VoiceError:
                shared = self.recordings is not None and name is not None and name.startswith(RECORDING)
                data = self.recordings.get(name) if shared else None
                if data is None:
                    raise
        self._clone(data, "the uploaded voice")
        with self._lock:
            return self.voices.get(name)

    def upload(self, data: bytes, filename: str = "upload") -> str:
        """Clone an uploaded recording (any format soundfile reads); returns its voice id (the hash of
        its samples: the same recording is cloned once), and keeps the recording in `recordings`."""
        key = self._clone(data, filename)
        if self.recordings is not None:
            self.recordings[key] = data
        return key

    def _clone(self, data: bytes, filename: str) -> str:
        if not data:
            raise VoiceError(f"the uploaded voice {filename!r} is empty")
        import soundfile

        try:
            samples, rate = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=True)
        except Exception as e:  # soundfile raises its own types for every unreadable input
            raise VoiceError(f"cannot decode the uploaded voice {filename!r} (wav, flac, ogg or mp3): {e}") from None
        if samples.shape[0] == 0:
            raise VoiceError(f"the uploaded voice {filename!r} has no audio")
        with self._lock:
            return self.voices.add(samples.T, int(rate))

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
