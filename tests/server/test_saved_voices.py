"""Uploaded voices that persist (server/saved_voices.py, with --voices-dir): a restarted server speaks
a voice uploaded before it stopped, the same audio; DELETE /v1/audio/voices/{id} forgets it, on disk
too; the voices folder's recordings stay the operator's; a saved file changed since is not offered;
a .uploads that is a link is refused at start."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import numpy as np
import pytest

from core import PocketTTSError, TTSModel, VoiceError
from core.portable.audio.pcm import wav_bytes
from e2e import harness
from server.engine_voices import EngineVoices
from tests.support.paths import ROOT, TINY_CONFIG, VOICE_24K
from tests.support.serving import GUARD

SPEAK = {"text": "Hello there.", "temperature": 0.0, "max_frames": 6, "eos_threshold": 100.0}


@pytest.fixture(scope="module")
def model():
    return TTSModel.load(str(TINY_CONFIG))


def _uploaded(url: str) -> list:
    voices = httpx.get(url + "/v1/audio/voices", timeout=GUARD).json()["voices"]
    return [(v["id"], v["name"]) for v in voices if v["kind"] == "uploaded"]


@pytest.mark.slow
def test_a_restarted_server_speaks_a_voice_uploaded_before_it_stopped(tmp_path) -> None:
    args = ["--model", str(TINY_CONFIG), "--voice", str(VOICE_24K), "--voices-dir", str(tmp_path)]
    with harness.server(args) as url:
        upload = httpx.post(url + "/voices", files={"voice_wav": ("mine.wav", VOICE_24K.read_bytes())}, timeout=GUARD)
        key = upload.json()["voice"]
        before = httpx.post(url + "/generate", json={**SPEAK, "voice": key}, timeout=GUARD)
        assert before.status_code == 200 and _uploaded(url) == [(key, "mine.wav")]
    with harness.server(args) as url:
        assert _uploaded(url) == [(key, "mine.wav")]
        after = httpx.post(url + "/generate", json={**SPEAK, "voice": key}, timeout=GUARD)
        assert after.status_code == 200 and after.content == before.content
        gone = httpx.delete(f"{url}/v1/audio/voices/{key}", timeout=GUARD)
        assert gone.status_code == 204 and _uploaded(url) == []
        again = httpx.post(url + "/generate", json={**SPEAK, "voice": key}, timeout=GUARD)
        assert again.status_code == 400 and again.json()["error"]["code"] == "unknown_voice"
    assert sorted(os.listdir(tmp_path / ".uploads")) == ["voices.json"]
    with harness.server(args) as url:
        assert _uploaded(url) == []


def test_the_voices_folders_recordings_are_not_saved_nor_deleted(model, tmp_path) -> None:
    (tmp_path / "narrator.wav").write_bytes(VOICE_24K.read_bytes())
    voices = EngineVoices(model, str(VOICE_24K), voices_dir=tmp_path)
    voices.voice("narrator")
    key = voices.uploaded()[0]
    with pytest.raises(VoiceError, match="is a recording of the voices folder: remove its file there"):
        voices.delete(key)
    assert os.listdir(tmp_path / ".uploads") == [] and (tmp_path / "narrator.wav").exists()


def test_a_saved_voice_changed_on_disk_is_not_offered(model, tmp_path) -> None:
    voices = EngineVoices(model, str(VOICE_24K), voices_dir=tmp_path)
    key = voices.upload(VOICE_24K.read_bytes(), "mine.wav")
    assert EngineVoices(model, str(VOICE_24K), voices_dir=tmp_path).uploaded() == [key]
    saved = tmp_path / ".uploads" / (key.split(":")[1] + ".safetensors")
    changed = bytearray(saved.read_bytes())
    changed[-1] ^= 0xFF
    saved.write_bytes(bytes(changed))
    fresh = EngineVoices(model, str(VOICE_24K), voices_dir=tmp_path)
    assert fresh.uploaded() == []
    with pytest.raises(VoiceError):
        fresh.voice(key)


def test_uploads_without_a_voices_folder_stay_in_memory(model, tmp_path) -> None:
    voices = EngineVoices(model, str(VOICE_24K))
    key = voices.upload(VOICE_24K.read_bytes(), "mine.wav")
    assert voices.listed()[-1][:3] == (key, "uploaded", "mine.wav") and not voices.saved.keeps
    voices.delete(key)
    assert voices.uploaded() == []


def test_an_uploads_folder_that_is_a_link_is_refused_at_start(model, tmp_path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    voices = tmp_path / "voices"
    voices.mkdir()
    (voices / ".uploads").symlink_to(elsewhere)
    with pytest.raises(PocketTTSError, match="is not a folder"):
        EngineVoices(model, str(VOICE_24K), voices_dir=voices)
    done = subprocess.run(
        [sys.executable, "-m", "server", "--model", str(TINY_CONFIG), "--voice", str(VOICE_24K)]
        + ["--voices-dir", str(voices), "--port", "1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=GUARD * 3,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode != 0 and "Traceback" not in done.stderr and lines[-1].startswith("error: "), done.stderr
    assert os.listdir(elsewhere) == []


def test_uploads_beyond_the_saved_limit_stay_in_memory(model, tmp_path, monkeypatch) -> None:
    """Uploads cannot fill the disk: past MAX_SAVED, a voice is kept in memory only."""
    from server import saved_voices

    monkeypatch.setattr(saved_voices, "MAX_SAVED", 1)
    voices = EngineVoices(model, str(VOICE_24K), voices_dir=tmp_path)
    first = voices.upload(VOICE_24K.read_bytes(), "first.wav")
    rate, samples = 24000, (np.sin(np.arange(48000) / 7.0) * 0.3).astype(np.float32)
    second = voices.upload(wav_bytes(samples, rate), "second.wav")
    assert list(voices.saved.names()) == [first] and set(voices.uploaded()) == {first, second}
    assert sorted(os.listdir(tmp_path / ".uploads")) == [first.split(":")[1] + ".safetensors", "voices.json"]
