"""Audio out of the server in the formats clients ask for: WAV and raw 16-bit PCM (which stream),
and the compressed formats soundfile's libsndfile can write (FLAC, MP3, Ogg/Opus), whole files."""

from __future__ import annotations

import io
from typing import List

import numpy as np

from core.portable.audio import pcm16, wav_bytes

MEDIA_TYPES = {
    "wav": "audio/wav",
    "pcm": "audio/pcm",
    "flac": "audio/flac",
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
}
# soundfile (container, subtype) of the compressed formats.
_SOUNDFILE = {"flac": ("FLAC", "PCM_16"), "mp3": ("MP3", "MPEG_LAYER_III"), "opus": ("OGG", "OPUS")}


def available(fmt: str) -> bool:
    """Whether this machine can write `fmt` (MP3 needs a libsndfile built with LAME)."""
    if fmt in ("wav", "pcm"):
        return True
    import soundfile

    container, subtype = _SOUNDFILE[fmt]
    return container in soundfile.available_formats() and subtype in soundfile.available_subtypes(container)


def encode(pcm: np.ndarray, sample_rate: int, fmt: str) -> bytes:
    """A whole file in `fmt`."""
    if fmt == "wav":
        return wav_bytes(pcm, sample_rate)
    if fmt == "pcm":
        return pcm16(pcm)
    import soundfile

    container, subtype = _SOUNDFILE[fmt]
    out = io.BytesIO()
    soundfile.write(out, np.clip(pcm, -1.0, 1.0), sample_rate, format=container, subtype=subtype)
    return out.getvalue()


def encode_chunks(chunks: List[np.ndarray], sample_rate: int, fmt: str) -> bytes:
    """A whole file in `fmt` of a generation's chunks, joined here (off the event loop: up to a
    request's whole audio)."""
    return encode(np.concatenate(chunks) if chunks else np.zeros(0, np.float32), sample_rate, fmt)
