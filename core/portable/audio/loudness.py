"""Loudness as ITU-R BS.1770-4 measures it (integrated, in LUFS), for mono audio at any rate, with
NumPy alone (the browser computes what the server does).

The K-weighting is two biquads, a high shelf (+4 dB above ~1.7 kHz: the head's effect) and a high
pass (~38 Hz), whose analogue prototypes give the standard's 48 kHz coefficients exactly and the
same response at other rates (bilinear transform, prewarped). They are applied in the frequency
domain (the signal padded with PAD_SECONDS of silence, so that the filters' response dies out
before it wraps round): NumPy has no recursive filter, and a loop per sample in Python would cost
seconds. The transform is this module's own (`fft`, radix 2 in NumPy): numpy.fft's library is
left out of the page's start, and loaded later in Pyodide 0.17 it fails on its first call. Then
the mean square of 400 ms blocks every 100 ms, an absolute gate at -70 LUFS and a relative one 10
LU below the loudness of the blocks over it.
"""

from __future__ import annotations

import math
from typing import List, Tuple

import numpy as np

# The K-weighting's prototypes (ITU-R BS.1770-4's 48 kHz coefficients, as frequency, gain and Q).
SHELF_HZ, SHELF_DB, SHELF_Q = 1681.974450955533, 3.999843853973347, 0.7071752369554196
HIGH_PASS_HZ, HIGH_PASS_Q = 38.13547087602444, 0.5003270373238773
BLOCK_SECONDS, STEP_SECONDS = 0.4, 0.1
ABSOLUTE_GATE = -70.0  # LUFS
RELATIVE_GATE = -10.0  # LU below the absolutely gated loudness
PAD_SECONDS = 0.5


def _shelf(rate: int) -> Tuple[np.ndarray, np.ndarray]:
    k = math.tan(math.pi * SHELF_HZ / rate)
    high = 10 ** (SHELF_DB / 20)
    band = high**0.4996667741545416
    a0 = 1 + k / SHELF_Q + k * k
    b = np.array([high + band * k / SHELF_Q + k * k, 2 * (k * k - high), high - band * k / SHELF_Q + k * k]) / a0
    a = np.array([1.0, 2 * (k * k - 1) / a0, (1 - k / SHELF_Q + k * k) / a0])
    return b, a


def _high_pass(rate: int) -> Tuple[np.ndarray, np.ndarray]:
    k = math.tan(math.pi * HIGH_PASS_HZ / rate)
    a0 = 1 + k / HIGH_PASS_Q + k * k
    return np.array([1.0, -2.0, 1.0]), np.array([1.0, 2 * (k * k - 1) / a0, (1 - k / HIGH_PASS_Q + k * k) / a0])


def fft(x: np.ndarray, inverse: bool = False) -> np.ndarray:
    """The discrete Fourier transform of `x` [n] (n a power of two), complex128 [n]; `inverse`:
    the inverse transform (scaled by 1/n). A DFT of at most 32 points as a product, then the
    radix-2 butterflies of each stage at once (decimation in time)."""
    n = x.shape[0]
    sign = 1.0 if inverse else -1.0
    small = min(n, 32)
    angle = 2 * np.pi * np.outer(np.arange(small), np.arange(small)) / small  # [small, small]
    out = (np.cos(angle) + sign * 1j * np.sin(angle)) @ np.asarray(x, np.complex128).reshape(small, -1)
    while out.shape[0] < n:  # [m, n // m]: the transforms of the n // m interleaved subsequences
        half = out.shape[1] // 2
        turn = np.pi * np.arange(out.shape[0]) / out.shape[0]  # [m]
        twiddled = (np.cos(turn) + sign * 1j * np.sin(turn))[:, None] * out[:, half:]  # [m, half]
        out = np.vstack([out[:, :half] + twiddled, out[:, :half] - twiddled])
    out = out.reshape(n)
    return out / n if inverse else out


def k_weighted(pcm: np.ndarray, rate: int) -> np.ndarray:
    """`pcm` [T] through the K-weighting filters (float64 [T])."""
    n = pcm.shape[0] + int(PAD_SECONDS * rate)
    size = 1 << max(1, (n - 1).bit_length())
    padded = np.zeros(size, np.float64)  # [size]
    padded[: pcm.shape[0]] = pcm
    w = 2 * np.pi * np.arange(size) / size  # [size]: the whole circle, so the response is conjugate-symmetric
    cos, sin = np.stack([np.cos(w), np.cos(2 * w)]), np.stack([np.sin(w), np.sin(2 * w)])  # [2, size]
    real, imag = np.ones_like(w), np.zeros_like(w)  # the filters' response at z = e^-jw
    for b, a in (_shelf(rate), _high_pass(rate)):
        top_r, top_i = b[0] + b[1:] @ cos, -(b[1:] @ sin)
        bottom_r, bottom_i = a[0] + a[1:] @ cos, -(a[1:] @ sin)
        power = bottom_r * bottom_r + bottom_i * bottom_i
        h_r, h_i = (top_r * bottom_r + top_i * bottom_i) / power, (top_i * bottom_r - top_r * bottom_i) / power
        real, imag = real * h_r - imag * h_i, real * h_i + imag * h_r
    return fft(fft(padded) * (real + 1j * imag), inverse=True).real[: pcm.shape[0]]


def integrated(pcm: np.ndarray, rate: int) -> float:
    """The integrated loudness of mono `pcm` [T] at `rate`, in LUFS; -inf where no block passes the
    gates (silence, or less than a block of audio)."""
    weighted = k_weighted(pcm, rate)
    block, step = int(round(BLOCK_SECONDS * rate)), int(round(STEP_SECONDS * rate))
    if weighted.shape[0] < block:
        return -math.inf
    squares = np.concatenate([[0.0], np.cumsum(weighted * weighted)])  # running sums: a block's mean in O(1)
    starts = np.arange(0, weighted.shape[0] - block + 1, step)
    means = (squares[starts + block] - squares[starts]) / block  # [blocks]
    with np.errstate(divide="ignore"):
        loudness = -0.691 + 10 * np.log10(means)
    kept = means[loudness > ABSOLUTE_GATE]
    if kept.shape[0] == 0:
        return -math.inf
    relative = -0.691 + 10 * math.log10(float(kept.mean())) + RELATIVE_GATE
    kept = means[(loudness > ABSOLUTE_GATE) & (loudness > relative)]
    return -0.691 + 10 * math.log10(float(kept.mean()))


# The ceiling a leveled stream's samples stay under, and how fast its limiter gives back what it took.
CEILING_DB = -1.0
RELEASE_DB_PER_CHUNK = 1.0


class Leveler:
    """A stream's audio brought to a loudness: every chunk multiplied by one gain (`gain_db`, fixed
    from the first chunk: the voice's, measured once), and a limiter that looks no further than the
    chunk in hand keeps every sample under CEILING_DB. Where a chunk's peak would pass it, the gain
    comes down across that chunk (samples the ramp has not brought down yet are cut at the
    ceiling), and goes back up by at most RELEASE_DB_PER_CHUNK a chunk after."""

    def __init__(self, gain_db: float):
        self.gain = 10 ** (gain_db / 20)
        self.ceiling = 10 ** (CEILING_DB / 20)
        self.release = 10 ** (RELEASE_DB_PER_CHUNK / 20)
        self.reduction = 1.0  # the limiter's factor at the end of the last chunk

    def __call__(self, pcm: np.ndarray) -> np.ndarray:
        out = pcm * np.float32(self.gain)  # [T]
        peak = float(np.max(np.abs(out))) if out.shape[0] else 0.0
        goal = min(1.0, self.reduction * self.release, self.ceiling / peak if peak > 0 else 1.0)
        out *= np.linspace(self.reduction, goal, out.shape[0], dtype=np.float32)
        np.clip(out, -self.ceiling, self.ceiling, out=out)
        self.reduction = goal
        return out


def leveled_whole(chunks: List[np.ndarray], rate: int, target: float) -> List[np.ndarray]:
    """A whole answer (a file's chunks, at `rate`) brought to `target` LUFS by its own loudness,
    which a file can wait for: each chunk through one Leveler, as a stream's, at the gain that
    brings the whole to `target`. Closer than the voice's gain, which was measured on another
    text: 0.1 LU from `target` by pyloudnorm where the voice's gain alone leaves up to 1.3
    (english's architecture, random weights; docs/options.md)."""
    whole = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)  # [n]
    leveler = Leveler(gain_to(target, integrated(whole, rate)))
    return [leveler(chunk) for chunk in chunks]


def gain_to(target: float, measured: float) -> float:
    """The gain in dB that brings `measured` LUFS to `target`; none (0) for a voice below the gate,
    whose noise is never raised."""
    return target - measured if math.isfinite(measured) else 0.0
