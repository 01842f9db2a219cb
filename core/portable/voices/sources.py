"""A voice for a model: a predefined name, an audio file to clone, a .safetensors voice state
(local or hf://), or samples; and the cloning itself (the Mimi encoder, then the flow LM reads the
recording's conditioning as the voice's prompt)."""

from __future__ import annotations

import difflib
import os
from typing import Any, Optional, Sequence

import numpy as np

from ..audio import pcm as audio
from ..errors import DownloadError, VoiceError
from ..network import flow_lm, mimi, ops, transformer
from ..weights import catalog, params, sources
from . import state as voice_state
from .state import VoiceSource, VoiceState

# What a voice that is a file ends with (a name with a folder in it is a file too).
FILE_ENDINGS = (".safetensors", ".wav", ".flac", ".mp3", ".ogg", ".opus", ".aiff", ".aif", ".au")


def check(source: str, names: Sequence[str], model_name: str) -> None:
    """A VoiceError now, before any work, for a voice `source` that is neither one of `names` (the
    model's predefined voices), a file, nor an hf:// path: a file that is not there says so; a name
    says which names there are, the closest first."""
    if source in names or source.startswith("hf://") or os.path.isfile(source):
        return
    if os.path.isdir(source):
        raise VoiceError(f"voice {source!r} is a folder: name an audio file or a .safetensors voice state")
    if os.sep in source or "/" in source or source.lower().endswith(FILE_ENDINGS):
        raise VoiceError(f"voice file not found: {source}")
    ours = f"use one of its voices ({', '.join(sorted(names))}) or" if names else "it has no predefined voices:"
    if source in catalog.voice_names():
        raise VoiceError(
            f"the predefined voice {source!r} is a state computed with the released weights of a catalog "
            f"model; {model_name} cannot use it: {ours} pass an audio file or a .safetensors voice state"
        )
    if not names:
        raise VoiceError(
            f"{model_name} has no predefined voices, and {source!r} is no file: pass an audio file or a "
            ".safetensors voice state"
        )
    close = difflib.get_close_matches(source.lower(), names, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(repr(name) for name in close)}? " if close else ""
    raise VoiceError(f"unknown voice {source!r}: {hint}the voices of {model_name} are {', '.join(sorted(names))}")


def check_before_loading(model_source: str, voices: Sequence[str]) -> None:
    """`check` of each of `voices` for a model not loaded yet: its predefined voices read without
    fetching anything (core.portable.weights.sources.voice_names)."""
    names = sources.voice_names(model_source)
    for voice in voices:
        check(voice, names, model_source)


def resolve(model: Any, source: VoiceSource, sample_rate: Optional[int]) -> VoiceState:
    """The voice of `source` for `model` (a TTSModel); None is the model's default voice."""
    if source is None:
        if model.default_voice is None:
            raise VoiceError(f"{model.name} has no default voice: pass an audio file or a voice state")
        try:
            return resolve(model, model.default_voice, None)
        except DownloadError as e:
            if model.default_voice in model.voices:
                raise
            raise VoiceError(
                f"{model.name} has no voice of its own, and its default (the official package's "
                f"{sources.CUSTOM_MODEL_VOICE!r} recording) could not be fetched ({e}): pass a voice, an audio "
                "file or a .safetensors voice state (--voice on the command line)"
            ) from None
    if isinstance(source, VoiceState):
        return source
    if isinstance(source, np.ndarray):
        if sample_rate is None:
            raise VoiceError("voice samples need their sample_rate")
        return model.clone_voice(source, sample_rate, "voice samples")
    path = os.fspath(source)
    if path in model.voices:
        path = model.voices[path]
    else:
        check(path, list(model.voices), model.name)
    if path.startswith("hf://"):
        path = model.runtime.fetch(path)
    if path.endswith(".safetensors"):
        return voice_state.load(path, model.flow_spec.transformer)
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
    with ops.using(model.runtime.backend):
        latents = mimi.encode(model.mimi_spec, model.params["mimi"], prompt)  # [frames, C]
        conditioning = flow_lm.voice_conditioning(model.flow_spec, model.params["flow_lm"], latents)
        state = transformer.init_state(model.flow_spec.transformer, capacity=conditioning.shape[0])
        flow_lm.prompt(model.flow_spec, model.params["flow_lm"], state, conditioning)
    return VoiceState(state)
