"""Pocket TTS in NumPy: Kyutai's streaming text-to-speech model as NumPy functions and data.

from core import TTSModel
model = TTSModel.load("path/to/config.yaml")
voice = model.voice_state("voice.wav")
pcm = model.generate("Hello world.", voice)          # float32 [n] at model.sample_rate
"""

from __future__ import annotations

from .errors import (
    AudioError,
    ConfigError,
    DownloadError,
    LimitError,
    PocketTTSError,
    TextError,
    VoiceError,
    WeightsError,
)
from .model import TTSModel
from .voice import VoiceState

__all__ = [
    "TTSModel",
    "VoiceState",
    "PocketTTSError",
    "ConfigError",
    "WeightsError",
    "AudioError",
    "VoiceError",
    "TextError",
    "DownloadError",
    "LimitError",
]
