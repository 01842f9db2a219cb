"""The boundary every front shares, tried as a hostile client would: one pool of connections for the
process (refused at accept, a reserve for /health and key holders, Wyoming's connections counted
with HTTP's), uploads whose cost follows their length and not their header, errors of the audio
library kept from clients, and the files a job writes never reached through a planted link.

Costs are counted (file descriptors, places in the pool, bytes allocated, slots), never timed: a
deadline only turns a hang into a failure.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import socket
import struct
import subprocess
import sys
import tracemalloc
from contextlib import ExitStack
from pathlib import Path
from typing import List

import httpx
import numpy as np
import pytest
from litestar.testing import TestClient
from wyoming.client import AsyncTcpClient
from wyoming.info import Describe

from core.portable.audio import pcm as audio
from core.portable.audio.pcm import wav_bytes
from e2e.harness import free_port
from server.access import Access
from server.app import create_app
from server.engine import ServerEngine
from server.pool import RESERVE
from server.wyoming_server import WyomingServer
from server.wyoming_voices import Voices
from tests.support.checks import error_of
from tests.support.paths import LOCAL, ROOT, TINY_CONFIG, VOICE_24K
from tests.support.processes import tiny_server
from tests.support.serving import GUARD, serving, until

SOCKETS = 300


def listening_process(port: int) -> int:
    """The pid of the process listening on `port` (Linux: the socket's inode among its files)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for row in f.readlines()[1:]:
                fields = row.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":  # LISTEN
                    inodes.add(f"socket:[{fields[9]}]")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") in inodes for fd in os.listdir(f"/proc/{pid}/fd")):
                return int(pid)
        except OSError:
            continue
    raise AssertionError(f"nothing listens on {port}")


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def answered(connections: List[socket.socket], count: int) -> List[socket.socket]:
    """Wait until `count` of `connections` have been answered (readable); those, each read once."""
    ready: List[socket.socket] = []
    waiting = list(connections)
    while len(ready) < count:
        readable, _, _ = select.select(waiting, [], [], GUARD)
        assert readable, f"only {len(ready)} of {count} answered"
        for connection in readable:
            waiting.remove(connection)
            ready.append(connection)
    return ready


def test_silent_connections_beyond_the_pool_are_refused_at_accept() -> None:
    """300 sockets that send nothing: all but the pool's places are refused at once (a 503 each),
    the server's open files grow by the places only, and a keep-alive connection opened before
    them is served as before (it was 503 for every request while they were open)."""
    cap = 8
    with tiny_server("--max-connections", str(cap), "--client-timeout", "600") as url:
        port = int(url.rsplit(":", 1)[1])
        server = listening_process(port)
        with httpx.Client(base_url=url, timeout=GUARD) as before, ExitStack() as stack:
            assert before.get("/voices").status_code == 200
            files = open_files(server)
            silent = []
            for _ in range(SOCKETS):
                silent.append(stack.enter_context(socket.create_connection(("127.0.0.1", port))))
            places = cap - 1 + RESERVE  # the keep-alive connection holds one
            refused = answered(silent, SOCKETS - places)
            answers = [connection.recv(4096) for connection in refused]
            assert all(answer.startswith(b"HTTP/1.1 503 ") for answer in answers)
            body = json.loads(answers[0].split(b"\r\n\r\n", 1)[1])
            assert body["error"]["code"] == "too_many_connections"
            for connection in refused:
                connection.close()
            until(lambda: open_files(server) <= files + places, "the refused connections' files closed")
            assert open_files(server) == files + places
            assert before.get("/voices").status_code == 200  # its place was taken before the flood
            fresh = httpx.get(url + "/health", timeout=GUARD)  # no place left, not even the reserve's
            assert fresh.status_code == 503 and fresh.json()["error"]["code"] == "too_many_connections"


@pytest.fixture
def engine(model):
    engine = ServerEngine(model, str(VOICE_24K), max_concurrent=2, max_connections=2, access=Access("sesame"))
    yield engine
    engine.close()


def test_one_pool_for_every_front_and_its_reserve_for_health_and_key_holders(engine) -> None:
    """Wyoming's connections and HTTP's share the engine's pool: with two Wyoming clients in it, an
    HTTP request finds only the reserve, which answers /health and a key holder, and nothing
    else; a third Wyoming client is refused (the reserve is never Wyoming's)."""
    key = {"authorization": "Bearer sesame"}

    async def main() -> List[int]:
        wyoming_port = free_port()
        wyoming = WyomingServer(engine, f"tcp://127.0.0.1:{wyoming_port}", Voices(engine), 30.0)
        await wyoming.start()
        try:
            async with AsyncTcpClient("127.0.0.1", wyoming_port) as a, AsyncTcpClient("127.0.0.1", wyoming_port) as b:
                for client in (a, b):
                    await client.write_event(Describe().event())
                    assert (await client.read_event()).type == "info"
                async with AsyncTcpClient("127.0.0.1", wyoming_port) as third:
                    await third.write_event(Describe().event())
                    refused = await third.read_event()
                    assert refused.type == "error" and refused.data["code"] == "too_many_connections"

                def over_http() -> List[int]:
                    with serving(engine) as url, httpx.Client(base_url=url, timeout=GUARD) as client:
                        return [
                            client.get("/voices", headers=key).status_code,
                            client.get("/health").status_code,
                            client.post("/generate", json={"text": "Hi."}).status_code,
                            client.get("/v1/models", headers={"authorization": "Bearer no"}).status_code,
                        ]

                return await asyncio.to_thread(over_http)
        finally:
            await wyoming.stop()

    assert asyncio.run(asyncio.wait_for(main(), GUARD)) == [200, 200, 503, 503]
    assert engine.connections.open == 0


def test_a_websocket_in_the_reserve_needs_the_key(model) -> None:
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    engine = ServerEngine(model, str(VOICE_24K), max_concurrent=2, max_connections=1, access=Access("sesame"))
    key = {"authorization": "Bearer sesame"}
    try:
        with serving(engine) as url, httpx.Client(base_url=url, headers=key, timeout=GUARD) as holder:
            assert holder.get("/voices").status_code == 200  # the only ordinary place
            stream = url.replace("http://", "ws://") + "/v1/audio/speech/stream"
            with pytest.raises(InvalidStatus) as refused:
                connect(stream, additional_headers={"authorization": "Bearer wrong"}, open_timeout=GUARD)
            assert refused.value.response.status_code == 503
            with connect(stream, additional_headers=key, open_timeout=GUARD) as connection:
                connection.send(json.dumps({"type": "start"}))
                assert json.loads(connection.recv(timeout=GUARD))["type"] == "started"
                assert engine.connections.open == 2
        until(lambda: engine.connections.open == 0, "every place given back")
    finally:
        engine.close()


# Uploads: their cost is their length's


def float_wav(samples: np.ndarray, rate: int) -> bytes:
    data = samples.astype("<f4").tobytes()
    fmt = b"fmt " + struct.pack("<IHHIIHH", 16, 3, 1, rate, rate * 4, 4, 32)
    return b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVE" + fmt + b"data" + struct.pack("<I", len(data)) + data


def test_a_short_upload_at_an_odd_rate_costs_what_its_length_does() -> None:
    """75 KB at 191,999 Hz: its resampling filter was 3.8 million float64 taps (~400 MB of arrays);
    the rate is now read as the nearest with a bounded ratio (192 kHz), and the whole upload's
    decoding and resampling allocates a few MB."""
    samples = (np.random.default_rng(1).standard_normal(19200) * 0.1).astype(np.float32)
    data = float_wav(samples, 191999)
    assert len(data) < 80_000
    tracemalloc.start()
    try:
        decoded, rate = audio.read(data)
        kept = audio.trim_prompt(decoded, rate, 24000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, f"{peak / 2**20:.0f} MB"
    assert np.array_equal(kept, audio.resample(decoded, 192000, 24000)) and kept.shape == (2400,)


def test_absurd_samples_are_a_400_and_a_recording_that_fails_to_clone_is_not_kept(model) -> None:
    engine = ServerEngine(model, str(VOICE_24K), max_concurrent=2)
    loud = float_wav(np.full(24000, 1e30, np.float32), 24000)
    try:
        with TestClient(app=create_app(engine), base_url=LOCAL) as client:
            response = client.post("/voices", files={"voice_wav": ("loud.wav", loud)})
            assert response.status_code == 400 and error_of(response)["code"] == "invalid_audio", response.text
            assert "1e+30" in error_of(response)["message"]

            def failing(*args):
                raise audio.AudioError("the recording says nothing")

            clone, engine.model.clone_voice = engine.model.clone_voice, failing
            try:
                quiet = wav_bytes(np.full(24000, 0.01, np.float32), 24000)
                failed = client.post("/voices", files={"voice_wav": ("quiet.wav", quiet)})
            finally:
                engine.model.clone_voice = clone
            assert failed.status_code == 400
        key, _ = engine.voices.registry.recording(*audio.read(quiet))
        assert not engine.voices.registry.has_recording(key) and engine.voices.uploaded() == []
    finally:
        engine.close()


def test_an_upload_that_is_not_audio_gets_no_word_of_the_audio_library() -> None:
    from core import AudioError

    with pytest.raises(AudioError) as refused:
        audio.read(b"this is not audio at all" * 10, "the upload")
    message = str(refused.value)
    assert message.startswith("cannot decode the upload: ")
    assert "0x" not in message and "BytesIO" not in message and "<" not in message


# Files: a job's manifest and the cluster's secrets


def test_the_batch_manifest_is_never_written_through_a_planted_link(tmp_path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.jsonl").symlink_to(victim)
    source = tmp_path / "lines.jsonl"
    source.write_text(json.dumps({"id": "one", "text": "Hi.", "max_frames": 2}) + "\n")
    command = [sys.executable, "-m", "core.cli", "batch", str(source), "--out", str(out), "--model", str(TINY_CONFIG)]
    done = subprocess.run(command + ["--voice", str(VOICE_24K)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "precious\n"
    manifest = out / "manifest.jsonl"
    assert not manifest.is_symlink() and json.loads(manifest.read_text())["id"] == "one"


def test_the_clusters_api_key_is_kept_as_given_even_where_a_file_has_its_name(tmp_path) -> None:
    (tmp_path / "sesame").write_text("a file that happens to share the key's name")
    done = subprocess.run(
        [sys.executable, "-m", "server.cluster", "--print-config", "--api-key", "sesame", "--model", str(TINY_CONFIG)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert done.returncode == 0, done.stderr
    import yaml

    arguments = yaml.safe_load(done.stdout)["applications"][0]["args"]
    assert arguments["api_key"] == "sesame" and arguments["model"] == str(Path(TINY_CONFIG).resolve())
