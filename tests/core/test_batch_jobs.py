"""Batch synthesis (`python -m core.cli batch`): a WAV file per line equal to the model's own audio,
a manifest with every line's outcome, resuming, and the same job on a real local Ray cluster whose
worker process dies mid-run."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from core.portable.audio.pcm import wav_bytes
from core.portable.synthesis.options import MAX_TEXT, GenerationOptions
from e2e.harness import ray_cluster
from tests.support.checks import pcm_close
from tests.support.needs import require_ray
from tests.support.paths import ROOT, TINY_CONFIG, VOICE_22K, VOICE_24K

LINES = [
    {"id": "hello", "text": "Hello there.", "temperature": 0, "max_frames": 8},
    {"id": "seeded", "text": "A seeded line.", "seed": 7, "max_frames": 8},
    {"id": "derived-seed", "text": "No seed given here.", "max_frames": 8},
    {"id": "other.voice", "text": "Another voice.", "voice": "voice_22050.wav", "temperature": 0, "max_frames": 8},
    {"id": "fast", "text": "Read 2 times faster.", "speed": 2.0, "temperature": 0, "max_frames": 8},
    {"id": "as-written", "text": "Read 2 as written.", "normalize": False, "temperature": 0, "max_frames": 8},
]
BAD = [
    "not json at all",
    json.dumps({"id": "hello", "text": "The same id again."}),
    json.dumps({"id": "../escape", "text": "A path for an id."}),
    json.dumps({"id": "no-text"}),
    json.dumps({"id": "odd-option", "text": "Hi.", "sped": 2}),
    json.dumps({"id": "too-fast", "text": "Hi.", "speed": 9}),
    json.dumps({"id": "bad-range", "text": "Hi.", "temperature": -1}),
    json.dumps({"id": "ghost", "text": "Hi.", "voice": "nobody"}),
]


def write_input(folder: Path, lines: List[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "voice_22050.wav").write_bytes(VOICE_22K.read_bytes())  # a voice beside the input file
    path = folder / "lines.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def batch(input_path: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "core.cli", "batch", str(input_path), "--out", str(out), "--model"]
    command += [str(TINY_CONFIG), "--voice", str(VOICE_24K), *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)


def same_wav(a: Path, b: Path) -> bool:
    """The same WAV file to the rounding of BLAS products: a Ray worker starts its BLAS on one
    thread (Ray sets OMP_NUM_THREADS=1), a local worker limits a multi-threaded one, and their
    products may round apart."""
    got, expected = a.read_bytes(), b.read_bytes()
    return got[:44] == expected[:44] and pcm_close(got[44:], expected[44:])


def manifest(out: Path) -> List[Dict]:
    return [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]


def test_each_line_is_the_models_audio_and_bad_lines_are_errors_in_the_manifest(model, tmp_path) -> None:
    """Exactly the model's audio, computed here with one BLAS thread as the workers do: the rounding
    of a BLAS product depends on its thread count, so bytes match only under the same threading."""
    from threadpoolctl import threadpool_limits

    source = write_input(tmp_path / "in", [json.dumps(line) for line in LINES] + BAD)
    done = batch(source, tmp_path / "out", "--workers", "2")
    assert done.returncode == 1
    assert (
        done.stderr.strip().splitlines()[-1]
        == f"error: {len(BAD)} of {len(LINES) + len(BAD)} lines failed: their errors are above and in the manifest"
    )
    told = [line for line in done.stderr.splitlines() if line.startswith("line ")]
    assert [int(line.split()[1].rstrip(":")) for line in told] == list(range(len(LINES) + 1, len(LINES) + len(BAD) + 1))
    entries = manifest(tmp_path / "out")
    assert [e["line"] for e in entries] == list(range(1, len(LINES) + len(BAD) + 1))
    with threadpool_limits(1):
        voices = {"default": model.voice_state(str(VOICE_24K)), "other": model.voice_state(str(VOICE_22K))}
    for line, entry in zip(LINES, entries):
        assert entry["error"] is None and entry["id"] == line["id"] and entry["file"] == f"{line['id']}.wav"
        options = {k: v for k, v in line.items() if k not in ("id", "text", "voice")}
        options.setdefault("seed", entry["options"]["seed"])  # one from the id when the line has none
        assert entry["options"] == options and isinstance(options["seed"], int)
        voice = voices["other" if "voice" in line else "default"]
        with threadpool_limits(1):
            pcm = model.generate(line["text"], voice, GenerationOptions.of(entry["options"]))
        assert (tmp_path / "out" / entry["file"]).read_bytes() == wav_bytes(pcm, model.sample_rate), line["id"]
        assert entry["duration_s"] == round(pcm.shape[0] / model.sample_rate, 3)
    assert entries[4]["duration_s"] == 8 * 0.08 / 2  # speed 2: half the frames' audio
    errors = [e["error"] for e in entries[len(LINES) :]]
    expected = [
        "not JSON",
        "used twice",
        "id must be",
        "text must be",
        "unknown option 'sped'",
        "speed must be from 0.25 to 4.0",
        "temperature",
        "'nobody' is no file",
    ]
    assert len(errors) == len(expected) and all(e in error for e, error in zip(expected, errors)), errors
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        ["manifest.jsonl"] + [f"{line['id']}.wav" for line in LINES]
    )
    for error, line in zip(errors, told):
        assert line.endswith(error)


def test_a_line_without_an_id_is_named_by_its_number_and_the_bar_counts_every_line(tmp_path) -> None:
    """The bar's total is every line of the input, the invalid ones and those made before included."""
    import re

    lines = [json.dumps({"text": "No id here.", "max_frames": 2}), "not json", json.dumps({"id": "x", "text": ""})]
    done = batch(write_input(tmp_path / "in", lines), tmp_path / "out", "--workers", "1")
    assert done.returncode == 1 and (tmp_path / "out" / "line-1.wav").is_file()
    assert [e["id"] for e in manifest(tmp_path / "out")] == ["line-1", None, "x"]
    counts = re.findall(r"(\d+)/(\d+) \[", done.stderr)
    assert counts and counts[-1] == ("3", "3") and all(total == "3" for _, total in counts), done.stderr
    assert "line 2: not JSON" in done.stderr and "line 3 (x): the text to speak is empty" in done.stderr


@pytest.mark.slow
def test_a_rerun_makes_only_what_is_missing_or_changed_and_replaces_only_its_own_files(tmp_path) -> None:
    lines = [{"id": f"line{i}", "text": f"Line number {i}.", "max_frames": 6} for i in range(6)]
    source = write_input(tmp_path / "in", [json.dumps(line) for line in lines])
    out = tmp_path / "out"
    assert batch(source, out, "--workers", "2").returncode == 0
    made = {p.name: p.stat().st_mtime_ns for p in out.glob("*.wav")}
    (out / "line0.wav").unlink()  # missing
    changed = (out / "line1.wav").read_bytes()[:100]
    (out / "line1.wav").write_bytes(changed)  # changed by someone else: no longer the file the job wrote
    lines[2]["text"] = "A changed text."  # changed
    old = (out / "line2.wav").read_bytes()
    source = write_input(tmp_path / "in", [json.dumps(line) for line in lines])
    again = batch(source, out, "--workers", "2")
    assert again.returncode == 1 and "6 lines: 2 made, 3 already there, 1 failed" in again.stderr, again.stderr
    assert f"line 2 (line1): {out / 'line1.wav'} is there and was not made by this job" in again.stderr
    assert (out / "line1.wav").read_bytes() == changed
    assert (out / "line0.wav").is_file() and (out / "line2.wav").read_bytes() != old
    for name in ("line3.wav", "line4.wav", "line5.wav"):
        assert (out / name).stat().st_mtime_ns == made[name]
    entries = manifest(out)
    assert [e["id"] for e in entries] == [line["id"] for line in lines]
    for entry in entries:
        if entry["error"] is None:
            assert entry["digest"] == hashlib.sha256((out / entry["file"]).read_bytes()).hexdigest()
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize(
    "args, message",
    [
        (["missing.jsonl", "--out", "{tmp}/out"], "input file not found: missing.jsonl"),
        (["{input}", "--out", "{input}"], "--out must be a folder"),
        (["{input}", "--out", "{tmp}/out", "--model", "no-such-model"], "no-such-model"),
        (["{input}", "--out", "{tmp}/out", "--max-text", "0"], "--max-text must be at least 1, got 0"),
    ],
)
def test_bad_arguments_are_one_line(tmp_path, args: List[str], message: str) -> None:
    source = write_input(tmp_path / "in", [json.dumps(LINES[0])])
    args = [a.format(tmp=tmp_path, input=source) for a in args]
    command = [sys.executable, "-m", "core.cli", "batch", *args]
    if "--model" not in args:
        command += ["--model", str(TINY_CONFIG)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120)
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1 and last.startswith("error: ") and message in last, done.stderr
    assert "Traceback" not in done.stderr


# A request's bounds, and what the job may write


def test_a_text_over_the_servers_limit_is_its_lines_error_unless_max_text_raises_it(tmp_path) -> None:
    """A line's text has the server's MAX_TEXT characters at most; a line too long in bytes for a
    text within the limit is refused unread, and one at the limit in the longest JSON (every
    character escaped as a pair: 12 bytes) is read: its limit follows --max-text."""
    many = 4 * MAX_TEXT
    lines = [
        {"id": "short", "text": "Hi.", "max_frames": 2},
        {"id": "long", "text": ("word " * MAX_TEXT)[: MAX_TEXT + 1], "max_frames": 2},
        {"id": "escaped", "text": "\U0001f600" * many, "max_frames": 2},  # json.dumps writes each as 12 bytes
        {"id": "after", "text": "Hi again.", "max_frames": 2},
    ]
    source = write_input(tmp_path / "in", [json.dumps(line) for line in lines])
    out = tmp_path / "out"
    done = batch(source, out, "--workers", "1")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    errors = {e["id"]: e["error"] for e in manifest(out)}
    assert errors["long"] == f"text is longer than {MAX_TEXT} characters (--max-text raises the limit)"
    assert errors[None].startswith("the line is longer than") and errors[None].endswith("(--max-text raises the limit)")
    assert errors["short"] is None and errors["after"] is None and len(errors) == 4
    again = batch(source, out, "--workers", "1", "--max-text", str(many))
    assert again.returncode == 0 and "4 lines: 2 made, 2 already there, 0 failed" in again.stderr, again.stderr
    assert [e["error"] for e in manifest(out)] == [None] * 4
    assert (out / "long.wav").is_file() and (out / "escaped.wav").is_file()


def test_a_huge_line_is_its_error_without_being_held(tmp_path) -> None:
    """A 20 MB line is read in bounded pieces and dropped: the job's allocations peak far below the
    line's size (counted by tracemalloc, in this process: no line here reaches a worker), and the
    line after it is read as usual. Its max_frames is out of range as well, so that a job that read
    it whole would refuse it rather than spend minutes on its text."""
    import tracemalloc

    from core import batch as job

    huge = json.dumps({"id": "huge", "text": "a" * 20_000_000, "max_frames": 10**9})
    after = json.dumps({"id": "after", "text": "Hi.", "speed": 9})
    warm = write_input(tmp_path / "warm", [after])
    job.run(str(warm), str(tmp_path / "warm" / "out"), str(TINY_CONFIG), str(VOICE_24K), progress=False)  # imports
    source = write_input(tmp_path / "in", [huge, after])
    tracemalloc.start()
    try:
        summary = job.run(str(source), str(tmp_path / "out"), str(TINY_CONFIG), str(VOICE_24K), progress=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < len(huge) // 20, peak
    assert (summary.lines, summary.failed) == (2, 2)
    errors = [e["error"] for e in manifest(tmp_path / "out")]
    assert errors[0].startswith("the line is longer than") and "speed must be from 0.25 to 4.0" in errors[1]


def test_a_line_is_read_in_pieces_no_longer_than_the_limit() -> None:
    import io

    from core.batch import numbered_lines

    class Reads(io.BytesIO):
        sizes: List[int] = []

        def readline(self, size: Optional[int] = -1) -> bytes:
            self.sizes.append(size)
            return super().readline(size)

    read = Reads(b"12345\n123456\n" + b"x" * 20 + b"\n\nlast")
    assert list(numbered_lines(read, 6)) == [(1, b"12345\n"), (2, b"123456\n"), (3, None), (4, b"\n"), (5, b"last")]
    assert read.sizes and all(0 < size <= 7 for size in read.sizes)


def test_lines_go_to_the_workers_as_they_are_read() -> None:
    """The first line is made while the later ones are still unread: a worker is handed a line when
    it is free, however long the input."""
    from core.batch import Line, ModelSource, local_outcomes

    read: List[int] = []

    def lines():
        for number in range(1, 7):
            read.append(number)
            yield Line(number, f"n{number}", "Hi.", str(VOICE_24K), {"max_frames": 2, "seed": 1}, "")

    seen = []
    for outcome in local_outcomes(ModelSource(str(TINY_CONFIG)), lines(), 1):
        assert outcome.error is None, outcome.error
        seen.append(len(read))
    assert seen == [1, 2, 3, 4, 5, 6]


def job_command(source: Path, out: Path, *args: str) -> List[str]:
    command = [sys.executable, "-m", "core.cli", "batch", str(source), "--out", str(out), "--model", str(TINY_CONFIG)]
    return command + ["--voice", str(VOICE_24K), *args]


def stat_fields(pid: int) -> List[str]:
    """/proc/PID/stat from its state on (its third field), or [] where there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    return text[text.rindex(")") + 2 :].split()


def workers_of(job: int) -> Dict[int, str]:
    """The job's worker processes (multiprocessing's spawned children), by pid, with their start
    time: a pid taken again later is another process."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = stat_fields(int(entry.name))
            try:
                spawned = b"spawn_main" in (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if fields and int(fields[1]) == job and spawned:
                found[int(entry.name)] = fields[19]
    return found


def alive(pid: int, started: str) -> bool:
    fields = stat_fields(pid)
    return bool(fields) and fields[19] == started and fields[0] != "Z"


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc; the workers' end with a killed job is Linux's"
)
@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=lambda s: signal.Signals(s).name)
def test_a_stopped_job_leaves_no_worker_and_a_rerun_makes_only_the_rest(tmp_path, stop: int) -> None:
    """Once a line has finished, the workers are frozen on their lines (SIGSTOP: none can finish, so
    the job cannot end by itself) and the job gets the signal. SIGTERM and SIGINT: it kills its
    workers, which are gone once it has ended, with 128 + the signal; the lines that finished are in
    the manifest, no other file is there, and a rerun makes exactly the others. SIGKILL: the workers
    die with it (the deadline is a hang guard: a frozen worker nobody kills stays)."""
    lines = [
        {"id": f"n{i}", "text": f"Sentence number {i}, long enough.", "max_frames": 200, "eos_threshold": 100}
        for i in range(8)
    ]
    source = write_input(tmp_path / "in", [json.dumps(line) for line in lines])
    out = tmp_path / "out"
    with open(tmp_path / "stderr", "w") as stderr:
        job = subprocess.Popen(job_command(source, out, "--workers", "2"), cwd=ROOT, stderr=stderr)
    workers: Dict[int, str] = {}
    try:
        deadline = time.monotonic() + 300
        while not ((out / "manifest.jsonl").is_file() and (out / "manifest.jsonl").read_text()):
            assert job.poll() is None and time.monotonic() < deadline, (tmp_path / "stderr").read_text()
            time.sleep(0.01)
        workers = workers_of(job.pid)
        for pid in workers:
            os.kill(pid, signal.SIGSTOP)
        assert workers and job.poll() is None, "the job ended before its workers could be frozen"
        job.send_signal(stop)
        job.wait(timeout=120)
        if stop == signal.SIGKILL:
            deadline = time.monotonic() + 60
            while any(alive(pid, started) for pid, started in workers.items()) and time.monotonic() < deadline:
                time.sleep(0.01)
        assert not [pid for pid, started in workers.items() if alive(pid, started)]
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
        for pid, started in workers.items():
            if alive(pid, started):
                os.kill(pid, signal.SIGKILL)
    if stop == signal.SIGKILL:
        assert job.returncode == -signal.SIGKILL
        return
    said = (tmp_path / "stderr").read_text()
    assert job.returncode == 128 + stop and "Traceback" not in said, said
    assert said.strip().splitlines()[-1].startswith(f"stopped by {signal.Signals(stop).name}: ")
    made = [e["id"] for e in manifest(out)]
    assert 0 < len(made) < len(lines)
    assert sorted(p.name for p in out.iterdir()) == sorted(["manifest.jsonl"] + [f"{i}.wav" for i in made])
    again = batch(source, out, "--workers", "2")
    counts = f"{len(lines)} lines: {len(lines) - len(made)} made, {len(made)} already there, 0 failed"
    assert again.returncode == 0 and counts in again.stderr, again.stderr


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_worker_killed_mid_job_costs_only_its_line(tmp_path) -> None:
    """A worker killed while lines remain: its line is its error (a rerun makes it), a new worker
    takes the next line, and every other line is made."""
    lines = [
        {"id": f"n{i}", "text": f"Sentence number {i}, long enough.", "max_frames": 200, "eos_threshold": 100}
        for i in range(8)
    ]
    source = write_input(tmp_path / "in", [json.dumps(line) for line in lines])
    out = tmp_path / "out"
    with open(tmp_path / "stderr", "w") as stderr:
        job = subprocess.Popen(job_command(source, out, "--workers", "2"), cwd=ROOT, stderr=stderr)
    try:
        deadline = time.monotonic() + 300
        while not ((out / "manifest.jsonl").is_file() and (out / "manifest.jsonl").read_text()):
            assert job.poll() is None and time.monotonic() < deadline, (tmp_path / "stderr").read_text()
            time.sleep(0.01)
        os.kill(next(iter(workers_of(job.pid))), signal.SIGKILL)
        job.wait(timeout=300)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    assert job.returncode == 1, (tmp_path / "stderr").read_text()
    errors = [e["error"] for e in manifest(out) if e["error"] is not None]
    assert errors == ["its worker process died (run the job again to resume)"]
    again = batch(source, out, "--workers", "2")
    assert again.returncode == 0 and "8 lines: 1 made, 7 already there, 0 failed" in again.stderr, again.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_file_the_job_did_not_write_is_its_lines_error_and_left_as_it_is(tmp_path) -> None:
    """The user's file, a planted link and a FIFO, each named like a line's output: each is that
    line's error, left as it is (the FIFO never opened: the job would wait on it), on a rerun too."""
    names = ("made", "mine", "link", "fifo")
    source = write_input(tmp_path / "in", [json.dumps({"id": n, "text": "Hi.", "max_frames": 2}) for n in names])
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.wav").write_bytes(b"my own recording")
    victim = tmp_path / "victim.wav"
    victim.write_bytes(b"precious")
    (out / "link.wav").symlink_to(victim)
    os.mkfifo(out / "fifo.wav")
    for _ in range(2):
        done = batch(source, out, "--workers", "1")
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        errors = {e["id"]: e["error"] for e in manifest(out)}
        assert errors.pop("made") is None
        for name, error in errors.items():
            assert error.startswith(f"{out / name}.wav is there and was not made by this job: not replaced"), error
        assert (out / "mine.wav").read_bytes() == b"my own recording" and victim.read_bytes() == b"precious"
        assert os.readlink(out / "link.wav") == str(victim) and stat.S_ISFIFO(os.lstat(out / "fifo.wav").st_mode)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("kind", ["file", "fifo"])
def test_a_folder_whose_manifest_is_not_a_batch_manifest_is_refused_before_any_work(tmp_path, kind: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    if kind == "file":
        (out / "manifest.jsonl").write_text("my notes\n")
    else:
        os.mkfifo(out / "manifest.jsonl")
    done = batch(write_input(tmp_path / "in", [json.dumps(LINES[0])]), out)
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1 and last.startswith("error: ") and "is not a batch manifest" in last, done.stderr
    assert os.listdir(out) == ["manifest.jsonl"]
    if kind == "file":
        assert (out / "manifest.jsonl").read_text() == "my notes\n"
    else:
        assert stat.S_ISFIFO(os.lstat(out / "manifest.jsonl").st_mode)


# On a real local Ray cluster


@pytest.fixture(scope="module")
def ray_address(request):
    require_ray(request)
    with ray_cluster(cpus=2) as address:
        yield address


MANY = [
    {"id": f"n{i:02d}", "text": f"Sentence number {i}, long enough to take a moment.", "max_frames": 60}
    for i in range(40)
]


@pytest.fixture(scope="module")
def local_run(tmp_path_factory) -> Path:
    """The job of MANY on worker processes here, to compare the cluster's with."""
    folder = tmp_path_factory.mktemp("local")
    assert batch(write_input(folder / "in", [json.dumps(line) for line in MANY]), folder / "out").returncode == 0
    return folder / "out"


@pytest.mark.cluster
def test_on_ray_the_job_makes_the_same_files(ray_address, local_run, tmp_path) -> None:
    out = tmp_path / "out"
    done = batch(write_input(tmp_path / "in", [json.dumps(line) for line in MANY]), out, "--ray", ray_address)
    assert done.returncode == 0, done.stderr
    assert without_digests(manifest(out)) == without_digests(manifest(local_run))
    for line in MANY:
        assert same_wav(out / f"{line['id']}.wav", local_run / f"{line['id']}.wav"), line["id"]


def without_digests(entries: List[Dict]) -> List[Dict]:
    """The entries but for the files' digests, which differ where the audio rounds apart (same_wav)."""
    return [{k: v for k, v in entry.items() if k not in ("digest", "words_digest")} for entry in entries]


def busy_workers() -> List[int]:
    """The processes running our task now (Ray names a worker after the task it runs)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                title = (entry / "cmdline").read_bytes().split(b"\0")[0]
            except OSError:
                continue
            if title == b"ray::synthesize":
                found.append(int(entry.name))
    return found


@pytest.mark.cluster
def test_a_worker_killed_mid_run_costs_nothing(ray_address, local_run, tmp_path) -> None:
    out = tmp_path / "out"
    source = write_input(tmp_path / "in", [json.dumps(line) for line in MANY])
    command = [sys.executable, "-m", "core.cli", "batch", str(source), "--out", str(out), "--model", str(TINY_CONFIG)]
    job = subprocess.Popen(
        command + ["--voice", str(VOICE_24K), "--ray", ray_address], cwd=ROOT, stderr=subprocess.PIPE, text=True
    )
    killed = None
    while killed is None and job.poll() is None:
        for pid in busy_workers():
            try:
                os.kill(pid, signal.SIGSTOP)  # frozen: if it is still on a line, it is killed on it
            except ProcessLookupError:
                continue
            if pid in busy_workers():
                os.kill(pid, signal.SIGKILL)
                killed = pid
                break
            os.kill(pid, signal.SIGCONT)
        time.sleep(0.005)
    _, stderr = job.communicate(timeout=600)
    assert killed is not None, "the job ended before a worker could be caught on a line"
    assert job.returncode == 0, stderr
    entries = manifest(out)
    assert [e["id"] for e in entries] == [line["id"] for line in MANY] and all(e["error"] is None for e in entries)
    for line in MANY:
        assert same_wav(out / f"{line['id']}.wav", local_run / f"{line['id']}.wav"), line["id"]
    assert sorted(p.name for p in out.iterdir()) == sorted(["manifest.jsonl"] + [f"{x['id']}.wav" for x in MANY])
