"""Pocket TTS in NumPy: Kyutai's streaming text-to-speech model as NumPy functions and data.

from core import TTSModel
model = TTSModel.load("english")                     # a catalog name, a config file or a bundle folder
voice = model.voice_state("voice.wav")
pcm = model.generate("Hello world.", voice)          # float32 [n] at model.sample_rate
core.backend()                                        # what runs the products, e.g. "compiled kernels ..."

Two floors. core/portable/ is the model: everything the browser's Pyodide runs too (NumPy and the
standard library, Python 3.8). The modules here are its CPython host: the command line (cli.py),
batch jobs (batch.py), bundle export (export.py), downloads (hub.py), atomic files (files.py), the
compiled kernels (native.py) and the threads (pipeline.py, threads.py). The host imports the
model, never the other way round.

Whoever loads a model chooses what runs it (core.portable.model.Runtime: the backend of its
products, how a generation runs alone, how hf:// files are fetched). `TTSModel.load` here gives
CPython's unless told otherwise (core/host.py: the kernels pip compiled, else NumPy; the flow LM
on a thread of its own where it pays; downloads). Importing core changes nothing in the process.
"""

from __future__ import annotations

__version__ = "0.1.0"  # the package's (pyproject.toml reads it here)

from . import host
from .portable import model as portable_model
from .portable.errors import (
    AudioError,
    ConfigError,
    DownloadError,
    EmptyTextError,
    LimitError,
    NoTimestampsError,
    PocketTTSError,
    TextError,
    VoiceError,
    WeightsError,
)
from .portable.model import Runtime
from .portable.voices.state import VoiceState


class TTSModel(portable_model.TTSModel):
    """The model on CPython: `load` gives it this host's runtime (core/host.py) unless it is given
    another (Runtime(): NumPy on the caller's thread, no downloads)."""

    @classmethod
    def default_runtime(cls) -> Runtime:
        return host.runtime()


def backend() -> str:
    """What runs the products of the models `TTSModel.load` loads here (the compiled kernels, or
    NumPy and why)."""
    return str(host.runtime().backend.description)


__all__ = [
    "TTSModel",
    "VoiceState",
    "Runtime",
    "backend",
    "PocketTTSError",
    "ConfigError",
    "WeightsError",
    "AudioError",
    "VoiceError",
    "TextError",
    "EmptyTextError",
    "DownloadError",
    "LimitError",
    "NoTimestampsError",
]
