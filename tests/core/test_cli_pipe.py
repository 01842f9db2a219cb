"""Speech from a pipe (`llm ... | pocket-tts-numpy generate --text -`): the text read as it arrives,
each sentence spoken once it is complete, the first audio out before stdin closes; and `--play`,
on this machine's speakers where it has any, else one line saying why."""

from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pytest

from core import TTSModel, audio_formats
from core.portable.audio.pcm import pcm16
from tests.support.paths import ROOT, TINY_CONFIG, VOICE_24K
from tests.support.serving import GUARD

FIRST, SECOND = "Hello there, this is the first sentence. ", "And here comes a second one."
OPTIONS = ["--temperature", "0", "--eos-threshold", "inf", "--max-frames", "12"]
COMMAND = [sys.executable, "-m", "core.cli", "generate", "--model", str(TINY_CONFIG), "--voice", str(VOICE_24K)]


def _reader(stream, got: bytearray, enough: threading.Event, size: int) -> None:
    while True:
        data = stream.read1(65536)
        if not data:
            enough.set()
            return
        got.extend(data)
        if len(got) >= size:
            enough.set()


def test_the_first_audio_comes_before_stdin_closes() -> None:
    process = subprocess.Popen(
        [*COMMAND, "--text", "-", "--stream", *OPTIONS],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    got, enough = bytearray(), threading.Event()
    reading = threading.Thread(target=_reader, args=(process.stdout, got, enough, 2 * 1920), daemon=True)
    reading.start()
    try:
        process.stdin.write(FIRST.encode())
        process.stdin.flush()
        assert enough.wait(GUARD * 3) and len(got) >= 2 * 1920, process.stderr.read1(4096)
        assert process.poll() is None  # still reading stdin: the first sentence was spoken before it closed
        process.stdin.write(SECOND.encode())
        process.stdin.close()
        assert process.wait(GUARD * 3) == 0, process.stderr.read().decode()
        reading.join(GUARD)
    finally:
        process.kill()
    model = TTSModel.load(str(TINY_CONFIG))
    options = {"temperature": 0.0, "eos_threshold": float("inf"), "max_frames": 12}
    want = np.concatenate(list(model.stream(iter([FIRST, SECOND]), str(VOICE_24K), **options)))
    assert bytes(got) == pcm16(want)  # the API's audio of the same pieces, as --stream writes it


@pytest.mark.parametrize(
    "stdin, extra, message",
    [
        (b"   \n\n", [], "error: the text to speak is empty"),
        (b"Hello \xff there.", [], "error: the text on stdin is not UTF-8: byte 0xff"),
        (b"Hello there. " * 10, ["--max-text", "50"], "error: the text is longer than 50 characters"),
    ],
)
def test_bad_piped_text_is_one_line_and_writes_nothing(tmp_path, stdin: bytes, extra: list, message: str) -> None:
    out = tmp_path / "out.wav"
    done = subprocess.run(
        [*COMMAND, "--text", "-", *OPTIONS, *extra, "-o", str(out)], input=stdin, capture_output=True, cwd=ROOT
    )
    lines = done.stderr.decode().strip().splitlines()
    assert done.returncode == 1 and lines[-1].startswith(message) and b"Traceback" not in done.stderr, lines
    assert not out.exists()


def test_play_without_speakers_is_one_line_before_any_model_is_loaded(tmp_path) -> None:
    done = subprocess.run(
        [*COMMAND, "Hi.", "--play", "--model", str(tmp_path / "absent.yaml")], capture_output=True, text=True, cwd=ROOT
    )
    try:
        audio_formats.speakers()
        pytest.skip("this machine has an output device to play on")
    except Exception as e:
        reason = str(e)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and lines == [f"error: {reason}"], done.stderr
    assert reason.startswith("--play needs") or reason.startswith("--play: no audio output device")


def test_play_writes_each_chunk_to_the_device_as_it_comes(monkeypatch) -> None:
    """`played` with sounddevice's OutputStream as a stand-in device: every chunk written, in order,
    as float32 [n, 1], while the same chunks go on to the file."""
    written = []

    class Device:
        def __init__(self, samplerate, channels, dtype):
            assert (samplerate, channels, dtype) == (24000, 1, "float32")

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            written.append("drained")

        def write(self, block):
            assert block.dtype == np.float32 and block.shape[1] == 1
            written.append(block[:, 0].copy())

    fake = type(sys)("sounddevice")
    fake.OutputStream = Device
    fake.query_devices = lambda kind: {"name": "speakers"}
    monkeypatch.setitem(sys.modules, "sounddevice", fake)
    chunks = [np.full(1920, n / 10, np.float32) for n in range(3)]
    assert [c is d for c, d in zip(audio_formats.played(iter(chunks), 24000), chunks)] == [True] * 3
    assert written[-1] == "drained" and all(np.array_equal(a, b) for a, b in zip(written[:-1], chunks))
