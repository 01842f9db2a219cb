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


def test_the_model_is_fastrtcs_protocol_and_speaks_as_the_api(fastrtc_python, tmp_path) -> None:
    out = tmp_path / "audio.npz"
    done = subprocess.run(
        [str(fastrtc_python), "-c", DRIVER, str(TINY_CONFIG), str(VOICE_24K), TEXT, str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    for name, (theirs, ours) in said["shapes"].items():
        assert theirs == ours, name
    assert said["async"] and said["rates"] == [24000] and said["dtype"] == "float32"
    assert said["chunks"][0] == said["chunks"][1] > 1
    audio = np.load(out)
    want = TTSModel.load(str(TINY_CONFIG)).generate(TEXT, str(VOICE_24K), temperature=0.0, seed=3)
    for name in ("whole", "synced", "streamed"):
        assert np.array_equal(audio[name], want), name
