"""The command line, run as a subprocess on a tiny fixture model."""

from __future__ import annotations

import subprocess
import sys
import wave

import numpy as np
from conftest import ROOT, TINY_DIR, VOICE_24K

CONFIG = str(TINY_DIR / "tiny_lsd" / "config.yaml")
TINY = ("--model", CONFIG, "--voice", str(VOICE_24K))


def cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "core.cli", *args], input=stdin, capture_output=True, text=True, cwd=ROOT, timeout=120
    )


def test_generate_writes_a_wav(tmp_path) -> None:
    out = tmp_path / "hello.wav"
    done = cli(
        "generate",
        *TINY,
        "--text",
        "Hello world.",
        "-o",
        str(out),
        "--temperature",
        "0",
        "--max-frames",
        "5",
        "--eos-threshold",
        "inf",
    )
    assert done.returncode == 0, done.stderr
    assert "first chunk after" in done.stderr and "real-time factor" in done.stderr
    with wave.open(str(out)) as f:
        assert (f.getframerate(), f.getnchannels(), f.getsampwidth(), f.getnframes()) == (24000, 1, 2, 5 * 1920)
        samples = np.frombuffer(f.readframes(f.getnframes()), dtype="<i2")
    assert np.abs(samples).max() > 0


def test_text_from_stdin(tmp_path) -> None:
    out = tmp_path / "x.wav"
    done = cli(
        "generate",
        *TINY,
        "--text",
        "-",
        "-o",
        str(out),
        "-q",
        "--max-frames",
        "2",
        stdin="From standard input.",
    )
    assert done.returncode == 0 and done.stderr == "" and out.exists()


def test_user_errors_are_one_line_without_traceback(tmp_path) -> None:
    out = tmp_path / "never.wav"
    cases = [
        ("--text", "Hello."),  # default catalog model: no download yet
        ("--model", CONFIG, "--voice", str(VOICE_24K), "--text", "   "),
        ("--model", CONFIG, "--voice", str(tmp_path / "missing.wav"), "--text", "Hi."),
        ("--model", str(tmp_path / "missing.yaml"), "--text", "Hi."),
        ("--model", CONFIG, "--voice", str(VOICE_24K), "--text", "Hi.", "--temperature", "-1"),
    ]
    for args in cases:
        done = cli("generate", *args, "-o", str(out))
        assert done.returncode == 1, args
        assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
        assert "Traceback" not in done.stderr
    assert not out.exists()
