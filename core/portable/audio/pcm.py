"""Audio in and out: WAV reading and writing, resampling and the voice-prompt cleanup, with NumPy alone.

`resample` is the polyphase filter of scipy.signal.resample_poly (Kaiser window, beta 5, the
official `convert_audio`), so a prompt at any common sample rate gives the official latents. Its
filter grows with the terms of the rates' ratio (24 kHz from 44.1 kHz: 80/147, 2,941 taps; from
191,999 Hz: 24000/191999, 3.8 million), so a ratio whose terms pass MAX_RATIO_TERM is replaced by
the nearest one within it (191,999 Hz is read as 192,000: 5 parts per million slower, far below
what an ear hears): the filter then has at most ~20,000 taps, and the work is the audio's length
times at most ~170 taps, whatever rate a file claims. WAV files of
any common encoding are parsed here; other formats are decoded with soundfile when it is installed
(CPython only: in the browser, the page decodes audio and hands over samples).
"""

from __future__ import annotations

import io
import math
import os
import struct
from fractions import Fraction
from typing import BinaryIO, Optional, Tuple, Union

import numpy as np

from ..errors import AudioError

# Voice prompts longer than this are cut (as the official server and export-voice do).
MAX_PROMPT_SECONDS = 30.0
# Recordings at other rates are refused (the rates of real recordings, 8 kHz telephony to 192 kHz).
MIN_SAMPLE_RATE, MAX_SAMPLE_RATE = 8000, 192000
# The largest term of a resampling ratio (see the module's docstring); every common rate is within.
MAX_RATIO_TERM = 1000
# Samples beyond this are no recording (full scale is 1; a float file may go over it, not by 40 dB).
MAX_AMPLITUDE = 100.0
# A WAV streamed to a pipe cannot go back to write its length: the sizes say "as long as it gets".
STREAMING_WAV_SIZE = 0xFFFFFFFF


def pcm16(pcm: np.ndarray) -> bytes:
    """16-bit little-endian samples, as the official writer makes them (clamp, scale, truncate)."""
    return (np.clip(pcm, -1.0, 1.0) * 32767).astype("<i2").tobytes()


def wav_header(sample_rate: int, data_bytes: int = STREAMING_WAV_SIZE) -> bytes:
    """The 44-byte header of a 16-bit mono WAV; without a length, the header of a stream."""
    riff = STREAMING_WAV_SIZE if data_bytes == STREAMING_WAV_SIZE else 36 + data_bytes
    fmt = struct.pack("<HHIIHH", 1, 1, sample_rate, sample_rate * 2, 2, 16)
    return (
        b"RIFF"
        + struct.pack("<I", riff)
        + b"WAVEfmt "
        + struct.pack("<I", 16)
        + fmt
        + b"data"
        + struct.pack("<I", data_bytes)
    )


def wav_bytes(pcm: np.ndarray, sample_rate: int) -> bytes:
    """A whole 16-bit mono WAV file."""
    data = pcm16(pcm)
    return wav_header(sample_rate, len(data)) + data


def read(source: Union[str, bytes], where: Optional[str] = None) -> Tuple[np.ndarray, int]:
    """The first MAX_PROMPT_SECONDS of a recording (a file's path, or its bytes): mono float32
    samples in [-1, 1] and their sample rate. Only what is kept is decoded, whatever length the file
    claims; a rate outside MIN_SAMPLE_RATE..MAX_SAMPLE_RATE is an AudioError before any decoding."""
    where = where or (source if isinstance(source, str) else "the recording")
    if isinstance(source, str):
        if not os.path.isfile(source):
            raise AudioError(f"audio file not found: {source}")
        try:
            with open(source, "rb") as f:
                return _read(f, where)
        except OSError as e:
            raise AudioError(f"cannot read {source}: {e.strerror or e}") from None
    return _read(io.BytesIO(source), where)


def _read(f: BinaryIO, where: str) -> Tuple[np.ndarray, int]:
    head = f.read(12)
    f.seek(0)
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return _read_wav(f, where)
    return _read_with_soundfile(f, where)


def _read_wav(f: BinaryIO, where: str) -> Tuple[np.ndarray, int]:
    """Parse a RIFF/WAVE file: PCM 8/16/24/32-bit or IEEE float 32/64, any channel count (averaged);
    its first MAX_PROMPT_SECONDS."""
    if f.read(12)[8:12] != b"WAVE":
        raise AudioError(f"cannot decode {where}: not a WAV file")
    fmt = None
    while True:
        header = f.read(8)
        if len(header) < 8:
            raise AudioError(f"cannot decode {where}: not a valid WAV file (no fmt or data chunk)")
        chunk_id, size = header[:4], struct.unpack("<I", header[4:])[0]
        if chunk_id == b"fmt ":
            body = f.read(min(size, 64))
            f.seek(size - len(body) + (size & 1), io.SEEK_CUR)
            if len(body) >= 16:
                fmt = struct.unpack("<HHIIHH", body[:16])
                if fmt[0] == 0xFFFE and len(body) >= 26:
                    fmt = (struct.unpack("<H", body[24:26])[0],) + fmt[1:]
        elif chunk_id == b"data":
            break
        else:
            f.seek(size + (size & 1), io.SEEK_CUR)
    if fmt is None:
        raise AudioError(f"cannot decode {where}: not a valid WAV file (no fmt chunk before its data)")
    tag, channels, rate, _, _, bits = fmt
    if channels < 1:
        raise AudioError(f"cannot decode {where}: invalid WAV header ({channels} channels)")
    _check_rate(rate, where)
    width = bits // 8
    if (tag, bits) not in ((1, 8), (1, 16), (1, 24), (1, 32), (3, 32), (3, 64)):
        raise AudioError(f"cannot decode {where}: unsupported WAV encoding (format {tag}, {bits} bits)")
    # A streamed WAV may claim more than the file holds: read what is kept, of what is there.
    wanted = min(size, int(MAX_PROMPT_SECONDS * rate) * width * channels)
    samples = f.read(wanted)
    usable = len(samples) - len(samples) % (width * channels)
    raw = np.frombuffer(samples[:usable], dtype=np.uint8)
    if tag == 1 and bits == 16:
        x = raw.view("<i2").astype(np.float32) / np.float32(32768.0)
    elif tag == 1 and bits == 8:
        x = (raw.astype(np.float32) - np.float32(128.0)) / np.float32(128.0)
    elif tag == 1 and bits == 24:
        triples = raw.reshape(-1, 3).astype(np.int32)
        ints = (triples[:, 0] << 8) | (triples[:, 1] << 16) | (triples[:, 2] << 24)  # left-justified int32
        x = ints.astype(np.float32) / np.float32(2.0**31)
    elif tag == 1:
        x = raw.view("<i4").astype(np.float32) / np.float32(2.0**31)
    else:
        x = raw.view("<f4" if bits == 32 else "<f8").astype(np.float32)
    x = x.reshape(-1, channels)
    return (x[:, 0] if channels == 1 else x.mean(axis=1)), rate


def _read_with_soundfile(f: BinaryIO, where: str) -> Tuple[np.ndarray, int]:
    """FLAC, MP3, Ogg and the rest of libsndfile's formats, decoded a block at a time up to what is
    kept (a small file of a long silence decodes no more than MAX_PROMPT_SECONDS of it)."""
    try:
        import soundfile
    except ImportError:
        raise AudioError(
            f"{where} is not a WAV file; reading other formats needs soundfile (pip install soundfile)"
        ) from None
    try:
        with soundfile.SoundFile(f) as sound:
            rate, channels = int(sound.samplerate), int(sound.channels)
            _check_rate(rate, where)
            left = int(MAX_PROMPT_SECONDS * rate)
            block = max(1, (1 << 20) // channels)
            parts = []
            while left > 0:
                data = sound.read(min(block, left), dtype="float32", always_2d=True)  # [frames, channels]
                if data.shape[0] == 0:
                    break
                parts.append(data[:, 0] if channels == 1 else data.mean(axis=1))
                left -= data.shape[0]
    except AudioError:
        raise
    except Exception:  # soundfile's errors name its file object (a heap address): not for a client
        raise AudioError(
            f"cannot decode {where}: not a recording in a format this reads (WAV, FLAC, Ogg, MP3)"
        ) from None
    return (np.concatenate(parts) if parts else np.zeros(0, np.float32)), rate


def _check_rate(rate: int, where: str) -> None:
    """Rates past these cost more to resample than any recording needs (an odd rate near the top
    already takes a filter of millions of taps)."""
    if not MIN_SAMPLE_RATE <= rate <= MAX_SAMPLE_RATE:
        raise AudioError(
            f"{where}: sample rate {rate} Hz is outside {MIN_SAMPLE_RATE}-{MAX_SAMPLE_RATE} Hz: resample it first"
        )


def as_mono(samples: np.ndarray, where: str = "audio") -> np.ndarray:
    """A float32 waveform [T] from [T] or [channels, T] input (int16 is scaled to [-1, 1])."""
    x = np.asarray(samples)
    if x.dtype == np.int16:
        x = x.astype(np.float32) / np.float32(32768.0)
    elif x.dtype.kind != "f":
        raise AudioError(f"{where}: expected float samples, got dtype {x.dtype}")
    x = x.astype(np.float32)
    if x.ndim == 2:
        x = x.mean(axis=0)
    if x.ndim != 1:
        raise AudioError(f"{where}: expected samples [T] or [channels, T], got shape {list(np.shape(samples))}")
    if x.size == 0:
        raise AudioError(f"{where} is empty")
    if not np.all(np.isfinite(x)):
        raise AudioError(f"{where} contains NaN or infinite samples")
    peak = float(np.max(np.abs(x)))
    if peak > MAX_AMPLITUDE:
        raise AudioError(f"{where}: its samples reach {peak:.3g}, beyond ±{MAX_AMPLITUDE:g} (full scale is ±1)")
    return x


def resample(x: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    """Polyphase resampling of x [T], equal to scipy.signal.resample_poly(x, up, down) in float32,
    where up/down is `to_rate / from_rate` (its terms within MAX_RATIO_TERM: `resampling_ratio`)."""
    if from_rate == to_rate:
        return x
    up, down = resampling_ratio(int(from_rate), int(to_rate))
    max_rate = max(up, down)
    half_len = 10 * max_rate
    h = (_kaiser_lowpass(2 * half_len + 1, 1.0 / max_rate).astype(x.dtype)) * x.dtype.type(up)
    n_in = x.shape[0]
    n_out = -(-n_in * up // down)
    pre_pad = down - half_len % down
    first = (half_len + pre_pad) // down  # output samples the filter delay pushes out front
    h = np.concatenate([np.zeros(pre_pad, h.dtype), h])
    # Output n of the full filter is sum_l h[phase + l*up] * x[base - l], phase/base from n*down.
    taps = -(-h.shape[0] // up)
    h = np.concatenate([h, np.zeros(taps * up - h.shape[0], h.dtype)])
    phases = h.reshape(taps, up).T  # [up, taps]: phases[r, l] = h[r + l*up]
    padded = np.concatenate([np.zeros(taps - 1, x.dtype), x, np.zeros(taps, x.dtype)])
    out = np.empty(n_out, dtype=x.dtype)
    block = max(1, (1 << 20) // taps)  # output samples a pass: its [block, taps] arrays stay a few MB
    for start in range(0, n_out, block):
        n = np.arange(first + start, first + min(start + block, n_out))
        base, phase = np.divmod(n * down, up)
        index = base[:, None] - np.arange(taps)[None, :] + (taps - 1)  # [B, taps] into `padded`
        valid = index < padded.shape[0]
        window = np.where(valid, padded[np.minimum(index, padded.shape[0] - 1)], 0)
        out[start : start + n.shape[0]] = np.einsum("bl,bl->b", window, phases[phase])
    return out


def resampling_ratio(from_rate: int, to_rate: int) -> Tuple[int, int]:
    """(up, down): to_rate / from_rate in lowest terms, or where one of them would pass
    MAX_RATIO_TERM, the nearest ratio whose terms do not."""
    g = math.gcd(from_rate, to_rate)
    up, down = to_rate // g, from_rate // g
    if max(up, down) <= MAX_RATIO_TERM:
        return up, down
    ratio = Fraction(from_rate, to_rate)  # down / up
    nearest = ratio.limit_denominator(max(1, int(MAX_RATIO_TERM / max(ratio, Fraction(1)))))
    return nearest.denominator, nearest.numerator


def _kaiser_lowpass(numtaps: int, cutoff: float) -> np.ndarray:
    """scipy.signal.firwin(numtaps, cutoff, window=("kaiser", 5.0)): windowed sinc, unit DC gain."""
    m = np.arange(numtaps) - (numtaps - 1) / 2.0
    h = cutoff * np.sinc(cutoff * m) * np.kaiser(numtaps, 5.0)
    return h / h.sum()


def end_on_pause(
    x: np.ndarray, sample_rate: int, pause_sec: float = 0.08, fade_sec: float = 0.02, floor_db: float = 35.0
) -> np.ndarray:
    """End a voice prompt on exactly `pause_sec` of silence, as the official `end_on_pause`.

    A prompt that stops mid-word makes the model continue that word; one that ends on a long
    silence delays the speech. Trailing 20 ms frames more than `floor_db` below the loudest are
    cut, the last `fade_sec` is faded out, then `pause_sec` of zeros is appended.
    """
    frame = max(1, int(0.02 * sample_rate))
    n = x.shape[0] // frame
    if n == 0:
        return x
    rms = np.sqrt(np.mean(np.square(x[: n * frame].reshape(n, frame)), axis=1))  # [n]
    db = np.float32(20) * np.log10(rms + np.float32(1e-12))
    loud = np.nonzero(db > db.max() - np.float32(floor_db))[0]
    end = (int(loud[-1]) + 1) * frame
    y = x[:end].copy()
    fade = min(int(fade_sec * sample_rate), end)
    y[end - fade :] *= np.linspace(1, 0, fade, dtype=np.float32)
    return np.concatenate([y, np.zeros(int(pause_sec * sample_rate), np.float32)])


def trim_prompt(samples: np.ndarray, sample_rate: int, model_rate: int, where: str = "audio") -> np.ndarray:
    """What a voice prompt keeps of a recording: mono, at most MAX_PROMPT_SECONDS, at the model's rate."""
    if not isinstance(sample_rate, (int, np.integer)):
        raise AudioError(f"{where}: invalid sample rate {sample_rate!r}")
    _check_rate(int(sample_rate), where)
    x = as_mono(samples, where)
    x = x[: int(MAX_PROMPT_SECONDS * sample_rate)]
    return resample(x, int(sample_rate), model_rate)


def prepare_prompt(samples: np.ndarray, sample_rate: int, model_rate: int, where: str = "audio") -> np.ndarray:
    """Any waveform -> the official encoder input: mono, at most 30 s, model rate, ending on a pause."""
    return end_on_pause(trim_prompt(samples, sample_rate, model_rate, where), model_rate)
