"""The voices a model speaks with: where a voice comes from (a predefined name, a file, a
recording), and the ones prepared so far, under one id scheme for every front-end.

`resolve` turns a source into a voice state (the model does the work: cloning, loading a state).
`VoiceRegistry` keeps prepared voices by id, as the server and the browser worker use them: the
default voice, the model's predefined voices by name, and recordings by `recording_id` (the hash of
the decoded samples and their rate, so the same recording is cloned once), the least recently used
recordings dropped beyond a capacity. The registry is plain data, not thread-safe: the server
serializes its calls.
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from typing import TYPE_CHECKING, Dict, List, Optional, Union

import numpy as np

from . import audio, catalog, hub, voice
from .errors import VoiceError
from .voice import VoiceState

if TYPE_CHECKING:
    from .model import TTSModel

VoiceSource = Union[VoiceState, str, np.ndarray, None]
RECORDING = "upload:"  # the prefix of a recording's id


def recording_id(samples: np.ndarray, sample_rate: int) -> str:
    """The id of a recording: the hash of its samples (float32, as decoded) and their rate."""
    data = np.ascontiguousarray(samples, dtype=np.float32).tobytes()
    return RECORDING + hashlib.sha256(f"{int(sample_rate)}:".encode() + data).hexdigest()[:24]


def resolve(model: TTSModel, source: VoiceSource, sample_rate: Optional[int] = None) -> VoiceState:
    """A voice from a predefined name, an audio file, a .safetensors voice state (local or hf://),
    or samples (with `sample_rate`). None is the model's default voice."""
    if source is None:
        if model.default_voice is None:
            raise VoiceError(f"{model.name} has no default voice: pass an audio file or a voice state")
        source = model.default_voice
    if isinstance(source, VoiceState):
        return source
    if isinstance(source, np.ndarray):
        if sample_rate is None:
            raise VoiceError("voice samples need their sample_rate")
        return model.clone_voice(source, sample_rate, "voice samples")
    path = os.fspath(source)
    if path in model.voices:
        path = model.voices[path]
    elif path in catalog.voice_names() and not os.path.exists(path):
        raise VoiceError(
            f"the predefined voice {path!r} is a state computed with the released weights of a catalog "
            f"model; {model.name} cannot use it: pass an audio file instead"
        )
    if path.startswith("hf://"):
        path = hub.fetch(path)
    if path.endswith(".safetensors"):
        if not os.path.isfile(path):
            raise VoiceError(f"voice state file not found: {path}")
        return voice.load(path, model.flow_spec.transformer)
    if not os.path.isfile(path):
        known = f" (predefined voices: {', '.join(sorted(model.voices))})" if model.voices else ""
        raise VoiceError(f"voice not found: {path!r} is neither a voice name, an audio file nor a voice state{known}")
    samples, rate = audio.read(path)
    return model.clone_voice(samples, rate, path)


class VoiceRegistry:
    """Prepared voices by id. `default`: the default voice's source (a name or a file; the model's
    default when None), prepared now, so that one that cannot load fails at once. Requests name
    voices, never files: `get` takes "default"/None, a predefined name, one of `aliases` (another
    name for a predefined voice or "default"), or a recording's id."""

    def __init__(
        self,
        model: TTSModel,
        default: Optional[str] = None,
        capacity: int = 32,
        aliases: Optional[Dict[str, str]] = None,
    ):
        self.model = model
        self.capacity = capacity
        self.aliases = dict(aliases or {})
        self.default_name = default if default is not None else model.default_voice
        self.default = resolve(model, self.default_name)
        self._prepared: OrderedDict[str, VoiceState] = OrderedDict()

    def names(self) -> List[str]:
        """The model's predefined voices."""
        return sorted(self.model.voices)

    def get(self, key: Optional[str]) -> VoiceState:
        key = self.aliases.get(key, key) if key is not None else None
        if key is None or key == "" or key == "default":
            return self.default
        if key in self._prepared:
            self._prepared.move_to_end(key)
            return self._prepared[key]
        if key.startswith(RECORDING):
            raise VoiceError(f"unknown uploaded voice {key!r} (uploads are kept for a while only): upload it again")
        if key not in self.model.voices:
            known = ", ".join(["default"] + self.names() + sorted(self.aliases))
            raise VoiceError(f"unknown voice {key!r}: use one of {known}, or upload one")
        self._prepared[key] = resolve(self.model, key)
        return self._prepared[key]

    def source(self, source: Optional[str]) -> VoiceState:
        """Any source a local caller names (the command line: a predefined name, an audio file, a
        voice state; None: the default), prepared once and kept by that source."""
        if source is None or source == self.default_name:
            return self.default
        if source not in self._prepared:
            self._prepared[source] = resolve(self.model, source)
        self._prepared.move_to_end(source)
        files = [k for k in self._prepared if not k.startswith(RECORDING) and k not in self.model.voices]
        for oldest in files[: max(0, len(files) - self.capacity)]:
            del self._prepared[oldest]
        return self._prepared[source]

    def add(self, samples: np.ndarray, sample_rate: int) -> str:
        """Clone a recording (samples [T] or [channels, T]) unless it was already; returns its id."""
        key = recording_id(samples, sample_rate)
        if key in self._prepared:
            self._prepared.move_to_end(key)
            return key
        self._prepared[key] = self.model.clone_voice(samples, sample_rate, "the uploaded voice")
        recordings = [k for k in self._prepared if k.startswith(RECORDING)]
        for oldest in recordings[: max(0, len(recordings) - self.capacity)]:
            del self._prepared[oldest]
        return key
