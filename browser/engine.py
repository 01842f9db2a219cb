"""The Python half of the in-browser engine, run by worker.js inside Pyodide.

It keeps one model and its voices warm, and generates one chunk per `step()` call, so that the
worker posts each chunk as soon as it exists and can stop between frames. Data crosses the JS
boundary as JSON strings and files in Pyodide's in-memory file system, which every Pyodide
version handles the same way.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, Iterator, Optional

import numpy as np

from core import TTSModel, VoiceState
from core.errors import PocketTTSError


class Engine:
    def __init__(self, bundle_dir: str):
        self.model = TTSModel.load(bundle_dir)
        self.voices: Dict[str, VoiceState] = {}
        self.chunks: Optional[Iterator[np.ndarray]] = None
        if self.model.default_voice is not None:
            self.voice(self.model.default_voice)

    def info(self) -> str:
        return json.dumps(
            {
                "name": self.model.name,
                "sample_rate": self.model.sample_rate,
                "voices": sorted(self.model.voices),
                "default_voice": self.model.default_voice,
                "can_clone_voices": self.model.can_clone_voices,
            }
        )

    def voice(self, name: Optional[str]) -> VoiceState:
        key = name or self.model.default_voice
        if key not in self.voices:
            self.voices[key] = self.model.voice_state(key)
        return self.voices[key]

    def add_voice(self, samples_path: str, sample_rate: int) -> str:
        """A recording the page decoded (float32 samples in a file) -> JSON {voice} or {error}."""

        def add() -> str:
            samples = np.fromfile(samples_path, dtype="<f4")
            key = "upload:" + hashlib.sha256(samples.tobytes()).hexdigest()[:24]
            if key not in self.voices:
                self.voices[key] = self.model.voice_state(samples, sample_rate=int(sample_rate))
            return key

        return _result("voice", add)

    def start(self, text: str, voice: str, options_json: str) -> str:
        """Begin a generation -> JSON {started} or {error} (bad input fails now, before any audio)."""

        def begin() -> bool:
            options: Dict[str, Any] = json.loads(options_json)
            self.chunks = self.model.stream(text, self.voice(voice or None), **options)
            return True

        return _result("started", begin)

    def step(self) -> Optional[np.ndarray]:
        """The next chunk of the current generation (float32), or None when it is over."""
        if self.chunks is None:
            return None
        chunk = next(self.chunks, None)
        if chunk is None:
            self.chunks = None
        return chunk

    def cancel(self) -> None:
        if self.chunks is not None:
            self.chunks.close()
            self.chunks = None


def _result(key: str, run: Any) -> str:
    """JSON {key: value} of run(), or {"error": message}: the core's own message for bad input."""
    try:
        return json.dumps({key: run()})
    except PocketTTSError as error:
        return json.dumps({"error": str(error)})
    except Exception as error:  # anything else still reaches the page as a message, not a hang
        return json.dumps({"error": f"{type(error).__name__}: {error}"})
