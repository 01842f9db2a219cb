"""The options of a generation, in one place: the command line, the server and the browser worker
build a GenerationOptions, and the docs' table (docs/options.md) is checked against it
(tests/project/test_options.py).
None means the model config's default, as in the official package."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, Optional, Tuple

import numpy as np

from ..audio.tsm import MAX_SPEED, MIN_SPEED, check_speed
from ..errors import PocketTTSError

# What a request may ask for where requests come from others (the server's requests, the batch
# command's lines): the characters of its text, the audio it may make, pauses included, and each
# option's range. The command line and the Python API take any valid value (and the model's own
# cap, an hour of audio); a batch job may raise its text limit (batch --max-text).
MAX_TEXT = 5000  # characters of one whole text
REQUEST_SECONDS = 600.0
REQUEST_RANGES: Dict[str, Tuple[float, float]] = {
    "temperature": (0.0, 5.0),
    "eos_threshold": (-100.0, 100.0),
    "max_frames": (0, 7500),  # REQUEST_SECONDS at 12.5 frames a second
    "frames_after_eos": (0, 100),
    "lsd_decode_steps": (1, 64),
    "seed": (0, 2**63 - 1),
    "max_tokens": (1, 500),
    "noise_clamp": (0.0, 100.0),  # above the low end
}
# Speed is a property of the audio, not of who asks: the same range for every caller; so is loudness.
SPEED_RANGE = (MIN_SPEED, MAX_SPEED)
LOUDNESS_RANGE = (-40.0, -5.0)  # LUFS


def _option(default: Any, doc: str) -> Any:
    return dataclasses.field(default=default, metadata={"doc": doc})


@dataclasses.dataclass(frozen=True)
class GenerationOptions:
    temperature: Optional[float] = _option(
        None, "variance of the sampling noise; the config's (0.3) by default; `0` is deterministic"
    )
    eos_threshold: Optional[float] = _option(
        None, "generation stops once the end-of-speech logit exceeds it (the config's, -4); `inf` never stops"
    )
    max_frames: Optional[int] = _option(
        None,
        "total budget of 80 ms frames, pauses included; when set it replaces the official length estimate "
        "(3 tokens/s + 2 s per chunk); in a text stream, each segment's own",
    )
    frames_after_eos: Optional[int] = _option(
        None, "frames kept after end of speech; default: the config's, else 5 for up to four words, 3 otherwise"
    )
    lsd_decode_steps: int = _option(1, "steps of the flow head per frame (1)")
    seed: Optional[int] = _option(None, "seed of the sampling noise (none: fresh randomness)")
    max_tokens: int = _option(50, "tokens per text chunk (50): long texts are split on sentences, then commas")
    noise_clamp: Optional[float] = _option(None, "truncate the sampling noise to ±clamp")
    speed: float = _option(1.0, "speaking rate, 0.25 to 4 (1: as generated, bit for bit); the pitch is kept")
    normalize: bool = _option(
        True, "read numbers, dates, currency, units and abbreviations as words (false: the text as given, as official)"
    )
    pauses: bool = _option(
        True, 'pause markup ([pause:500ms], <break time="1s"/>) is silence (false: the markup is read as text)'
    )
    loudness: Optional[float] = _option(
        None,
        "the voice brought to this loudness, in LUFS (-40 to -5; -18 is usual), peaks under -1 dBFS; none: as "
        "the model makes it, bit for bit",
    )

    @classmethod
    def of(cls, values: Dict[str, Any]) -> GenerationOptions:
        """From a mapping of option names (the JSON of a request), refusing unknown names."""
        unknown = sorted(set(values) - {field.name for field in dataclasses.fields(cls)})
        if unknown:
            raise PocketTTSError(f"unknown option {unknown[0]!r} (options: {', '.join(names())})")
        return cls(**values)

    def check(self) -> None:
        """Raise PocketTTSError naming the first option out of range."""

        def number(name: str, value: Any) -> float:
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
                raise PocketTTSError(f"{name} must be a number, got {value!r}")
            if math.isnan(value):
                raise PocketTTSError(f"{name} must not be NaN")
            return float(value)

        def count(name: str, value: Any, minimum: int) -> None:
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
                raise PocketTTSError(f"{name} must be an integer >= {minimum}, got {value!r}")

        if self.temperature is not None and not 0 <= number("temperature", self.temperature) < math.inf:
            raise PocketTTSError(f"temperature must be >= 0 and finite, got {self.temperature!r}")
        if self.eos_threshold is not None:
            number("eos_threshold", self.eos_threshold)
        for name in ("max_frames", "frames_after_eos"):
            if getattr(self, name) is not None:
                count(name, getattr(self, name), 0)
        count("lsd_decode_steps", self.lsd_decode_steps, 1)
        count("max_tokens", self.max_tokens, 1)
        if self.seed is not None:
            count("seed", self.seed, 0)
        if self.noise_clamp is not None and not 0 < number("noise_clamp", self.noise_clamp) < math.inf:
            raise PocketTTSError(f"noise_clamp must be > 0, got {self.noise_clamp!r}")
        check_speed(self.speed)
        for name in ("normalize", "pauses"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise PocketTTSError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if self.loudness is not None:
            low, high = LOUDNESS_RANGE
            if not low <= number("loudness", self.loudness) <= high:
                raise PocketTTSError(f"loudness must be between {low:g} and {high:g} LUFS, got {self.loudness!r}")

    def check_request(self) -> None:
        """`check`, and the ranges a request may ask for (REQUEST_RANGES)."""
        self.check()
        for name, (low, high) in REQUEST_RANGES.items():
            value = getattr(self, name)
            if value is not None and not low <= value <= high:
                raise PocketTTSError(f"{name} must be between {low:g} and {high:g} in a request, got {value!r}")


def names() -> list:
    return [field.name for field in dataclasses.fields(GenerationOptions)]
