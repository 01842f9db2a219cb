"""The HTTP server: routes through Litestar's TestClient, and a real `python -m server` process
driven by the official openai SDK and plain HTTP (concurrency, disconnects, overload). The same
routes and clients run against the app as a Ray Serve application too (`python -m server.cluster`:
two replicas on a local Ray cluster), which must also replace a replica that dies."""

from __future__ import annotations

import base64
import concurrent.futures
import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile
from litestar.testing import TestClient

from core import VoiceError
from core.portable.audio.pcm import pcm16
from e2e.harness import active_generations, cluster_server, free_port, ray_cluster
from server.app import create_app
from server.engine import ServerEngine
from server.health import alive
from server.settings import MAX_CONCURRENT
from tests.support.checks import error_of, pcm_close
from tests.support.needs import require_ray
from tests.support.paths import LOCAL, ROOT, TINY_CONFIG, VOICE_22K, VOICE_24K
from tests.support.processes import tiny_server

CONFIG = str(TINY_CONFIG)
QUIET = {"temperature": 0.0, "max_frames": 6}


def expected_pcm(model, text: str, voice, **options) -> bytes:
    return pcm16(model.generate(text, voice, **dict(QUIET, **options)))


def same_audio(client, got: bytes, expected: bytes) -> bool:
    """In process, the exact audio; through Ray Serve, whose replicas are other processes (their
    products may round differently), the same to one 16-bit step."""
    return got == expected if isinstance(client, TestClient) else pcm_close(got, expected)


@pytest.fixture(scope="module")
def engine(model) -> ServerEngine:
    return ServerEngine(model, str(VOICE_24K), max_concurrent=2)


@pytest.fixture(scope="module")
def served(request):
    """The same app on Ray Serve: two replicas on a local two-CPU Ray cluster."""
    require_ray(request)
    args = ["--model", CONFIG, "--voice", str(VOICE_24K), "--replicas", "2", "--cpus-per-replica", "1"]
    with ray_cluster() as address, cluster_server(address, args + ["--max-concurrent", "4"]) as url:
        yield url


@pytest.fixture(scope="module")
def app_client(engine):
    with TestClient(app=create_app(engine), base_url=LOCAL) as test_client:
        yield test_client


@pytest.fixture(scope="module", params=["app", pytest.param("serve", marks=pytest.mark.cluster)])
def client(request):
    """The routes in process (TestClient), and over HTTP through Ray Serve's proxy."""
    if request.param == "app":
        yield request.getfixturevalue("app_client")
    else:
        with httpx.Client(base_url=request.getfixturevalue("served"), timeout=120) as http:
            yield http


def test_health_and_voices(client, engine) -> None:
    health = client.get("/health").json()
    assert health["status"] == "ok" and health["sample_rate"] == 24000 and health["active_generations"] == 0
    # Names, never paths or processes: the config's folder, the voice file's own name, a random id.
    assert health["model"] == "tiny_lsd" and health["default_voice"] == "voice_24000"
    assert "/" not in json.dumps(health) and str(os.getpid()) not in health["instance"]
    assert [card["id"] for card in client.get("/v1/models").json()["data"]][0] == "tiny_lsd"
    listing = client.get("/voices").json()
    assert listing["voices"] == [] and listing["openai_voices"]["alloy"] == "default"


def test_uvicorns_factory_builds_its_engine_from_the_environment(monkeypatch) -> None:
    """`uvicorn --factory server.app:create_app` reads its settings from the environment, with
    python -m server's defaults (server/settings.py) for those it does not find; its lifespan loads
    the engine and closes it at the end."""
    monkeypatch.setenv("POCKET_TTS_MODEL", CONFIG)
    monkeypatch.setenv("POCKET_TTS_VOICE", str(VOICE_24K))
    monkeypatch.setenv("POCKET_TTS_API_KEY", "sesame")
    monkeypatch.delenv("POCKET_TTS_MAX_CONCURRENT", raising=False)
    app = create_app()
    with TestClient(app=app, base_url=LOCAL) as client:
        engine = app.state.engine
        assert engine.model.name == CONFIG and engine.generations.max_concurrent == MAX_CONCURRENT and alive(engine)
        assert client.get("/voices").status_code == 401
        assert client.get("/voices", headers={"authorization": "Bearer sesame"}).status_code == 200
    assert not alive(engine)


def test_generate_returns_the_core_audio_as_wav(client, engine) -> None:
    response = client.post("/generate", json={"text": "Hello world.", **QUIET})
    assert response.status_code == 200 and response.headers["content-type"] == "audio/wav"
    samples, rate = soundfile.read(io.BytesIO(response.content), dtype="int16")
    assert rate == 24000 and samples.shape == (6 * 1920,)
    assert same_audio(
        client, samples.tobytes(), expected_pcm(engine.model, "Hello world.", engine.voices.voice("default"))
    )


def test_stream_is_raw_pcm_of_the_same_audio(client, engine) -> None:
    response = client.post("/stream", json={"text": "Hello world.", **QUIET})
    assert response.status_code == 200
    assert response.headers["x-sample-rate"] == "24000" and response.headers["x-sample-format"] == "s16le"
    assert same_audio(
        client, response.content, expected_pcm(engine.model, "Hello world.", engine.voices.voice("default"))
    )


def test_official_tts_form(client, engine) -> None:
    response = client.post("/tts", files={"text": (None, "Hello world.")})
    assert response.status_code == 200 and response.headers["content-type"] == "audio/wav"
    assert response.content[:4] == b"RIFF" and response.content[40:44] == b"\xff\xff\xff\xff"  # streamed WAV
    encoded = client.post("/tts", data={"text": "Hello world."})  # url-encoded, as FastAPI's Form takes too
    assert encoded.status_code == 200 and encoded.content[:4] == b"RIFF" and len(encoded.content) > 44
    with open(VOICE_22K, "rb") as f:
        uploaded = client.post("/tts", files={"text": (None, "Hello world."), "voice_wav": ("me.wav", f.read())})
    assert uploaded.status_code == 200 and len(uploaded.content) > 44
    assert error_of(client.post("/tts", files={"text": (None, "  ")}))["message"] == "Text cannot be empty"
    unknown = client.post("/tts", files={"text": (None, "Hi"), "voice_url": (None, "https://example.com/v.wav")})
    assert unknown.status_code == 400 and error_of(unknown)["param"] == "voice_url"


def test_uploaded_voice_is_encoded_once(app_client, engine, monkeypatch) -> None:
    client = app_client
    calls = []
    original = engine.model.clone_voice
    monkeypatch.setattr(engine.model, "clone_voice", lambda *a, **k: calls.append(1) or original(*a, **k))
    samples, rate = soundfile.read(VOICE_22K, dtype="float32")
    buffer = io.BytesIO()
    soundfile.write(buffer, 0.9 * samples, rate, format="FLAC")  # a recording no other test uploads
    data = buffer.getvalue()
    first = client.post("/voices", files={"voice_wav": ("a.flac", data)}).json()["voice"]
    second = client.post("/voices", files={"voice_wav": ("b.flac", data)}).json()["voice"]
    assert first == second and first.startswith("upload:") and len(calls) == 1
    spoken = client.post("/generate", json={"text": "Cloned.", "voice": first, **QUIET})
    assert spoken.status_code == 200
    assert spoken.content[44:] == expected_pcm(engine.model, "Cloned.", engine.voices.voice(first))


def test_an_upload_to_one_server_is_cloned_by_another_from_the_shared_recordings(model) -> None:
    """Servers behind one address share the recordings of their uploads (server/cluster.py keeps
    them in a Serve deployment; a dict here): the others clone an uploaded id on its first use."""
    recordings: dict = {}
    engines = [ServerEngine(model, str(VOICE_24K), 1, recordings=recordings) for _ in range(2)]
    alone = ServerEngine(model, str(VOICE_24K), 1)
    try:
        data = VOICE_22K.read_bytes()
        key = engines[0].voices.upload(data, "me.wav")
        assert recordings == {key: data}
        with pytest.raises(VoiceError, match="upload it again"):
            alone.voices.voice(key)
        here, there = engines[0].voices.voice(key), engines[1].voices.voice(key)
        assert here is not there and here.transformer.offset == there.transformer.offset
        for a, b in zip(
            here.transformer.keys + here.transformer.values, there.transformer.keys + there.transformer.values
        ):
            assert np.array_equal(a, b)
        assert engines[1].voices.voice(key) is there  # cloned once, then kept
        with pytest.raises(VoiceError, match="upload it again"):
            engines[1].voices.voice("upload:" + "0" * 24)
    finally:
        for engine in engines + [alone]:
            engine.close()


@pytest.mark.parametrize("payload, message", [(b"", "empty"), (b"RIFF1234WAVEnot audio", "cannot decode")])
def test_bad_voice_uploads(client, payload: bytes, message: str) -> None:
    response = client.post("/voices", files={"voice_wav": ("v.wav", payload)})
    assert response.status_code == 400 and message in error_of(response)["message"]


@pytest.mark.parametrize("fmt, container", [("wav", "WAV"), ("flac", "FLAC"), ("mp3", "MP3"), ("opus", "OGG")])
def test_openai_speech_formats(client, fmt: str, container: str) -> None:
    response = client.post(
        "/v1/audio/speech", json={"model": "tts-1", "input": "Hello.", "voice": "alloy", "response_format": fmt}
    )
    assert response.status_code == 200, response.text
    info = soundfile.info(io.BytesIO(response.content))
    assert info.format == container and info.channels == 1 and info.duration > 0.3


def test_openai_pcm_and_sse(client) -> None:
    """OpenAI's API has no seed: the model's default temperature makes every call differ."""
    body = {"model": "tts-1", "input": "Hello there.", "voice": {"id": "default"}}
    pcm = client.post("/v1/audio/speech", json=dict(body, response_format="pcm"))
    assert pcm.status_code == 200 and pcm.headers["content-type"] == "audio/pcm"
    assert len(pcm.content) % (2 * 1920) == 0 and len(pcm.content) > 0
    events = client.post("/v1/audio/speech", json=dict(body, response_format="pcm", stream_format="sse"))
    assert events.headers["content-type"].startswith("text/event-stream")
    parsed = [json.loads(line[len("data: ") :]) for line in events.text.splitlines() if line.startswith("data: ")]
    assert parsed[-1]["type"] == "speech.audio.done" and len(parsed) > 2
    audio = b"".join(base64.b64decode(e["audio"]) for e in parsed if e["type"] == "speech.audio.delta")
    assert len(audio) % (2 * 1920) == 0 and len(audio) > 0


def test_speed_and_normalize_on_every_http_entry(app_client, engine) -> None:
    """Speed stretches the audio (the chunks then come in other sizes than a frame's: the streamed
    WAV, PCM and SSE bodies carry them as they come); normalize is the core's."""
    client, voice = app_client, engine.voices.voice("default")
    body = {"text": "Hello world, 3 times.", **QUIET}
    for speed in (0.5, 2.0):
        for normalize in (True, False):
            expected = expected_pcm(engine.model, body["text"], voice, speed=speed, normalize=normalize)
            streamed = client.post("/stream", json=dict(body, speed=speed, normalize=normalize))
            assert streamed.status_code == 200 and streamed.content == expected
            assert abs(len(expected) / 2 - 6 * 1920 / speed) <= 1
    spoken = client.post("/generate", json=dict(body, normalize=False)).content[44:]
    assert spoken == expected_pcm(engine.model, body["text"], voice, normalize=False)
    assert spoken != expected_pcm(engine.model, body["text"], voice)  # "3" read as "three"
    form = client.post("/tts", data={"text": "Hello.", "speed": "2", "normalize": "false"})
    assert form.status_code == 200 and form.content[:4] == b"RIFF"
    for field, value in (("speed", "fast"), ("speed", "nan"), ("speed", "5"), ("normalize", "maybe")):
        refused = client.post("/tts", data={"text": "Hello.", field: value})
        assert refused.status_code == 400 and error_of(refused)["param"] == field
    openai = {"model": "tts-1", "input": "Hello there.", "voice": "alloy", "response_format": "pcm"}
    events = client.post("/v1/audio/speech", json=dict(openai, speed=1.5, stream_format="sse"))
    parsed = [json.loads(line[len("data: ") :]) for line in events.text.splitlines() if line.startswith("data: ")]
    deltas = [base64.b64decode(e["audio"]) for e in parsed if e["type"] == "speech.audio.delta"]
    assert parsed[-1]["type"] == "speech.audio.done" and all(deltas)  # no empty delta
    wav = client.post("/v1/audio/speech", json=dict(openai, response_format="wav", speed=0.25, normalize=False))
    samples, rate = soundfile.read(io.BytesIO(wav.content), dtype="int16")
    assert wav.status_code == 200 and rate == 24000 and samples.size > 0


@pytest.mark.parametrize(
    "body, param",
    [
        ({"response_format": "aac"}, "response_format"),
        ({"speed": 4.5}, "speed"),
        ({"speed": 0.2}, "speed"),
        ({"normalize": "no"}, "normalize"),
        ({"voice": "nobody"}, "voice"),
        ({"response_format": "ogg-vorbis"}, "response_format"),
        ({"input": ""}, "input"),
        ({"input": " \n "}, "input"),
    ],
)
def test_openai_errors_have_openai_shape(client, body: dict, param: str) -> None:
    request = dict({"model": "tts-1", "input": "Hello.", "voice": "alloy"}, **body)
    response = client.post("/v1/audio/speech", json=request)
    assert response.status_code == 400
    assert error_of(response)["param"] == param


@pytest.mark.parametrize(
    "request_kwargs, status, text",
    [
        ({"json": {"text": ""}}, 400, "the text to speak is empty"),
        ({"json": {"text": "   \n "}}, 400, "empty"),
        ({"json": {"text": "x" * 5001}}, 400, "text"),
        ({"json": {"text": "Hi.", "voice": "ghost"}}, 400, "unknown voice 'ghost'"),
        ({"json": {"text": "Hi.", "temperature": -1}}, 400, "temperature"),
        ({"json": {"text": "Hi.", "temperature": "NaN"}}, 400, "temperature"),
        ({"json": {"text": "Hi.", "lsd_decode_steps": 0}}, 400, "lsd_decode_steps"),
        ({"json": {"text": "Hi.", "seed": -5}}, 400, "seed"),
        ({"json": {"text": "Hi.", "extra": 1}}, 400, "extra"),
        ({"json": ["not", "an", "object"]}, 400, ""),
        ({"content": b'{"text": "unterminated', "headers": {"content-type": "application/json"}}, 400, "malformed"),
        ({"content": b"text=hi", "headers": {"content-type": "text/plain"}}, 415, "application/json"),
        ({"json": {"text": "[pause:forever] hi"}}, 400, "malformed pause"),
    ],
)
def test_bad_input_gets_a_json_4xx_and_the_server_keeps_serving(client, request_kwargs, status: int, text: str) -> None:
    response = client.post("/generate", **request_kwargs)
    assert response.status_code == status, response.text
    assert text.lower() in json.dumps(error_of(response)).lower()
    assert client.get("/health").json()["status"] == "ok"


def test_oversized_body_is_413_json(client) -> None:
    response = client.post("/voices", files={"voice_wav": ("big.wav", b"\0" * (21 * 1024 * 1024))})
    assert response.status_code == 413 and "larger than" in error_of(response)["message"]


# A real server process


@pytest.fixture(scope="module")
def live_process():
    with tiny_server("--max-concurrent", "8") as url:
        yield url


@pytest.fixture(scope="module", params=["process", pytest.param("serve", marks=pytest.mark.cluster)])
def live(request):
    """`python -m server`, and the Ray Serve application."""
    yield request.getfixturevalue("live_process" if request.param == "process" else "served")


def test_the_server_says_what_runs_its_products(live) -> None:
    import core

    assert httpx.get(live + "/health").json()["kernels"] == core.backend()


def test_openai_sdk_against_the_server(live, tmp_path) -> None:
    """The SDK's calls as users make them; a WAV it saves says its own length (Python's `wave` and
    the Content-Length agree with the samples), and a non-WAV answer is whole too."""
    import wave

    from openai import OpenAI

    client = OpenAI(base_url=live + "/v1", api_key="not-needed")
    wav = client.audio.speech.create(
        model="pocket-tts", voice="alloy", input="Hello from the SDK.", response_format="wav"
    )
    samples, rate = soundfile.read(io.BytesIO(wav.content), dtype="int16")
    assert rate == 24000 and samples.size > 0
    wav.write_to_file(tmp_path / "said.wav")
    with wave.open(str(tmp_path / "said.wav")) as f:
        assert f.getnframes() == samples.size and 44 + 2 * f.getnframes() == (tmp_path / "said.wav").stat().st_size
    assert int(wav.response.headers["content-length"]) == len(wav.content)
    with client.audio.speech.with_streaming_response.create(
        model="pocket-tts", voice="alloy", input="Hello from the SDK.", response_format="pcm"
    ) as response:
        assert response.headers["content-type"] == "audio/pcm"
        pieces = list(response.iter_bytes())
    streamed = b"".join(pieces)
    assert len(streamed) % (2 * 1920) == 0 and np.abs(np.frombuffer(streamed, "<i2")).max() > 0


def test_concurrent_requests_give_the_audio_they_get_alone(live) -> None:
    """Eight at once are stepped together (continuous batching): each gets its audio alone, to the
    rounding of the batched products (16-bit samples: at most one step apart)."""
    body = {"text": "Eight at once, each on its own.", "temperature": 0.0, "max_frames": 12, "eos_threshold": 100.0}
    alone = httpx.post(live + "/generate", json=body, timeout=120).content
    results = [None] * 8

    def call(i: int) -> None:
        results[i] = httpx.post(live + "/generate", json=body, timeout=120)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.status_code == 200 for r in results), [r.status_code for r in results]
    assert len(alone) == 44 + 12 * 1920 * 2 and np.abs(np.frombuffer(alone[44:], "<i2")).max() > 100
    for r in results:
        assert r.content[:44] == alone[:44] and pcm_close(r.content[44:], alone[44:])


def wait_idle(url: str) -> int:
    """The running generations once none is left (or after a minute: a hang shows as a failure)."""
    deadline = time.monotonic() + 60
    while active_generations(url) and time.monotonic() < deadline:
        time.sleep(0.02)
    return active_generations(url)


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def test_a_client_that_goes_away_stops_its_generation(live_process) -> None:
    live = live_process
    body = {"text": "A very long story that nobody will hear to the end.", "max_frames": 3000, "eos_threshold": 100.0}
    with httpx.stream("POST", live + "/stream", json=body, timeout=60) as response:
        received = response.iter_bytes()  # kept: dropping the iterator closes the response
        next(received)
        assert active_generations(live) == 1
    assert wait_idle(live) == 0
    # The same for a request that waits for the whole file.
    with socket.create_connection(("127.0.0.1", port_of(live))) as s:
        payload = json.dumps(body).encode()
        s.sendall(
            b"POST /generate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(payload)}\r\n\r\n".encode()
            + payload
        )
        deadline = time.monotonic() + 60
        while active_generations(live) == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert active_generations(live) == 1
    assert wait_idle(live) == 0


def test_overload_gets_a_quick_503_with_retry_after() -> None:
    with tiny_server("--max-concurrent", "1") as url:
        body = {"text": "Keep the only slot busy.", "max_frames": 3000, "eos_threshold": 100.0}
        with httpx.stream("POST", url + "/stream", json=body, timeout=60) as response:
            received = response.iter_bytes()
            next(received)
            refused = httpx.post(url + "/generate", json={"text": "Me too."}, timeout=10)  # at once, no queue
            assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
            assert error_of(refused)["code"] == "busy"
        assert wait_idle(url) == 0
        assert httpx.post(url + "/generate", json={"text": "Now.", **QUIET}, timeout=30).status_code == 200


def test_a_voice_that_cannot_load_fails_at_startup(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "server",
            "--model",
            CONFIG,
            "--voice",
            str(tmp_path / "no.wav"),
            "--port",
            str(free_port()),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and done.stderr.splitlines()[-1].startswith("error: voice file not found")


def instances(url: str, count: int) -> set:
    """The replicas answering /health (each a random id), once `count` different ones have answered."""
    seen: set = set()
    deadline = time.monotonic() + 120
    while len(seen) < count and time.monotonic() < deadline:
        seen.add(httpx.get(url + "/health", timeout=30).json()["instance"])
    return seen


def replica_processes() -> list:
    """The PIDs of this machine's replicas of the app (Ray titles each actor's process after it)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if entry.name.isdigit() and b"ServeReplica:pocket-tts:PocketTTS" in command:
            found.append(int(entry.name))
    assert found, "no replica process found"
    return sorted(found)


@pytest.mark.cluster
def test_a_killed_replica_is_replaced_and_requests_keep_being_answered(served) -> None:
    """Under load (two clients asking one after another), one replica is killed: the other answers
    meanwhile, Serve starts a new one, and then every request succeeds again."""
    before = instances(served, 2)
    assert len(before) == 2, before
    statuses: list = []
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            try:
                statuses.append(httpx.post(served + "/tts", data={"text": "Still there?"}, timeout=60).status_code)
            except httpx.HTTPError as e:  # a request the dead replica had: an answer of sorts, not a hang
                statuses.append(type(e).__name__)

    clients = [threading.Thread(target=load) for _ in range(2)]
    for client in clients:
        client.start()
    try:
        while len(statuses) < 4 and all(c.is_alive() for c in clients):  # the load is on
            time.sleep(0.01)
        os.kill(replica_processes()[0], signal.SIGKILL)  # /health names no process: Ray's title does
        killed_at = len(statuses)
        now: set = set()
        deadline = time.monotonic() + 180
        while not (now - before) and time.monotonic() < deadline:  # until the new replica answers
            now.add(httpx.get(served + "/health", timeout=30).json()["instance"])
        replaced_at = len(statuses)
    finally:
        stop.set()
        for client in clients:
            client.join()
    assert now - before, "no new replica"
    assert len(before - instances(served, 2)) == 1  # one of the two is gone for good
    assert statuses[killed_at:replaced_at].count(200) >= 1, statuses  # the survivor kept answering
    after = [httpx.post(served + "/tts", data={"text": "Back to two."}, timeout=60).status_code for _ in range(8)]
    assert after == [200] * 8, (after, statuses)


@pytest.mark.cluster
def test_a_voice_uploaded_through_one_replica_speaks_through_every_replica(served) -> None:
    """The upload reaches one replica; Serve spreads the requests that follow over both, and each
    answers with that voice (the other clones it from the shared recordings). Were uploads kept per
    replica only, some of the twelve would fail unless Serve sent all twelve to the same one."""
    assert len(instances(served, 2)) == 2
    samples, rate = soundfile.read(VOICE_22K, dtype="float32")
    buffer = io.BytesIO()
    soundfile.write(buffer, 0.8 * samples, rate, format="WAV")  # a recording no other test uploads
    uploaded = httpx.post(served + "/voices", files={"voice_wav": ("me.wav", buffer.getvalue())}, timeout=60)
    assert uploaded.status_code == 200, uploaded.text
    voice = uploaded.json()["voice"]
    request = {"text": "Cloned.", "voice": voice, **QUIET}

    def speak(_index: int) -> httpx.Response:
        return httpx.post(served + "/generate", json=request, timeout=120)

    with concurrent.futures.ThreadPoolExecutor(4) as pool:  # in flight together: spread over replicas
        answers = list(pool.map(speak, range(12)))
    assert [a.status_code for a in answers] == [200] * 12, [a.text for a in answers if a.status_code != 200]
    for answer in answers[1:]:
        assert pcm_close(answer.content[44:], answers[0].content[44:])


@pytest.mark.cluster
def test_the_cluster_config_file_with_the_command_line_on_top(request) -> None:
    require_ray(request)
    import yaml
    from ray.serve.schema import ServeDeploySchema

    shipped = yaml.safe_load((ROOT / "server" / "serve.yaml").read_text())
    ServeDeploySchema.model_validate(shipped)
    assert shipped["applications"][0]["import_path"] == "server.cluster:app"
    flags = ["--model", CONFIG, "--min-replicas", "1", "--max-replicas", "3", "--cpus-per-replica", "0.5"]
    flags += ["--allow-host", "tts.lan", "--api-key", "sesame"]
    done = subprocess.run(
        [sys.executable, "-m", "server.cluster", "--print-config", "--port", "9000", *flags],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    config = yaml.safe_load(done.stdout)
    ServeDeploySchema.model_validate(config)
    application = config["applications"][0]
    deployment = application["deployments"][0]
    expected = dict(
        shipped["applications"][0]["args"], model=CONFIG, allow_hosts=["127.0.0.1", "tts.lan"], api_key="sesame"
    )
    assert application["args"] == expected
    assert "num_replicas" not in deployment
    assert deployment["autoscaling_config"] == {"min_replicas": 1, "max_replicas": 3}
    assert deployment["ray_actor_options"]["num_cpus"] == 0.5 and config["http_options"]["port"] == 9000
    refused = subprocess.run(
        [sys.executable, "-m", "server.cluster", "--replicas", "0"], capture_output=True, text=True, cwd=ROOT
    )
    assert refused.returncode == 2 and "--replicas must be at least 1" in refused.stderr
