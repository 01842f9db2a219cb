"""Loudness (core/portable/audio/loudness.py): ITU-R BS.1770-4's integrated loudness against
pyloudnorm, the independent implementation, within 0.5 LU (measured: 0.04-0.13 LU, pyloudnorm's
K-weighting rounds its constants) on tones, noise, gated speech-like bursts at every rate the
server offers, a recording, and the model's speech with a predefined and a cloned voice."""

from __future__ import annotations

import math

import numpy as np
import pytest
import soundfile

from core import TTSModel
from core.portable.audio import loudness
from tests.support.paths import TINY_CONFIG, VOICE_24K

pyloudnorm = pytest.importorskip("pyloudnorm")
WITHIN = 0.5  # LU, the bar


def _signals(rate: int):
    t = np.arange(int(rate * 4.3)) / rate
    rng = np.random.default_rng(rate)
    yield "1 kHz", 0.5 * np.sin(2 * np.pi * 1000 * t)
    yield "100 Hz", 0.3 * np.sin(2 * np.pi * 100 * t)
    yield "8 kHz", 0.2 * np.sin(2 * np.pi * min(8000, rate / 2 - 500) * t)
    yield "noise", 0.1 * rng.standard_normal(t.size)
    # Bursts and near-silence between them: the relative gate drops the quiet blocks.
    yield "bursts", np.where((t % 1.2) < 0.6, 0.4, 0.0005) * np.sin(2 * np.pi * 440 * t)


@pytest.mark.parametrize("rate", [8000, 16000, 22050, 24000, 44100, 48000])
def test_integrated_loudness_equals_pyloudnorms(rate: int) -> None:
    for name, signal in _signals(rate):
        ours = loudness.integrated(signal.astype(np.float32), rate)
        theirs = pyloudnorm.Meter(rate).integrated_loudness(signal)
        assert abs(ours - theirs) <= WITHIN, (rate, name, ours, theirs)


def test_a_997_hz_tone_at_minus_20_dbfs_is_minus_20_lufs() -> None:
    """The standard's own check: a sine at 997 Hz whose RMS is -20 dBFS reads -20 LKFS (the K-weighting's
    gain there offsets the -0.691), at 48 kHz where the filters are the standard's coefficients."""
    t = np.arange(48000 * 5) / 48000
    tone = math.sqrt(2) * 10 ** (-20 / 20) * np.sin(2 * np.pi * 997 * t)
    assert loudness.integrated(tone, 48000) == pytest.approx(-20.0, abs=0.01)


def test_speech_a_recording_and_the_models_voices(tmp_path) -> None:
    recording, rate = soundfile.read(str(VOICE_24K), dtype="float32")
    clips = [("recording", recording, rate)]
    model = TTSModel.load(str(TINY_CONFIG))
    options = dict(temperature=0.0, eos_threshold=float("inf"), max_frames=60)
    for name, voice in (
        ("predefined", str(TINY_CONFIG.parent / "voice_state.safetensors")),
        ("cloned", str(VOICE_24K)),
    ):
        clips.append((name, model.generate("A sentence for the meter, long enough to gate.", voice, **options), 24000))
    for name, pcm, rate in clips:
        ours, theirs = (
            loudness.integrated(pcm, rate),
            pyloudnorm.Meter(rate).integrated_loudness(pcm.astype(np.float64)),
        )
        assert math.isfinite(ours) and abs(ours - theirs) <= WITHIN, (name, ours, theirs)


def test_silence_and_less_than_a_block_have_no_loudness() -> None:
    assert loudness.integrated(np.zeros(48000, np.float32), 24000) == -math.inf
    assert loudness.integrated(np.full(9000, 0.5, np.float32), 24000) == -math.inf  # under 400 ms
    quiet = 1e-4 * np.sin(2 * np.pi * 1000 * np.arange(48000) / 24000)  # about -83 LUFS
    assert loudness.integrated(quiet.astype(np.float32), 24000) == -math.inf  # under the -70 LUFS gate


@pytest.mark.parametrize("n", [1, 2, 8, 32, 64, 4096, 2**15])
def test_the_modules_own_transform_is_numpys(n: int) -> None:
    """The K-weighting's transform (numpy.fft is not loaded in the page): numpy.fft's within float64
    rounding, and its inverse gives the signal back."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    assert np.allclose(loudness.fft(x), np.fft.fft(x), rtol=0, atol=1e-10 * n)
    assert np.allclose(loudness.fft(loudness.fft(x), inverse=True), x, rtol=0, atol=1e-12)
