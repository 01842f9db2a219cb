"""Whole files encoded a chunk at a time (core.audio_formats.WholeFile): the bytes of the whole
signal resampled and encoded at once, for every format and rate, and an answer's memory bounded by
the file, not by its samples (tracemalloc, through POST /generate's body at 48 kHz)."""

from __future__ import annotations

import base64
import collections
import hashlib
import io
import json
import threading
import tracemalloc

import anyio
import numpy as np
import pytest
import soundfile
import soxr
from litestar.testing import TestClient

from core import PocketTTSError, audio_formats
from core.portable.audio.pcm import pcm16, wav_header
from core.portable.synthesis.options import GenerationOptions
from server import bodies
from server.app import create_app
from server.engine import ServerEngine
from tests.support.checks import error_of
from tests.support.paths import LOCAL, VOICE_24K
from tests.support.serving import NEVER_ENDS

MB = 2**20
TEXT = "Hello there. How are you today?"


def signal(seconds: float) -> np.ndarray:
    """Speech-like noise, a little of it past full scale (clamped as a file's samples are): [n] float32."""
    noise = np.random.default_rng(5).standard_normal(int(24000 * seconds)) * 0.4
    return np.clip(noise, -1.2, 1.2).astype(np.float32)


def pieces(x: np.ndarray) -> list:
    """`x` cut at 40 random places, and so that one piece is empty and one a sample long."""
    cuts = np.concatenate([np.random.default_rng(3).choice(x.size, 40), [7, 7, 8]])
    return np.split(x, np.sort(cuts))


def at_once(x: np.ndarray, fmt: str, rate: int) -> bytes:
    """The file of the whole signal, resampled and encoded in one piece (what the server did)."""
    if rate != 24000:
        x = soxr.resample(x, 24000, rate, quality="HQ")
    if fmt in audio_formats.STREAMED:
        return {"pcm": pcm16, "mulaw": audio_formats.mulaw, "alaw": audio_formats.alaw}[fmt](x)
    if fmt == "wav":
        data = pcm16(x)
        return wav_header(rate, len(data)) + data
    container, subtype = {"flac": ("FLAC", "PCM_16"), "mp3": ("MP3", "MPEG_LAYER_III"), "opus": ("OGG", "OPUS")}[fmt]
    out = io.BytesIO()
    soundfile.write(out, np.frombuffer(pcm16(x), "<i2"), rate, format=container, subtype=subtype)
    return out.getvalue()


def in_pieces(chunks: list, fmt: str, rate: int) -> bytes:
    file = audio_formats.WholeFile(fmt, 24000, rate)
    for chunk in chunks:
        file.add(chunk)
    return file.end()


def without_serials(ogg: bytes) -> bytes:
    """An Ogg file with each page's stream serial number, and the checksum that covers it, zeroed:
    libsndfile draws the serial number at random, so two encodings of one signal differ there."""
    data, at = bytearray(ogg), 0
    while at < len(data):
        assert data[at : at + 4] == b"OggS"
        segments = data[at + 26]
        data[at + 14 : at + 18] = data[at + 22 : at + 26] = bytes(4)
        at += 27 + segments + sum(data[at + 27 : at + 27 + segments])
    return bytes(data)


@pytest.mark.parametrize(
    ("fmt", "rate"),
    [
        (fmt, rate)
        for fmt in audio_formats.FILE_FORMATS
        for rate in audio_formats.RATES
        if fmt != "opus" or rate in audio_formats.OPUS_RATES  # the others are refused: below
    ],
)
def test_a_file_made_a_chunk_at_a_time_has_the_bytes_of_the_whole_signal_at_once(fmt, rate) -> None:
    if not audio_formats.available(fmt):
        pytest.skip(f"this libsndfile cannot write {fmt}")
    x = signal(2.0)
    made = in_pieces(pieces(x), fmt, rate)
    expected = at_once(x, fmt, rate)
    if fmt == "opus":
        made, expected = without_serials(made), without_serials(expected)
    assert made == expected
    if fmt == "wav":
        info = soundfile.info(io.BytesIO(made))
        assert (info.samplerate, info.frames) == (rate, round(x.size * rate / 24000))


def test_a_file_of_no_chunks_is_the_file_of_no_samples() -> None:
    nothing = np.zeros(0, np.float32)
    for fmt in audio_formats.writable():
        made, expected = in_pieces([], fmt, 48000), at_once(nothing, fmt, 48000)
        if fmt == "opus":
            made, expected = without_serials(made), without_serials(expected)
        assert made == expected, fmt
    assert in_pieces([], "wav", 48000) == wav_header(48000, 0)


def test_opus_at_a_rate_it_has_not_is_refused_before_any_work() -> None:
    with pytest.raises(PocketTTSError, match="opus is not written at 44100 Hz: use one of 8000, 16000, 24000, 48000"):
        audio_formats.WholeFile("opus", 24000, 44100)


def test_the_openai_route_refuses_opus_at_a_rate_it_has_not(model) -> None:
    engine = ServerEngine(model, str(VOICE_24K), max_concurrent=2)
    body = {"model": "tts-1", "input": "Hi.", "voice": "alloy", "response_format": "opus", "sample_rate": 22050}
    try:
        with TestClient(app=create_app(engine), base_url=LOCAL) as client:
            refused = client.post("/v1/audio/speech", json=body)
    finally:
        engine.close()
    assert refused.status_code == 400 and "opus is not written at 22050 Hz" in error_of(refused)["message"]


def test_a_files_chunks_are_held_only_as_the_file() -> None:
    """Ten seconds at 48 kHz, a chunk (80 ms) at a time: the most allocated at once is the WAV's
    bytes (and the eighth its buffer grows by), plus a chunk's work."""
    chunks = np.split(signal(10.0), 125)
    tracemalloc.start()
    try:
        file = audio_formats.WholeFile("wav", 24000, 48000)
        for chunk in chunks:
            file.add(chunk)
        size = len(file.end())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert size == 44 + 2 * 480000
    assert peak <= size * 9 / 8 + MB / 4, f"{peak / MB:.2f} MB for a {size / MB:.2f} MB file"


class Listening:
    """A request whose client stays (its `receive` never says it went away)."""

    async def receive(self) -> dict:
        await anyio.sleep_forever()
        return {}


class Saying:
    """A session whose audio is `chunks`, handed out one at a time: a generation made beforehand,
    as the body sees it (the model's own memory is not the body's, and the engine's varies with the
    timing of its threads)."""

    def __init__(self, chunks: list, sample_rate: int):
        self.sample_rate = sample_rate
        self.loudness = None  # the model's own level
        self._chunks = collections.deque(chunks)

    async def audio(self):
        while self._chunks:
            yield self._chunks.popleft()

    def close(self) -> None:
        pass


def off_the_loop(monkeypatch) -> set:
    """The threads a whole file's chunks are encoded on, and its end made (filled as they are)."""
    threads = set()
    for name in ("add", "end"):
        original = getattr(audio_formats.WholeFile, name)

        def recorded(self, *args, original=original):
            threads.add(threading.get_ident())
            return original(self, *args)

        monkeypatch.setattr(audio_formats.WholeFile, name, recorded)
    return threads


def test_a_compressed_sse_answer_is_one_delta_of_the_file_encoded_off_the_event_loop(monkeypatch) -> None:
    x = signal(1.0)
    threads = off_the_loop(monkeypatch)

    async def events() -> bytes:
        async def audio():
            for chunk in pieces(x):
                yield chunk

        return b"".join([event async for event in bodies.sse(audio(), 24000, 1920, "flac", 48000)])

    sent = anyio.run(events)
    parsed = [json.loads(line[len("data: ") :]) for line in sent.decode().splitlines() if line.startswith("data: ")]
    assert [event["type"] for event in parsed] == ["speech.audio.delta", "speech.audio.done"]
    assert base64.b64decode(parsed[0]["audio"]) == at_once(x, "flac", 48000)
    assert parsed[1]["usage"]["output_tokens"] == 13  # 24,000 samples: 12.5 frames of 80 ms
    assert threads and threading.get_ident() not in threads


@pytest.mark.slow
def test_an_answers_memory_is_its_file_whatever_its_length(model, monkeypatch) -> None:
    """The issue's case: each 48 kHz answer of POST /generate held ~7.8 times its size (its chunks,
    joined, resampled, clamped and scaled in one piece). For 250 and 750 frames of the tiny model
    (1.8 and 5.5 MB at 48 kHz), the body's most memory at once is the file (and the eighth its
    buffer grows by) and a chunk's work, whatever the length: then it held 5-6 times the file. Each
    chunk is encoded off the event loop."""
    voice = model.voice_state(str(VOICE_24K))

    async def body(made: list) -> tuple:
        """The answer's size and digest, read a piece at a time as a client reads it."""
        held = bodies.Answer(Saying(made, model.sample_rate))
        response = await bodies.whole_file(Listening(), held, "wav", 48000)
        size, digest = 0, hashlib.sha256()
        async for piece in response.iterator:
            size += len(piece)
            digest.update(piece)
        return size, digest.digest()

    threads = off_the_loop(monkeypatch)
    for frames in (250, 750):
        made = list(model.stream(TEXT, voice, GenerationOptions(max_frames=frames, **NEVER_ENDS)))
        tracemalloc.start()
        try:
            size, digest = anyio.run(body, made)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert digest == hashlib.sha256(at_once(np.concatenate(made), "wav", 48000)).digest()
        assert size == 44 + 2 * 2 * model.frame_size * frames  # 16-bit, at twice the model's rate
        assert peak <= size * 9 / 8 + MB / 4, f"{frames} frames: {peak / MB:.1f} MB held for a {size / MB:.1f} MB file"
    assert threads and threading.get_ident() not in threads  # the event loop's
