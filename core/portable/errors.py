"""The one exception family `core` raises for bad input (files, configs, text, audio, voices).

Every message names the file, field or value at fault, so a caller can show it as it is.
"""

from __future__ import annotations

import difflib
from typing import Sequence


class PocketTTSError(ValueError):
    """Bad input to the model: a missing or malformed file, config, voice, audio or text."""


class ConfigError(PocketTTSError):
    """A model config that does not follow the official YAML schema."""


class NoTimestampsError(ConfigError):
    """Word timestamps asked of a model whose config names no timestamp heads."""


class WeightsError(PocketTTSError):
    """A weights file that is missing, unreadable, or does not match its config."""


class AudioError(PocketTTSError):
    """An audio input that cannot be read or used as a voice prompt."""


class VoiceError(PocketTTSError):
    """A voice that cannot be found or does not fit the model."""


class TextError(PocketTTSError):
    """A text prompt that cannot be spoken (empty, or malformed markup)."""


class EmptyTextError(TextError):
    """A text with nothing to speak (or not a text at all)."""


class DownloadError(PocketTTSError):
    """A file that could not be fetched (no network, no access, not found)."""


class LimitError(PocketTTSError):
    """A request for more than a limit allows (audio longer than a generation may last)."""


def did_you_mean(name: str, names: Sequence[str]) -> str:
    """An error's hint for a name that stands for nothing: "did you mean 'a' or 'b'? " with the (up
    to three) of `names` closest to it, or nothing where none is close."""
    close = difflib.get_close_matches(name.lower(), names, n=3, cutoff=0.6)
    return f"did you mean {' or '.join(repr(found) for found in close)}? " if close else ""
