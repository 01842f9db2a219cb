"""A voice for a model: a predefined name, an audio file to clone, a .safetensors voice state
(local or hf://), or samples; and the cloning itself (the Mimi encoder, then the flow LM reads the
recording's conditioning as the voice's prompt)."""

from __future__ import annotations

import os
from typing import Any, Optional

import numpy as np

from . import audio, catalog, flow_lm, mimi, params, sources, transformer, voice_state
from .errors import VoiceError
from .voice_state import VoiceSource, VoiceState


def resolve(model: Any, source: VoiceSource, sample_rate: Optional[int]) -> VoiceState:
    """The voice of `source` for `model` (a TTSModel); None is the model's default voice."""
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
        path = sources.fetch(path)
    if path.endswith(".safetensors"):
        if not os.path.isfile(path):
            raise VoiceError(f"voice state file not found: {path}")
        return voice_state.load(path, model.flow_spec.transformer)
    if not os.path.isfile(path):
        known = f" (predefined voices: {', '.join(sorted(model.voices))})" if model.voices else ""
        raise VoiceError(f"voice not found: {path!r} is neither a voice name, an audio file nor a voice state{known}")
    samples, rate = audio.read(path)
    return model.clone_voice(samples, rate, path)


def clone(model: Any, samples: np.ndarray, sample_rate: int, where: str) -> VoiceState:
    """The voice of a recording (samples [T] or [channels, T]); `where` names it in errors."""
    model.require(params.VOICE_CLONING)
    if not model.can_clone_voices:
        raise VoiceError(
            f"{model.name} cannot clone voices: its weights come without voice cloning (for the official "
            "models, accept the terms at https://huggingface.co/kyutai/pocket-tts and log in with "
            "`hf auth login` or HF_TOKEN). Use a predefined voice or a .safetensors voice state."
        )
    prompt = audio.prepare_prompt(samples, sample_rate, model.sample_rate, where)
    latents = mimi.encode(model.mimi_spec, model.params["mimi"], prompt)  # [frames, C]
    conditioning = flow_lm.voice_conditioning(model.flow_spec, model.params["flow_lm"], latents)
    state = transformer.init_state(model.flow_spec.transformer, capacity=conditioning.shape[0])
    flow_lm.prompt(model.flow_spec, model.params["flow_lm"], state, conditioning)
    return VoiceState(state)
