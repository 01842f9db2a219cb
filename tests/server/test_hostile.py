"""Careless and hostile input: every request's cost bounded by what it may produce, nothing heavy on
the event loop, every malformed request a 4xx, and the batch command's input and output folder
held to the same.

Nothing here asserts a duration: costs are counted (frames, samples decoded, tokens decoded,
states kept, slots taken), and "the event loop stays free" is shown by answering /health while the
heavy work is held in the middle (a deadline only turns a hang into a failure).
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import re
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, List

import httpx
import numpy as np
import pytest
import soundfile
import yaml
from litestar import Request, get
from litestar.testing import TestClient

from core import DownloadError, LimitError, Runtime, TTSModel
from core.files import only_writer, write_atomically
from core.portable.audio.pcm import MAX_PROMPT_SECONDS, wav_bytes
from core.portable.synthesis.options import REQUEST_SECONDS, GenerationOptions
from core.portable.text.prepare import MAX_SEGMENT_TOKENS
from server import reading
from server.access import Access
from server.app import create_app
from server.engine import ServerEngine
from server.errors import ServiceError
from server.relay import LIMIT
from server.routes import MAX_JSON
from server.scheduler import Stream
from server.schemas import GenerateRequest, SpeechRequest, StreamRequest
from server.session import MAX_TEXT
from server.settings import Settings
from tests.support.checks import error_of
from tests.support.paths import LOCAL, ROOT, TINY_CONFIG, VOICE_22K, VOICE_24K
from tests.support.processes import tiny_server
from tests.support.serving import GUARD, NEVER_ENDS, Held, in_thread, serving, unread_request, until, wyoming_serving


@pytest.fixture
def engine(model):
    engine = ServerEngine(model, str(VOICE_24K), max_concurrent=2)
    yield engine
    engine.close()


# 1, 5. Audio beyond what a request may make, pauses included


def test_pauses_count_in_the_audio_a_request_may_make(engine, monkeypatch) -> None:
    def add(*args) -> None:
        raise AssertionError("a generation was started")

    with TestClient(app=create_app(engine), base_url=LOCAL) as client:
        capped = client.post("/generate", json={"text": "Hi. " + "[pause:10s] " * 10, "max_frames": 1})
        assert capped.status_code == 200 and len(capped.content) == 44 + 2 * 1920  # one frame, not 100 s
        monkeypatch.setattr(Stream, "add", add)
        for body in ({"text": "[pause:10s]" * 454}, {"text": "Hi.", "max_frames": 7501}):
            refused = client.post("/generate", json=body)
            assert refused.status_code == 400, refused.text
            assert "600 s" in error_of(refused)["message"] or "7500" in error_of(refused)["message"]
    assert engine.active == 0


@pytest.mark.parametrize(
    "text, max_tokens",
    [
        ("ab" * 2500, 50),  # no sentence or clause break: one chunk, as the official splits it
        ("Word " * 1000, 50),
        ("Word, " * 800, 1),  # a chunk per clause, 2 s of padding each
        ("1." * 2500, 50),
        ("\U0001f600" * 5000, 50),
        ("Hi. [pause:10s] " * 59, 50),  # 590 s of pauses, and speech
    ],
)
def test_no_text_makes_a_generation_longer_than_a_request_may_last(engine, text, max_tokens) -> None:
    """A text with no sentence or clause break was one chunk whose length estimate grew with it
    (5,000 characters: a 28-minute budget), and a chunk per clause added 2 s each: now a request's
    audio stops at its limit, pauses included, and no chunk is longer than the segment bound."""
    generation = (
        engine.text_stream(None, GenerationOptions(max_tokens=max_tokens), REQUEST_SECONDS).say(text).generation
    )
    assert generation.frames_left <= 600 * 12.5
    assert all(len(item.tokens) <= MAX_SEGMENT_TOKENS + 1 for item in generation.plan if hasattr(item, "tokens"))


def test_speech_that_could_run_past_the_limit_stops_at_it(model, voice) -> None:
    from core.portable.synthesis.generation import advance

    generation = model.generation("Hello there. " * 20, voice, temperature=0.0, eos_threshold=100.0, max_seconds=1.0)
    made = 0
    while not generation.finished:
        frame = advance(model, [generation])[0]
        made += frame is not None and not frame.end
    assert made == 12  # a second at 12.5 frames a second, of a text that could last a minute


def test_the_models_own_cap_and_max_frames_beyond_it(model, voice) -> None:
    with pytest.raises(LimitError, match="max_frames 100"):
        model.generation("Hi.", voice, max_frames=100, max_seconds=1.0)
    with pytest.raises(LimitError, match=r"the pauses of this text \(2 s of audio\) are more than the 1 s"):
        model.generation("Hi. [pause:2s]", voice, max_seconds=1.0)
    assert model.generation("Hi.", voice, max_frames=12, max_seconds=1.0).frames_left == 12


# 2. A slot is held until the audio is delivered; a client that reads nothing holds little


@pytest.mark.slow
def test_a_client_that_does_not_read_holds_its_slot_and_no_more_than_a_relay_of_audio(model, relays) -> None:
    engine = ServerEngine(model, str(VOICE_24K), max_concurrent=1)
    try:
        with serving(engine) as url:
            client = unread_request(url, "/stream", {"text": "Nobody reads this.", "max_frames": 7500, **NEVER_ENDS})
            until(lambda: relays and relays[0].full, "the generation waits for its client")
            assert relays[0].waiting <= LIMIT and engine.active == 1
            busy = httpx.post(url + "/generate", json={"text": "Me too.", "max_frames": 2}, timeout=GUARD)
            assert busy.status_code == 503 and busy.headers["retry-after"] == "1"
            client.close()
            until(lambda: engine.active == 0, "the slot is free once the client is gone")
    finally:
        engine.close()


@pytest.mark.slow
def test_a_client_that_takes_nothing_for_the_client_timeout_is_dropped(model, relays) -> None:
    engine = ServerEngine(model, str(VOICE_24K), max_concurrent=1)
    try:
        with serving(engine, client_timeout=1.0) as url:
            client = unread_request(url, "/stream", {"text": "Nobody reads this.", "max_frames": 7500, **NEVER_ENDS})
            until(lambda: relays and relays[0].full, "the generation waits for its client")
            until(lambda: engine.active == 0, "the server drops the client and frees its slot")
            assert relays[0].abandoned.is_set()
            client.close()
    finally:
        engine.close()


@pytest.mark.slow
def test_a_request_whose_headers_trickle_in_is_dropped(engine) -> None:
    with serving(engine, client_timeout=1.0) as url:
        with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1]))) as client:
            client.settimeout(GUARD)
            client.sendall(b"POST /generate HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            closed = False
            for _ in range(int(GUARD / 0.2)):
                try:
                    client.sendall(b"X-Slow: y\r\n")
                    client.setblocking(False)
                    closed = client.recv(1) == b""
                except BlockingIOError:
                    pass
                except OSError:
                    closed = True
                client.setblocking(True)
                if closed:
                    break
                time.sleep(0.2)
            assert closed, "the server kept a request whose headers never ended"


# 3. Nothing heavy on the event loop


def health_answers(url: str) -> bool:
    return httpx.get(url + "/health", timeout=GUARD).json()["status"] == "ok"


def while_held(held: Held, url: str, send: Callable[[], httpx.Response], check: Callable[[], None] = lambda: None):
    """Send a request whose work `held` stops in the middle; meanwhile /health answers (the event
    loop is free) and `check` passes; then the work goes on. Returns the request's response."""
    answer = in_thread(send)
    assert held.entered.wait(GUARD)
    try:
        assert health_answers(url)
        check()
    finally:
        held.release.set()
    until(lambda: answer, "the held request ends")
    return answer[0]


def test_text_preparation_runs_off_the_event_loop(engine, monkeypatch) -> None:
    import core.portable.synthesis.planning

    held = Held(core.portable.synthesis.planning.split_into_chunks)
    monkeypatch.setattr(core.portable.synthesis.planning, "split_into_chunks", held)
    with serving(engine) as url:
        body = {"text": "Held.", "max_frames": 2}
        response = while_held(held, url, lambda: httpx.post(url + "/generate", json=body, timeout=GUARD))
    assert response.status_code == 200


def test_compressed_encoding_runs_off_the_event_loop(engine, monkeypatch) -> None:
    from core import audio_formats

    held = Held(audio_formats.encode)
    monkeypatch.setattr(audio_formats, "encode", held)
    body = {"model": "x", "input": "Held.", "voice": "alloy", "response_format": "flac"}
    with serving(engine) as url:
        response = while_held(held, url, lambda: httpx.post(url + "/v1/audio/speech", json=body, timeout=GUARD))
    assert response.status_code == 200 and response.content[:4] == b"fLaC"


def test_cloning_an_upload_runs_off_the_event_loop_and_outside_the_engines_lock(engine, monkeypatch) -> None:
    held = Held(engine.model.clone_voice)
    monkeypatch.setattr(engine.model, "clone_voice", held)

    def voices_are_looked_up() -> None:  # every request's voice lookup takes the engine's lock
        lookup = in_thread(lambda: engine.voices.voice("default"))
        until(lambda: lookup, "a voice lookup while a clone runs")
        assert lookup[0] is engine.voices.registry.default

    with serving(engine) as url:

        def upload() -> httpx.Response:
            return httpx.post(url + "/voices", files={"voice_wav": ("v.wav", VOICE_22K.read_bytes())}, timeout=GUARD)

        response = while_held(held, url, upload, voices_are_looked_up)
    assert response.status_code == 200


def test_the_decimal_point_check_decodes_a_bounded_number_of_tokens_per_boundary(model) -> None:
    """ "1." * 2500: a boundary at every period; decoding the whole text at each was quadratic."""
    decoded = []
    tokenizer = model.tokenizer
    original = tokenizer.decode
    tokenizer.decode = lambda ids: decoded.append(len(ids)) or original(ids)
    try:
        text = "1." * 2500
        from core.portable.text.prepare import split_into_chunks

        split_into_chunks(tokenizer, text, 50, model.text_options)
    finally:
        del tokenizer.decode
    assert sum(decoded) <= 64 * len(tokenizer.encode(text)), sum(decoded)


# 4, 10. Uploads cost what is kept; they do not push each other's voices out


def tiny_wav(rate: int) -> bytes:
    """A valid 92-byte WAV: 24 mono 16-bit samples at `rate`."""
    samples = (np.sin(np.arange(24)) * 1000).astype("<i2").tobytes()
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    return (
        b"RIFF"
        + struct.pack("<I", 36 + len(samples))
        + b"WAVEfmt "
        + struct.pack("<I", 16)
        + fmt
        + (b"data" + struct.pack("<I", len(samples)) + samples)
    )


def test_an_upload_at_an_odd_sample_rate_is_refused_before_any_resampling(engine, monkeypatch) -> None:
    import core.portable.audio.pcm

    resampled = []
    monkeypatch.setattr(core.portable.audio.pcm, "resample", lambda *args: resampled.append(args) or args[0])
    with TestClient(app=create_app(engine), base_url=LOCAL) as client:
        data = tiny_wav(1999993)
        assert len(data) == 92
        response = client.post("/voices", files={"voice_wav": ("odd.wav", data)})
    assert response.status_code == 400 and "8000-192000 Hz" in error_of(response)["message"]
    assert resampled == []


def test_a_long_compressed_upload_is_decoded_only_as_far_as_it_is_kept(engine, monkeypatch) -> None:
    silence = io.BytesIO()
    soundfile.write(silence, np.zeros(8000 * 1200, np.int16), 8000, format="FLAC")  # 20 minutes in a few KB
    decoded = []
    original = soundfile.SoundFile.read

    def counted(self, *args, **kwargs):
        data = original(self, *args, **kwargs)
        decoded.append(data.shape[0])
        return data

    monkeypatch.setattr(soundfile.SoundFile, "read", counted)
    with TestClient(app=create_app(engine), base_url=LOCAL) as client:
        response = client.post("/voices", files={"voice_wav": ("quiet.flac", silence.getvalue())})
    assert response.status_code == 200, response.text
    assert sum(decoded) == MAX_PROMPT_SECONDS * 8000


def noise_wav(seed: int, seconds: float) -> bytes:
    samples = np.random.default_rng(seed).standard_normal(int(24000 * seconds)).astype(np.float32) * 0.1
    return wav_bytes(samples, 24000)


def test_many_small_uploads_do_not_push_another_users_voice_out(engine) -> None:
    with TestClient(app=create_app(engine), base_url=LOCAL) as client:
        mine = client.post("/voices", files={"voice_wav": ("me.wav", VOICE_22K.read_bytes())}).json()["voice"]
        for seed in range(40):
            other = client.post("/voices", files={"voice_wav": (f"{seed}.wav", noise_wav(seed, 0.3))})
            assert other.status_code == 200
        spoken = client.post("/generate", json={"text": "Still mine.", "voice": mine, "max_frames": 2})
    assert spoken.status_code == 200, spoken.text


def test_a_predefined_voice_is_fetched_once_outside_the_lock_and_its_failure_remembered() -> None:
    def unreachable(url: str) -> str:
        raise DownloadError(f"cannot download {url}: no network")

    held = Held(unreachable)
    model = TTSModel.load(str(TINY_CONFIG), runtime=Runtime(fetch=held))  # every hf:// file goes through it
    model.voices = {"alba": "hf://kyutai/pocket-tts/voices/alba.safetensors"}
    engine = ServerEngine(model, str(VOICE_24K), max_concurrent=2)
    try:
        first, second = in_thread(lambda: engine.voices.voice("alba")), in_thread(lambda: engine.voices.voice("alba"))
        assert held.entered.wait(GUARD)
        lookup = in_thread(lambda: engine.voices.voice("default"))
        until(lambda: lookup, "a voice lookup while a download runs")
        assert lookup[0] is engine.voices.registry.default
        held.release.set()
        until(lambda: first and second, "both requests for the voice end")
        assert isinstance(first[0], DownloadError) and isinstance(second[0], DownloadError)
        with pytest.raises(DownloadError):
            engine.voices.voice("alba")
        assert held.calls == 1
    finally:
        engine.close()


# 6, 7. Cross-site requests; the cluster's default address


def test_json_routes_take_json_only(engine) -> None:
    """A cross-site page can POST text/plain without a CORS preflight: it must not drive the server."""
    with TestClient(app=create_app(engine), base_url=LOCAL) as client:
        for path, body in (("/generate", {"text": "Hi.", "max_frames": 2}), ("/v1/audio/speech", {"input": "Hi."})):
            sneaky = client.post(path, content=json.dumps(body), headers={"content-type": "text/plain"})
            assert sneaky.status_code == 415 and error_of(sneaky)["code"] == "unsupported_media_type"
        too_big = client.post("/generate", content=b" " * (MAX_JSON + 1), headers={"content-type": "application/json"})
        assert too_big.status_code == 413 and str(MAX_JSON) in error_of(too_big)["message"]


def test_requests_from_other_sites_are_refused_unless_allowed(engine) -> None:
    with serving(engine, allow_origins=("https://app.example",)) as url:
        own = url.replace("http://", "")
        form = {"text": (None, "Hi.")}
        evil = httpx.post(url + "/tts", files=form, headers={"origin": "https://evil.example"}, timeout=GUARD)
        assert evil.status_code == 403 and error_of(evil)["code"] == "forbidden_origin"
        upload = httpx.post(
            url + "/voices",
            files={"voice_wav": ("v.wav", noise_wav(1, 0.3))},
            headers={"origin": "null"},
            timeout=GUARD,
        )
        assert upload.status_code == 403
        for origin in (f"http://{own}", "https://app.example"):
            allowed = httpx.post(url + "/tts", files=form, headers={"origin": origin}, timeout=GUARD)
            assert allowed.status_code == 200, (origin, allowed.text)
        assert allowed.headers["access-control-allow-origin"] == "https://app.example"
        assert httpx.post(url + "/tts", files=form, timeout=GUARD).status_code == 200  # not a browser: no Origin
        assert httpx.get(url + "/health", headers={"origin": "https://evil.example"}, timeout=GUARD).status_code == 200


def test_the_cluster_config_listens_on_this_machine_only() -> None:
    config = yaml.safe_load((ROOT / "server" / "serve.yaml").read_text())
    assert config["http_options"]["host"] == "127.0.0.1"


# 8. Malformed requests are 4xx; unexpected errors are logged


def test_malformed_requests_get_a_json_4xx(engine) -> None:
    with serving(engine) as url:
        boundary = "x" * 16
        body = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="text"\r\n\r\n'.encode()
            + b"\xff\xfe not UTF-8\r\n"
            + f"--{boundary}--\r\n".encode()
        )
        form = httpx.post(
            url + "/tts",
            content=body,
            headers={"content-type": f"multipart/form-data; boundary={boundary}"},
            timeout=GUARD,
        )
        assert form.status_code == 400 and error_of(form)["code"] == "malformed_form"
        deep = b'{"text": "Hi.", "voice": ' + b"[" * 5000 + b"]" * 5000 + b"}"
        for payload in (deep, b"[" * 5000 + b"]" * 5000):
            nested = httpx.post(url + "/generate", content=payload, headers={"content-type": "application/json"})
            assert nested.status_code == 400, nested.text
        nul = httpx.get(url + "/%00", timeout=GUARD)
        assert nul.status_code == 400 and error_of(nul)["code"] == "bad_path"
        assert health_answers(url)


@pytest.mark.parametrize("error, status", [(MemoryError(), 503), (RuntimeError("a bug of ours"), 500)])
def test_an_unexpected_error_is_a_5xx_for_the_client_and_a_traceback_for_the_operator(
    engine, monkeypatch, caplog, error, status
) -> None:
    def fail(*args):
        raise error

    monkeypatch.setattr(engine, "text_stream", fail)
    with TestClient(app=create_app(engine), base_url=LOCAL) as client, caplog.at_level(
        logging.ERROR, "pocket_tts.server"
    ):
        response = client.post("/generate", json={"text": "Hi."})
    assert response.status_code == status and "Traceback" not in response.text
    logged = [r for r in caplog.records if r.name == "pocket_tts.server"]
    assert logged and logged[0].exc_info[0] is type(error) and "/generate" in logged[0].getMessage()
    assert engine.active == 0


# 9. The batch command


def batch(source: Path, out: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "core.cli", "batch", str(source), "--out", str(out), "--model", str(TINY_CONFIG)]
    return subprocess.run(command + ["--voice", str(VOICE_24K)], capture_output=True, text=True, cwd=ROOT, timeout=600)


def test_batch_lines_of_bad_bytes_or_unbounded_options_are_their_own_errors(tmp_path) -> None:
    lines = [
        json.dumps({"id": "before", "text": "Fine.", "max_frames": 2}).encode(),
        b'{"id": "bad-bytes", "text": "caf\xe9"}',
        json.dumps({"id": "huge", "text": "Hi.", "max_frames": 100_000_000}).encode(),
        json.dumps({"id": "steps", "text": "Hi.", "lsd_decode_steps": 100_000}).encode(),
        b'{"id": "deep", "text": ' + b"[" * 5000 + b"]" * 5000 + b"}",
        json.dumps({"id": "after", "text": "Fine too.", "max_frames": 2}).encode(),
        # 7,500 frames at speed 0.25 are 2,400 s of audio: the speed does not multiply the cap.
        json.dumps({"id": "slow", "text": "Hi.", "max_frames": 7500, "speed": 0.25}).encode(),
    ]
    source = tmp_path / "lines.jsonl"
    source.write_bytes(b"\n".join(lines) + b"\n")
    done = batch(source, tmp_path / "out")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    entries = [json.loads(line) for line in (tmp_path / "out" / "manifest.jsonl").read_text().splitlines()]
    errors = {entry["line"]: entry["error"] for entry in entries}
    assert errors[1] is None and errors[6] is None
    assert "not UTF-8" in errors[2] and "max_frames must be between 0 and 7500" in errors[3]
    assert "lsd_decode_steps must be between 1 and 64" in errors[4] and "not JSON" in errors[5]
    assert "max_frames 7500 (2400 s of audio at speed 0.25" in errors[7] and "the 600 s of audio" in errors[7]
    with open(tmp_path / "out" / "manifest.jsonl", "ab") as manifest:
        manifest.write(b'{"id": "before", \xff\xfe}\n')  # a damaged manifest: its bad line is skipped
    again = batch(source, tmp_path / "out")
    assert again.returncode == 1 and "2 already there" in again.stderr and "Traceback" not in again.stderr


def test_a_second_batch_job_on_a_folder_in_use_says_so(tmp_path) -> None:
    source = tmp_path / "lines.jsonl"
    source.write_text(json.dumps({"id": "one", "text": "Hi.", "max_frames": 2}) + "\n")
    out = tmp_path / "out"
    out.mkdir()
    with only_writer(str(out)):
        done = batch(source, out)
    assert done.returncode == 1 and "another process is writing to" in done.stderr.splitlines()[-1]
    assert list(out.iterdir()) == []


def test_output_files_are_written_through_no_planted_file_or_link(tmp_path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    target = tmp_path / "out.wav"
    (tmp_path / f".{target.name}.{os.getpid()}.tmp").symlink_to(victim)  # the name a temporary file once had
    write_atomically(str(target), b"new audio")
    assert victim.read_text() == "precious" and target.read_bytes() == b"new audio"
    assert not target.is_symlink()


# 10-12. A session's boundary on HTTP: slots for read requests only, the audio cap after the speed
# change, the Host, strict JSON, the API key, and nothing of the machine in the answers


def test_a_request_takes_its_slot_only_once_its_body_is_read(engine, monkeypatch) -> None:
    """A multipart upload trickling in holds a connection, not a slot: the route reads its form
    first (before, four trickling uploads held every slot for as long as they liked)."""
    from litestar.connection import Request

    held = Held(Request.form)
    monkeypatch.setattr(Request, "form", lambda self: held(self))
    with serving(engine) as url:
        form = {"text": (None, "Hi."), "voice_wav": ("v.wav", noise_wav(2, 0.3))}
        answer = in_thread(lambda: httpx.post(url + "/tts", files=form, timeout=GUARD))
        assert held.entered.wait(GUARD)
        try:
            assert engine.active == 0
        finally:
            held.release.set()
        until(lambda: answer, "the upload is answered")
    assert answer[0].status_code == 200 and engine.active == 0


@pytest.mark.slow
def test_a_body_must_arrive_within_its_time_however_it_trickles(engine) -> None:
    with serving(engine, body_timeout=1.0) as url:
        port = int(url.rsplit(":", 1)[1])
        boundary = "b" * 16
        body = f'--{boundary}\r\nContent-Disposition: form-data; name="text"\r\n\r\nHi.\r\n--{boundary}--\r\n'.encode()
        head = (
            f"POST /tts HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n"
            f"Content-Type: multipart/form-data; boundary={boundary}\r\n\r\n"
        )
        with socket.create_connection(("127.0.0.1", port), timeout=GUARD) as client:
            client.sendall(head.encode())
            answer = b""
            for byte in body:  # a byte every tenth of a second: each well within the client timeout
                try:
                    client.sendall(bytes([byte]))
                except OSError:
                    break
                client.settimeout(0.1)
                try:
                    answer += client.recv(4096)
                except (socket.timeout, ConnectionResetError):
                    pass
                if answer:
                    break
            client.settimeout(GUARD)
            while b"\r\n\r\n" not in answer:
                answer += client.recv(4096)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:100]
    assert b'"code":"body_timeout"' in answer
    assert engine.active == 0


@pytest.mark.slow
def test_speed_does_not_multiply_the_audio_a_request_may_make(engine) -> None:
    with TestClient(app=create_app(engine), base_url=LOCAL) as client:
        refused = client.post("/generate", json={"text": "Hi.", "max_frames": 7500, "speed": 0.25})
        assert refused.status_code == 400 and error_of(refused)["code"] == "audio_limit"
        assert "2400 s of audio at speed 0.25" in error_of(refused)["message"]
        # Speech that could run for half an hour, a quarter as fast: 600 s of audio, not 2,400.
        body = {"text": "Word, " * 800, "max_tokens": 1, "speed": 0.25, **NEVER_ENDS}
        with client.stream("POST", "/stream", json=body) as streamed:
            samples = sum(len(piece) for piece in streamed.iter_bytes()) // 2
    assert 599 * 24000 <= samples <= 600 * 24000
    assert engine.active == 0


@pytest.mark.parametrize(
    "path, body, param",
    [
        ("/generate", {"text": "Hi.", "speed": "2"}, "speed"),
        ("/generate", {"text": "Hi.", "max_frames": "1e3"}, "max_frames"),
        ("/stream", {"text": "Hi.", "normalize": "0"}, "normalize"),
        ("/stream", {"text": "Hi.", "seed": True}, "seed"),
        ("/generate", {"text": "Hi.", "temperature": "0.5"}, "temperature"),
        ("/v1/audio/speech", {"model": "m", "input": "Hi.", "voice": "alloy", "speed": "2"}, "speed"),
        ("/v1/audio/speech", {"model": "m", "input": "Hi.", "voice": "alloy", "normalize": "false"}, "normalize"),
    ],
)
def test_numbers_and_booleans_are_of_their_own_type_only(engine, path, body, param) -> None:
    with TestClient(app=create_app(engine), base_url=LOCAL) as client:
        refused = client.post(path, json=body)
    assert refused.status_code == 400 and error_of(refused)["param"] == param, refused.text


def test_a_json_body_is_decoded_once(engine, monkeypatch) -> None:
    """Strictly, from its bytes (server/reading.py StrictJSON), and never again as Litestar's JSON."""
    decoded = []
    strict = reading.decode
    monkeypatch.setattr(reading, "decode", lambda *args: decoded.append(args[1]) or strict(*args))
    monkeypatch.setattr(Request, "json", lambda *_: pytest.fail("the body was decoded again"))
    bodies = {
        "/generate": {"text": "Hi.", "max_frames": 2},
        "/stream": {"text": "Hi.", "max_frames": 2},
        "/v1/audio/speech": {"model": "m", "input": "Hi.", "voice": "alloy", "response_format": "pcm"},
    }
    with TestClient(app=create_app(engine), base_url=LOCAL) as client:
        for path, body in bodies.items():
            assert client.post(path, json=body).status_code == 200, path
    assert decoded == [GenerateRequest, StreamRequest, SpeechRequest]


def test_a_whole_text_is_checked_once_before_any_work(engine) -> None:
    """Every front of a whole text (the JSON routes, the official form, Wyoming, MCP) refuses
    nothing to say and too much text by the session's one check (server/session.py whole_text),
    with the same words, before it takes a slot: with every slot taken it is still the text's
    refusal, not `busy`."""
    from wyoming.client import AsyncTcpClient
    from wyoming.tts import Synthesize

    from server.mcp_server import Speaker

    long = "Hello there. " * (MAX_TEXT // 13 + 1)
    held = [engine.admit() for _ in range(2)]
    try:
        refusals = []
        with TestClient(app=create_app(engine), base_url=LOCAL) as client:
            for text in (" ", long):
                for path, body in (
                    ("/generate", {"text": text}),
                    ("/stream", {"text": text}),
                    ("/v1/audio/speech", {"model": "m", "input": text, "voice": "alloy"}),
                ):
                    refusals.append(error_of(client.post(path, json=body)))
                refusals.append(error_of(client.post("/tts", data={"text": text})))

        async def synthesize(port: int) -> list:
            answers = []
            for text in (" ", long):
                async with AsyncTcpClient("127.0.0.1", port) as client:
                    await client.write_event(Synthesize(text=text).event())
                    answers.append(await client.read_event())
            return answers

        for answer in wyoming_serving(engine, synthesize):
            refusals.append({"code": answer.data.get("code"), "message": answer.data.get("text")})
        speaker = Speaker(engine, None)
        for text in (" ", long):
            with pytest.raises(ServiceError) as refused:
                asyncio.run(speaker.speak(text, None, 1.0, "wav"))
            refusals.append({"code": refused.value.code, "message": refused.value.message})
    finally:
        for slot in held:
            slot.release()
    codes = [refusal["code"] for refusal in refusals]
    assert codes == ["empty_text"] * 4 + ["text_too_long"] * 4 + ["empty_text", "text_too_long"] * 2, refusals
    assert refusals[3]["message"] == "Text cannot be empty"  # the official server's words
    assert {r["message"] for r in refusals[4:8]} == {
        "text is longer than 5000 characters",
        "input is longer than 5000 characters",
    }


def test_only_the_servers_own_hosts_are_answered(engine) -> None:
    """DNS rebinding: a page on a domain pointed at this machine names its domain as Host."""
    app = create_app(engine, Settings(allow_origins=("https://app.example",), allow_hosts=("tts.lan",)))
    with TestClient(app=app, base_url=LOCAL) as client:
        for host in ("localhost:8000", "127.0.0.1", "[::1]:8000", "LOCALHOST.", "tts.lan:80", "app.example"):
            assert client.get("/health", headers={"host": host}).status_code == 200, host
        for host in ("evil.example", "evil.example:8000", "127.0.0.1.evil.example", "10.0.0.5", "tts.lan.evil"):
            refused = client.get("/health", headers={"host": host})
            assert refused.status_code == 421 and error_of(refused)["code"] == "misdirected_request", host
        same_site = {"host": "evil.example:8000", "origin": "http://evil.example:8000"}
        assert client.post("/generate", json={"text": "Hi."}, headers=same_site).status_code == 421
    everywhere = create_app(engine, Settings(host="0.0.0.0"))  # bound to every interface: addresses are fine
    with TestClient(app=everywhere, base_url=LOCAL) as client:
        assert client.get("/health", headers={"host": "192.168.1.20:8000"}).status_code == 200
        assert client.get("/health", headers={"host": "[fe80::1]:8000"}).status_code == 200
        assert client.get("/health", headers={"host": "evil.example"}).status_code == 421


def test_an_api_key_guards_every_api_route_and_the_websocket(model) -> None:
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    key = {"authorization": "Bearer sesame"}
    logged: List[logging.LogRecord] = []
    recorder = logging.Handler(logging.ERROR)
    recorder.emit = logged.append
    engine = ServerEngine(model, str(VOICE_24K), max_concurrent=2, access=Access("sesame"))
    with serving(engine) as url:
        logging.getLogger("uvicorn.error").addHandler(recorder)  # once uvicorn has set its logging up
        refused = httpx.post(url + "/generate", json={"text": "Hi.", "max_frames": 1}, timeout=GUARD)
        assert refused.status_code == 401 and error_of(refused)["code"] == "unauthorized"
        assert refused.headers["www-authenticate"] == "Bearer"
        for headers in ({"authorization": "Bearer wrong"}, {"authorization": "sesame"}, {"authorization": "Basic x"}):
            assert httpx.get(url + "/v1/models", headers=headers, timeout=GUARD).status_code == 401
        spoken = httpx.post(url + "/generate", json={"text": "Hi.", "max_frames": 1}, headers=key, timeout=GUARD)
        assert spoken.status_code == 200 and len(spoken.content) == 44 + 2 * 1920
        for path in ("/voices", "/v1/audio/voices", "/v1/models", "/schema"):
            assert httpx.get(url + path, timeout=GUARD).status_code == 401, path
            assert httpx.get(url + path, headers=key, timeout=GUARD).status_code == 200, path
        assert httpx.get(url + "/health", timeout=GUARD).status_code == 200  # health checks need no key
        assert httpx.get(url + "/", timeout=GUARD).status_code == 200  # nor the page's files
        assert httpx.get(url + "/site.json", timeout=GUARD).json()["server"] is True
        stream = url.replace("http://", "ws://") + "/v1/audio/speech/stream"
        with pytest.raises(InvalidStatus) as no_key:
            connect(stream, open_timeout=GUARD)
        assert no_key.value.response.status_code == 401
        with connect(stream, additional_headers=key, open_timeout=GUARD) as connection:
            connection.send(json.dumps({"type": "start"}))
            assert json.loads(connection.recv(timeout=GUARD))["type"] == "started"
    logging.getLogger("uvicorn.error").removeHandler(recorder)
    assert not logged, [record.getMessage() for record in logged]  # a refused handshake is no error of ours
    engine.close()


def test_only_the_routes_marked_public_are_open_without_the_key(model) -> None:
    """Every route of the app needs the key but those marked public (server/guard.py PUBLIC): the
    page's files, its site.json and the health check. Each GET route of the app is asked without
    the key (path parameters filled in), and a GET route added without the mark is closed too."""
    engine = ServerEngine(model, str(VOICE_24K), 2, access=Access("sesame"))
    app = create_app(engine, Settings())

    @get("/added-later")
    async def added_later() -> str:
        return "the key was checked"

    app.register(added_later)
    public = {
        route.path
        for route in app.routes
        for handler in getattr(route, "route_handlers", [])
        if handler.opt.get("public") and handler.handler_name != "options_handler"
    }
    assert public == {"/health", "/site.json", "/", "/{file_path:path}"}, public
    key = {"authorization": "Bearer sesame"}
    with TestClient(app=app, base_url=LOCAL) as client:
        for route in app.routes:
            if route.path in public or "GET" not in getattr(route, "methods", ()):
                continue
            path = re.sub(r"\{[^}]+\}", "x", route.path)
            assert client.get(path).status_code == 401, path
        assert client.get("/added-later", headers=key).text == "the key was checked"
        assert client.get("/health").status_code == 200 and client.get("/site.json").status_code == 200
    engine.close()


def test_the_command_lines_api_key_for_openai_clients(tmp_path) -> None:
    from openai import AuthenticationError, OpenAI

    with tiny_server("--api-key", "sesame") as url:
        with pytest.raises(AuthenticationError):
            OpenAI(base_url=url + "/v1", api_key="wrong").models.list()
        assert [model.id for model in OpenAI(base_url=url + "/v1", api_key="sesame").models.list()][0] == "tiny_lsd"
