"""Voice states: the flow LM's KV cache after the voice prompt, and its safetensors form.

The file format is the official one (`pocket-tts export-voice` and the predefined voices): for each
layer i, `transformer.layers.{i}.self_attn/cache` [2, 1, T, H_kv, D] (keys then values),
`/offset` [1] and `/pad` [1] (int64). Older files carry `/current_end`, whose length is the offset.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Union

import numpy as np

from ..errors import VoiceError
from ..network import transformer
from ..weights import safetensors_file


@dataclasses.dataclass
class VoiceState:
    """A voice, ready to generate from: the transformer state after prompting with it."""

    transformer: transformer.TransformerState

    @property
    def length(self) -> int:
        """Positions of the prompt (voice frames, plus one for BOS when the model inserts it)."""
        return self.transformer.offset

    def copy(self) -> VoiceState:
        return VoiceState(self.transformer.copy())


# What a voice may be given as: a state, a predefined name or a file (str), or samples (np.ndarray,
# with their sample rate); None for the model's default voice (TTSModel.voice_state).
VoiceSource = Union[VoiceState, str, np.ndarray, None]


def to_tensors(voice: VoiceState) -> Dict[str, np.ndarray]:
    tensors: Dict[str, np.ndarray] = {}
    state = voice.transformer
    n = state.offset
    for i, (k, v) in enumerate(zip(state.keys, state.values)):
        name = f"transformer.layers.{i}.self_attn"
        cache = np.stack([k[:, :n], v[:, :n]]).transpose(0, 2, 1, 3)[:, None]  # [2, 1, T, H_kv, D]
        tensors[f"{name}/cache"] = np.ascontiguousarray(cache, dtype=np.float32)
        tensors[f"{name}/offset"] = np.array([n], dtype=np.int64)
        tensors[f"{name}/pad"] = np.zeros(1, dtype=np.int64)
    return tensors


def from_tensors(tensors: Dict[str, np.ndarray], spec: transformer.TransformerSpec, source: str) -> VoiceState:
    """Rebuild a voice state, checking it fits a flow LM with this transformer spec."""
    modules: Dict[str, Dict[str, np.ndarray]] = {}
    for key, value in tensors.items():
        module, sep, field = key.rpartition("/")
        if not sep:
            raise VoiceError(f"{source} is not a voice state (unexpected tensor {key!r})")
        modules.setdefault(module, {})[field] = value
    expected = [f"transformer.layers.{i}.self_attn" for i in range(spec.num_layers)]
    if sorted(modules) != sorted(expected):
        raise VoiceError(
            f"{source} is a voice state for a {len(modules)}-layer model; this model has {spec.num_layers} layers"
        )
    keys, values, offsets = [], [], set()
    for name in expected:
        entry = modules[name]
        if "cache" not in entry:
            raise VoiceError(f"{source}: {name} has no cache")
        cache = entry["cache"]
        shape = (2, 1, spec.num_kv_heads, spec.head_dim)
        if cache.ndim != 5 or (cache.shape[0], cache.shape[1], cache.shape[3], cache.shape[4]) != shape:
            raise VoiceError(
                f"{source}: {name}/cache has shape {list(cache.shape)}, this model needs "
                f"[2, 1, T, {spec.num_kv_heads}, {spec.head_dim}]: the voice was made for another model"
            )
        if "offset" in entry:
            offset = int(np.asarray(entry["offset"]).reshape(-1)[0])
        elif "current_end" in entry:
            offset = int(entry["current_end"].shape[0])
        else:
            raise VoiceError(f"{source}: {name} has neither offset nor current_end")
        if "pad" in entry and np.any(np.asarray(entry["pad"]) != 0):
            raise VoiceError(f"{source}: {name} holds a padded (batched) state, which is not a single voice")
        if not 0 < offset <= cache.shape[2]:
            raise VoiceError(f"{source}: {name} has offset {offset} for a cache of {cache.shape[2]} positions")
        filled = np.asarray(cache[:, 0, :offset], dtype=np.float32)  # [2, T, H_kv, D]
        if not np.all(np.isfinite(filled)):
            raise VoiceError(f"{source}: {name} holds NaN or infinite values")
        keys.append(np.ascontiguousarray(filled[0].transpose(1, 0, 2)))  # [H_kv, T, D]
        values.append(np.ascontiguousarray(filled[1].transpose(1, 0, 2)))
        offsets.add(offset)
    if len(offsets) != 1:
        raise VoiceError(f"{source}: the layers disagree on the prompt length ({sorted(offsets)})")
    return VoiceState(transformer.TransformerState(keys, values, offsets.pop()))


def load(path: str, spec: transformer.TransformerSpec) -> VoiceState:
    try:
        tensors, _ = safetensors_file.load(path)
    except ValueError as e:
        raise VoiceError(str(e)) from None
    return from_tensors(tensors, spec, path)
