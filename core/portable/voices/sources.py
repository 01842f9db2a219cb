"""A voice for a model: a predefined name, an audio file to clone, a .safetensors voice state
(local or hf://), or samples. What it needs of the model comes in a VoiceBook (its voices, its
rate, its fetcher and its encoder), so that voices know nothing of the model object."""

from __future__ import annotations

import os
from typing import Callable, Mapping, NamedTuple, Optional, Sequence

import numpy as np

from ..audio import pcm as audio
from ..errors import DownloadError, VoiceError, did_you_mean
from ..network import transformer
from ..weights import catalog, sources
from . import state as voice_state
from .state import VoiceSource, VoiceState

# A recording at the model's rate [T] (prompt-cleaned) -> its voice state: the model's encoder.
Encode = Callable[[np.ndarray], VoiceState]


class VoiceBook(NamedTuple):
    """What a model gives its voices: its name (for errors), its predefined voices (name -> state
    file), its default, its rate, its transformer's layout (of a voice state's caches), how hf://
    files are fetched, and its encoder (which says why it cannot clone, where it cannot)."""

    model_name: str
    predefined: Mapping[str, str]
    default: Optional[str]
    sample_rate: int
    layout: transformer.TransformerSpec
    fetch: sources.Fetch
    encode: Encode


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
    raise VoiceError(
        f"unknown voice {source!r}: {did_you_mean(source, names)}the voices of {model_name} are "
        f"{', '.join(sorted(names))}"
    )


def check_before_loading(model_source: str, voices: Sequence[str]) -> None:
    """`check` of each of `voices` for a model not loaded yet: its predefined voices read without
    fetching anything (core.portable.weights.sources.voice_names)."""
    names = sources.voice_names(model_source)
    for voice in voices:
        check(voice, names, model_source)


def resolve(book: VoiceBook, source: VoiceSource, sample_rate: Optional[int]) -> VoiceState:
    """The voice of `source`; None is the model's default voice."""
    if source is None:
        if book.default is None:
            raise VoiceError(f"{book.model_name} has no default voice: pass an audio file or a voice state")
        try:
            return resolve(book, book.default, None)
        except DownloadError as e:
            if book.default in book.predefined:
                raise
            raise VoiceError(
                f"{book.model_name} has no voice of its own, and its default (the official package's "
                f"{sources.CUSTOM_MODEL_VOICE!r} recording) could not be fetched ({e}): pass a voice, an audio "
                "file or a .safetensors voice state (--voice on the command line)"
            ) from None
    if isinstance(source, VoiceState):
        return source
    if isinstance(source, np.ndarray):
        if sample_rate is None:
            raise VoiceError("voice samples need their sample_rate")
        return clone(book, source, sample_rate, "voice samples")
    path = os.fspath(source)
    if path in book.predefined:
        path = book.predefined[path]
    else:
        check(path, list(book.predefined), book.model_name)
    if path.startswith("hf://"):
        path = book.fetch(path)
    if path.endswith(".safetensors"):
        return voice_state.load(path, book.layout)
    samples, rate = audio.read(path)
    return clone(book, samples, rate, path)


def clone(book: VoiceBook, samples: np.ndarray, sample_rate: int, where: str) -> VoiceState:
    """The voice of a recording (samples [T] or [channels, T]); `where` names it in errors."""
    return book.encode(audio.prepare_prompt(samples, sample_rate, book.sample_rate, where))
