"""The opt-in level (`loudness`, core/portable/audio/loudness.py's Leveler): a voice's loudness is
measured once (its language's sample text) and every chunk of a generation multiplied by one gain
from the first, peaks kept under -1 dBFS; without the option the audio is the model's, bit for
bit; measured by pyloudnorm, the independent meter. On every front: the Python API and the command
line here, the server's routes, form, OpenAI's route, the WebSocket and its default below."""

from __future__ import annotations

import io
import math

import httpx
import numpy as np
import pytest
import soundfile

from core import PocketTTSError, TTSModel
from core.portable.audio import loudness
from core.portable.audio.pcm import pcm16
from tests.support.paths import TINY_CONFIG, VOICE_24K
from tests.support.serving import GUARD, as_served, serving

pyloudnorm = pytest.importorskip("pyloudnorm")
TEXT = "A sentence to bring to an even level, long enough for the meter to gate it. And a second one."
OPTIONS = {"temperature": 0.0, "seed": 2}
CEILING = 10 ** (-1 / 20)


@pytest.fixture(scope="module")
def model():
    return TTSModel.load(str(TINY_CONFIG))


def _lufs(pcm: np.ndarray, rate: int = 24000) -> float:
    return pyloudnorm.Meter(rate).integrated_loudness(pcm.astype(np.float64))


@pytest.mark.parametrize("voice", [str(TINY_CONFIG.parent / "voice_state.safetensors"), str(VOICE_24K)])
def test_a_voice_is_brought_to_the_level_asked_with_peaks_under_the_ceiling(model, voice) -> None:
    plain = model.generate(TEXT, voice, **OPTIONS)
    for target in (-18.0, -23.0, -30.0):
        leveled = model.generate(TEXT, voice, loudness=target, **OPTIONS)
        assert leveled.shape == plain.shape and abs(_lufs(leveled) - target) <= 1.0, (target, _lufs(leveled))
        assert np.max(np.abs(leveled)) <= CEILING
    assert _lufs(plain) < -30  # the random weights speak quietly: the gain is real
    chunks = list(model.stream(TEXT, voice, loudness=-18.0, **OPTIONS))
    streamed = np.concatenate(chunks)
    assert abs(_lufs(streamed) - -18.0) <= 2.0 and np.max(np.abs(streamed)) <= CEILING
    whole = loudness.leveled_whole(chunks, 24000, -18.0)  # a file's: the stream's, leveled again by its own measure
    assert np.array_equal(np.concatenate(whole), model.generate(TEXT, voice, loudness=-18.0, **OPTIONS))


def test_without_the_option_the_audio_is_the_models_bit_for_bit(model) -> None:
    assert np.array_equal(
        model.generate(TEXT, str(VOICE_24K), **OPTIONS), model.generate(TEXT, str(VOICE_24K), loudness=None, **OPTIONS)
    )


def test_the_voice_is_measured_once(model, monkeypatch) -> None:
    """A stream's gain is the voice's, measured on its first leveled stream only; a file (`generate`)
    measures itself as well, once each."""
    voice = model.voice_state(str(VOICE_24K))
    measured = []
    integrated = loudness.integrated
    monkeypatch.setattr(
        loudness, "integrated", lambda pcm, rate: measured.append(pcm.shape[0]) or integrated(pcm, rate)
    )
    for _ in range(3):
        list(model.stream("Hi there.", voice, loudness=-18.0, **OPTIONS))
    assert len(measured) == 1
    said = model.generate("Hi there.", voice, loudness=-18.0, **OPTIONS)
    assert measured[1:] == [said.shape[0]]


def test_the_limiter_keeps_every_sample_under_the_ceiling_chunk_by_chunk() -> None:
    leveler = loudness.Leveler(20.0)
    rng = np.random.default_rng(1)
    out = [leveler((0.2 * rng.standard_normal(1920)).astype(np.float32)) for _ in range(20)]
    assert max(float(np.max(np.abs(chunk))) for chunk in out) <= CEILING
    assert loudness.gain_to(-18.0, -math.inf) == 0.0  # silence is never raised


@pytest.mark.parametrize("bad", [-41.0, -4.0, float("nan"), "loud"])
def test_a_level_out_of_range_is_a_clear_error(model, bad) -> None:
    with pytest.raises(PocketTTSError, match="loudness must (be|not be NaN)"):
        model.generate("Hi.", str(VOICE_24K), loudness=bad)


def test_the_servers_fronts_take_it_and_its_default(model) -> None:
    from server.engine import ServerEngine

    engine = ServerEngine(model, str(VOICE_24K), 2)
    try:
        with serving(engine) as url:
            body = {"text": TEXT, "loudness": -18.0, **OPTIONS}
            wav = httpx.post(url + "/generate", json=body, timeout=GUARD)
            assert wav.status_code == 200, wav.text
            pcm, rate = soundfile.read(io.BytesIO(wav.content), dtype="float32")
            assert abs(_lufs(pcm, rate) - -18.0) <= 1.0
            samples, _ = soundfile.read(io.BytesIO(wav.content), dtype="int16")
            with as_served():  # a file: leveled by its own measure
                said = model.generate(TEXT, str(VOICE_24K), loudness=-18.0, **OPTIONS)
            assert np.array_equal(samples, np.frombuffer(pcm16(said), "<i2"))
            form = httpx.post(url + "/tts", data={"text": TEXT, "loudness": "-18"}, timeout=GUARD)
            assert form.status_code == 200
            speech = {"model": "tts-1", "voice": "alloy", "input": TEXT, "response_format": "wav", "loudness": -18}
            assert httpx.post(url + "/v1/audio/speech", json=speech, timeout=GUARD).status_code == 200
            for route, answer in (
                ("/generate", httpx.post(url + "/generate", json={"text": "Hi.", "loudness": -50}, timeout=GUARD)),
                ("/tts", httpx.post(url + "/tts", data={"text": "Hi.", "loudness": "loud"}, timeout=GUARD)),
            ):
                assert answer.status_code == 400 and "loudness" in answer.text, (route, answer.text)
            engine.loudness = -23.0  # --loudness: a request that asks for none
            default = httpx.post(url + "/generate", json={"text": TEXT, **OPTIONS}, timeout=GUARD)
            pcm, rate = soundfile.read(io.BytesIO(default.content), dtype="float32")
            assert abs(_lufs(pcm, rate) - -23.0) <= 1.0
    finally:
        engine.close()


def test_a_server_with_a_level_measures_its_default_voice_before_its_first_request(monkeypatch) -> None:
    from server.engine import load_engine
    from server.settings import Settings

    measured = []
    integrated = loudness.integrated
    monkeypatch.setattr(loudness, "integrated", lambda pcm, rate: measured.append(1) or integrated(pcm, rate))
    engine = load_engine(Settings(model=str(TINY_CONFIG), voice=str(VOICE_24K), loudness=-18.0))
    try:
        assert len(measured) == 1
        with serving(engine) as url:
            answer = httpx.post(url + "/stream", json={"text": "Hi there.", **OPTIONS}, timeout=GUARD)
            assert answer.status_code == 200 and len(answer.content) > 0
        assert len(measured) == 1  # the stream took the gain measured at start
    finally:
        engine.close()


@pytest.mark.slow
def test_voices_recorded_at_different_levels_land_at_the_same_one_on_englishs_architecture(request, tmp_path) -> None:
    """english's full-size architecture (random weights: the real ones cannot be downloaded here)
    with its reference voice state and the test recording at three levels, 24 dB apart (the
    predefined voices differ by 6 to 9 dB): each file within 1 LU of -18 (by its own measure), each
    stream within 2 (by the voice's, measured on another text), no sample over -1 dBFS."""
    from pathlib import Path

    from tests.support.parity import model_dir

    folder = model_dir(Path(request.config.getoption("--reference-dir")), "english")
    english = TTSModel.load(str(folder / "config.yaml"))
    recording, rate = soundfile.read(str(VOICE_24K), dtype="float32")
    voices = [str(folder / "voice_state.safetensors")]
    for db in (-12, 0, 12):
        path = tmp_path / f"recorded_{db}.wav"
        soundfile.write(str(path), np.clip(recording * 10 ** (db / 20), -1, 1), rate)
        voices.append(str(path))
    for voice in voices:
        leveled = english.generate(TEXT, voice, loudness=-18.0, **OPTIONS)
        assert abs(_lufs(leveled) - -18.0) <= 1.0 and np.max(np.abs(leveled)) <= CEILING, (voice, _lufs(leveled))
        streamed = np.concatenate(list(english.stream(TEXT, voice, loudness=-18.0, **OPTIONS)))
        assert abs(_lufs(streamed) - -18.0) <= 2.0 and np.max(np.abs(streamed)) <= CEILING, (voice, _lufs(streamed))
