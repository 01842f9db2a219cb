"""Speed: time-scale modification that keeps the pitch (WSOLA), streaming, in NumPy alone.

The output is built from windowed segments of the input, one every `hop` output samples (10 ms), each
`2 * hop` long (20 ms, periodic Hann, so overlapping windows sum to one). Segment k is taken near input
position k * hop * speed, within +-`tolerance` (10 ms): of the candidates there, the one whose waveform
is most like the natural continuation of segment k - 1 (the input right after it) is chosen, by
normalized cross-correlation, so segments join in phase and the pitch is the input's. The search runs
on sums of `decimation` samples (6 kHz at 24 kHz), then at full rate around the best coarse match:
about 20 thousand multiply-adds per segment instead of 230 thousand.

Slow speeds: segments are copied from the waveform as it is (no phase vocoder, so none of its
"metallic" phasiness), and the continuation search keeps copying the input verbatim for as long as
the tolerance allows, then jumps back by whole pitch periods; what is left at 0.25 is the repetition
of short stretches (a stop consonant heard twice), not a change of timbre.

Streaming: a segment is placed as soon as every input sample its search can look at has arrived, and
every decision depends on the samples alone (candidate positions fixed by k and speed, scores computed
on fresh arrays of fixed sizes), never on how they were cut into chunks, so `push` over any chunking
followed by `finish` equals `stretch` exactly. The delay, counted in input samples held back: after n
samples have been pushed, at least (n - delay) / speed output samples have come out, with delay =
tolerance + hop + max(hop, hop * speed) + 1: 30 ms at speeds up to 1, 60 ms at speed 4. `finish` gives
the rest, round(n / speed) samples in all. Speed 1.0 passes the samples through unchanged (push
returns them, finish nothing).
"""

from __future__ import annotations

import math
import numbers
from typing import List, Optional, Tuple

import numpy as np

from ..errors import PocketTTSError

MIN_SPEED = 0.25
MAX_SPEED = 4.0
# Segment hop and search tolerance; the window is two hops (Hann overlap-add at 50%).
HOP_SECONDS = 0.010
TOLERANCE_SECONDS = 0.010
# The coarse search runs at about this rate (speech's pitch and formants lie below 3 kHz).
COARSE_RATE = 6000


def check_speed(speed: object) -> float:
    """The speed as a float, or a PocketTTSError naming it when it is no number in MIN_SPEED..MAX_SPEED."""
    if isinstance(speed, (bool, np.bool_)) or not isinstance(speed, numbers.Real):
        raise PocketTTSError(f"speed must be a number from {MIN_SPEED} to {MAX_SPEED}, not {speed!r}")
    value = float(speed)
    if not MIN_SPEED <= value <= MAX_SPEED:  # also refuses nan
        raise PocketTTSError(f"speed must be from {MIN_SPEED} to {MAX_SPEED}, not {speed!r}")
    return value


def _scores(region: np.ndarray, template: np.ndarray) -> np.ndarray:
    """Normalized cross-correlation of every window of `region` (float64) against `template`, as
    corr * |corr| / energy: the ranking of corr / sqrt(energy) without a square root. The same arithmetic
    runs on arrays made afresh for each segment from the same samples, so the scores (and the choice
    between two candidates a whole period apart, equal but for rounding) do not depend on chunking."""
    n = len(template)
    corr = np.correlate(region, template, "valid")  # [len(region) - n + 1]
    power = np.cumsum(region * region)  # [len(region)], running energy
    energy = power[n - 1 :].copy()  # [len(region) - n + 1]
    energy[1:] -= power[:-n]
    floor = 1e-9 * power[-1] + 1e-30  # above the running sum's rounding; silence scores 0, never nan
    return corr * np.abs(corr) / np.maximum(energy, floor)


def _decimate(x: np.ndarray, d: int, count: int) -> np.ndarray:
    """Sums of d consecutive samples: [x[0] + ... + x[d - 1], ...], the first `count` of them."""
    total = x[0 : count * d : d].copy()  # [count]
    for i in range(1, d):
        total += x[i : count * d : d]
    return total


class TimeStretch:
    """A streaming time stretcher: float32 chunks of any size in, the stretched audio out."""

    def __init__(self, speed: float, sample_rate: int):
        self.speed = check_speed(speed)
        if isinstance(sample_rate, bool) or not isinstance(sample_rate, numbers.Integral) or sample_rate <= 0:
            raise PocketTTSError(f"sample_rate must be a positive integer, not {sample_rate!r}")
        self.sample_rate = int(sample_rate)
        self.decimation = max(1, round(self.sample_rate / COARSE_RATE))
        d = self.decimation
        self.hop = d * max(1, round(HOP_SECONDS * self.sample_rate / d))
        self.tolerance = d * max(1, round(TOLERANCE_SECONDS * self.sample_rate / d))
        self.window = 2 * self.hop
        n = np.arange(self.window)
        self._hann = (0.5 - 0.5 * np.cos(2 * np.pi * n / self.window)).astype(np.float32)  # [window], periodic
        self.delay = self.tolerance + self.hop + int(math.ceil(max(self.hop, self.hop * self.speed))) + 1
        self._buffer = np.zeros(0, np.float32)  # the input from absolute sample self._start on
        self._start = 0
        self._received = 0
        self._frame = 0  # the next segment to place
        self._previous = -self.hop  # input start of the last segment placed
        self._tail = np.zeros(self.hop, np.float32)  # its windowed second half, still to be overlapped
        self._emitted = 0
        self._spent = False

    def push(self, samples: np.ndarray) -> np.ndarray:
        """The output that these samples complete (float32, possibly empty)."""
        if self._spent:
            raise PocketTTSError("this TimeStretch has finished; make a new one for new audio")
        x = np.asarray(samples)
        if x.ndim != 1:
            raise PocketTTSError(f"push takes a 1-D array of samples, not shape {x.shape}")
        x = np.array(x, dtype=np.float32)  # a copy: the caller may reuse its array
        if self.speed == 1.0:
            return x
        self._received += len(x)
        if len(x):
            self._buffer = np.concatenate([self._buffer, x])
        return self._run(final=False)

    def finish(self) -> np.ndarray:
        """The rest of the output: round(samples pushed / speed) in all. The stretcher is then spent."""
        if self._spent:
            raise PocketTTSError("this TimeStretch has finished already")
        self._spent = True
        if self.speed == 1.0:
            return np.zeros(0, np.float32)
        return self._run(final=True)

    def _candidates(self, k: int) -> Tuple[int, int]:
        """The first and last input position segment k may start at: its nominal start (centred on
        k * hop * speed) give or take the tolerance, none before the input's first sample."""
        start = int(math.floor(k * self.hop * self.speed + 0.5)) - self.hop
        return max(start - self.tolerance, 0), start + self.tolerance

    def _needs(self, k: int) -> int:
        """How many input samples segment k's search reads (from the first sample on)."""
        if k == 0:
            return self.hop
        return max(self._candidates(k)[1], self._previous + self.hop) + self.window

    def _run(self, final: bool) -> np.ndarray:
        out: List[np.ndarray] = []
        produced = 0
        total = int(math.floor(self._received / self.speed + 0.5))
        if final:
            # Past the end the input is silence; candidates stop where the input does when they can.
            last = self._frame + (total - self._emitted) // self.hop + 2
            pad = self._candidates(last)[1] + self.hop + self.window - (self._start + len(self._buffer))
            if pad > 0:
                self._buffer = np.concatenate([self._buffer, np.zeros(pad, np.float32)])
        while True:
            if final:
                if self._emitted + produced >= total:
                    break
            elif self._needs(self._frame) > self._received:
                break
            out.append(self._place(self._frame, self._received if final else None))
            produced += len(out[-1])
            self._frame += 1
        # Keep what later searches can still read: from the earliest candidate or continuation on.
        keep = min(self._candidates(self._frame)[0], self._previous + self.hop)
        if keep > self._start:
            self._buffer = self._buffer[keep - self._start :]
            self._start = keep
        result = np.concatenate(out) if out else np.zeros(0, np.float32)
        if final:
            result = result[: max(total - self._emitted, 0)]
        self._emitted += len(result)
        return result

    def _place(self, k: int, end: Optional[int] = None) -> np.ndarray:
        """Place segment k; return the `hop` output samples it completes (none for the first)."""
        b = self._buffer
        o = self._start
        if k == 0:
            self._tail = self._hann[self.hop :] * b[0 - o : self.hop - o]  # [hop]; output starts at its centre
            self._previous = -self.hop
            return np.zeros(0, np.float32)
        lo, hi = self._candidates(k)
        if end is not None:
            # At the end, candidates that would read past the input are left out (all but one when none fit).
            hi = max(lo, min(hi, end - self.window))
        count = hi - lo + 1
        d = self.decimation
        n = self.window
        region = b[lo - o : lo - o + count - 1 + n].astype(np.float64)  # [count - 1 + n]
        template = b[self._previous + self.hop - o : self._previous + self.hop + n - o].astype(np.float64)  # [n]
        # Coarse: sums of d samples (a box filter against aliasing), candidates every d samples from lo.
        coarse_count = (count - 1) // d + 1
        coarse_region = _decimate(region, d, coarse_count - 1 + n // d)  # [coarse_count - 1 + n/d]
        coarse_template = _decimate(template, d, n // d)  # [n/d]
        coarse = _scores(coarse_region, coarse_template)  # [coarse_count]
        j = int(np.argmax(coarse)) * d
        # Fine: every sample within d of the coarse best, by plain correlation (the energy of windows a
        # few samples apart is the same).
        first = max(j - d + 1, 0)
        last = min(j + d - 1, count - 1)
        fine = np.correlate(region[first : last + n], template, "valid")  # [last - first + 1]
        start = lo + first + int(np.argmax(fine))
        segment = self._hann * b[start - o : start + n - o]  # [n]
        done = self._tail + segment[: self.hop]  # [hop]
        self._tail = segment[self.hop :]
        self._previous = start
        return done


def stretch(samples: np.ndarray, speed: float, sample_rate: int) -> np.ndarray:
    """The whole recording at `speed` (float32, round(len / speed) samples; the same at 1.0)."""
    stretcher = TimeStretch(speed, sample_rate)
    head = stretcher.push(samples)
    return np.concatenate([head, stretcher.finish()])
