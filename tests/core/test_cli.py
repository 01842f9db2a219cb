"""The command line, run as a subprocess on a tiny fixture model."""

from __future__ import annotations

import io
import subprocess
import sys
import wave

import numpy as np
import pytest
import soundfile

from tests.support.paths import ROOT, TINY_DIR, VOICE_24K

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


@pytest.mark.slow
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
    assert listing.stdout.splitlines() == ["   voice", "*  voice_24000 (default)"]
    bad = cli("export", "--model", CONFIG, "--out", str(tmp_path / "other"), "--int8-group", "0")
    assert bad.returncode == 1 and "int8 group must be a positive number" in bad.stderr
    assert not (tmp_path / "other").exists()


def test_models_and_voices_are_described() -> None:
    """A heading, then a row per model: its language, parameters (counted from its config's
    tensors), word times; voices with the language they were recorded in."""
    from core.portable.weights import catalog

    done = cli("models")
    heading, *rows = [line[2:].split() for line in done.stdout.splitlines()]
    assert done.returncode == 0 and heading[:3] == ["model", "language", "parameters"] and len(rows) == 27
    table = {row[0]: row for row in rows}
    assert table["english"][1:4] == ["(default)", "english", "109.5M"] and table["french_24l"][1:3] == [
        "french",
        "336.1M",
    ]
    assert table["english_2m_2026-10"][1:4] == ["english", "11.7M", "no"] and table["french"][3] == "yes"
    assert sorted(table) == catalog.model_names()
    voices = [line[2:].split() for line in cli("voices", "--model", "french").stdout.splitlines()]
    assert ["estelle", "(default)", "french"] in voices and ["alba", "english"] in voices


def test_pause_markup_errors_on_the_command_line(tmp_path) -> None:
    done = cli("generate", *TINY, "--text", "Hello [pause:forever] there", "-o", str(tmp_path / "x.wav"))
    assert done.returncode == 1 and "malformed pause" in done.stderr and done.stderr.count("\n") == 2


@pytest.mark.slow
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
        assert done.returncode == 1 and "not UTF-8: byte 0x" in lines[-1], done.stderr
        # stdin is read as it arrives, once the model is loaded: its "loading" line comes first
        assert all(line.startswith("loading ") for line in lines[:-1]) and len(lines) <= 2, done.stderr
    assert not out.exists()


@pytest.mark.slow
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


@pytest.mark.slow
def test_the_output_and_the_voice_are_checked_before_the_model_loads(tmp_path) -> None:
    """Each mistake is one line, before the `loading ...` line (no model was read), and writes nothing."""
    hi = ("--text", "Hi.")
    cases = [
        (("--model", CONFIG, "--voice", str(VOICE_24K), "-o", str(tmp_path / "no" / "a.wav")), "the folder"),
        (("--model", CONFIG, "--voice", str(VOICE_24K), "-o", str(tmp_path / "a.aac")), "cannot write .aac files"),
        (("--model", CONFIG, "--voice", "nope.wav", "-o", str(tmp_path / "a.wav")), "voice file not found: nope.wav"),
        (("--voice", "albaa", "-o", str(tmp_path / "a.wav")), "did you mean 'alba'?"),
        (("--voice", "nobody", "-o", str(tmp_path / "a.wav")), "the voices of english are alba, anna"),
        (("--model", CONFIG, "--voice", "marius", "-o", str(tmp_path / "a.wav")), "has no predefined voices"),
        (("--model", str(tmp_path / "none.yaml"), "--voice", "x.wav", "-o", str(tmp_path / "a.wav")), "not found"),
    ]
    for args, said in cases:
        done = cli("generate", *args, *hi)
        assert done.returncode == 1 and done.stderr.count("\n") == 1, (args, done.stderr)
        assert done.stderr.startswith("error: ") and said in done.stderr, (args, done.stderr)
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "a file").write_text("kept")
    others = [
        (("export-voice", "nope.wav", str(tmp_path / "v.safetensors"), "--model", CONFIG), "voice file not found"),
        (("export-voice", str(VOICE_24K), str(tmp_path / "no" / "v.safetensors"), "--model", CONFIG), "the folder"),
        (("export", "--model", CONFIG, "--out", str(tmp_path / "a file")), "exists and is not a folder"),
        (("export", "--model", CONFIG, "--out", str(tmp_path / "b"), "--voice", "nope.wav"), "voice file not found"),
    ]
    for args, said in others:
        done = cli(*args)
        assert done.returncode == 1 and done.stderr.splitlines()[-1].startswith("error: "), (args, done.stderr)
        assert said in done.stderr and "loading" not in done.stderr, (args, done.stderr)
    assert [p.name for p in tmp_path.iterdir()] == ["a file"] and (tmp_path / "a file").read_text() == "kept"


@pytest.mark.slow
def test_a_wrong_flag_prints_its_commands_usage_and_normalize_takes_its_text_as_an_argument() -> None:
    done = cli("generate", "--bogus", "1", "2")  # "1" is the text: "2" is one argument too many
    assert done.returncode == 2 and "usage: python -m core.cli generate" in done.stderr
    assert "unrecognized arguments: --bogus 2" in done.stderr and "{generate," not in done.stderr
    assert cli("normalize", "I have 3 cats.").stdout == cli("normalize", "--text", "I have 3 cats.").stdout
    assert cli("normalize", "I have 3 cats.").stdout == "I have three cats.\n"
    for args in ((), ("one", "--text", "two")):
        done = cli("normalize", *args)
        assert done.returncode == 1 and done.stderr.startswith("error: normalize takes one text"), done.stderr


@pytest.mark.slow
def test_the_format_comes_from_the_name_or_from_format(tmp_path) -> None:
    """FLAC is lossless: its samples are the WAV's; the lossy ones decode to the same length; a name
    without an extension is a WAV, and --format overrides any name."""
    from core import audio_formats

    common = ("generate", *TINY, "--text", "Same samples.", "--temperature", "0", "--max-frames", "4", "-q")
    assert cli(*common, "-o", str(tmp_path / "a.wav")).returncode == 0
    reference, _ = soundfile.read(str(tmp_path / "a.wav"), dtype="int16")
    assert cli(*common, "-o", str(tmp_path / "a.flac")).returncode == 0
    assert soundfile.info(str(tmp_path / "a.flac")).format == "FLAC"
    assert np.array_equal(soundfile.read(str(tmp_path / "a.flac"), dtype="int16")[0], reference)
    assert cli(*common, "-o", str(tmp_path / "noext")).returncode == 0
    assert (tmp_path / "noext").read_bytes() == (tmp_path / "a.wav").read_bytes()
    assert cli(*common, "--format", "flac", "-o", str(tmp_path / "b.audio")).returncode == 0
    assert soundfile.info(str(tmp_path / "b.audio")).format == "FLAC"
    assert cli(*common, "-o", str(tmp_path / "a.pcm")).returncode == 0
    assert (tmp_path / "a.pcm").read_bytes() == (tmp_path / "a.wav").read_bytes()[44:]
    for name, container in (("a.ogg", "OGG"), ("a.opus", "OGG"), ("a.mp3", "MP3")):
        if not audio_formats.available(audio_formats.EXTENSIONS["." + name.split(".")[1]]):
            continue
        assert cli(*common, "-o", str(tmp_path / name)).returncode == 0
        info = soundfile.info(str(tmp_path / name))
        assert info.format == container and abs(info.frames - reference.size) <= 2 * 1152, (name, info.frames)
    to_stdout = subprocess.run(
        [sys.executable, "-m", "core.cli", *common, "--format", "flac", "-o", "-"], capture_output=True, cwd=ROOT
    )
    assert np.array_equal(soundfile.read(io.BytesIO(to_stdout.stdout), dtype="int16")[0], reference)


@pytest.mark.slow
def test_a_model_without_voices_asks_for_one_and_version_is_the_packages(tmp_path) -> None:
    import importlib.metadata
    import os

    offline = dict(os.environ, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "core.cli",
            "generate",
            "--model",
            CONFIG,
            "--text",
            "Hi.",
            "-o",
            str(tmp_path / "a.wav"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=offline,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith("error: ") and "pass a voice" in done.stderr
    version = cli("--version")
    assert version.stdout.strip() == f"pocket-tts-numpy {importlib.metadata.version('pocket-tts-numpy')}"


def test_checkout_script_is_the_installed_command() -> None:
    """`python pocket_tts_numpy.py` runs core.cli's commands and those it finds above core, as the
    installed `pocket-tts-numpy` does."""
    script = [sys.executable, str(ROOT / "pocket_tts_numpy.py")]
    listed = subprocess.run([*script, "models"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert listed.returncode == 0 and "english (default)" in listed.stdout, listed.stderr
    handed = subprocess.run([*script, "serve", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert handed.returncode == 0 and "usage: pocket-tts-numpy serve" in handed.stdout, handed.stderr


@pytest.mark.slow
def test_generate_shows_progress_on_a_terminal_only(tmp_path) -> None:
    """On a terminal (a pseudo-terminal here) stderr gets a bar counting seconds of audio; piped, or
    with -q, none."""
    import fcntl
    import os
    import pty
    import struct
    import termios

    args = [sys.executable, "-m", "core.cli", "generate", *TINY, "--text", "Hi.", "--max-frames", "30"]
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a new one is 0 columns wide
    shown = subprocess.run([*args, "-o", str(tmp_path / "a.wav")], stderr=follower, cwd=ROOT, timeout=120)
    os.close(follower)
    seen = b""
    while True:
        try:
            piece = os.read(leader, 65536)
        except OSError:
            break
        if not piece:
            break
        seen += piece
    os.close(leader)
    assert shown.returncode == 0 and b"speaking: " in seen and b" s of audio in " in seen, seen
    assert b"999999" not in seen  # seconds counted from samples, not summed as floats
    piped = cli("generate", *TINY, "--text", "Hi.", "--max-frames", "30", "-o", str(tmp_path / "b.wav"))
    assert piped.returncode == 0 and "speaking" not in piped.stderr


def test_a_missing_extra_is_one_line_naming_it(tmp_path) -> None:
    """As in a wheel installed without its extras (the modules made impossible to import)."""
    cases = [
        ("uvicorn", "from core.cli import main; sys.exit(main(['serve']))", "serve needs uvicorn", "server"),
        ("uvicorn", "from server.__main__ import main; sys.exit(main([]))", "python -m server needs uvicorn", "server"),
        (
            "huggingface_hub",
            f"from core.cli import main; sys.exit(main(['generate', '-o', {str(tmp_path / 'a.wav')!r}]))",
            "needs huggingface_hub, from the 'cli' extra",
            "cli",
        ),
    ]
    for module, code, said, extra in cases:
        done = subprocess.run(
            [sys.executable, "-c", f"import sys; sys.modules[{module!r}] = None; {code}"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        last = done.stderr.strip().splitlines()[-1]
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert said in last and f"pip install 'pocket-tts-numpy[{extra}]'" in last, last


def test_the_default_output_never_replaces_a_file_already_there(tmp_path) -> None:
    """Without -o the file's name is ours, not the user's: a tts_output.wav already there (theirs, or
    a link planted there) stays, and each run makes the next free name."""
    (tmp_path / "tts_output.wav").write_bytes(b"the user's own recording")
    (tmp_path / "elsewhere").write_bytes(b"elsewhere")
    (tmp_path / "tts_output-2.wav").symlink_to(tmp_path / "elsewhere")
    said = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-m", "core.cli", "generate", *TINY, "--text", "Hi.", "--max-frames", "2"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        said.append(done.stderr)
    assert "wrote tts_output-3.wav" in said[0] and "wrote tts_output-4.wav" in said[1]
    assert (tmp_path / "tts_output.wav").read_bytes() == b"the user's own recording"
    assert (tmp_path / "elsewhere").read_bytes() == b"elsewhere" and (tmp_path / "tts_output-2.wav").is_symlink()
    for name in ("tts_output-3.wav", "tts_output-4.wav"):
        assert soundfile.info(str(tmp_path / name)).frames == 2 * 1920


def test_the_text_may_come_as_the_argument_and_one_text_is_asked(tmp_path) -> None:
    common = ("generate", *TINY, "--temperature", "0", "--max-frames", "4", "-q")
    assert cli(*common, "--text", "Same words.", "-o", str(tmp_path / "option.wav")).returncode == 0
    done = cli(*common, "Same words.", "-o", str(tmp_path / "argument.wav"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "argument.wav").read_bytes() == (tmp_path / "option.wav").read_bytes()
    both = cli(*common, "One.", "--text", "Two.", "-o", str(tmp_path / "both.wav"))
    assert both.returncode == 1 and both.stderr.strip().splitlines() == [
        "error: generate takes one text: as its argument, or as --text (- reads stdin)"
    ]
    assert not (tmp_path / "both.wav").exists()


def test_a_name_and_format_that_disagree_and_format_with_stream_are_refused(tmp_path) -> None:
    common = ("generate", *TINY, "--text", "Hi.", "--max-frames", "4", "-q")
    named = cli(*common, "-o", str(tmp_path / "out.mp3"), "--format", "wav")
    assert named.returncode == 1 and len(named.stderr.strip().splitlines()) == 1
    assert "out.mp3 is named .mp3 but --format is wav: name it .wav" in named.stderr
    assert not (tmp_path / "out.mp3").exists()
    streamed = cli(*common, "--stream", "--format", "wav")
    assert streamed.returncode == 1 and len(streamed.stderr.strip().splitlines()) == 1
    assert "--stream writes raw 16-bit PCM" in streamed.stderr and "-o - --format FORMAT" in streamed.stderr


def test_a_wav_on_stdout_into_a_file_has_its_true_length_and_into_a_pipe_streams(tmp_path) -> None:
    """Redirected to a regular file, stdout gets the whole WAV, its header's lengths those of its
    data (what soxi and every player read); a pipe gets it as it is made, with the streaming header."""
    args = [sys.executable, "-m", "core.cli", "generate", *TINY, "--text", "Hi.", "--max-frames", "4", "-q", "-o", "-"]
    args += ["--temperature", "0"]
    with open(tmp_path / "redirected.wav", "wb") as out:
        assert subprocess.run(args, stdout=out, cwd=ROOT, timeout=120).returncode == 0
    data = (tmp_path / "redirected.wav").read_bytes()
    with wave.open(str(tmp_path / "redirected.wav")) as f:
        assert f.getnframes() == 4 * 1920
    assert int.from_bytes(data[4:8], "little") == len(data) - 8
    piped = subprocess.run(args, capture_output=True, cwd=ROOT, timeout=120)
    assert piped.returncode == 0 and piped.stdout[44:] == data[44:]
    assert int.from_bytes(piped.stdout[40:44], "little") > len(piped.stdout)  # the streaming header's


def test_a_model_name_with_a_typo_gets_the_closest_names() -> None:
    done = cli("generate", "--model", "englsh", "--text", "Hi.", "-q")
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1
    assert "unknown model 'englsh': did you mean 'english'" in done.stderr


def test_a_flag_that_turns_an_option_off_says_what_it_does_and_the_default() -> None:
    shown = " ".join(cli("generate", "--help").stdout.split())
    assert "--no-pauses the markup is read as text (by default: pause markup ([pause:500ms]," in shown
    assert "--no-normalize the text as given, as official (by default: read numbers," in shown


def test_piped_text_is_read_when_no_text_is_given(tmp_path) -> None:
    """`echo Hi | generate`: stdin, a pipe here, is the text (said on stderr); piped empty, it is the
    empty-text error; from /dev/null (no pipe, no file), the model's sample text."""
    common = ("generate", *TINY, "--temperature", "0", "--max-frames", "4", "--eos-threshold", "inf")
    assert cli(*common, "--text", "Piped words.", "-q", "-o", str(tmp_path / "given.wav")).returncode == 0
    piped = cli(*common, "-o", str(tmp_path / "piped.wav"), stdin="Piped words.")
    assert piped.returncode == 0, piped.stderr
    assert "reading the text from stdin" in piped.stderr
    assert (tmp_path / "piped.wav").read_bytes() == (tmp_path / "given.wav").read_bytes()
    empty = cli(*common, "-o", str(tmp_path / "empty.wav"), stdin="")
    assert empty.returncode == 1 and empty.stderr.strip().splitlines()[-1].startswith("error: ")
    assert not (tmp_path / "empty.wav").exists()
    devnull = subprocess.run(
        [sys.executable, "-m", "core.cli", *common, "-q", "-o", str(tmp_path / "sample.wav")],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert devnull.returncode == 0 and (tmp_path / "sample.wav").exists(), devnull.stderr
    assert (tmp_path / "sample.wav").read_bytes() != (tmp_path / "given.wav").read_bytes()
