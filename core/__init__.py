"""Pocket TTS in NumPy: Kyutai's streaming text-to-speech model as NumPy functions and data.

from core import TTSModel
model = TTSModel.load("english")                     # a catalog name, a config file or a bundle folder
voice = model.voice_state("voice.wav")
pcm = model.generate("Hello world.", voice)          # float32 [n] at model.sample_rate
core.backend()                                        # what runs the products, e.g. "compiled kernels ..."

Two floors. core/portable/ is the model: everything the browser's Pyodide runs too (NumPy and the
standard library, Python 3.8). The modules here are its CPython host: the command line (cli.py),
batch jobs (batch.py), bundle export (export.py), downloads (hub.py), atomic files (files.py) and
the compiled kernels (native.py). The host imports the model, never the other way round.

This file plugs the host into the model's three seams: downloads of hf:// files
(sources.use_fetcher), the fastest backend for the products (ops.use: the kernels pip compiled,
else NumPy), and how a generation runs alone (model.use_runner: on a machine of two cores or more,
the flow LM on a thread of its own, core/pipeline.py: every Python caller gets the fast path). All
are inert in the browser, which has no threads, installs its own kernels and loads bundles from its
site.
"""

from __future__ import annotations

__version__ = "0.1.0"  # the package's (pyproject.toml reads it here)

import os
import sys

from . import hub, native, pipeline
from .portable import model as portable_model
from .portable import ops, sources
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
from .portable.model import TTSModel
from .portable.voice_state import VoiceState

sources.use_fetcher(hub.fetch)
ops.use(native.backend())
if sys.platform != "emscripten" and (os.cpu_count() or 1) > 1:  # Pyodide has no threads
    portable_model.use_runner(pipeline.run)


def backend() -> str:
    """What runs the model's products now (the compiled kernels, NumPy, or a runtime's own)."""
    return str(ops.current().description)


__all__ = [
    "TTSModel",
    "VoiceState",
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
