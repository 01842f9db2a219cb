"""The command line, run as a subprocess on a tiny fixture model."""

from __future__ import annotations

import io
import subprocess
import sys
import wave

import numpy as np
import soundfile

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
        lines = done.stderr.splitlines()
        assert lines[-1].startswith("error: ") and all(line.startswith("loading ") for line in lines[:-1]), lines
        assert "Traceback" not in done.stderr
    assert not out.exists()


def test_wav_on_stdout_and_raw_stream_carry_the_same_samples(tmp_path) -> None:
    common = ["generate", *TINY, "--text", "Same samples.", "--temperature", "0", "--max-frames", "4", "-q"]
    to_file = cli(*common, "-o", str(tmp_path / "a.wav"))
    assert to_file.returncode == 0, to_file.stderr
    with wave.open(str(tmp_path / "a.wav")) as f:
        reference = f.readframes(f.getnframes())
    as_wav = subprocess.run([sys.executable, "-m", "core.cli", *common, "-o", "-"], capture_output=True, cwd=ROOT)
    raw = subprocess.run([sys.executable, "-m", "core.cli", *common, "--stream"], capture_output=True, cwd=ROOT)
    assert as_wav.returncode == 0 and raw.returncode == 0
    assert raw.stdout == reference and len(reference) == 4 * 1920 * 2
    assert as_wav.stdout[:4] == b"RIFF" and as_wav.stdout[8:16] == b"WAVEfmt " and as_wav.stdout[44:] == reference
    parsed = soundfile.read(io.BytesIO(as_wav.stdout), dtype="int16")[0]
    assert np.array_equal(parsed, np.frombuffer(reference, "<i2"))


def test_export_voice_then_generate_with_it(tmp_path) -> None:
    state = tmp_path / "me.safetensors"
    done = cli("export-voice", str(VOICE_24K), str(state), "--model", CONFIG, "-q")
    assert done.returncode == 0 and state.exists(), done.stderr
    out = tmp_path / "x.wav"
    done = cli("generate", "--model", CONFIG, "--voice", str(state), "--text", "Hi.", "-o", str(out), "-q")
    assert done.returncode == 0 and out.exists(), done.stderr
    bad = cli("export-voice", str(VOICE_24K), str(tmp_path / "me.wav"), "--model", CONFIG)
    assert bad.returncode == 1 and "must end in .safetensors" in bad.stderr


def test_export_bundle_and_generate_from_it_with_its_default_voice(tmp_path) -> None:
    bundle = tmp_path / "bundle"
    done = cli("export", "--model", CONFIG, "--out", str(bundle), "--voice", str(VOICE_24K))
    assert done.returncode == 0, done.stderr
    assert "weights" in done.stderr and "voices: voice_24000" in done.stderr
    out = tmp_path / "x.wav"
    done = cli("generate", "--model", str(bundle), "--text", "Hi.", "-o", str(out), "-q", "--max-frames", "3")
    assert done.returncode == 0, done.stderr
    listing = cli("voices", "--model", str(bundle))
    assert listing.stdout.splitlines() == ["* voice_24000 (default)"]
    bad = cli("export", "--model", CONFIG, "--out", str(tmp_path / "other"), "--int8-group", "0")
    assert bad.returncode == 1 and "int8 group must be a positive number" in bad.stderr
    assert not (tmp_path / "other").exists()


def test_models_lists_the_catalog() -> None:
    done = cli("models")
    names = [line[2:].split(" ")[0] for line in done.stdout.splitlines()]
    assert done.returncode == 0 and "english" in names and "english_2m_2026-10" in names and len(names) == 27


def test_pause_markup_errors_on_the_command_line(tmp_path) -> None:
    done = cli("generate", *TINY, "--text", "Hello [pause:forever] there", "-o", str(tmp_path / "x.wav"))
    assert done.returncode == 1 and "malformed pause" in done.stderr and done.stderr.count("\n") == 2


def test_speed_and_normalization_on_the_command_line(tmp_path) -> None:
    def frames(*args: str) -> np.ndarray:
        out = tmp_path / "x.wav"
        common = ("--temperature", "0", "--max-frames", "10", "--eos-threshold", "inf", "-q", "-o", str(out))
        done = cli("generate", *TINY, *common, *args)
        assert done.returncode == 0, done.stderr
        return soundfile.read(str(out), dtype="int16")[0]

    normal = frames("--text", "It is 5 past 3.")
    assert abs(frames("--text", "It is 5 past 3.", "--speed", "2").shape[0] - normal.shape[0] / 2) <= 0.02 * 9600
    # At temperature 0 the audio follows the text the model reads: the digits, or the same words spelled out.
    assert np.array_equal(frames("--text", "It is five past three."), normal)
    assert not np.array_equal(frames("--text", "It is 5 past 3.", "--no-normalize"), normal)
    bad = cli("generate", *TINY, "--text", "Hi.", "--speed", "9", "-o", str(tmp_path / "never.wav"))
    assert bad.returncode == 1 and bad.stderr.splitlines()[-1].startswith("error: speed must be from 0.25 to 4.0")


def test_normalize_prints_what_will_be_spoken() -> None:
    done = cli("normalize", "--text", "It costs $5 [pause:300ms] on May 3.")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "It costs five dollars [pause:300ms] on May third.\n"
    french = cli("normalize", "--text", "Il a 21 ans.", "--language", "french")
    assert french.stdout == "Il a vingt et un ans.\n"
    by_model = cli("normalize", "--text", "Er ist 21.", "--model", "german")
    assert by_model.stdout == "Er ist einundzwanzig.\n"
    empty = cli("normalize", "--text", "  ")
    assert empty.returncode == 1 and empty.stderr.startswith("error: ") and "Traceback" not in empty.stderr


def cli_bytes(*args: bytes, stdin: bytes = b"") -> subprocess.CompletedProcess:
    """The command line with arguments as raw bytes (what a shell passes, whatever the locale)."""
    command = [sys.executable.encode(), b"-m", b"core.cli", *args]
    return subprocess.run(command, input=stdin, capture_output=True, cwd=ROOT, timeout=120)


def test_text_that_is_not_utf8_is_one_line_and_nothing_is_written(tmp_path) -> None:
    out = tmp_path / "x.wav"
    tiny = [part.encode() for part in TINY]
    for args, stdin in (
        ([b"generate", *tiny, b"--text", b"-", b"-o", bytes(out)], b"caf\xe9 au lait"),
        ([b"generate", *tiny, b"--text", b"caf\xe9", b"-o", bytes(out)], b""),
        ([b"normalize", b"--text", b"\xff1"], b""),
    ):
        done = cli_bytes(*args, stdin=stdin)
        lines = done.stderr.decode().strip().splitlines()
        assert done.returncode == 1 and len(lines) == 1 and "not UTF-8: byte 0x" in lines[0], done.stderr
    assert not out.exists()


def test_output_to_a_fifo_or_a_device_is_written_through_and_a_folder_is_refused(tmp_path) -> None:
    """-o never puts a regular file in place of what was there: a FIFO gets the WAV (a reader
    takes it), a character device is written to, a folder is an error before any work."""
    import os
    import stat
    import threading

    fifo = tmp_path / "pipe.wav"
    os.mkfifo(fifo)
    heard = []
    reader = threading.Thread(target=lambda: heard.append(fifo.read_bytes()))
    reader.start()
    done = cli("generate", *TINY, "--text", "Hi.", "--max-frames", "2", "-o", str(fifo), "-q")
    reader.join(60)
    assert done.returncode == 0, done.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and heard[0][:4] == b"RIFF" and len(heard[0]) == 44 + 2 * 2 * 1920
    if os.geteuid() == 0:  # a device of our own: a copy of /dev/null made in the test's folder
        device = tmp_path / "null"
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        done = cli("generate", *TINY, "--text", "Hi.", "--max-frames", "2", "-o", str(device), "-q")
        assert done.returncode == 0, done.stderr
        assert stat.S_ISCHR(os.stat(device).st_mode)
    folder = tmp_path / "folder"
    folder.mkdir()
    done = cli("generate", *TINY, "--text", "Hi.", "-o", str(folder))
    assert done.returncode == 1 and done.stderr.strip().splitlines() == [
        f"error: {folder} is a folder: not written (name a file, a FIFO or a character device)"
    ]
    assert folder.is_dir() and list(folder.iterdir()) == []
