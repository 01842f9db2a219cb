"""Batch synthesis (`python -m core.cli batch`): a WAV file per line equal to the model's own audio,
a manifest with every line's outcome, resuming, and the same job on a real local Ray cluster whose
worker process dies mid-run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import pytest

from core.portable.audio import wav_bytes
from core.portable.options import GenerationOptions
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


def test_a_rerun_makes_only_what_is_missing_changed_or_incomplete(tmp_path) -> None:
    lines = [{"id": f"line{i}", "text": f"Line number {i}.", "max_frames": 6} for i in range(6)]
    source = write_input(tmp_path / "in", [json.dumps(line) for line in lines])
    out = tmp_path / "out"
    assert batch(source, out, "--workers", "2").returncode == 0
    made = {p.name: p.stat().st_mtime_ns for p in out.glob("*.wav")}
    (out / "line0.wav").unlink()  # missing
    whole = (out / "line1.wav").read_bytes()
    (out / "line1.wav").write_bytes(whole[: len(whole) // 2])  # cut short (not by us: our writes are atomic)
    lines[2]["text"] = "A changed text."  # changed
    source = write_input(tmp_path / "in", [json.dumps(line) for line in lines])
    again = batch(source, out, "--workers", "2")
    assert again.returncode == 0 and "6 lines: 3 made, 3 already there, 0 failed" in again.stderr
    assert (out / "line1.wav").read_bytes() == whole
    for name in ("line3.wav", "line4.wav", "line5.wav"):
        assert (out / name).stat().st_mtime_ns == made[name]
    assert [e["id"] for e in manifest(out)] == [line["id"] for line in lines]
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize(
    "args, message",
    [
        (["missing.jsonl", "--out", "{tmp}/out"], "input file not found: missing.jsonl"),
        (["{input}", "--out", "{input}"], "--out must be a folder"),
        (["{input}", "--out", "{tmp}/out", "--model", "no-such-model"], "no-such-model"),
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
    assert manifest(out) == manifest(local_run)
    for line in MANY:
        assert same_wav(out / f"{line['id']}.wav", local_run / f"{line['id']}.wav"), line["id"]


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
