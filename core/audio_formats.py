"""Audio files in the formats users ask for: WAV and raw 16-bit PCM (which stream), and the
compressed formats soundfile's libsndfile can write (FLAC, MP3, Ogg/Opus), whole files. The server's
answers and the command line's files are written here. AAC is not among them: libsndfile has no
AAC encoder, and an encoder of our own or ffmpeg's is not worth its weight for one of OpenAI's six."""

from __future__ import annotations

import io
import os
from typing import List, Optional

import numpy as np

from .portable.audio import pcm16, wav_bytes
from .portable.errors import PocketTTSError

MEDIA_TYPES = {
    "wav": "audio/wav",
    "pcm": "audio/pcm",
    "flac": "audio/flac",
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
}
# soundfile (container, subtype) of the compressed formats.
_SOUNDFILE = {"flac": ("FLAC", "PCM_16"), "mp3": ("MP3", "MPEG_LAYER_III"), "opus": ("OGG", "OPUS")}
# A file's extension -> the format written to it.
EXTENSIONS = {
    ".wav": "wav",
    ".flac": "flac",
    ".mp3": "mp3",
    ".ogg": "opus",
    ".opus": "opus",
    ".pcm": "pcm",
    ".raw": "pcm",
}
FILE_FORMATS = ("wav", "flac", "mp3", "opus", "pcm")


def available(fmt: str) -> bool:
    """Whether this machine can write `fmt` (MP3 needs a libsndfile built with LAME)."""
    if fmt in ("wav", "pcm"):
        return True
    import soundfile

    container, subtype = _SOUNDFILE[fmt]
    return container in soundfile.available_formats() and subtype in soundfile.available_subtypes(container)


def writable() -> List[str]:
    """The formats this machine writes."""
    return [fmt for fmt in FILE_FORMATS if available(fmt)]


def format_of(path: Optional[str], fmt: Optional[str]) -> str:
    """The format of an output file: `fmt` where given, else its extension's (a name without one,
    stdout and a device get a WAV); a PocketTTSError naming what can be written where neither can be."""
    if fmt is None:
        extension = os.path.splitext(path or "")[1].lower()
        if path in (None, "-") or not extension:
            fmt = "wav"
        elif extension not in EXTENSIONS:
            raise PocketTTSError(
                f"cannot write {extension} files ({path}): name a {', '.join(sorted(EXTENSIONS))} file, "
                "or choose one with --format"
            )
        else:
            fmt = EXTENSIONS[extension]
    if fmt not in FILE_FORMATS:
        raise PocketTTSError(f"unknown format {fmt!r}: use one of {', '.join(FILE_FORMATS)}")
    if not available(fmt):
        raise PocketTTSError(
            f"this machine's libsndfile cannot write {fmt} (MP3 needs libsndfile 1.1 or later, built with LAME): "
            f"use one of {', '.join(writable())}"
        )
    return fmt


def encode(pcm: np.ndarray, sample_rate: int, fmt: str) -> bytes:
    """A whole file in `fmt`; a WAV's header says its length."""
    if fmt == "wav":
        return wav_bytes(pcm, sample_rate)
    if fmt == "pcm":
        return pcm16(pcm)
    import soundfile

    container, subtype = _SOUNDFILE[fmt]
    out = io.BytesIO()
    samples = np.frombuffer(pcm16(pcm), "<i2")  # [n] the WAV's samples: FLAC holds exactly them
    soundfile.write(out, samples, sample_rate, format=container, subtype=subtype)
    return out.getvalue()


def encode_chunks(chunks: List[np.ndarray], sample_rate: int, fmt: str) -> bytes:
    """A whole file in `fmt` of a generation's chunks, joined here (on the server, off the event
    loop: up to a request's whole audio)."""
    return encode(np.concatenate(chunks) if chunks else np.zeros(0, np.float32), sample_rate, fmt)
