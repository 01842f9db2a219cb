"""Batch synthesis: a JSONL file of texts to one WAV file each, and a manifest.

    python -m core.cli batch lines.jsonl --out audio/               # worker processes on this machine
    python -m core.cli batch lines.jsonl --out audio/ --ray auto    # Ray tasks on a cluster

Each line of the input is a JSON object: "id" (letters, digits, ".", "_", "-"; the file's name;
default: "line-N", N its line number),
"text", optionally "voice" (a predefined voice, an audio file or a .safetensors voice state; a
relative path is relative to the input file's folder; default: --voice, else the model's) and any
generation option by name ("temperature": 0, "seed": 7, ...). Each line becomes OUT/ID.wav, and
OUT/manifest.jsonl has one entry per line, in input order: line (its number), id, file,
duration_s, voice, options (the seed included), error (null when it worked) and a fingerprint.

- Resumable: a line whose WAV file exists, is complete, and was made from the same model, text,
  voice and options (the manifest keeps a fingerprint) is not made again. Files are written to a
  temporary name and renamed, and the manifest grows as lines finish, so an interrupted job leaves
  no partial file and loses only the lines in progress.
- A bad line (not UTF-8, not JSON, no text, a bad id or one used twice, an unknown option or
  voice, an option outside a request's ranges: core.portable.options.REQUEST_RANGES) is an error in
  the manifest and on stderr (its line number and id), not the end of the job; the command then
  exits 1. A line makes at most a request's audio (REQUEST_SECONDS, counted after the speed
  change: core.portable.budget); a max_frames or pauses asking for more are its error.
- One job per output folder: a second one on a folder in use stops at once with an error.
- Reproducible: a line without a "seed" gets one from its id, so a rerun, a retried task or
  another machine makes the same audio.
- Word times (`--words`, models with timestamp heads): each line's also go to OUT/ID.words.json
  (`generate --words`' format); a line made without them is made again.
- Workers: processes on this machine (one per core, each NumPy on one thread), or Ray tasks
  (`--ray ADDRESS`, or `auto` for the cluster this machine belongs to), which Ray runs again on
  another worker when the one running it dies. Each worker loads the model once. The audio comes
  back to this process, which writes every file. On a cluster of several machines, voice files
  must be at the same path on every node.

This module is the command line's: the model code knows nothing of pools or Ray, which are imported
only by the runner asked for.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import struct
import sys
import time
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from .files import appending, only_writer, read_regular, write_atomically
from .portable import catalog
from .portable.audio import wav_bytes
from .portable.errors import PocketTTSError
from .portable.options import REQUEST_SECONDS, GenerationOptions
from .portable.text import check_text
from .subtitles import words_json

MANIFEST = "manifest.jsonl"
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}\Z")
# Ray runs a task again on another worker when its worker process dies, up to this many times.
RAY_RETRIES = 3


@dataclasses.dataclass(frozen=True)
class Line:
    """One line of work: what to say, with what voice and options (seed included)."""

    number: int  # in the input file
    id: str
    text: str
    voice: str
    options: Dict[str, Any]
    fingerprint: str


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What a worker made of a line: the WAV file's bytes, or the error."""

    id: str
    wav: Optional[bytes]
    duration_s: float
    error: Optional[str]
    words: Optional[bytes] = None  # its words file (words: the job's --words)


def read_lines(path: str, model: str, voice: Optional[str]) -> Tuple[List[Line], List[Dict[str, Any]]]:
    """The valid lines of the input, and a manifest entry for each invalid one; `voice` is the
    voice of the lines that name none (None: without one, such a line is invalid)."""
    folder = os.path.dirname(os.path.abspath(path))
    lines: List[Line] = []
    invalid: List[Dict[str, Any]] = []
    seen = set()
    with open(path, "rb") as f:
        for number, data in enumerate(f, 1):
            try:
                raw = data.decode("utf-8")
            except UnicodeDecodeError as e:
                invalid.append(_entry(number, None, None, None, {}, f"not UTF-8 text ({e.reason} at byte {e.start})"))
                continue
            if not raw.strip():
                continue
            try:
                line = _parse(number, raw, folder, model, voice)
            except PocketTTSError as e:
                invalid.append(_entry(number, _id_of(raw), None, None, {}, str(e)))
                continue
            if line.id in seen:
                invalid.append(_entry(number, line.id, None, line.voice, line.options, f"id {line.id!r} used twice"))
                continue
            seen.add(line.id)
            lines.append(line)
    return lines, invalid


def _json(raw: str) -> Any:
    """A JSON value, or a PocketTTSError (nesting too deep for the parser included)."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise PocketTTSError(f"not JSON ({e})") from None


def _id_of(raw: str) -> Optional[str]:
    try:
        value = _json(raw)
    except PocketTTSError:
        return None
    found = value.get("id") if isinstance(value, dict) else None
    return found if isinstance(found, str) else None


def _parse(number: int, raw: str, folder: str, model: str, default_voice: Optional[str]) -> Line:
    value = _json(raw)
    if not isinstance(value, dict):
        raise PocketTTSError("not a JSON object")
    fields = dict(value)
    line_id, text, voice = fields.pop("id", f"line-{number}"), fields.pop("text", None), fields.pop("voice", None)
    if not isinstance(line_id, str) or not ID_PATTERN.match(line_id):
        raise PocketTTSError(
            f"id must be 1-200 letters, digits, '.', '_' or '-', starting with a letter or digit, got {line_id!r}"
        )
    check_text(text)
    if voice is not None and not isinstance(voice, str):
        raise PocketTTSError(f"voice must be a string, got {voice!r}")
    if voice is None:
        if default_voice is None:
            raise PocketTTSError("no voice: the model has no default voice, so name one (or use --voice)")
        voice = default_voice
    elif not voice.startswith("hf://") and not os.path.isabs(voice):
        beside = os.path.join(folder, voice)
        if os.path.exists(beside):
            voice = beside
    if fields.get("seed") is None:
        fields["seed"] = int.from_bytes(hashlib.sha256(line_id.encode()).digest()[:4], "little") & 0x7FFFFFFF
    try:
        GenerationOptions.of(fields).check_request()
    except TypeError as e:
        raise PocketTTSError(str(e)) from None
    what = json.dumps({"model": model, "text": text, "voice": voice, "options": fields}, sort_keys=True)
    return Line(number, line_id, text, voice, fields, hashlib.sha256(what.encode()).hexdigest())


def _entry(
    number: int,
    line_id: Optional[str],
    duration_s: Optional[float],
    voice: Optional[str],
    options: Dict[str, Any],
    error: Optional[str],
    fingerprint: Optional[str] = None,
) -> Dict[str, Any]:
    return {
        "line": number,
        "id": line_id,
        "file": f"{line_id}.wav" if error is None else None,
        "duration_s": round(duration_s, 3) if error is None and duration_s is not None else None,
        "voice": voice,
        "options": options,
        "error": error,
        "fingerprint": fingerprint,
    }


def complete_wav(path: str) -> bool:
    """Whether a file is a whole 16-bit WAV as written here (its RIFF length is its size)."""
    try:
        with open(path, "rb") as f:
            head = f.read(12)
            size = os.fstat(f.fileno()).st_size
    except OSError:
        return False
    if len(head) < 12 or head[:4] != b"RIFF" or head[8:] != b"WAVE":
        return False
    return struct.unpack("<I", head[4:8])[0] + 8 == size


def _previous(out: str) -> Dict[str, Dict[str, Any]]:
    """The manifest entries of earlier runs' valid lines, the latest per id (a line cut short by a
    crash is skipped)."""
    entries: Dict[str, Dict[str, Any]] = {}
    for raw in (read_regular(os.path.join(out, MANIFEST)) or b"").splitlines():
        try:
            entry = _json(raw.decode("utf-8"))
        except (UnicodeDecodeError, PocketTTSError):
            continue
        if isinstance(entry, dict) and isinstance(entry.get("id"), str) and entry.get("fingerprint"):
            entries[entry["id"]] = entry
    return entries


def _done(out: str, line: Line, previous: Dict[str, Dict[str, Any]], words: bool) -> bool:
    entry = previous.get(line.id)
    return (
        entry is not None
        and entry.get("error") is None
        and entry.get("fingerprint") == line.fingerprint
        and complete_wav(os.path.join(out, f"{line.id}.wav"))
        and (not words or os.path.isfile(os.path.join(out, words_file(line.id))))
    )


def words_file(line_id: str) -> str:
    return f"{line_id}.words.json"


# The worker side: a model per worker process, loaded by its first line.
_workers: Dict[str, Any] = {}


def synthesize(model_source: str, line: Line, words: bool = False) -> Outcome:
    """One line, in a worker process (of the pool, or a Ray task); with `words`, its word times too."""
    from . import host, threads
    from .portable.model import TTSModel, one_thread
    from .portable.voice_registry import VoiceRegistry

    try:
        if _workers.get("source") != model_source:
            threads.one_blas_thread_for_good()
            runtime = dataclasses.replace(host.runtime(), runner=one_thread)  # a worker per core already
            _workers.clear()
            _workers.update(source=model_source, model=TTSModel.load(model_source, runtime=runtime))
        model = _workers["model"]
        if "voices" not in _workers:
            _workers["voices"] = VoiceRegistry(model, default=line.voice)
        voices = _workers["voices"]
        options = GenerationOptions.of(line.options)
        voice = voices.source(line.voice)
        if words:
            pcm, timed = model.generate_with_words(line.text, voice, options, max_seconds=REQUEST_SECONDS)
        else:
            pcm, timed = model.generate(line.text, voice, options, max_seconds=REQUEST_SECONDS), None
    except PocketTTSError as e:
        return Outcome(line.id, None, 0.0, str(e))
    timing = words_json(timed) if timed is not None else None
    return Outcome(line.id, wav_bytes(pcm, model.sample_rate), pcm.shape[0] / model.sample_rate, None, timing)


def local_outcomes(model_source: str, lines: List[Line], workers: int, words: bool = False) -> Iterator[Outcome]:
    """The lines on a pool of worker processes on this machine, as they finish."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
    futures = {pool.submit(synthesize, model_source, line, words): line for line in lines}
    try:
        for future in as_completed(futures):
            line_id = futures[future].id
            try:
                yield future.result()
            except BrokenProcessPool:
                yield Outcome(line_id, None, 0.0, "its worker process died (run the job again to resume)")
            except Exception as e:  # a failure of ours: this line's error, not the job's end
                yield Outcome(line_id, None, 0.0, f"{type(e).__name__}: {e}")
    finally:
        for future in futures:
            future.cancel()
        pool.shutdown(wait=True)


def ray_outcomes(model_source: str, lines: List[Line], address: str, words: bool = False) -> Iterator[Outcome]:
    """The lines as Ray tasks on the cluster at `address`, as they finish; this package travels with
    them, so the cluster's nodes need NumPy (and, for catalog models, huggingface_hub) only."""
    try:
        import ray
    except ImportError:
        raise PocketTTSError('--ray needs Ray: pip install "pocket-tts-numpy[cluster]"') from None
    try:
        ray.init(
            address=address,
            runtime_env={"py_modules": [os.path.dirname(os.path.abspath(__file__))]},
            log_to_driver=False,
            logging_level="error",
        )
    except (ConnectionError, ValueError, RuntimeError) as e:
        raise PocketTTSError(f"cannot reach the Ray cluster at {address!r}: {e}") from None
    try:
        task = ray.remote(num_cpus=1, max_retries=RAY_RETRIES)(synthesize)
        # Enough tasks queued to keep every CPU busy, few enough that results do not pile up.
        window = max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
        pending: Dict[Any, Line] = {}
        queue = iter(lines)
        while True:
            for line in queue:
                pending[task.remote(model_source, line, words)] = line
                if len(pending) >= window:
                    break
            if not pending:
                return
            ready, _ = ray.wait(list(pending), num_returns=1)
            line = pending.pop(ready[0])
            try:
                yield ray.get(ready[0])
            except ray.exceptions.RayError as e:
                yield Outcome(line.id, None, 0.0, f"Ray gave up on it: {type(e).__name__}")
    finally:
        ray.shutdown()


@dataclasses.dataclass
class Summary:
    lines: int
    skipped: int
    made: int
    failed: int
    audio_s: float
    seconds: float


def run(
    input_path: str,
    out: str,
    model: str,
    voice: Optional[str] = None,
    workers: Optional[int] = None,
    ray_address: Optional[str] = None,
    progress: bool = True,
    words: bool = False,
) -> Summary:
    """Make every line of `input_path` not yet made in `out`; see the module's docstring. With
    `words`, each line's word times too, in OUT/ID.words.json (a line made without is made again)."""
    start = time.perf_counter()
    if not os.path.isfile(input_path):
        raise PocketTTSError(f"input file not found: {input_path}")
    if os.path.exists(out) and not os.path.isdir(out):
        raise PocketTTSError(f"--out must be a folder: {out} is a file")
    if not catalog.is_model(model) and os.path.exists(model):
        model = os.path.abspath(model)  # the workers may run elsewhere than here
    from .portable.sources import resolve

    files = resolve(model)  # a model that cannot load is one error now, not one per line
    if voice is not None and os.path.exists(voice):
        voice = os.path.abspath(voice)
    lines, invalid = read_lines(input_path, model, voice if voice is not None else files.default_voice)
    os.makedirs(out, exist_ok=True)
    with only_writer(out):  # a second job on the same folder would make every line again
        previous = _previous(out)
        todo = [line for line in lines if not _done(out, line, previous, words)]
        entries = {e["line"]: e for e in invalid}
        waiting = {line.id for line in todo}
        for line in lines:
            if line.id not in waiting:
                entries[line.number] = dict(previous[line.id], line=line.number)
        summary = Summary(len(lines) + len(invalid), len(lines) - len(todo), 0, len(invalid), 0.0, 0.0)
        for entry in invalid:
            _tell(entry)
        if todo:
            if ray_address is not None:
                outcomes = ray_outcomes(model, todo, ray_address, words)
            else:
                outcomes = local_outcomes(model, todo, min(workers or os.cpu_count() or 1, len(todo)), words)
            by_id = {line.id: line for line in todo}
            with appending(os.path.join(out, MANIFEST)) as manifest:
                for outcome in _progress(outcomes, summary, progress):
                    line = by_id[outcome.id]
                    if outcome.wav is not None:
                        write_atomically(os.path.join(out, f"{line.id}.wav"), outcome.wav)
                        if outcome.words is not None:
                            write_atomically(os.path.join(out, words_file(line.id)), outcome.words)
                        summary.made += 1
                        summary.audio_s += outcome.duration_s
                    else:
                        summary.failed += 1
                    entry = _entry(
                        line.number,
                        line.id,
                        outcome.duration_s,
                        line.voice,
                        line.options,
                        outcome.error,
                        line.fingerprint,
                    )
                    entries[line.number] = entry
                    if outcome.error is not None:
                        _tell(entry)
                    manifest.write((json.dumps(entry) + "\n").encode("utf-8"))
                    manifest.flush()
        text = "".join(json.dumps(entries[number]) + "\n" for number in sorted(entries))
        write_atomically(os.path.join(out, MANIFEST), text.encode("utf-8"))
        summary.seconds = time.perf_counter() - start
        return summary


def _tell(entry: Dict[str, Any]) -> None:
    """A failed line, on stderr (beside the progress bar): its number, id and error."""
    from tqdm import tqdm

    which = f" ({entry['id']})" if entry.get("id") else ""
    tqdm.write(f"line {entry['line']}{which}: {entry['error']}", file=sys.stderr)


def _progress(outcomes: Iterable[Outcome], summary: Summary, show: bool) -> Iterator[Outcome]:
    """A progress bar over every line of the input (those already made and those that are invalid
    count from the start), with the rate, the time left and the audio made so far, on stderr."""
    from tqdm import tqdm

    done = summary.skipped + summary.failed
    with tqdm(
        total=summary.lines, initial=done, unit="line", desc="synthesizing", disable=not show, file=sys.stderr
    ) as bar:
        for outcome in outcomes:
            yield outcome  # the caller writes it and counts it in `summary`
            bar.set_postfix_str(f"{summary.audio_s:.0f} s of audio, {summary.failed} failed", refresh=False)
            bar.update(1)
