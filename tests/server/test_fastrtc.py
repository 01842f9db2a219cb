"""FastRTC's text-to-speech model (server/fastrtc_tts.py), in an environment with fastrtc itself
(.venv-fastrtc, made by scripts/test.sh: fastrtc's dependencies pin others' versions): it has
fastrtc's TTSModel protocol's three methods with its parameters, `stream_tts` an async generator;
all three give the audio the Python API gives for the same call, at the model's rate."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from core import TTSModel
from tests.support.paths import ROOT, TINY_CONFIG, VOICE_24K

FASTRTC_PYTHON = ROOT / ".venv-fastrtc" / "bin" / "python"
TEXT = "Hello from a FastRTC app. It speaks as it goes."
DRIVER = """
import asyncio, inspect, json, sys
import numpy as np
from fastrtc.text_to_speech.tts import TTSModel as Protocol
from server.fastrtc_tts import PocketTTSModel, PocketTTSOptions

config, voice, text, out = sys.argv[1:]
shapes = {}
for name in ("tts", "stream_tts", "stream_tts_sync"):
    theirs, ours = inspect.signature(getattr(Protocol, name)), inspect.signature(getattr(PocketTTSModel, name))
    shapes[name] = [list(theirs.parameters), list(ours.parameters)]
model = PocketTTSModel(config, voice=voice)
options = PocketTTSOptions(temperature=0.0, seed=3)
rate, whole = model.tts(text, options)
synced = [(r, c) for r, c in model.stream_tts_sync(text, options)]

async def collect():
    return [(r, c) async for r, c in model.stream_tts(text, options)]

streamed = asyncio.run(collect())
joined = {name: np.concatenate([c for _, c in chunks]) for name, chunks in (("synced", synced), ("streamed", streamed))}
np.savez(out, whole=whole, **joined)
print(json.dumps({"shapes": shapes, "async": inspect.isasyncgenfunction(PocketTTSModel.stream_tts), "rates":
    sorted({rate} | {r for r, _ in synced} | {r for r, _ in streamed}), "dtype": str(whole.dtype),
    "chunks": [len(synced), len(streamed)]}))
"""


@pytest.fixture(scope="module")
def fastrtc_python(request):
    if not FASTRTC_PYTHON.exists():
        if request.config.getoption("--require-full-reference"):
            pytest.fail(f"{FASTRTC_PYTHON} is missing (scripts/test.sh makes it)")
        pytest.skip("needs .venv-fastrtc (scripts/test.sh)")
    return FASTRTC_PYTHON


def driven(fastrtc_python, driver: str, *more: str) -> dict:
    """What `driver` prints last (JSON), run by fastrtc's Python with the tiny model, the test
    voice, TEXT and `more`."""
    done = subprocess.run(
        [str(fastrtc_python), "-W", "ignore", "-c", driver, str(TINY_CONFIG), str(VOICE_24K), TEXT, *more],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_model_is_fastrtcs_protocol_and_speaks_as_the_api(fastrtc_python, tmp_path) -> None:
    out = tmp_path / "audio.npz"
    said = driven(fastrtc_python, DRIVER, str(out))
    for name, (theirs, ours) in said["shapes"].items():
        assert theirs == ours, name
    assert said["async"] and said["rates"] == [24000] and said["dtype"] == "float32"
    assert said["chunks"][0] == said["chunks"][1] > 1
    audio = np.load(out)
    want = TTSModel.load(str(TINY_CONFIG)).generate(TEXT, str(VOICE_24K), temperature=0.0, seed=3)
    for name in ("whole", "synced", "streamed"):
        assert np.array_equal(audio[name], want), name


STREAM_DRIVER = """
import audioop, base64, json, sys
import numpy as np
from fastapi import FastAPI
from fastapi.testclient import TestClient
from fastrtc import ReplyOnPause, Stream
from fastrtc.websocket import convert_to_mulaw
from server.fastrtc_tts import PocketTTSModel, PocketTTSOptions

config, voice, text = sys.argv[1:]


class LoudnessVAD:
    # fastrtc's pause detection model protocol, without silero's download: speech is a 20 ms frame above -40 dBFS.
    def vad(self, audio, options):
        rate, samples = audio
        samples = np.asarray(samples, np.float32).reshape(-1) / 32768.0
        frames = samples[: samples.size // 160 * 160].reshape(-1, 160)
        return float((np.sqrt((frames**2).mean(axis=1)) > 0.01).sum() * 160 / rate), []

    def warmup(self):
        pass


tts = PocketTTSModel(config, voice=voice)
options = PocketTTSOptions(temperature=0.0, seed=3)
heard = []


def reply(audio):
    heard.append(int(audio[1].size))
    yield from tts.stream_tts_sync(text, options)


stream = Stream(ReplyOnPause(reply, model=LoudnessVAD(), input_sample_rate=8000), modality="audio", mode="send-receive")
app = FastAPI()
stream.mount(app)
_, whole = tts.tts(text, options)
want = convert_to_mulaw(whole, 24000, 24000)
speech = (np.random.default_rng(0).standard_normal(8000) * 3000).astype(np.int16)
caller = np.concatenate([speech, np.zeros(8000, np.int16)])
got, media = b"", 0
with TestClient(app).websocket_connect("/websocket/offer") as ws:
    ws.send_json({"event": "start", "websocket_id": "caller"})
    for at in range(0, caller.size, 160):
        payload = base64.b64encode(audioop.lin2ulaw(caller[at : at + 160].tobytes(), 2)).decode()
        ws.send_json({"event": "media", "media": {"payload": payload}})
    while len(got) < len(want):
        message = ws.receive_json()
        if message.get("event") == "media":
            got += base64.b64decode(message["media"]["payload"])
            media += 1
    ws.send_json({"event": "stop"})
print(json.dumps({"heard": heard, "equal": got == want, "media": media, "bytes": len(want)}))
"""


def test_a_fastrtc_stream_answers_a_caller_with_the_apis_audio(fastrtc_python) -> None:
    """FastRTC's own Stream, mounted on a FastAPI app, with ReplyOnPause over this model: a caller
    speaks a second then falls silent on the Stream's WebSocket, and hears the API's audio for the
    answer, chunk by chunk, byte for byte as fastrtc encodes it (mu-law at the model's rate)."""
    said = driven(fastrtc_python, STREAM_DRIVER)
    assert said["heard"] and said["heard"][0] >= 8000  # the caller's speech reached the reply, at 8 kHz
    assert said["equal"] and said["bytes"] > 0 and said["media"] > 1
