"""Batch synthesis: a JSONL file of texts to one WAV file each, and a manifest.

    python -m core.cli batch lines.jsonl --out audio/               # worker processes on this machine
    python -m core.cli batch lines.jsonl --out audio/ --ray auto    # Ray tasks on a cluster

Each line of the input is a JSON object: "id" (letters, digits, ".", "_", "-"; the file's name;
default: "line-N", N its line number),
"text", optionally "voice" (a predefined voice, an audio file or a .safetensors voice state; a
relative path is relative to the input file's folder; default: --voice, else the model's) and any
generation option by name ("temperature": 0, "seed": 7, ...). Each line becomes OUT/ID.wav, and
OUT/manifest.jsonl has one entry per line, in input order: line (its number), id, file,
duration_s, voice, options (the seed included), error (null when it worked), a fingerprint, and
the digest of the ID.wav (and words_digest, of the ID.words.json) this job wrote.

- A request's bounds: a line's text has at most MAX_TEXT characters, a server request's (more is
  its error; `max_text`, the command's --max-text, raises it), and the input is read a line at a
  time, each read bounded by what a line within that limit can hold (`line_limit`): a longer line
  is its error, read in pieces and dropped, never held whole. Lines are planned as they are read,
  each handed to a worker when one is free, so the first is made while the rest are still unread,
  and memory grows only by a manifest entry per line, not with the texts.
- Resumable: a line whose WAV file is the one this job wrote (its digest in the manifest) for the
  same model, text, voice and options (the manifest keeps a fingerprint) is not made again. Files
  are written to a temporary name and renamed, and the manifest grows as lines finish, so an
  interrupted job leaves no partial file and loses only the lines in progress.
- Files: a line's files replace only what this job wrote there (core.files.write_own, by the digest
  in the manifest): anything else by that name (the user's file, a link, a FIFO) is that line's
  error, left as it is and never opened. A folder whose manifest.jsonl is not a batch manifest
  is refused before any work; a link in its place is replaced, what it points to never read.
- A bad line (not UTF-8, not JSON, no text or too long a text, a bad id or one used twice, an
  unknown option or voice, an option outside a request's ranges:
  core.portable.synthesis.options.REQUEST_RANGES) is an error in the manifest and on stderr (its line number
  and id), not the end of the job; the command then exits 1. A line makes at most a request's
  audio (REQUEST_SECONDS, counted after the speed change: core.portable.synthesis.budget); a max_frames or
  pauses asking for more are its error.
- One job per output folder: a second one on a folder in use stops at once with an error.
- Stopped (SIGTERM, SIGINT: `stopped_by_signals`), a job kills its worker processes and ends; a
  line that finished is in the manifest, so a rerun makes only the others. On Linux a worker also
  dies with the job however the job dies (SIGKILL included).
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
import errno
import hashlib
import itertools
import json
import os
import re
import signal
import stat
import sys
import time
from contextlib import closing, contextmanager
from typing import Any, BinaryIO, Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple, Union

from .files import (
    NO_LINK,
    appending,
    digest,
    is_own,
    only_writer,
    remove_own,
    write_atomically,
    write_own,
)
from .portable.audio.pcm import wav_bytes
from .portable.errors import PocketTTSError
from .portable.synthesis.options import MAX_TEXT, REQUEST_SECONDS, GenerationOptions
from .portable.text import lexicon
from .portable.text.prepare import check_text
from .portable.weights import adapter as lora
from .portable.weights import catalog
from .subtitles import words_json

MANIFEST = "manifest.jsonl"
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}\Z")
# Ray runs a task again on another worker when its worker process dies, up to this many times.
RAY_RETRIES = 3
# Bytes of a line beside its text's: the id, a voice's path, the options, the spacing.
LINE_ROOM = 64 * 1024
# Bytes a character of the text may take in a line: JSON escapes one beyond the BMP as a pair of
# \uXXXX (an emoji: 12 bytes; as UTF-8, 4).
ESCAPED_CHARACTER = 12
# What ends a job cleanly (`stopped_by_signals`).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# The keys every entry of a batch manifest has.
_ENTRY_KEYS = frozenset(("line", "id", "file", "error", "fingerprint"))


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


def line_limit(max_text: int) -> int:
    """Bytes of the longest line that a text of `max_text` characters fits in."""
    return LINE_ROOM + ESCAPED_CHARACTER * max_text


def numbered_lines(f: BinaryIO, limit: int) -> Iterator[Tuple[int, Optional[bytes]]]:
    """Each line of `f` with its number (from 1), None in place of one longer than `limit` bytes:
    that one is read in pieces of `limit` bytes at most and dropped, so none is ever held whole."""
    for number in itertools.count(1):
        data = f.readline(limit + 1)
        if not data:
            return
        if len(data) <= limit or data.endswith(b"\n"):
            yield number, data
            continue
        while data and not data.endswith(b"\n"):
            data = f.readline(limit + 1)
        yield number, None


def _blank(data: bytes) -> bool:
    try:
        return not data.decode("utf-8").strip()
    except UnicodeDecodeError:
        return False


def count_lines(path: str, limit: int) -> int:
    """The lines of the input a job counts (all but the blank ones), read as the job reads them."""
    with open(path, "rb") as f:
        return sum(1 for _, data in numbered_lines(f, limit) if data is None or not _blank(data))


def read_lines(
    f: BinaryIO, folder: str, model: str, voice: Optional[str], max_text: int
) -> Iterator[Union[Line, Dict[str, Any]]]:
    """The lines of the input file `f` (in `folder`), as they are read: a Line for each valid one,
    a manifest entry for each invalid one (one longer than `line_limit` included, never held
    whole); `voice` is the voice of the lines that name none (None: without one, such a line is
    invalid); a text may have `max_text` characters."""
    limit = line_limit(max_text)
    seen = set()
    for number, data in numbered_lines(f, limit):
        if data is None:
            too_long = f"the line is longer than {limit} bytes, more than a text of {max_text} characters needs"
            yield _entry(number, None, None, {}, f"{too_long}: not read (--max-text raises the limit)")
            continue
        try:
            raw = data.decode("utf-8")
        except UnicodeDecodeError as e:
            yield _entry(number, None, None, {}, f"not UTF-8 text ({e.reason} at byte {e.start})")
            continue
        if not raw.strip():
            continue
        try:
            line = _parse(number, raw, folder, model, voice, max_text)
        except PocketTTSError as e:
            yield _entry(number, _id_of(raw), None, {}, str(e))
            continue
        if line.id in seen:
            yield _entry(number, line.id, line.voice, line.options, f"id {line.id!r} used twice")
            continue
        seen.add(line.id)
        yield line


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


def _parse(number: int, raw: str, folder: str, model: str, default_voice: Optional[str], max_text: int) -> Line:
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
    if len(text) > max_text:
        raise PocketTTSError(f"text is longer than {max_text} characters (--max-text raises the limit)")
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
    voice: Optional[str],
    options: Dict[str, Any],
    error: Optional[str],
    fingerprint: Optional[str] = None,
    duration_s: Optional[float] = None,
    digests: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """A line's manifest entry; `digests`: those of the files of its name this job wrote (its
    `digest` and `words_digest`), kept while they are there, whatever became of the line."""
    return {
        "line": number,
        "id": line_id,
        "file": f"{line_id}.wav" if error is None else None,
        "duration_s": round(duration_s, 3) if error is None and duration_s is not None else None,
        "voice": voice,
        "options": options,
        "error": error,
        "fingerprint": fingerprint,
        "digest": (digests or {}).get("digest"),
        "words_digest": (digests or {}).get("words_digest"),
    }


def _is_entry(value: Any) -> bool:
    return isinstance(value, dict) and _ENTRY_KEYS <= set(value)


def _previous(path: str, limit: int) -> Dict[str, Dict[str, Any]]:
    """The entries of earlier runs' valid lines in the manifest at `path`, the latest per id (a
    damaged line is skipped). Nothing where there is no manifest, or a link in its place (replaced by
    a new file, what it points to never read); a PocketTTSError, before any work, where it is
    anything but a batch manifest (a FIFO, a folder, a file whose first line is not an entry of
    ours), which is left as it is."""
    refused = f"{path} is not a batch manifest: not replaced; choose another --out folder, or move it away"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | NO_LINK)
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ELOOP):
            return {}
        raise PocketTTSError(f"{refused} ({e.strerror or e})") from None
    entries: Dict[str, Dict[str, Any]] = {}
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise PocketTTSError(refused)
        first = True
        for _, data in numbered_lines(f, limit):
            if data is not None and _blank(data):
                continue
            try:
                entry = None if data is None else _json(data.decode("utf-8"))
            except (UnicodeDecodeError, PocketTTSError):
                entry = None
            if first and not _is_entry(entry):
                raise PocketTTSError(refused)
            first = False
            if _is_entry(entry) and isinstance(entry["id"], str) and entry["fingerprint"]:
                entries[entry["id"]] = entry
    return entries


def words_file(line_id: str) -> str:
    return f"{line_id}.words.json"


# The worker side: a model per worker process, loaded by its first line.
_workers: Dict[str, Any] = {}


class ModelSource(NamedTuple):
    """What a worker loads: the model (a catalog name or a path) and the LoRA adapter merged into it."""

    model: str
    adapter: Optional[str] = None
    pronunciations: Optional[str] = None  # a pronunciation file the model reads its texts with


def synthesize(model_source: ModelSource, line: Line, words: bool = False) -> Outcome:
    """One line, in a worker process (of the pool, or a Ray task); with `words`, its word times too."""
    from . import host, threads
    from .portable.model import TTSModel, one_thread
    from .portable.voice_registry import VoiceRegistry

    try:
        if _workers.get("source") != model_source:
            threads.one_blas_thread_for_good()
            runtime = dataclasses.replace(host.runtime(), runner=one_thread)  # a worker per core already
            _workers.clear()
            model = TTSModel.load(model_source.model, runtime=runtime, adapter=model_source.adapter)
            if model_source.pronunciations is not None:
                model.pronounce(model_source.pronunciations)
            _workers.update(source=model_source, model=model)
        model = _workers["model"]
        if "voices" not in _workers:
            _workers["voices"] = VoiceRegistry(model, default=line.voice)
        voices = _workers["voices"]
        options = GenerationOptions.of(line.options)
        voice = voices.source(line.voice)
        if words:
            pcm, timed = model.generate(line.text, voice, options, words=True, max_seconds=REQUEST_SECONDS)
        else:
            pcm, timed = model.generate(line.text, voice, options, max_seconds=REQUEST_SECONDS), None
    except PocketTTSError as e:
        return Outcome(line.id, None, 0.0, str(e))
    timing = words_json(timed) if timed is not None else None
    return Outcome(line.id, wav_bytes(pcm, model.sample_rate), pcm.shape[0] / model.sample_rate, None, timing)


class Stopped(BaseException):
    """The job was asked to stop (`signum`: SIGTERM, SIGINT): raised in the main thread, where it
    ends the job as Ctrl-C would, every `finally` run on its way (the workers killed, no temporary
    file left)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@dataclasses.dataclass
class _Hold:
    """What must be done whole (`_held`): how deep in it the job is, and a stop that came meanwhile,
    which waits for its end."""

    depth: int = 0
    stop: Optional[int] = None


_hold = _Hold()


def _stop(signum: int, frame: object) -> None:
    if _hold.depth:
        _hold.stop = signum
        return
    raise Stopped(signum)


@contextmanager
def stopped_by_signals() -> Iterator[None]:
    """SIGTERM and SIGINT, within, stop the job (`Stopped`); one that comes while something is done
    whole (a line's files and entry written, a worker started and recorded) stops it once that is
    done. Only for the main thread (signals' own rule)."""
    before = {number: signal.signal(number, _stop) for number in STOP_SIGNALS}
    try:
        yield
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)


@contextmanager
def _held() -> Iterator[None]:
    _hold.depth += 1
    try:
        yield
    finally:
        _hold.depth -= 1
    if not _hold.depth and _hold.stop is not None:
        stop, _hold.stop = _hold.stop, None
        raise Stopped(stop)


def _serve(connection: Any, parent: int) -> None:
    """A worker process: (model source, line, words) in, the line's Outcome out, one at a time,
    until the job closes its end. Ctrl-C is for the job, which ends its workers itself; on Linux
    the worker is killed when the job dies, however it dies (SIGKILL, the OOM killer)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        _die_with(parent)
    while True:
        try:
            model_source, line, words = connection.recv()
        except EOFError:
            return
        try:
            outcome = synthesize(model_source, line, words)
        except Exception as e:  # a failure of ours: this line's error, not the worker's end
            outcome = Outcome(line.id, None, 0.0, f"{type(e).__name__}: {e}")
        connection.send(outcome)


def _die_with(parent: int) -> None:
    """This process killed (SIGKILL) when its parent, the job, dies (Linux's PR_SET_PDEATHSIG)."""
    import ctypes

    pr_set_pdeathsig = 1
    try:
        ctypes.CDLL(None).prctl(pr_set_pdeathsig, int(signal.SIGKILL))
    except (OSError, AttributeError):  # a libc without prctl: the job's own ending is all there is
        return
    if os.getppid() != parent:  # the job died before the worker asked to die with it
        os._exit(1)


def _nonempty(lines: Iterable[Line]) -> Optional[Iterator[Line]]:
    """The lines, or None where there are none (read up to the first: workers start only for one)."""
    queue = iter(lines)
    first = next(queue, None)
    return None if first is None else itertools.chain([first], queue)


def local_outcomes(
    model_source: ModelSource, lines: Iterable[Line], workers: int, words: bool = False
) -> Iterator[Outcome]:
    """The lines on worker processes on this machine, as they finish: each worker has one line at a
    time, and the next line is read when a worker is free. A worker that dies costs its line (its
    error), and the next line gets a new one. Closed before the end (an error, or the job stopped),
    it kills its workers: none goes on with a line. Each worker has a pipe of its own, which its
    death closes: a result cut short is an end of file, where a pool's shared queue would wait on
    it for good."""
    import multiprocessing
    from multiprocessing.connection import wait

    queue = _nonempty(lines)
    if queue is None:
        return
    context = multiprocessing.get_context("spawn")
    processes: Dict[Any, Any] = {}  # every live worker's process, by its connection
    free: List[Any] = []  # the connections of idle workers
    running: Dict[Any, Line] = {}  # busy workers' lines, by connection

    def hand(line: Line) -> None:
        if not free:
            connection, theirs = context.Pipe()
            process = context.Process(target=_serve, args=(theirs, os.getpid()), daemon=True)
            with _held():  # a worker started is a worker known, to be killed if it comes to that
                process.start()
                processes[connection] = process
            theirs.close()  # the worker's alone: its death is an end of file here
            free.append(connection)
        connection = free.pop()
        running[connection] = line
        try:
            connection.send((model_source, line, words))
        except OSError:  # it died idle: its pipe says so to `wait`, and the line is its error
            pass

    try:
        while True:
            while len(running) < workers:
                line = next(queue, None)
                if line is None:
                    break
                hand(line)
            if not running:
                return
            connection = wait(list(running))[0]
            try:
                outcome = connection.recv()
            except (EOFError, OSError):
                line = running.pop(connection)
                processes.pop(connection).join()
                connection.close()
                outcome = Outcome(line.id, None, 0.0, "its worker process died (run the job again to resume)")
            else:
                del running[connection]
                free.append(connection)
            yield outcome
    except BaseException:
        for process in processes.values():
            process.kill()
        raise
    finally:
        for connection, process in processes.items():
            connection.close()  # an idle worker's end of file: it returns
            process.join()


def ray_outcomes(
    model_source: ModelSource, lines: Iterable[Line], address: str, words: bool = False
) -> Iterator[Outcome]:
    """The lines as Ray tasks on the cluster at `address`, as they finish; this package travels with
    them, so the cluster's nodes need NumPy (and, for catalog models, huggingface_hub) only."""
    queue = _nonempty(lines)
    if queue is None:
        return
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


class _Job:
    """What a run knows as it goes: the earlier runs' entries, the manifest's entries of this one,
    the lines in the workers' hands, the counts and the progress bar."""

    def __init__(self, out: str, previous: Dict[str, Dict[str, Any]], words: bool, bar: Any):
        self.out = out
        self.previous = previous
        self.words = words
        self.bar = bar
        self.entries: Dict[int, Dict[str, Any]] = {}
        self.making: Dict[str, Line] = {}
        self.summary = Summary(0, 0, 0, 0, 0.0, 0.0)

    def to_make(self, read: Iterable[Union[Line, Dict[str, Any]]]) -> Iterator[Line]:
        """The lines to make, as they are read; the others are recorded on the way: an invalid line,
        one made before, one whose file of its name is not this job's."""
        for item in read:
            if isinstance(item, dict):
                self._failed(item)
                continue
            entry = self.previous.get(item.id, {})
            if self._done(item, entry):
                self.entries[item.number] = dict(entry, line=item.number)
                self.summary.skipped += 1
                self._count()
                continue
            problem = self._not_ours(item.id, entry)
            if problem is not None:
                self._failed(
                    _entry(item.number, item.id, item.voice, item.options, problem, item.fingerprint, None, entry)
                )
                continue
            self.making[item.id] = item
            yield item

    def _done(self, line: Line, entry: Dict[str, Any]) -> bool:
        return (
            entry.get("error") is None
            and entry.get("fingerprint") == line.fingerprint
            and is_own(os.path.join(self.out, f"{line.id}.wav"), entry.get("digest"))
            and (not self.words or is_own(os.path.join(self.out, words_file(line.id)), entry.get("words_digest")))
        )

    def _not_ours(self, line_id: str, entry: Dict[str, Any]) -> Optional[str]:
        """Why the line cannot be made (a file of its name that this job did not write), or None."""
        files = [(f"{line_id}.wav", "digest")] + ([(words_file(line_id), "words_digest")] if self.words else [])
        for name, key in files:
            path = os.path.join(self.out, name)
            if os.path.lexists(path) and not is_own(path, entry.get(key)):
                return f"{path} is there and was not made by this job: not replaced (move it away to have it made)"
        return None

    def finished(self, outcome: Outcome, manifest: BinaryIO) -> None:
        """A line's outcome: its files written, its entry added to the manifest, as one (`_held`)."""
        line = self.making.pop(outcome.id)
        before = self.previous.get(line.id, {})
        digests = {key: before.get(key) for key in ("digest", "words_digest")}
        error = outcome.error
        with _held():
            if outcome.wav is not None:
                error = self._write(line.id, outcome, digests)
            entry = _entry(
                line.number, line.id, line.voice, line.options, error, line.fingerprint, outcome.duration_s, digests
            )
            manifest.write((json.dumps(entry) + "\n").encode("utf-8"))
            manifest.flush()
        self.entries[line.number] = entry
        if error is None:
            self.summary.made += 1
            self.summary.audio_s += outcome.duration_s
            self._count()
        else:
            self._failed(entry)

    def _write(self, line_id: str, outcome: Outcome, digests: Dict[str, Optional[str]]) -> Optional[str]:
        """The line's files, each over only what this job wrote there; `digests` then records
        what it did write. The line's error, or None."""
        wav = os.path.join(self.out, f"{line_id}.wav")
        words = os.path.join(self.out, words_file(line_id))
        try:
            write_own(wav, outcome.wav, digests["digest"])
            digests["digest"] = digest(outcome.wav)
            if outcome.words is not None:
                write_own(words, outcome.words, digests["words_digest"])
                digests["words_digest"] = digest(outcome.words)
            elif remove_own(words, digests["words_digest"]):  # an earlier audio's words: not this one's
                digests["words_digest"] = None
        except PocketTTSError as e:
            return str(e)
        return None

    def _failed(self, entry: Dict[str, Any]) -> None:
        self.entries[entry["line"]] = entry
        self.summary.failed += 1
        _tell(entry)
        self._count()

    def _count(self) -> None:
        self.bar.set_postfix_str(f"{self.summary.audio_s:.0f} s of audio, {self.summary.failed} failed", refresh=False)
        self.bar.update(1)


def run(
    input_path: str,
    out: str,
    model: str,
    voice: Optional[str] = None,
    workers: Optional[int] = None,
    ray_address: Optional[str] = None,
    progress: bool = True,
    words: bool = False,
    max_text: int = MAX_TEXT,
    adapter: Optional[str] = None,
    pronunciations: Optional[str] = None,
) -> Summary:
    """Make every line of `input_path` not yet made in `out`; see the module's docstring. With
    `words`, each line's word times too, in OUT/ID.words.json (a line made without is made again);
    a line's text may have `max_text` characters; `adapter`: a LoRA adapter merged into the model;
    `pronunciations`: a pronunciation file its texts are read with."""
    from tqdm import tqdm

    start = time.perf_counter()
    if not os.path.isfile(input_path):
        raise PocketTTSError(f"input file not found: {input_path}")
    if os.path.exists(out) and not os.path.isdir(out):
        raise PocketTTSError(f"--out must be a folder: {out} is a file")
    if max_text < 1:
        raise PocketTTSError(f"--max-text must be at least 1, got {max_text}")
    if not catalog.is_model(model) and os.path.exists(model):
        model = os.path.abspath(model)  # the workers may run elsewhere than here
    from .portable.weights.sources import resolve

    files = resolve(model)  # a model that cannot load is one error now, not one per line
    if adapter is not None:
        adapter = os.path.abspath(adapter)
        lora.read(adapter)  # so is an adapter that cannot
    if pronunciations is not None:
        pronunciations = os.path.abspath(pronunciations)
        lexicon.read(pronunciations)
    if voice is not None and os.path.exists(voice):
        voice = os.path.abspath(voice)
    voice = voice if voice is not None else files.default_voice
    limit = line_limit(max_text)
    os.makedirs(out, exist_ok=True)
    manifest_path = os.path.join(out, MANIFEST)
    with only_writer(out):  # a second job on the same folder would make every line again
        previous = _previous(manifest_path, limit)
        total = count_lines(input_path, limit)
        with open(input_path, "rb") as f, appending(manifest_path) as manifest, tqdm(
            total=total, unit="line", desc="synthesizing", disable=not progress, file=sys.stderr
        ) as bar:
            job = _Job(out, previous, words, bar)
            folder = os.path.dirname(os.path.abspath(input_path))
            to_make = job.to_make(read_lines(f, folder, model, voice, max_text))
            source = ModelSource(model, adapter, pronunciations)
            if ray_address is not None:
                outcomes = ray_outcomes(source, to_make, ray_address, words)
            else:
                outcomes = local_outcomes(source, to_make, max(1, min(workers or os.cpu_count() or 1, total)), words)
            with closing(outcomes):
                for outcome in outcomes:
                    job.finished(outcome, manifest)
        text = "".join(json.dumps(job.entries[number]) + "\n" for number in sorted(job.entries))
        write_atomically(manifest_path, text.encode("utf-8"))
    summary = job.summary
    summary.lines = summary.skipped + summary.made + summary.failed
    summary.seconds = time.perf_counter() - start
    return summary


def _tell(entry: Dict[str, Any]) -> None:
    """A failed line, on stderr (beside the progress bar): its number, id and error."""
    from tqdm import tqdm

    which = f" ({entry['id']})" if entry.get("id") else ""
    tqdm.write(f"line {entry['line']}{which}: {entry['error']}", file=sys.stderr)
