"""The voices prepared so far, under one id scheme for every front-end (the server, the browser
worker, the command line's batch workers); `TTSModel.voice_state` prepares each.

`VoiceRegistry` keeps prepared voices by id, as the server and the browser worker use them: the
default voice, the model's predefined voices by name, and recordings by `recording_id` (the hash of
the decoded samples and their rate, so the same recording is cloned once), the least recently used
recordings dropped beyond a capacity. The registry is plain data, not thread-safe: the server
serializes its calls.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .audio import pcm as audio
from .errors import VoiceError
from .model import TTSModel
from .voices.state import VoiceState

RECORDING = "upload:"  # the prefix of a recording's id
# What a registry keeps: prepared voice states, and the recordings to clone again (see VoiceRegistry).
STATE_BYTES = 256 * 1024 * 1024
RECORDING_BYTES = 256 * 1024 * 1024


def recording_id(samples: np.ndarray, sample_rate: int) -> str:
    """The id of a recording: the hash of its samples (float32, as decoded) and their rate."""
    data = np.ascontiguousarray(samples, dtype=np.float32).tobytes()
    return RECORDING + hashlib.sha256(f"{int(sample_rate)}:".encode() + data).hexdigest()[:24]


class VoiceRegistry:
    """Prepared voices by id. `default`: the default voice's source (a name or a file; the model's
    default when None, if it has one), prepared now, so that one that cannot load fails at once.
    Requests name voices, never files: `get` takes "default"/None, a predefined name, one of
    `aliases` (another name for a predefined voice or "default"), or a recording's id.

    Two caches, each bounded by bytes, not by count, so that many small recordings cannot push a
    large one out: the prepared states (a few MB of KV cache each), and the recordings themselves
    as kept (mono, at the model's rate, at most 30 s: 2.9 MB at most), so that a recording whose
    state was dropped is cloned again from what was kept. Only a recording dropped from both is
    gone ("upload it again").

    The slow work (cloning, downloading a predefined voice) comes apart from the caches' upkeep, so
    that a threaded caller can do it outside its lock: `key` -> `find` -> `recipe`() -> `keep`.
    """

    def __init__(
        self,
        model: TTSModel,
        default: Optional[str] = None,
        aliases: Optional[Dict[str, str]] = None,
        state_bytes: int = STATE_BYTES,
        recording_bytes: int = RECORDING_BYTES,
    ):
        self.model = model
        self.aliases = dict(aliases or {})
        self.default_name = default if default is not None else model.default_voice
        # A model may come without a voice (a bundle exported with none): it speaks uploads only.
        self.default = model.voice_state(self.default_name) if self.default_name is not None else None
        self._states = SizedCache(state_bytes)
        self._recordings = SizedCache(recording_bytes)

    def names(self) -> List[str]:
        """The model's predefined voices."""
        return sorted(self.model.voices)

    def key(self, name: Optional[str]) -> str:
        """The id a request's voice name stands for: "default", a predefined name or a recording's
        id; a VoiceError for anything else."""
        name = self.aliases.get(name, name) if name is not None else None
        if name is None or name in ("", "default"):
            return "default"
        if name.startswith(RECORDING) or name in self.model.voices:
            return name
        raise self.unknown(name)

    def unknown(self, name: str, others: Sequence[str] = ()) -> VoiceError:
        """The error of a voice name that stands for nothing here (it names the voices that do,
        `others` too: voices found elsewhere, such as a server's voices folder)."""
        known = ", ".join(["default"] + self.names() + sorted(self.aliases) + list(others))
        return VoiceError(f"unknown voice {name!r}: use one of {known}, or upload one")

    def find(self, key: str) -> Optional[VoiceState]:
        """The voice of `key` if it is prepared."""
        return self.default if key == "default" else self._states.get(key)

    def recipe(self, key: str) -> Callable[[], VoiceState]:
        """The work that prepares `key`'s voice (it changes nothing here: `keep` its result); a
        VoiceError now for a recording that is no longer kept."""
        if key.startswith(RECORDING):
            prompt = self._recordings.get(key)
            if prompt is None:
                raise VoiceError(f"unknown uploaded voice {key!r} (uploads are kept for a while only): upload it again")
            return lambda: self.model.clone_voice(prompt, self.model.sample_rate, "the uploaded voice")
        return lambda: self.model.voice_state(None if key == "default" else key)

    def has_recording(self, key: str) -> bool:
        """Whether the recording `key` is still kept (asking is not a use)."""
        return key in self._recordings

    def keep(self, key: str, state: VoiceState) -> VoiceState:
        self._states.put(key, state, _state_bytes(state))
        return state

    def get(self, name: Optional[str]) -> VoiceState:
        """The voice a request names, prepared now if it is not yet (for single-threaded callers)."""
        key = self.key(name)
        found = self.find(key)
        return found if found is not None else self.keep(key, self.recipe(key)())

    def recording(self, samples: np.ndarray, sample_rate: int) -> Tuple[str, np.ndarray]:
        """A recording's id and what is kept of it (see `add_recording`)."""
        kept = audio.trim_prompt(samples, sample_rate, self.model.sample_rate, "the uploaded voice")
        return recording_id(samples, sample_rate), kept

    def add_recording(self, key: str, kept: np.ndarray) -> None:
        self._recordings.put(key, kept, kept.nbytes)

    def drop_recording(self, key: str) -> None:
        """Forget a recording and its voice (one that could not be cloned, or one deleted)."""
        self._recordings.pop(key)
        self._states.pop(key)

    def add(self, samples: np.ndarray, sample_rate: int) -> str:
        """Clone a recording (samples [T] or [channels, T]) unless it was already; returns its id."""
        key, kept = self.recording(samples, sample_rate)
        self.add_recording(key, kept)
        self.get(key)
        return key

    def source(self, source: Optional[str]) -> VoiceState:
        """Any source a local caller names (the command line: a predefined name, an audio file, a
        voice state; None: the default), prepared once and kept by that source."""
        if (source is None or source == self.default_name) and self.default is not None:
            return self.default
        found = self._states.get(source)
        return found if found is not None else self.keep(source, self.model.voice_state(source))


def _state_bytes(state: VoiceState) -> int:
    return sum(a.nbytes for a in state.transformer.keys + state.transformer.values)


class SizedCache:
    """Values by key, the least recently used dropped beyond a total size (the newest always kept)."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._items: OrderedDict[str, Tuple[Any, int]] = OrderedDict()
        self._size = 0

    def __contains__(self, key: str) -> bool:
        """Whether `key` is kept (not a use: the order of dropping stays)."""
        return key in self._items

    def get(self, key: str) -> Any:
        if key not in self._items:
            return None
        self._items.move_to_end(key)
        return self._items[key][0]

    def pop(self, key: str) -> None:
        if key in self._items:
            self._size -= self._items.pop(key)[1]

    def put(self, key: str, value: Any, size: int) -> None:
        self.pop(key)
        self._items[key] = (value, size)
        self._size += size
        while self._size > self.capacity and len(self._items) > 1:
            self._size -= self._items.popitem(last=False)[1][1]
