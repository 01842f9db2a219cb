"""Audio at the rate and in the codec a client asks for: G.711 mu-law and A-law against CPython's
own implementation (audioop) and libsndfile's decoder, a stream's resampling against soxr on the
whole signal, and the fronts that send audio (POST /stream, POST /generate, OpenAI's route, the
command line) at 8 and 16 kHz."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
import warnings

import httpx
import numpy as np
import pytest
import soundfile
import soxr

from core import audio_formats
from core.portable.audio.pcm import pcm16
from tests.support.paths import ROOT, TINY_CONFIG, VOICE_24K
from tests.support.processes import tiny_server

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import audioop  # CPython's G.711 (audioop-lts where the standard library has none)

ONE_SENTENCE = "Hello there, how are you today?"
BODY = {"text": "Hello there. How are you?", "temperature": 0, "max_frames": 20, "eos_threshold": 100.0}


def samples(seconds: float = 1.0) -> np.ndarray:
    """A sweep over the whole range, then speech-like noise: [n] float32 in [-1, 1]."""
    sweep = np.linspace(-1.0, 1.0, int(24000 * seconds / 2))
    noise = np.random.default_rng(2).standard_normal(int(24000 * seconds / 2)) * 0.3
    return np.clip(np.concatenate([sweep, noise]), -1, 1).astype(np.float32)


def test_g711_is_cpythons_and_decodes_to_the_samples_within_the_codecs_error() -> None:
    x = samples()
    linear = pcm16(x)
    assert audio_formats.mulaw(x) == audioop.lin2ulaw(linear, 2)
    assert audio_formats.alaw(x) == audioop.lin2alaw(linear, 2)
    reference = np.frombuffer(linear, "<i2").astype(np.float64)
    for subtype, encode, step in (("ULAW", audio_formats.mulaw, 1 / 16), ("ALAW", audio_formats.alaw, 1 / 16)):
        decoded, _ = soundfile.read(
            io.BytesIO(encode(x)), samplerate=8000, channels=1, format="RAW", subtype=subtype, dtype="int16"
        )
        error = np.abs(decoded - reference)
        # G.711 keeps 4 bits of mantissa: an error of at most a 16th of the magnitude (plus the step near zero)
        assert np.all(error <= step * np.abs(reference) + 16), (subtype, float(error.max()))


@pytest.mark.parametrize("rate", audio_formats.RATES)
def test_a_streams_chunks_join_as_the_whole_signal_resampled(rate) -> None:
    x = samples(2.0)
    cuts = np.sort(np.random.default_rng(rate).choice(x.size, 25, replace=False))
    output = audio_formats.Output("pcm", 24000, rate)
    streamed = b"".join(output.chunk(piece) for piece in np.split(x, cuts)) + output.end()
    whole = x if rate == 24000 else soxr.resample(x, 24000, rate, quality="HQ")
    assert streamed == pcm16(whole) and len(streamed) == 2 * round(x.size * rate / 24000)


def test_an_unoffered_rate_is_refused() -> None:
    from core import PocketTTSError

    with pytest.raises(PocketTTSError, match="sample rate 12345 is not offered: use one of 8000, 16000"):
        audio_formats.Output("pcm", 24000, 12345)


@pytest.fixture(scope="module")
def live():
    with tiny_server() as url:
        yield url


def test_the_http_fronts_send_the_rate_and_codec_asked(live) -> None:
    native = httpx.post(live + "/generate", json=BODY, timeout=60)
    pcm24, rate = soundfile.read(io.BytesIO(native.content), dtype="float32")
    assert rate == 24000
    expected16 = pcm16(soxr.resample(pcm24, 24000, 16000, quality="HQ"))
    wav16 = httpx.post(live + "/generate", json=dict(BODY, sample_rate=16000), timeout=60)
    info = soundfile.info(io.BytesIO(wav16.content))
    assert (info.samplerate, info.subtype, info.frames) == (16000, "PCM_16", len(expected16) // 2)
    close(wav16.content[44:], expected16)
    streamed = httpx.post(live + "/stream", json=dict(BODY, sample_rate=16000), timeout=60)
    assert streamed.headers["x-sample-rate"] == "16000" and streamed.headers["x-sample-format"] == "s16le"
    assert streamed.content == wav16.content[44:]
    telephone = httpx.post(live + "/stream", json=dict(BODY, sample_rate=8000, format="mulaw"), timeout=60)
    assert telephone.headers["x-sample-format"] == "mulaw" and telephone.headers["x-sample-rate"] == "8000"
    g711_close(telephone.content, "ULAW", soxr.resample(pcm24, 24000, 8000, quality="HQ"))
    speech = {"model": "tts-1", "input": BODY["text"], "voice": "alloy", "speed": 1.0}
    openai_alaw = httpx.post(
        live + "/v1/audio/speech", json=dict(speech, response_format="alaw", sample_rate=8000), timeout=60
    )
    assert openai_alaw.status_code == 200 and openai_alaw.headers["content-type"].startswith("audio/x-alaw-basic")
    assert len(openai_alaw.content) > 0
    flac = httpx.post(
        live + "/v1/audio/speech", json=dict(speech, response_format="flac", sample_rate=44100), timeout=60
    )
    assert soundfile.info(io.BytesIO(flac.content)).samplerate == 44100
    events = httpx.post(
        live + "/v1/audio/speech", json=dict(speech, response_format="pcm", sample_rate=16000, stream_format="sse")
    )
    deltas = [json.loads(line[6:]) for line in events.text.splitlines() if line.startswith("data: ")]
    audio = b"".join(base64.b64decode(d["audio"]) for d in deltas if d["type"] == "speech.audio.delta")
    assert len(audio) % 2 == 0 and len(audio) > 0
    refused = httpx.post(live + "/stream", json=dict(BODY, sample_rate=12345), timeout=60)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "sample_rate"
    refused = httpx.post(live + "/stream", json=dict(BODY, format="gsm"), timeout=60)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "format"


def close(got: bytes, expected: bytes) -> None:
    """The same 16-bit samples, to the rounding of the batched products and of a WAV read back
    before it was resampled (a few steps)."""
    a, b = np.frombuffer(got, "<i2").astype(int), np.frombuffer(expected, "<i2").astype(int)
    assert a.shape == b.shape and np.abs(a - b).max() <= 3


def g711_close(got: bytes, subtype: str, expected: np.ndarray) -> None:
    """G.711 bytes that decode to `expected` (float samples) within the codec's error."""
    decoded, _ = soundfile.read(
        io.BytesIO(got), samplerate=8000, channels=1, format="RAW", subtype=subtype, dtype="int16"
    )
    reference = np.frombuffer(pcm16(expected), "<i2").astype(np.float64)
    assert decoded.shape == reference.shape
    assert np.all(np.abs(decoded - reference) <= np.abs(reference) / 16 + 20)


@pytest.mark.slow
def test_the_command_line_writes_the_rate_and_codec_asked(tmp_path) -> None:
    common = [sys.executable, "-m", "core.cli", "generate", "--model", str(TINY_CONFIG), "--voice", str(VOICE_24K)]
    common += ["--text", BODY["text"], "--temperature", "0", "--max-frames", "20", "--eos-threshold", "100", "-q"]
    for name in ("a24.wav", "a8.wav", "a8.ulaw", "a8.alaw"):
        rate = ["--sample-rate", "8000"] if "8" in name else []
        done = subprocess.run(common + rate + ["-o", str(tmp_path / name)], capture_output=True, cwd=ROOT, timeout=120)
        assert done.returncode == 0, done.stderr
    pcm24, _ = soundfile.read(str(tmp_path / "a24.wav"), dtype="float32")
    pcm8 = soxr.resample(pcm24, 24000, 8000, quality="HQ")
    info = soundfile.info(str(tmp_path / "a8.wav"))
    assert (info.samplerate, info.frames) == (8000, pcm8.size)
    g711_close((tmp_path / "a8.ulaw").read_bytes(), "ULAW", pcm8)
    g711_close((tmp_path / "a8.alaw").read_bytes(), "ALAW", pcm8)
    raw = subprocess.run(common + ["--stream", "--sample-rate", "16000"], capture_output=True, cwd=ROOT, timeout=120)
    close(raw.stdout, pcm16(soxr.resample(pcm24, 24000, 16000, quality="HQ")))


def test_the_websocket_sends_the_rate_and_codec_its_start_asks(live) -> None:
    """Its audio at 16 kHz is POST /stream's at 16 kHz (the same seed, and a text of one segment),
    and its sample counts are at that rate; mu-law at 8 kHz is a byte a sample."""
    from websockets.sync.client import connect

    def spoken(start: dict) -> tuple:
        audio, frames = b"", []
        with connect(live.replace("http://", "ws://") + "/v1/audio/speech/stream", open_timeout=60) as ws:
            ws.send(json.dumps(dict(start, type="start")))
            ws.send(json.dumps({"type": "text", "text": ONE_SENTENCE}))
            ws.send(json.dumps({"type": "end"}))
            for message in ws:
                if isinstance(message, bytes):
                    audio += message
                else:
                    frames.append(json.loads(message))
        return audio, frames

    options = {"temperature": 0, "max_frames": 20, "eos_threshold": 100.0, "seed": 3}
    audio, frames = spoken(dict(options, sample_rate=16000))
    assert frames[0] == {"type": "started", "sample_rate": 16000, "format": "pcm"}
    assert frames[-1] == {"type": "done", "samples": len(audio) // 2}
    body = dict(BODY, text=ONE_SENTENCE, seed=3, sample_rate=16000)
    streamed = httpx.post(live + "/stream", json=body, timeout=60).content
    close(audio, streamed)
    telephone, frames = spoken(dict(options, sample_rate=8000, format="mulaw"))
    assert frames[-1] == {"type": "done", "samples": len(telephone)} and len(telephone) * 4 == len(
        audio
    )  # 8 bits, half the rate
