"""File formats and signal helpers against independent implementations:
safetensors (the `safetensors` library), WAV (soundfile / libsndfile), resampling (scipy)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import safetensors.numpy
import scipy.signal
import soundfile
from hypothesis import given, settings
from hypothesis import strategies as st

from core import AudioError, WeightsError
from core.files import save_tensors
from core.portable.audio import pcm as audio
from core.portable.weights import safetensors_file


def test_safetensors_reads_what_the_library_writes(tmp_path) -> None:
    tensors = {
        "f32": np.arange(12, dtype=np.float32).reshape(3, 4),
        "f16": np.array([1.5, -2.25], dtype=np.float16),
        "i64": np.array([[7]], dtype=np.int64),
        "i8": np.array([-128, 0, 127], dtype=np.int8),
        "scalar": np.array(3.0, dtype=np.float64),
        "empty": np.zeros((0, 5), dtype=np.float32),
    }
    path = tmp_path / "x.safetensors"
    safetensors.numpy.save_file(tensors, str(path), metadata={"format": "test"})
    loaded, metadata = safetensors_file.load(str(path))
    assert metadata == {"format": "test"}
    for key, value in tensors.items():
        assert loaded[key].dtype == value.dtype and np.array_equal(loaded[key], value), key
    from_bytes, _ = safetensors_file.loads(path.read_bytes())
    assert all(np.array_equal(from_bytes[k], v) for k, v in tensors.items())
    some, _ = safetensors_file.loads(np.fromfile(str(path), np.uint8), keys=lambda key: key.startswith("f"))
    assert sorted(some) == ["f16", "f32"] and all(np.array_equal(some[k], tensors[k]) for k in some)
    selected, metadata = safetensors_file.load(str(path), keys=lambda key: key.startswith(("f", "e")))
    assert sorted(selected) == ["empty", "f16", "f32"] and metadata == {"format": "test"}
    assert all(np.array_equal(selected[k], tensors[k]) and not isinstance(selected[k], np.memmap) for k in selected)


def test_safetensors_selected_reads_of_a_truncated_file_are_a_clear_error(tmp_path) -> None:
    path = tmp_path / "x.safetensors"
    safetensors.numpy.save_file({"a": np.ones(100, np.float32)}, str(path))
    path.write_bytes(path.read_bytes()[:-8])
    for keys in (None, lambda key: True):
        with pytest.raises(WeightsError, match="x.safetensors"):
            safetensors_file.load(str(path), keys)


def test_safetensors_bfloat16_from_raw_bytes() -> None:
    values = np.array([1.0, -2.5, 3.140625], dtype=np.float32)
    bf16 = (values.view(np.uint32) >> 16).astype("<u2")
    header = b'{"x":{"dtype":"BF16","shape":[3],"data_offsets":[0,6]}}'
    header += b" " * (-len(header) % 8)
    buffer = len(header).to_bytes(8, "little") + header + bf16.tobytes()
    tensors, _ = safetensors_file.loads(buffer)
    assert tensors["x"].dtype == np.float32 and np.array_equal(tensors["x"], values)


def test_safetensors_written_here_read_by_the_library(tmp_path) -> None:
    tensors = {"a": np.ones((2, 3), np.float32), "b": np.arange(4, dtype=np.int64)}
    path = tmp_path / "out.safetensors"
    save_tensors(str(path), tensors, {"k": "v"})
    back = safetensors.numpy.load_file(str(path))
    assert all(np.array_equal(back[k], v) for k, v in tensors.items())
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


@pytest.mark.parametrize("payload", [b"", b"abc", b"\xff" * 8 + b"{}", (8).to_bytes(8, "little") + b"not json"])
def test_safetensors_garbage_is_a_clear_error(tmp_path, payload: bytes) -> None:
    path = tmp_path / "bad.safetensors"
    path.write_bytes(payload)
    with pytest.raises(WeightsError, match="bad.safetensors"):
        safetensors_file.load(str(path))


def test_safetensors_missing_file(tmp_path) -> None:
    with pytest.raises(WeightsError, match="nope.safetensors"):
        safetensors_file.load(str(tmp_path / "nope.safetensors"))


@pytest.mark.parametrize("subtype", ["PCM_16", "PCM_24", "PCM_32", "PCM_U8", "FLOAT", "DOUBLE"])
@pytest.mark.parametrize("channels", [1, 2])
def test_wav_reader_matches_libsndfile(tmp_path, subtype: str, channels: int) -> None:
    rng = np.random.default_rng(1)
    data = (rng.uniform(-0.9, 0.9, (1000, channels))).astype(np.float32)
    path = tmp_path / "x.wav"
    soundfile.write(str(path), data, 16000, subtype=subtype)
    ours, rate = audio.read(str(path))
    theirs, their_rate = soundfile.read(str(path), dtype="float32", always_2d=True)
    assert rate == their_rate == 16000
    assert np.allclose(ours, theirs.mean(axis=1), atol=1e-6)


def test_wav_16_bit_is_scaled_like_the_official_reader(tmp_path) -> None:
    path = tmp_path / "x.wav"
    ints = np.array([-32768, -1, 0, 1, 32767], dtype=np.int16)
    soundfile.write(str(path), ints, 24000, subtype="PCM_16")
    samples, _ = audio.read(str(path))
    assert np.array_equal(samples, ints.astype(np.float32) / 32768.0)


def test_other_formats_go_through_soundfile(tmp_path) -> None:
    path = tmp_path / "x.flac"
    data = np.sin(np.arange(4800) / 10).astype(np.float32) * 0.5
    soundfile.write(str(path), data, 48000)
    samples, rate = audio.read(str(path))
    assert rate == 48000 and np.allclose(samples, data, atol=1e-4)


@pytest.mark.parametrize("payload", [b"RIFF\x00\x00\x00\x00WAVE", b"RIFF" + b"\x00" * 40, b"garbage audio bytes"])
def test_unreadable_audio_is_a_clear_error(tmp_path, payload: bytes) -> None:
    path = tmp_path / "broken.wav"
    path.write_bytes(payload)
    with pytest.raises(AudioError, match="broken.wav"):
        audio.read(str(path))


@settings(max_examples=60, deadline=None)
@given(
    from_rate=st.sampled_from([8000, 11025, 16000, 22050, 24000, 32000, 44100, 48000, 96000]),
    to_rate=st.sampled_from([16000, 24000, 48000]),
    length=st.integers(1, 5000),
    seed=st.integers(0, 2**16),
)
def test_resample_equals_scipy_resample_poly(from_rate: int, to_rate: int, length: int, seed: int) -> None:
    x = np.random.default_rng(seed).standard_normal(length).astype(np.float32)
    ours = audio.resample(x, from_rate, to_rate)
    g = math.gcd(from_rate, to_rate)
    theirs = scipy.signal.resample_poly(x, to_rate // g, from_rate // g) if from_rate != to_rate else x
    assert ours.shape == theirs.shape and ours.dtype == np.float32
    assert np.allclose(ours, theirs, atol=1e-5)


def test_end_on_pause_cuts_trailing_silence_and_appends_the_pause() -> None:
    rate = 24000
    speech = (0.5 * np.sin(np.arange(rate) * 0.05)).astype(np.float32)
    x = np.concatenate([speech, np.zeros(rate, np.float32)])  # 1 s speech, 1 s silence
    y = audio.end_on_pause(x, rate)
    assert y.shape[0] == rate + int(0.08 * rate)
    assert np.all(y[rate:] == 0)
    assert abs(y[rate - 1]) < 0.01 and np.allclose(y[: rate - 480], speech[: rate - 480])


@pytest.mark.parametrize(
    "samples, message",
    [
        (np.zeros(0, np.float32), "empty"),
        (np.array([0.0, np.nan], np.float32), "NaN"),
        (np.zeros((2, 3, 4), np.float32), "shape"),
        (np.zeros(10, np.int32), "dtype"),
    ],
)
def test_bad_samples_are_clear_errors(samples: np.ndarray, message: str) -> None:
    with pytest.raises(AudioError, match=message):
        audio.prepare_prompt(samples, 24000, 24000)
