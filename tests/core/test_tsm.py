"""Speed (core.portable.audio.tsm): duration, pitch, streaming equal to whole-file, no clicks, bounds, delay."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.portable.audio.tsm import MAX_SPEED, MIN_SPEED, TimeStretch, stretch
from core.portable.errors import PocketTTSError

RATE = 24000
CHUNK = 1920  # the model's 80 ms frames at 24 kHz
SPEEDS = [0.25, 0.5, 0.8, 1.25, 1.5, 2.0, 3.0, 4.0]


def harmonic(f0: float, seconds: float, rate: int = RATE, harmonics: int = 8) -> np.ndarray:
    """A steady tone of `harmonics` partials falling at 6 dB per octave (a buzz, like a voiced sound)."""
    t = np.arange(int(seconds * rate)) / rate
    x = sum(np.sin(2 * np.pi * f0 * h * t + h) / h for h in range(1, harmonics + 1))
    return (0.25 * x).astype(np.float32)


def vowel(seconds: float, rate: int = RATE) -> np.ndarray:
    """An /a/-like vowel: a 120 Hz pulse train with a 0.5% vibrato at 5 Hz through three formant resonators."""
    t = np.arange(int(seconds * rate)) / rate
    phase = 2 * np.pi * 120 * t - 0.005 * 120 / 5 * np.cos(2 * np.pi * 5 * t)
    source = sum(np.cos(h * phase) * (0.98**h) for h in range(1, 40))  # partials up to 4.7 kHz
    spectrum = np.fft.rfft(source)
    freqs = np.fft.rfftfreq(len(source), 1 / rate)
    envelope = sum(1 / (1 + ((freqs - f) / bw) ** 2) for f, bw in ((700, 110), (1220, 120), (2600, 160)))
    y = np.fft.irfft(spectrum * envelope, len(source))
    return (0.3 * y / np.abs(y).max()).astype(np.float32)


def pitch(y: np.ndarray, low: float, high: float, rate: int = RATE) -> float:
    """The frequency of the strongest spectral peak between low and high Hz (Hann window, zero-padded
    FFT, parabolic interpolation of the log magnitude), from the middle half of y."""
    y = y[len(y) // 4 : 3 * len(y) // 4].astype(np.float64)
    size = 1 << 21
    magnitude = np.abs(np.fft.rfft(y * np.hanning(len(y)), size))
    freqs = np.fft.rfftfreq(size, 1 / rate)
    i = int(np.argmax(np.where((freqs > low) & (freqs < high), magnitude, 0)))
    a, b, c = np.log(magnitude[i - 1 : i + 2])
    return (i + 0.5 * (a - c) / (a - 2 * b + c)) * rate / size


def chunked(stretcher: TimeStretch, x: np.ndarray, sizes) -> np.ndarray:
    """push over consecutive pieces of the given sizes (the last takes the rest), then finish."""
    out, i = [], 0
    for size in sizes:
        out.append(stretcher.push(x[i : i + size]))
        i += size
    out.append(stretcher.push(x[i:]))
    out.append(stretcher.finish())
    for piece in out:
        assert piece.dtype == np.float32 and piece.ndim == 1
    return np.concatenate(out)


def random_sizes(rng: np.random.Generator, total: int):
    """Chunk sizes with zeros, ones, odd sizes, the model's chunk and huge pieces, summing to <= total."""
    sizes, left = [], total
    while left > 0:
        size = int(rng.choice([0, 1, 2, 7, 239, 241, 480, 1000, CHUNK, 1921, 5003, 20000]))
        size = min(size, left)
        sizes.append(size)
        left -= size
    return sizes


def test_speed_one_passes_audio_through_bit_for_bit():
    rng = np.random.default_rng(1)
    x = rng.standard_normal(30000).astype(np.float32)
    stretcher = TimeStretch(1.0, RATE)
    i = 0
    for size in random_sizes(rng, len(x)):
        piece = x[i : i + size]
        out = stretcher.push(piece)
        assert out.dtype == np.float32 and np.array_equal(out, piece)
        i += size
    tail = stretcher.finish()
    assert tail.dtype == np.float32 and len(tail) == 0
    assert np.array_equal(stretch(x, 1.0, RATE), x)


@pytest.mark.parametrize("speed", SPEEDS)
def test_duration_is_input_over_speed(speed):
    x = vowel(3.0)
    y = stretch(x, speed, RATE)
    assert y.dtype == np.float32
    assert len(y) == round(len(x) / speed)
    assert abs(len(y) - len(x) / speed) <= 0.02 * len(x) / speed


@pytest.mark.parametrize("length", [0, 1, 5, 100, 479, 480, 481, 2000])
@pytest.mark.parametrize("speed", [0.25, 0.7, 1.3, 4.0])
def test_short_inputs_keep_their_duration(length, speed):
    x = np.random.default_rng(length).standard_normal(length).astype(np.float32) * 0.1
    y = stretch(x, speed, RATE)
    assert y.dtype == np.float32 and len(y) == math.floor(length / speed + 0.5)
    assert np.all(np.isfinite(y))


@pytest.mark.parametrize("speed", SPEEDS)
def test_pitch_of_a_harmonic_signal_is_kept(speed):
    for f0 in (150.0, 97.3):
        y = stretch(harmonic(f0, 3.0), speed, RATE)
        assert abs(pitch(y, 0.8 * f0, 1.2 * f0) / f0 - 1) < 0.01, (f0, speed)


@pytest.mark.parametrize("speed", [0.25, 0.5, 1.5, 3.0])
def test_pitch_of_a_vowel_is_kept(speed):
    x = vowel(3.0)
    f0 = pitch(x, 100, 140)
    assert abs(pitch(stretch(x, speed, RATE), 100, 140) / f0 - 1) < 0.01


@pytest.mark.parametrize("speed", SPEEDS + [0.37, 1.01, 2.71])
def test_streaming_equals_whole_file(speed):
    rng = np.random.default_rng(int(speed * 100))
    x = np.concatenate([vowel(1.0), np.zeros(3001, np.float32), harmonic(97.3, 0.7), rng.standard_normal(5000) * 0.05])
    x = x.astype(np.float32)
    whole = stretch(x, speed, RATE)
    for _ in range(4):
        assert np.array_equal(chunked(TimeStretch(speed, RATE), x, random_sizes(rng, len(x))), whole)
    assert np.array_equal(chunked(TimeStretch(speed, RATE), x, [CHUNK] * (len(x) // CHUNK)), whole)
    assert np.array_equal(chunked(TimeStretch(speed, RATE), x, [1] * 3000), whole)


@pytest.mark.parametrize("speed", SPEEDS)
def test_no_clicks_at_chunk_joins(speed):
    # Steady tones (periods of 246.7 and 182.2 samples: the joins cannot fall on whole periods by luck)
    # with all their partials below 1.1 kHz, fed in the model's chunks. A click at a join spreads energy
    # over the whole spectrum: skipping 3 samples at each chunk join gives 2e-5 above 1.5 kHz, plain
    # overlap-add without the search 2e-10 to 5e-9; this gives about 1e-11.
    for f0 in (97.3, 131.7):
        x = harmonic(f0, 3.0)
        y = chunked(TimeStretch(speed, RATE), x, [CHUNK] * (len(x) // CHUNK))
        body = y[RATE // 10 : -RATE // 10].astype(np.float64)  # leave out the start and end
        spectrum = np.abs(np.fft.rfft(body * np.hanning(len(body)))) ** 2
        freqs = np.fft.rfftfreq(len(body), 1 / RATE)
        above = spectrum[freqs > 1500].sum() / spectrum.sum()
        assert above < 1e-9, (f0, above)
        # Sample-to-sample steps no larger than the tone's own (3-sample skips make them 3.5 times larger).
        assert np.abs(np.diff(body)).max() <= 1.05 * np.abs(np.diff(x.astype(np.float64))).max()


@pytest.mark.parametrize("bad", [0.2, 0.249, 4.01, 4.5, 0, -1, float("nan"), float("inf"), -float("inf"), True, False])
def test_speed_out_of_bounds_is_refused(bad):
    with pytest.raises(PocketTTSError):
        TimeStretch(bad, RATE)
    with pytest.raises(PocketTTSError):
        stretch(np.zeros(10, np.float32), bad, RATE)


@pytest.mark.parametrize("bad", ["1.0", None, [1.0], 1 + 0j, np.bool_(True)])
def test_speed_that_is_no_number_is_refused(bad):
    with pytest.raises(PocketTTSError):
        TimeStretch(bad, RATE)


def test_bounds_themselves_and_numpy_numbers_are_accepted():
    for speed in (MIN_SPEED, MAX_SPEED, np.float32(1.5), np.int64(2), 3):
        assert len(stretch(np.zeros(1000, np.float32), speed, RATE)) == round(1000 / float(speed))
    assert (MIN_SPEED, MAX_SPEED) == (0.25, 4.0)


def test_bad_sample_rate_and_shapes_and_use_after_finish_are_refused():
    for rate in (0, -24000, 24000.0, True):
        with pytest.raises(PocketTTSError):
            TimeStretch(1.5, rate)
    stretcher = TimeStretch(1.5, RATE)
    with pytest.raises(PocketTTSError):
        stretcher.push(np.zeros((2, 10), np.float32))
    stretcher.finish()
    with pytest.raises(PocketTTSError):
        stretcher.push(np.zeros(10, np.float32))
    with pytest.raises(PocketTTSError):
        stretcher.finish()


@pytest.mark.parametrize("speed", SPEEDS)
def test_delay_is_bounded(speed):
    stretcher = TimeStretch(speed, RATE)
    # The documented bound: the search range plus a window, at most 60 ms (at speed 4).
    assert stretcher.delay <= 0.060 * RATE + 1
    if speed <= 1:
        assert stretcher.delay <= 0.030 * RATE + 1
    rng = np.random.default_rng(7)
    x = vowel(2.0)
    pushed = out = 0
    # One sample at a time first (the bound is met with 2 samples to spare), then any chunks.
    for size in [1] * 3000 + random_sizes(rng, len(x) - 3000 - 5 * CHUNK) + [CHUNK] * 5:
        out += len(stretcher.push(x[pushed : pushed + size]))
        pushed += size
        assert out >= (pushed - stretcher.delay) / speed, pushed


@pytest.mark.parametrize("speed", SPEEDS)
def test_silence_in_silence_out(speed):
    stretcher = TimeStretch(speed, RATE)
    y = chunked(stretcher, np.zeros(10000, np.float32), [CHUNK] * 5)
    assert y.dtype == np.float32 and len(y) == round(10000 / speed)
    assert not np.any(y)


@pytest.mark.parametrize("speed", [0.5, 2.0])
def test_loudness_is_kept(speed):
    x = vowel(2.0)
    y = stretch(x, speed, RATE)
    rms = lambda a: float(np.sqrt(np.mean(a.astype(np.float64) ** 2)))  # noqa: E731
    assert abs(rms(y) / rms(x) - 1) < 0.05


def test_other_sample_rates():
    for rate in (8000, 16000, 44100, 48000):
        x = harmonic(150.0, 2.0, rate)
        y = stretch(x, 1.5, rate)
        assert len(y) == round(len(x) / 1.5)
        assert abs(pitch(y, 120, 180, rate) / 150 - 1) < 0.01
