"""OpenAI's listings against a real `python -m server`: GET /v1/models through the official openai
SDK (models.list, models.retrieve), GET /v1/audio/voices (the SDK has no call for it) through httpx;
and /v1/audio/speech's speed and normalize, through the SDK."""

from __future__ import annotations

from typing import Iterator

import httpx
import pytest
from openai import NotFoundError, OpenAI

from tests.support.paths import TINY_CONFIG, VOICE_22K, VOICE_24K
from tests.support.processes import tiny_server

# The model's own name (the config's folder: never the path it was loaded from), then OpenAI's.
NAMES = [TINY_CONFIG.parent.name, "pocket-tts", "tts-1", "tts-1-hd", "gpt-4o-mini-tts"]


@pytest.fixture(scope="module")
def live() -> Iterator[str]:
    with tiny_server() as url:
        yield url


@pytest.fixture(scope="module")
def client(live) -> OpenAI:
    return OpenAI(base_url=live + "/v1", api_key="not-needed")


def test_models_lists_the_loaded_model_under_the_names_clients_send(client) -> None:
    models = client.models.list()
    assert [model.id for model in models] == NAMES
    assert all(model.object == "model" and model.owned_by == "kyutai" and model.created > 0 for model in models)
    assert client.models.retrieve("tts-1").id == "tts-1"
    assert client.models.retrieve(NAMES[0]).id == NAMES[0]
    with pytest.raises(NotFoundError):
        client.models.retrieve(str(TINY_CONFIG))
    with pytest.raises(NotFoundError) as missing:
        client.models.retrieve("whisper-1")
    assert missing.value.body["code"] == "model_not_found"


def test_each_listed_model_speaks(client) -> None:
    for name in NAMES[1:]:
        spoken = client.audio.speech.create(model=name, voice="alloy", input="Hi.", response_format="pcm")
        assert len(spoken.content) > 0


def test_voices_lists_the_default_the_predefined_the_aliases_and_the_uploads_kept(live) -> None:
    voices = httpx.get(live + "/v1/audio/voices", timeout=60).json()["voices"]
    assert voices[0] == {"id": "default", "name": VOICE_24K.stem, "kind": "default"}
    aliases = {v["id"]: v["voice"] for v in voices if v["kind"] == "alias"}
    assert aliases["alloy"] == "default" and len(aliases) == 11  # the tiny model has no predefined voices
    assert not [v for v in voices if v["kind"] in ("predefined", "uploaded")]
    uploaded = httpx.post(live + "/voices", files={"voice_wav": ("me.wav", VOICE_22K.read_bytes())}, timeout=60)
    key = uploaded.json()["voice"]
    voices = httpx.get(live + "/v1/audio/voices", timeout=60).json()["voices"]
    assert voices[-1] == {"id": key, "name": "me.wav", "kind": "uploaded"}  # the name it was uploaded under
    assert all(httpx.get(live + "/v1/audio/voices").status_code == 200 for _ in range(2))


def test_speech_takes_speed_and_normalize(client) -> None:
    """OpenAI's speed (0.25-4), and our `normalize` as an extra field; the SDK checks neither."""
    body = {"model": "tts-1", "voice": "alloy", "response_format": "pcm"}
    fast = client.audio.speech.create(input="Hello there.", speed=4.0, extra_body={"normalize": False}, **body)
    assert len(fast.content) > 0
    with pytest.raises(Exception) as refused:
        client.audio.speech.create(input="Hello.", speed=4.5, **body)
    assert refused.value.status_code == 400 and refused.value.body["param"] == "speed"


def test_the_voices_folder_is_offered_on_every_front_and_models_are_described(tmp_path) -> None:
    """--voices-dir without Wyoming: its recordings are listed by /voices and /v1/audio/voices,
    speak by name on /generate and OpenAI's route, and are among the names an unknown voice's error
    gives. A model card says its language, parameters and whether it times words."""
    import io
    import shutil

    import numpy as np
    import soundfile

    from core.portable import config
    from core.portable.weights import params

    shutil.copy(VOICE_22K, tmp_path / "grandpa.wav")
    with tiny_server("--voices-dir", str(tmp_path)) as url:
        assert httpx.get(url + "/voices", timeout=60).json()["folder"] == ["grandpa"]
        voices = httpx.get(url + "/v1/audio/voices", timeout=60).json()["voices"]
        assert {"id": "grandpa", "name": "grandpa", "kind": "folder"} in voices
        body = {"text": "Hi there.", "temperature": 0, "max_frames": 6, "eos_threshold": 100.0}
        default = httpx.post(url + "/generate", json=body, timeout=60)
        folder = httpx.post(url + "/generate", json=dict(body, voice="grandpa"), timeout=60)
        assert default.status_code == folder.status_code == 200 and default.content != folder.content
        speech = {"model": "tts-1", "input": "Hi.", "voice": "grandpa", "response_format": "flac"}
        spoken = httpx.post(url + "/v1/audio/speech", json=speech, timeout=60)
        assert spoken.status_code == 200 and soundfile.read(io.BytesIO(spoken.content))[0].size > 0
        unknown = httpx.post(url + "/generate", json=dict(body, voice="grandma"), timeout=60)
        assert unknown.status_code == 400 and "grandpa" in unknown.json()["error"]["message"]
        card = httpx.get(url + "/v1/models/tts-1", timeout=60).json()
    count = sum(int(np.prod(s)) for s in params.expected_shapes(config.load_yaml(str(TINY_CONFIG))).values())
    assert card["language"] == "english" and card["parameters"] == count and card["word_timestamps"] is False


def test_the_call_pipecats_openai_service_makes(client) -> None:
    """Pipecat's OpenAITTSService: a streaming response of 24 kHz PCM for an OpenAI voice name, with
    `speed` and `instructions` (accepted, and ignored: the model takes no instructions)."""
    with client.audio.speech.with_streaming_response.create(
        input="Hello from Pipecat.",
        model="gpt-4o-mini-tts",
        voice="alloy",
        response_format="pcm",
        instructions="Speak warmly.",
        speed=1.2,
    ) as response:
        assert response.headers["content-type"] == "audio/pcm" and response.headers["x-sample-rate"] == "24000"
        audio = b"".join(response.iter_bytes(4096))
    assert len(audio) > 0 and len(audio) % 2 == 0
