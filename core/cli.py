"""Command line: `python -m core.cli generate --text "Hello" -o hello.wav`, and friends.

    generate      speak a text to a WAV file, a WAV on stdout (-o -), or raw PCM as it is made (--stream)
    export-voice  save a voice (audio file or name) as an official .safetensors voice state
    export        write a model bundle (int8 weights, config, tokenizer, voices) for offline/browser use
    normalize     print a text as it will be spoken (numbers, dates, currency, ... read as words)
    batch         speak every line of a JSONL file (worker processes, or a Ray cluster), resumable
    models        list the catalog models: language, parameters, word times, what is cached (*)
    voices        list a model's predefined voices: the language each was recorded in, cached (*)

Every user error (missing file, empty text, unknown voice or model, unreadable audio, no network) is
one line on stderr and exit status 1; files are written atomically, so an error or Ctrl-C never
leaves a half-written output.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import stat
import sys
import time
from typing import IO, Callable, Dict, Iterable, Iterator, List, Optional, Union

import numpy as np

from . import __version__, audio_formats, host, hub, native
from .extras import install_hint
from .files import check_folder, check_replaceable, check_writable, write_atomically, write_new
from .portable.errors import PocketTTSError
from .portable.model import TTSModel
from .portable.synthesis.options import MAX_TEXT, GenerationOptions
from .portable.synthesis.options import names as option_names
from .portable.synthesis.timestamps import TimedWord, timed_words
from .portable.text import lexicon, normalize
from .portable.text.prepare import check_text, normalized
from .portable.voices import sources as voices
from .portable.weights import catalog, sources
from .subtitles import cues, subtitle_format, subtitles, words_json

# The commands of `pocket-tts-numpy` that live above core (the server's serve and mcp, the site's
# build-site): entry points of this group (pyproject.toml), each a function (argv, prog) -> exit
# status whose docstring's first line is its help. Found in the installed package's metadata, so
# that core imports none of them.
COMMANDS = "pocket_tts_numpy.commands"
# generate's file where -o names none: made new (core.files.write_new), tts_output-2.wav where it is taken.
DEFAULT_OUTPUT = "tts_output.wav"
PROG = "pocket-tts-numpy"
Handed = Dict[str, Callable[[List[str], str], int]]


class _Timed:
    """Wraps a chunk stream to measure the time to the first chunk and the total."""

    def __init__(self, chunks: Iterable[np.ndarray]):
        self.chunks = chunks
        self.start = time.perf_counter()
        self.first: Optional[float] = None
        self.samples = 0
        self.done = False  # all the chunks were given out

    def __iter__(self) -> Iterator[np.ndarray]:
        for chunk in self.chunks:
            if self.first is None:
                self.first = time.perf_counter() - self.start
            self.samples += chunk.shape[0]
            yield chunk
        self.done = True

    def report(self, sample_rate: int, target: str) -> str:
        elapsed = time.perf_counter() - self.start
        seconds = self.samples / sample_rate
        return (
            f"{target}: {seconds:.2f} s of audio, first chunk after {1000 * (self.first or 0.0):.0f} ms, "
            f"real-time factor {elapsed / max(seconds, 1e-9):.2f} ({elapsed:.2f} s)"
        )


def _say(args: argparse.Namespace, message: str) -> None:
    if not args.quiet:
        print(message, file=sys.stderr)


def _load(args: argparse.Namespace) -> TTSModel:
    runtime = host.runtime()
    adapted = f" with the adapter {args.adapter}" if args.adapter else ""
    _say(args, f"loading {args.model}{adapted} (on {native.plainly(runtime.backend)})")
    model = TTSModel.load(args.model, runtime=runtime, adapter=args.adapter)
    if getattr(args, "pronunciations", None):
        model.pronounce(args.pronunciations)
    return model


def _mode(stream: Optional[IO]) -> int:
    """The file mode of what a standard stream is open on (0 where it is closed or none)."""
    try:
        return os.fstat(stream.fileno()).st_mode if stream is not None else 0
    except (OSError, ValueError):
        return 0


def _piped(stdin: Optional[IO]) -> bool:
    """Whether stdin is a pipe or a regular file (`echo Hi | generate`), not a terminal, a device
    such as /dev/null, or closed."""
    mode = _mode(stdin)
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode)


class _Piped:
    """The text on stdin as it arrives, in the pieces a pipe gives (an LLM's words, a `tail -f`),
    for TTSModel.stream to speak each sentence once it is complete, before stdin closes: UTF-8 (a
    PocketTTSError naming the bad byte), at most `max_text` characters in all, not all blank."""

    def __init__(self, max_text: int):
        self.max_text = _max_text(max_text)

    def __iter__(self) -> Iterator[str]:
        import codecs

        decoder = codecs.getincrementaldecoder("utf-8")()
        read, said, fd = 0, False, sys.stdin.fileno()
        while True:
            data = os.read(fd, 4096)
            try:
                piece = decoder.decode(data, final=not data)
            except UnicodeDecodeError as e:
                raise PocketTTSError(f"the text on stdin is not UTF-8: byte {e.object[e.start]:#04x}") from None
            read += len(piece)
            if read > self.max_text:
                raise _too_long(self.max_text)
            said = said or bool(piece.strip())
            if piece:
                yield piece
            if not data:
                break
        if not said:
            check_text("")


def _max_text(max_text: int) -> int:
    if max_text < 1:
        raise PocketTTSError(f"--max-text must be at least 1, got {max_text}")
    return max_text


def _too_long(max_text: int) -> PocketTTSError:
    return PocketTTSError(f"the text is longer than {max_text} characters (--max-text raises the limit)")


def _text(value: str, max_text: int) -> str:
    """--text: the text itself, or - for stdin; UTF-8 either way (a PocketTTSError naming the bad
    byte), of at most `max_text` characters (stdin read no further than such a text can be)."""
    too_long = _too_long(_max_text(max_text))
    if value == "-":
        data = sys.stdin.buffer.read(4 * max_text + 1)  # UTF-8: at most 4 bytes a character
        if len(data) > 4 * max_text:
            raise too_long
        try:
            value = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise PocketTTSError(f"the text on stdin is not UTF-8: byte {data[e.start]:#04x} at {e.start}") from None
    else:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:  # bytes the locale could not decode arrive as lone surrogates
            bad = value[e.start].encode("utf-8", "surrogateescape")
            raise PocketTTSError(f"--text is not UTF-8: byte {bad[0]:#04x} at character {e.start}") from None
    if len(value) > max_text:
        raise too_long
    return value


def _generate(args: argparse.Namespace) -> None:
    if args.text is not None and args.text_option is not None:
        raise PocketTTSError("generate takes one text: as its argument, or as --text (- reads stdin)")
    given = args.text if args.text is not None else args.text_option
    if given is None and _piped(sys.stdin):
        _say(args, "reading the text from stdin: no text was given, and stdin is a pipe or a file")
        given = "-"
    text: Union[str, _Piped]
    if given is None:
        text = catalog.default_text(args.model if catalog.is_model(args.model) else None)
    elif given == "-":
        text = _Piped(args.max_text)
    else:
        text = check_text(_text(given, args.max_text))
    if args.play:
        audio_formats.speakers()
    if args.stream and args.format is not None and args.output is None:
        raise PocketTTSError(
            "--stream writes raw 16-bit PCM to stdout: --format names -o's format (for a stream of another "
            "format, use -o - --format FORMAT)"
        )
    output = args.output or (DEFAULT_OUTPUT if not (args.stream or args.play) else None)
    fmt = audio_formats.format_of(output, args.format)
    timed = [path for path in (args.words, args.subtitles) if path is not None]
    for path in [args.output] + timed:
        if path not in (None, "-"):
            check_writable(path)  # a missing folder, a folder named as the file: refused before any work
    if output == DEFAULT_OUTPUT and args.output is None:
        check_folder(os.getcwd(), f"cannot write {DEFAULT_OUTPUT}")
    if args.subtitles is not None:
        subtitle_format(args.subtitles)
    voices.check_before_loading(args.model, [args.voice] if args.voice is not None else [])
    model = _load(args)
    voice = model.voice_state(args.voice)
    options = {name: getattr(args, name) for name in option_names() if getattr(args, name) is not None}
    said = model.stream(text, voice, GenerationOptions.of(options), words=bool(timed))
    events: List[object] = []
    audio = _audio_of(said, events)
    chunks = _Timed(
        _progress(args, audio_formats.played(audio, model.sample_rate) if args.play else audio, model.sample_rate)
    )
    try:
        _write_audio(args, output, fmt, chunks, model.sample_rate)
    finally:
        if timed and chunks.done:
            _write_words(args, timed_words(events, model.sample_rate))


def _progress(args: argparse.Namespace, chunks: Iterator[np.ndarray], sample_rate: int) -> Iterator[np.ndarray]:
    """The chunks, counted in seconds of audio on a progress bar on stderr where it is a terminal
    (and neither --quiet nor a pipe)."""
    from tqdm import tqdm

    show = not args.quiet and sys.stderr.isatty()
    samples = 0
    shown = "{desc} in {elapsed}"
    with tqdm(desc="speaking: 0.0 s of audio", bar_format=shown, disable=not show, file=sys.stderr, leave=False) as bar:
        for chunk in chunks:
            samples += chunk.shape[0]
            bar.set_description_str(f"speaking: {samples / sample_rate:.1f} s of audio", refresh=False)
            bar.update(1)
            yield chunk


def _audio_of(items: Iterable[object], events: List[object]) -> Iterator[np.ndarray]:
    """The audio chunks of what a stream gives out; its word events go to `events`."""
    for item in items:
        if isinstance(item, np.ndarray):
            yield item
        else:
            events.append(item)


def _write_words(args: argparse.Namespace, words: List[TimedWord]) -> None:
    if args.words is not None:
        write_atomically(args.words, words_json(words))
        _say(args, f"wrote {args.words}: {_counted(len(words), 'word')}")
    if args.subtitles is not None:
        write_atomically(args.subtitles, subtitles(words, subtitle_format(args.subtitles)))
        _say(args, f"wrote {args.subtitles}: {_counted(len(cues(words)), 'cue')}")


def _flag_help(doc: str, on_by_default: bool) -> str:
    """A boolean option's help: its doc, or for the --no- flag of one that is on by default, what
    the flag does and then what is done by default (the docs read "on (false: off)")."""
    if not on_by_default:
        return doc
    on, off = doc.rsplit(" (false: ", 1)
    return f"{off.rstrip(')')} (by default: {on})"


def _counted(count: int, noun: str) -> str:
    """ "1 word", "2 words"."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _write_audio(args: argparse.Namespace, output: Optional[str], fmt: str, chunks: _Timed, sample_rate: int) -> None:
    """The audio to `output` in `fmt` at --sample-rate; to stdout as it is made where that is asked
    for (--stream: raw 16-bit PCM, or -o - in a format that streams)."""
    stdout = sys.stdout.buffer
    # A WAV is streamed with a header that cannot know its length: only to a pipe or a terminal. A
    # regular file gets the whole file, its true length in its header.
    to_stdout = args.output == "-"
    wav_streams = to_stdout and fmt == "wav" and not stat.S_ISREG(_mode(stdout))
    streamed = args.stream or (to_stdout and fmt in audio_formats.STREAMED) or wav_streams
    whole = None  # the file, encoded as the chunks come
    if output is not None and not (streamed and output == "-"):
        whole = audio_formats.WholeFile(fmt, sample_rate, args.sample_rate, args.loudness)
    if streamed:
        out = audio_formats.Output(fmt if args.output == "-" else "pcm", sample_rate, args.sample_rate)
        stdout.write(out.header())  # a WAV stream's: its length is not known yet
        for chunk in chunks:
            stdout.write(out.chunk(chunk))
            stdout.flush()
            if whole is not None:
                whole.add(chunk)
        stdout.write(out.end())
        stdout.flush()
    else:
        for chunk in chunks:
            if whole is not None:
                whole.add(chunk)
    if whole is not None:
        data = whole.end()
        if output == "-":
            stdout.write(data)
        elif args.output is None:  # a name of ours, not the user's: never in place of a file already there
            output = os.path.relpath(write_new(os.getcwd(), output, data))
        else:
            write_atomically(output, data)
    where = "stdout" if output in (None, "-") else output
    if output is None and not streamed:
        where, streamed = "the speakers", True
    _say(args, chunks.report(sample_rate, where if streamed else f"wrote {where}"))


def _normalize(args: argparse.Namespace) -> None:
    if (args.text is None) == (args.text_option is None):
        raise PocketTTSError("normalize takes one text: as its argument, or as --text (- reads stdin)")
    text = check_text(_text(args.text if args.text is not None else args.text_option, args.max_text))
    said = lexicon.read(args.pronunciations) if args.pronunciations else lexicon.EMPTY
    print(normalized(text, args.language or normalize.language_of(args.model), said))


def _export_voice(args: argparse.Namespace) -> None:
    from .export import export_voice

    if not args.out.endswith(".safetensors"):
        raise PocketTTSError(f"the voice state file must end in .safetensors: {args.out}")
    check_writable(args.out)
    voices.check_before_loading(args.model, [args.audio])
    model = _load(args)
    export_voice(model, args.audio, args.out)
    _say(args, f"wrote {args.out}")


def _export(args: argparse.Namespace) -> None:
    from .export import export

    check_replaceable(args.out)
    voices.check_before_loading(args.model, args.voice or [])
    _say(args, f"exporting {args.model} to {args.out}")
    report = export(
        args.model,
        args.out,
        args.voice or (),
        int8=not args.float32,
        voice_cloning=args.voice_cloning,
        int8_group=args.int8_group,
        adapter=args.adapter,
    )
    _say(
        args,
        f"wrote {report['bundle']}: weights {report['weights_bytes'] / 1e6:.1f} MB "
        f"(source {report['source_weights_bytes'] / 1e6:.1f} MB), {report['total_bytes'] / 1e6:.1f} MB in all, "
        f"voices: {', '.join(report['voices']) or 'none'}",
    )


def _batch(args: argparse.Namespace) -> Optional[int]:
    """The job; stopped by SIGTERM or SIGINT, it ends with 128 + the signal's number (143, 130), as a
    shell reports a command a signal killed, once its workers are gone."""
    import signal

    from .batch import MANIFEST, Stopped, run, stopped_by_signals

    workers = args.workers or os.cpu_count() or 1
    where = f"the Ray cluster at {args.ray}" if args.ray else f"{workers} worker process{'es' if workers > 1 else ''}"
    _say(args, f"synthesizing {args.input} with {args.model} on {where}")
    try:
        with stopped_by_signals():
            done = run(
                args.input,
                args.out,
                args.model,
                args.voice,
                args.workers,
                args.ray,
                not args.quiet,
                args.words,
                args.max_text,
                args.adapter,
                args.pronunciations,
            )
    except Stopped as e:
        print(
            f"stopped by {signal.Signals(e.signum).name}: the lines made are in the manifest, "
            "and running the job again makes the others",
            file=sys.stderr,
        )
        return 128 + e.signum
    _say(
        args,
        f"{done.lines} lines: {done.made} made, {done.skipped} already there, {done.failed} failed; "
        f"{done.audio_s:.1f} s of audio in {done.seconds:.1f} s ({done.audio_s / max(done.seconds, 1e-9):.2f} s of "
        f"audio per second); manifest: {os.path.join(args.out, MANIFEST)}",
    )
    if done.failed:
        raise PocketTTSError(f"{done.failed} of {done.lines} lines failed: their errors are above and in the manifest")


def _models(args: argparse.Namespace) -> None:
    """The catalog as a table: language, parameters, word times, and what of it is cached here; then
    the community checkpoints in the Hugging Face cache (a repo with a Pocket TTS config.yaml)."""
    from .portable import config as configs
    from .portable.weights import params

    default = catalog.default_model()
    timed = set(catalog.timed_models())
    rows = [("", "model", "language", "parameters", "word times", "on disk")]
    for name in catalog.model_names():
        cfg = catalog.config(name)
        count = params.parameter_count(cfg)
        paths = [hub.cached(p) for p in (cfg.weights_path, cfg.weights_path_without_voice_cloning) if p]
        size = sum(os.path.getsize(path) for path in paths if path)
        rows.append(
            (
                "*" if size else " ",
                name + (" (default)" if name == default else ""),
                normalize.language_of(name),
                f"{count / 1e6:.1f}M",
                "yes" if name in timed else "no",
                f"{size / 1e6:.0f} MB" if size else "not cached",
            )
        )
    for repo in hub.cached_repos():
        try:
            cfg = configs.load_yaml(repo.config)
        except PocketTTSError:  # another kind of model's config.yaml
            continue
        count = params.parameter_count(cfg)
        language = normalize.language_of(repo.url.split("/", 3)[-1])
        heads = "yes" if cfg.timestamp_heads is not None else "no"
        rows.append(("*", repo.url, language, f"{count / 1e6:.1f}M", heads, f"{repo.size / 1e6:.0f} MB"))
    _table(rows)


def _voices(args: argparse.Namespace) -> None:
    """A model's predefined voices: the language each was recorded in, and whether it is cached."""
    rows = [("", "voice", "recorded in")]
    if catalog.is_model(args.model):
        default = catalog.default_voice(args.model)
        for name in catalog.voice_names():
            mark = "*" if hub.cached(catalog.voice_url(args.model, name)) else " "
            rows.append((mark, name + (" (default)" if name == default else ""), catalog.voice_language(name)))
        _table(rows)
        return
    files = sources.resolve(args.model, hub.fetch)
    rows = [("", "voice")]  # a bundle's or a config's voices: recordings of any language
    for name in files.voices:
        rows.append(("*", name + (" (default)" if name == files.default_voice else "")))
    if not files.voices:
        print(f"{args.model} has no predefined voices: use an audio file or a .safetensors voice state")
        return
    _table(rows)


def _table(rows: List[tuple]) -> None:
    """Rows printed as columns, the first row their heading."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())


def handed_commands() -> Handed:
    """The commands of the parts above core (COMMANDS), by name; none where the package is not
    installed (a checkout on PYTHONPATH has no metadata)."""
    from importlib.metadata import entry_points

    found = entry_points()
    group = found.select(group=COMMANDS) if hasattr(found, "select") else found.get(COMMANDS, ())
    return {point.name: _hinting(point.load()) for point in group}


def _hinting(command: Callable[[List[str], str], int]) -> Callable[[List[str], str], int]:
    """`command`, with one line naming the extra to install where a wheel was installed without it
    (instead of a traceback)."""

    @functools.wraps(command)
    def hinted(argv: List[str], prog: str) -> int:
        try:
            return command(argv, prog)
        except ModuleNotFoundError as e:
            print(install_hint(e, prog), file=sys.stderr)
            return 1

    return hinted


def parser(prog: str = "python -m core.cli", handed: Optional[Handed] = None) -> argparse.ArgumentParser:
    """The command line's parser; with `handed` (handed_commands), those commands too, listed in the
    help (main hands `serve ...` to them before parsing). Its `commands` are the names it parses."""
    top = argparse.ArgumentParser(prog=prog, description="Pocket TTS in NumPy")
    top.add_argument("--version", action="version", version=f"pocket-tts-numpy {__version__}")
    commands = top.add_subparsers(dest="command", required=True)
    top.commands = commands.choices  # type: ignore[attr-defined]

    def command(name: str, run, help: str) -> argparse.ArgumentParser:  # noqa: A002, ANN001
        sub = commands.add_parser(name, help=help, description=help)
        sub.set_defaults(usage=sub)
        sub.set_defaults(run=run)
        sub.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
        return sub

    def model_option(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--model",
            default=catalog.default_model(),
            help="catalog name, config .yaml/.json, or bundle folder (default: %(default)s)",
        )

    def adapter_option(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--adapter",
            metavar="PATH",
            help="a LoRA fine-tune of the model (a PEFT folder or a .safetensors file), merged at load",
        )

    def pronunciations_option(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--pronunciations",
            metavar="FILE",
            help="words to say otherwise: a text file of `word = respelling` lines (Kyutai = kyoo tie)",
        )

    def max_text_option(sub: argparse.ArgumentParser, what: str) -> None:
        sub.add_argument(
            "--max-text",
            type=int,
            default=MAX_TEXT,
            metavar="N",
            help=f"characters {what} may have (default: %(default)s, as a server request's); more is refused",
        )

    gen = command("generate", _generate, "speak a text")
    gen.add_argument(
        "text",
        nargs="?",
        help="text to speak, or - to read stdin (default: stdin where it is a pipe or a file, else the model's "
        "sample text)",
    )
    gen.add_argument("--text", dest="text_option", metavar="TEXT", help="the same, as an option")
    gen.add_argument("--voice", help="predefined voice, audio file, or .safetensors voice state (default: the model's)")
    model_option(gen)
    adapter_option(gen)
    pronunciations_option(gen)
    max_text_option(gen, "the text")
    gen.add_argument(
        "-o",
        "--output",
        help="audio file (its extension says the format: .wav, .flac, .mp3, .ogg/.opus, .pcm, .ulaw, .alaw), or - "
        "for a WAV on stdout (default: tts_output.wav)",
    )
    gen.add_argument(
        "--format", choices=audio_formats.FILE_FORMATS, help="the output's format, whatever its name (default: from -o)"
    )
    gen.add_argument(
        "--sample-rate",
        type=int,
        choices=audio_formats.RATES,
        help="the output's sample rate, resampled with soxr (default: the model's, 24000)",
    )
    gen.add_argument(
        "--stream", action="store_true", help="write raw 16-bit little-endian mono PCM to stdout as it is generated"
    )
    gen.add_argument(
        "--play",
        action="store_true",
        help="play it on this machine's default output device as it is made (and write -o only where given)",
    )
    gen.add_argument(
        "--words",
        metavar="FILE.json",
        help='also write when each word is spoken: [{"word", "start", "end"}, ...] in seconds (models with '
        "timestamp heads)",
    )
    gen.add_argument(
        "--subtitles", metavar="FILE.srt|FILE.vtt", help="also write the words as subtitles (SRT or WebVTT)"
    )
    for field in dataclasses.fields(GenerationOptions):  # one flag per option, documented where they are defined
        flag = "--" + field.name.replace("_", "-")
        if "bool" in str(field.type):
            on_by_default = field.default is True
            gen.add_argument(
                "--no-" + field.name.replace("_", "-") if on_by_default else flag,
                dest=field.name,
                action="store_const",
                const=not on_by_default,
                help=_flag_help(field.metadata["doc"], on_by_default),
            )
            continue
        kind = float if "float" in str(field.type) else int
        gen.add_argument(flag, type=kind, help=field.metadata["doc"])

    no = command("normalize", _normalize, "print a text as it will be spoken (numbers, dates, ... as words)")
    no.add_argument("text", nargs="?", help="text to normalize, or - to read stdin")
    no.add_argument("--text", dest="text_option", metavar="TEXT", help="the same, as an option")
    no.add_argument(
        "--language",
        choices=normalize.LANGUAGES,
        help="language of the words (default: the language of --model)",
    )
    model_option(no)
    pronunciations_option(no)
    max_text_option(no, "the text")

    ev = command("export-voice", _export_voice, "save a voice as an official .safetensors voice state")
    ev.add_argument("audio", help="audio file (or predefined voice name)")
    ev.add_argument("out", help="output .safetensors file")
    model_option(ev)
    adapter_option(ev)

    ex = command("export", _export, "write a self-contained model bundle (int8 weights by default)")
    model_option(ex)
    adapter_option(ex)
    ex.add_argument("--out", required=True, help="bundle folder to write")
    ex.add_argument("--voice", action="append", help="voice to include (repeatable; default: the model's default)")
    ex.add_argument("--float32", action="store_true", help="keep float32 weights instead of int8")
    ex.add_argument(
        "--int8-group",
        type=int,
        help="int8 scale per this many values of a row (e.g. 64) instead of one per row",
    )
    ex.add_argument(
        "--no-voice-cloning",
        dest="voice_cloning",
        action="store_false",
        help="leave out the Mimi encoder (smaller; only bundled voices then)",
    )

    ba = command("batch", _batch, "speak every line of a JSONL file to a WAV file each, with a manifest")
    ba.add_argument("input", help='JSONL file: {"id", "text", "voice"?, options?} per line')
    ba.add_argument("--out", required=True, help="folder for ID.wav files and manifest.jsonl (a rerun resumes)")
    model_option(ba)
    adapter_option(ba)
    pronunciations_option(ba)
    ba.add_argument("--voice", help="voice of the lines that name none (default: the model's)")
    ba.add_argument("--workers", type=int, help="worker processes on this machine (default: one per core)")
    ba.add_argument("--ray", metavar="ADDRESS", help="run on a Ray cluster instead: its address, or auto")
    ba.add_argument(
        "--words", action="store_true", help="also write each line's word times to ID.words.json (as generate --words)"
    )
    max_text_option(ba, "a line's text")

    for name, run in (handed or {}).items():
        handed_on = commands.add_parser(name, help=(run.__doc__ or "").strip().splitlines()[0], add_help=False)
        handed_on.add_argument("arguments", nargs=argparse.REMAINDER, help=f"{name}'s options")
        handed_on.set_defaults(run=lambda args, run=run, name=name: run(args.arguments, f"{prog} {name}"), quiet=False)
    command("models", _models, "list the catalog models: language, size, word times, cached (*)")
    vo = command("voices", _voices, "list a model's predefined voices: the language of each, cached (*)")
    model_option(vo)
    return top


def main(argv: Optional[List[str]] = None, prog: str = "python -m core.cli") -> int:
    argv = sys.argv[1:] if argv is None else argv
    top = parser(prog)
    if not (argv[:1] and argv[0] in top.commands):  # type: ignore[attr-defined]
        handed = handed_commands()  # only then: reading the installed packages' metadata takes a while
        if argv[:1] and argv[0] in handed:  # before argparse, which would take their options for its own
            return handed[argv[0]](argv[1:], f"{prog} {argv[0]}")
        top = parser(prog, handed)
    args, unknown = top.parse_known_args(argv)
    if unknown:  # the command's own usage, not the list of every command
        getattr(args, "usage", top).error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.quiet:
        os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    try:
        status = args.run(args)
    except PocketTTSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, and keep Python from complaining at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except ModuleNotFoundError as e:
        print(install_hint(e, args.command), file=sys.stderr)
        return 1
    except OSError as e:
        print(f"error: {e.strerror or e}{': ' + str(e.filename) if e.filename else ''}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return status or 0


def command() -> int:
    """`pocket-tts-numpy`, the command pip installs."""
    return main(prog=PROG)


if __name__ == "__main__":
    sys.exit(main())
