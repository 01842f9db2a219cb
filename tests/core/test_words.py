"""Word timestamps (core/portable/text/words.py, core/portable/synthesis/timestamps.py) against
`pocket-tts-timestamped` 1.4.0, and what the reference does not do by its own invariants.

Against the fork (build/reference/NAME/words.json, made by scripts/make_word_reference.py on the
parity fixtures' random weights: an english LSD config with its tokenizer.json, and english_2m
with its SentencePiece model; temperature 0, EOS off, normalization off; texts of several chunks
with punctuation, curly quotes, a dash and hyphenated words): the same tokens, units and
token-to-unit shares (exactly), the same score per unit at every frame (within 1e-6), the same
words and times (to the millisecond), every decision of the state machine away from float noise
(so that a flipped comparison cannot pass by luck), and the command line's `--words` file equal
to the fork's `generate_audio_with_timestamps`. Then, on the tiny model with heads: a text stream's
segments, pauses, speed and normalization.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Callable

import numpy as np
import pytest

from core import ConfigError, NoTimestampsError, TTSModel
from core.portable.synthesis import planning, timestamps
from core.portable.synthesis.decoding import WordTimer
from core.portable.synthesis.generation import Chunk, Frame, alone
from core.portable.synthesis.timestamps import WordEnd, WordStart
from core.portable.weights import catalog
from tests.support.models import timed_tiny
from tests.support.paths import ROOT, VOICE_24K

WORD_MODELS = ("english", "english_2m_2026-10")
OFF = {"temperature": 0.0, "eos_threshold": float("inf"), "normalize": False}
# How close a comparison of the state machine may come before its outcome is float noise.
MARGIN = 1e-4
# The keys of the two word events every wire sends (docs/word-timestamps.md).
WORD_STARTS = ("index", "start_sample", "type", "word")
WORD_ENDS = ("end_sample", "index", "start_sample", "type", "word")


def reference(request: pytest.FixtureRequest, name: str) -> Path:
    directory = Path(request.config.getoption("--reference-dir")) / name
    if not (directory / "words.json").exists():
        if request.config.getoption("--require-full-reference"):
            pytest.fail(f"{directory / 'words.json'} is missing (scripts/test.sh makes it)")
        pytest.skip("needs the word-timestamp fixtures (scripts/make_word_reference.py)")
    return directory


@pytest.fixture(scope="module", params=WORD_MODELS)
def forked(request: pytest.FixtureRequest):
    directory = reference(request, request.param)
    words = json.loads((directory / "words.json").read_text())
    model = TTSModel.load(str(directory / "config_words.yaml"))
    return model, model.voice_state(str(directory / "voice_state.safetensors")), words


def options(case: dict) -> dict:
    return dict(OFF, max_tokens=case["max_tokens"], **({"max_frames": case["frames"]} if case["frames"] else {}))


def test_the_tokens_units_and_shares_are_the_forks(forked) -> None:
    model, _, reference_words = forked
    for case in reference_words["cases"]:
        chunks = [
            c for c in planning.plan(model.reader, case["text"], case["max_tokens"], False, 0) if isinstance(c, Chunk)
        ]
        assert len(chunks) == len(case["chunks"])
        for ours, theirs in zip(chunks, case["chunks"]):
            units = [
                {
                    "text": u.text,
                    "begin": u.begin,
                    "end": u.end,
                    "word": None if u.word is None else [u.word.text, u.word.index],
                    "synthetic": u.synthetic,
                }
                for u in ours.words.units
            ]
            assert ours.tokens == theirs["tokens"] and units == theirs["units"], theirs["text"]
            assert np.array_equal(ours.words.token_to_unit, np.array(theirs["token_to_unit"], np.float32))


@pytest.mark.slow
def test_the_scores_decisions_and_words_are_the_forks(forked, monkeypatch) -> None:
    model, voice, reference_words = forked
    closest = [np.inf]
    compare = timestamps.above

    def watched(value: float, than: float) -> bool:
        closest[0] = min(closest[0], abs(value - than) / max(abs(than), 1e-12))
        return compare(value, than)

    monkeypatch.setattr(timestamps, "above", watched)
    moved = 0
    for case in reference_words["cases"]:
        generation = model.generation(case["text"], voice, first_word=0, **options(case))
        scores = [frame.scores for frame in alone(model, generation) if frame.scores is not None]
        theirs = [np.array(frame["scores"], np.float32) for frame in case["frames_seen"]]
        assert len(scores) == len(theirs)
        assert max(float(np.abs(a - b).max()) for a, b in zip(scores, theirs)) < 1e-6
        closest[0] = np.inf
        pcm, words = model.generate(case["text"], voice, **options(case), words=True)
        assert closest[0] > MARGIN, f"a decision within {closest[0]:.1e} of its threshold: {case['text']!r}"
        assert pcm.shape[0] == case["samples"]
        assert [(w.word, w.index) for w in words] == [(w, i) for w, i, _, _ in case["words"]]
        for ours, (_, _, start, end) in zip(words, case["words"]):
            assert abs(ours.start - start) < 1e-3 and abs(ours.end - end) < 1e-3
        moved += len(words)
    assert moved >= 2 * len(reference_words["cases"])  # the alignment moved: a test with something to compare


def test_the_command_line_writes_the_forks_words(request, tmp_path) -> None:
    directory = reference(request, "english_2m_2026-10")
    case = next(c for c in json.loads((directory / "words.json").read_text())["cases"] if c["frames"])
    command = [sys.executable, "-m", "core.cli", "generate", "--model", str(directory / "config_words.yaml")]
    command += ["--voice", str(directory / "voice_state.safetensors"), "--text", case["text"], "--no-normalize"]
    command += ["--temperature", "0", "--eos-threshold", "inf", "--max-frames", str(case["frames"])]
    command += ["--words", str(tmp_path / "out.json"), "-o", str(tmp_path / "out.wav"), "-q"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
    written = json.loads((tmp_path / "out.json").read_text())
    assert [(w["word"], round(w["start"], 3), round(w["end"], 3)) for w in written] == [
        (w, round(start, 3), round(end, 3)) for w, _, start, end in case["words"]
    ]


def test_the_catalog_has_the_forks_heads_where_it_pins_the_same_weights(request) -> None:
    directory = reference(request, "english")
    fork = json.loads((directory.parent / "timestamp_heads.json").read_text())
    for name in catalog.model_names():
        ours = catalog.config(name).timestamp_heads
        theirs = fork.get(name)
        same = theirs is not None and theirs["weights_path"] == catalog._catalog()["models"][name]["weights_path"]
        expected = theirs["timestamp_heads"] if same else None
        assert (None if ours is None else [{"layer": h.layer, "head": h.head} for h in ours]) == expected, name
    assert "english" not in catalog.timed_models() and "english_2026-09_2" in catalog.timed_models()


# The tiny model with heads: what the reference does not do


@pytest.fixture(scope="module")
def timed(tmp_path_factory: pytest.TempPathFactory) -> TTSModel:
    return timed_tiny(tmp_path_factory.mktemp("timed"))


def events(model: TTSModel, text: str, **options) -> list:
    return [
        item
        for item in model.stream(text, str(VOICE_24K), words=True, **dict(OFF, **options))
        if not isinstance(item, np.ndarray)
    ]


@pytest.mark.parametrize(
    "heads, message",
    [
        ([], "at least one"),
        ([{"layer": 2, "head": 0}], "layer 2"),
        ([{"layer": 0, "head": 4}], "head 4"),
        ([{"layer": 0, "head": 1}, {"layer": 0, "head": 1}], "twice"),
    ],
)
def test_heads_outside_the_model_are_a_config_error(tmp_path, heads, message) -> None:
    with pytest.raises(ConfigError, match=message):
        timed_tiny(tmp_path, heads)


def test_a_model_without_heads_says_which_have_them(model) -> None:
    with pytest.raises(NoTimestampsError) as refused:
        model.generate("Hello.", str(VOICE_24K), words=True)
    assert "english_2026-09_2" in str(refused.value) and "timestamp_heads" in str(refused.value)


def test_every_word_starts_before_the_audio_it_starts_and_ends_after_it(timed) -> None:
    said, words = 0, []
    for item in timed.stream("One two three. Four five six!", str(VOICE_24K), words=True, **OFF, max_frames=40):
        if isinstance(item, np.ndarray):
            said += item.shape[0]
        elif isinstance(item, WordStart):
            assert item.sample <= said
            words.append(item)
        else:
            assert item.start < item.end <= said
    assert words and [w.index for w in words] == sorted(w.index for w in words)


def test_a_text_streams_words_run_on_from_segment_to_segment(timed) -> None:
    """Segments that are the whole text's chunks: the same words, indexes and times as the whole."""
    text = ["Hello there. ", "This is a test, of the stream. ", "And now a third sentence!"]
    whole = events(timed, "".join(text), max_tokens=8, max_frames=None)
    pieces = [
        i for i in timed.stream(text, str(VOICE_24K), words=True, **OFF, max_tokens=8) if not isinstance(i, np.ndarray)
    ]
    assert pieces == whole and len({e.index for e in whole}) >= 3


def test_a_pause_holds_no_word_and_its_words_run_on_after_it(timed) -> None:
    before = timed.generate("Hello there.", str(VOICE_24K), **OFF).shape[0]
    paused = events(timed, "Hello there. [pause:1s] Nice to meet you.")
    ends = [e for e in paused if isinstance(e, WordEnd)]
    first, second = [e for e in ends if e.index < 2], [e for e in ends if e.index >= 2]
    assert first and second and second[0].word == "Nice" and second[0].index == 2
    assert all(e.end <= before for e in first)
    assert all(e.start >= before + timed.sample_rate for e in second)


def test_times_follow_the_speed_change(timed) -> None:
    at_one = events(timed, "One two three four.", max_frames=30)
    at_two = events(timed, "One two three four.", max_frames=30, speed=2.0)
    assert [type(e) for e in at_one] == [type(e) for e in at_two]
    for a, b in zip(at_one, at_two):
        if isinstance(a, WordStart):
            assert b.sample == round(a.sample / 2)
        else:
            assert (b.start, b.end) == (round(a.start / 2), round(a.end / 2))


def test_a_normalized_word_is_one_word_over_its_expansion(timed) -> None:
    """Frames whose scores move on one spoken word a frame: "$5.20" (said as five words) starts
    with "five" and ends with "cents", one word as the user wrote it; the words around it are
    their own."""
    [chunk] = [c for c in planning.plan(timed.reader, "It costs $5.20 today.", 50, True, 0) if isinstance(c, Chunk)]
    units = chunk.words.units
    spoken = [i for i, unit in enumerate(units) if unit.word is not None]
    assert [units[i].word.text for i in spoken] == "It costs five dollars and twenty cents today".split()
    timer = WordTimer()
    frame = timed.frame_size
    voiced = np.full(frame, 0.1, np.float32)
    for k, unit in enumerate(spoken):
        scores = np.zeros(len(units), np.float32)
        scores[unit] = 1.0
        timer.frame(Frame(np.zeros(1, np.float32), 0, k == 0, False, chunk.words, scores), voiced)
    timer.frame(Frame(None, 0, False, True), None)
    ends = [(e.word, e.index, e.start // frame, e.end // frame) for e in timer.take() if isinstance(e, WordEnd)]
    assert ends == [("It", 0, 0, 1), ("costs", 1, 1, 2), ("$5.20", 2, 2, 7), ("today", 3, 7, 8)]


@pytest.mark.parametrize(
    "text, words",
    [
        ("I saw Dr. Smith at 3.14 pm.", ["I", "saw", "Dr.", "Smith", "at", "3.14", "pm"]),
        ("\u201cCall me at 10:30,\u201d she said.", ["Call", "me", "at", "10:30", "she", "said"]),
        ("Hello world", ["Hello", "world"]),
        # Rewritten words with punctuation between them and no space: each its own, once.
        ("1-->2", ["1", "2"]),
        ("x 1-->2, y", ["x", "1", "2", "y"]),
        ("#1#2", ["#1", "2"]),
        ("$5,$6", ["$5", "6"]),
        ("(1990s)", ["1990s"]),
        ('He said "1990s".', ["He", "said", "1990s"]),
        ("Dr.", ["Dr."]),
        ("No. 5", ["No.", "5"]),
        ("A&B", ["A", "&", "B"]),
        ("A & B", ["A", "&", "B"]),
        ("#5 & #6", ["#5", "&", "#6"]),
    ],
)
def test_the_users_words_of_a_normalized_text(text, words) -> None:
    """Each word as written, said for once: the spans in order, apart, and each the word's text."""
    from core.portable.text import normalize
    from core.portable.text.words import said_for

    said = said_for(text, *normalize.normalize_aligned(text, "english"))
    users = {}
    for word in said.values():
        assert users.setdefault(word.index, word) == word
    found = [users[i] for i in sorted(users)]
    assert [w.text for w in found] == words
    assert all(text[w.begin : w.end] == w.text for w in found)
    assert all(a.end <= b.begin for a, b in zip(found, found[1:]))


def test_a_generations_words_are_the_users_each_once(timed) -> None:
    users = {}
    for chunk in planning.plan(timed.reader, "Call 1-->2 now, #1#2 (1990s) Dr. Smith and A&B.", 50, True, 0):
        if isinstance(chunk, Chunk):
            for word in chunk.words.users.values():
                assert users.setdefault(word.index, word.text) == word.text
    assert list(users) == sorted(users)
    assert list(users.values()) == ["Call", "1", "2", "now", "#1", "2", "1990s", "Dr.", "Smith", "and", "A", "&", "B"]


def lines_run(module: ModuleType, call: Callable[[], object]) -> int:
    """The lines of `module` that `call` runs (sys.settrace's line events in its frames)."""
    source = module.__file__
    count = [0]

    def local(frame, event, arg):
        count[0] += event == "line"
        return local

    def calls(frame, event, arg):
        return local if frame.f_code.co_filename == source else None

    previous = sys.gettrace()
    sys.settrace(calls)
    try:
        call()
    finally:
        sys.settrace(previous)
    return count[0]


@pytest.mark.parametrize("path", ["plan", "text stream"])
@pytest.mark.parametrize("text", ["#1" * 300, "1-->2" * 120, "$5,$6" * 120, "A&B" * 200, "(1990s)" * 90, "a 1 " * 150])
def test_the_users_words_cost_what_the_text_is_long(timed, path, text) -> None:
    """Texts the normalizer rewrites word by word, with no space between the words (issue 56: each
    word was widened to the whitespace around it, a scan of the whole run each time): the lines
    of words.py that find the user's words double when the text doubles (4 times where they grow
    with its square)."""
    from core.portable.text import words

    def found(text: str) -> None:
        if path == "plan":
            planning.plan(timed.reader, text, 50, True, 0)
        else:
            stream = timed.text_stream(str(VOICE_24K), words=True)
            stream.push(text)
            stream.end()

    once, twice = lines_run(words, lambda: found(text)), lines_run(words, lambda: found(text + text))
    assert once > 0 and twice <= 2.5 * once, (once, twice)


# Every front gives the same words for the same request


@pytest.mark.slow
def test_every_front_gives_the_words_of_the_python_api(timed) -> None:
    import base64
    import io
    import wave

    import httpx
    from websockets.sync.client import connect

    from server.engine import ServerEngine
    from tests.support.serving import GUARD, serving

    text = "One two three. Four five six, seven eight!"
    request = {"text": text, "max_tokens": 8, "normalize": False, "temperature": 0.0, "eos_threshold": 100.0}
    expected = [
        (w.word, w.index, w.start, w.end)
        for w in timed.generate(text, str(VOICE_24K), **dict(OFF, eos_threshold=100.0), max_tokens=8, words=True)[1]
    ]
    assert len(expected) >= 2
    rate = timed.sample_rate
    engine = ServerEngine(timed, str(VOICE_24K), max_concurrent=2)
    try:
        with serving(engine) as url:
            assert httpx.get(url + "/health", timeout=GUARD).json()["word_timestamps"] is True
            whole = httpx.post(url + "/generate/words", json=request, timeout=GUARD)
            assert whole.status_code == 200, whole.text
            body = whole.json()
            with wave.open(io.BytesIO(base64.b64decode(body["audio"]))) as audio:
                assert audio.getframerate() == rate == body["sample_rate"] and audio.getnframes() > 0
            assert [(w["word"], w["index"], w["start"], w["end"]) for w in body["words"]] == expected
            lines = []
            with httpx.stream("POST", url + "/stream/words", json=request, timeout=GUARD) as streamed:
                lines = [json.loads(line) for line in streamed.iter_lines() if line]
            assert lines[0] == {"type": "started", "sample_rate": rate} and lines[-1]["type"] == "done"
            events = [e for e in lines if e["type"] in ("word", "word_end")]
            assert {tuple(sorted(e)) for e in events} == {WORD_STARTS, WORD_ENDS}  # the shape of every wire
            ends = [
                (e["word"], e["index"], e["start_sample"] / rate, e["end_sample"] / rate)
                for e in events
                if e["type"] == "word_end"
            ]
            assert ends == expected
            said = 0
            for line in lines:  # a word's start comes before the audio that starts it
                if line["type"] == "audio":
                    said += len(base64.b64decode(line["audio"])) // 2
                elif line["type"] == "word":
                    assert line["start_sample"] <= said
            stream = url.replace("http://", "ws://") + "/v1/audio/speech/stream"
            with connect(stream, open_timeout=GUARD) as socket:
                socket.send(
                    json.dumps({"type": "start", "words": True, **{k: v for k, v in request.items() if k != "text"}})
                )
                socket.send(json.dumps({"type": "text", "text": text}))
                socket.send(json.dumps({"type": "end"}))
                frames = []
                while True:
                    frame = socket.recv(timeout=GUARD)
                    if isinstance(frame, str):
                        frames.append(json.loads(frame))
                        if frames[-1]["type"] in ("done", "error"):
                            break
            ws_words = [f for f in frames if f["type"] in ("word", "word_end")]
            assert ws_words == events, frames[-1]
    finally:
        engine.close()


def test_a_model_without_heads_is_refused_on_every_front(model) -> None:
    import httpx
    from websockets.sync.client import connect

    from server.engine import ServerEngine
    from tests.support.serving import GUARD, serving

    engine = ServerEngine(model, str(VOICE_24K), max_concurrent=2)
    try:
        with serving(engine) as url:
            assert httpx.get(url + "/health", timeout=GUARD).json()["word_timestamps"] is False
            for path in ("/generate/words", "/stream/words"):
                refused = httpx.post(url + path, json={"text": "Hi."}, timeout=GUARD)
                error = refused.json()["error"]
                assert refused.status_code == 400 and error["code"] == "unsupported_value" and error["param"] == "words"
            with connect(url.replace("http://", "ws://") + "/v1/audio/speech/stream", open_timeout=GUARD) as socket:
                socket.send(json.dumps({"type": "start", "words": True}))
                error = json.loads(socket.recv(timeout=GUARD))
            assert error["type"] == "error" and error["error"]["code"] == "unsupported_value"
        assert engine.active == 0
    finally:
        engine.close()


def read_cues(path: Path) -> list:
    """(text, start, end) of each cue of a .srt or .vtt file, as `srt` and `webvtt-py` read it: the
    text as shown (WebVTT's character references read; the word joiner of an SRT arrow dropped)."""
    import html

    import srt
    import webvtt

    if path.suffix == ".srt":
        cues = srt.parse(path.read_text(encoding="utf-8"))
        return [(c.content.replace("\u2060", ""), c.start.total_seconds(), c.end.total_seconds()) for c in cues]
    return [
        (html.unescape(c.text), c.start_in_seconds + c.start_time.milliseconds / 1000, None)
        for c in webvtt.read(str(path))
    ]


@pytest.mark.parametrize("suffix", [".srt", ".vtt"])
@pytest.mark.parametrize(
    "text, normalized",
    [
        ("One two three four five six seven eight nine ten eleven twelve. Thirteen!", False),
        ("Call 1-->2 now, #1#2 (1990s) Dr. Smith and A&B.", True),
    ],
)
def test_the_command_lines_subtitles_are_read_back_by_a_parser_of_their_own(
    timed, tmp_path, suffix, text, normalized
) -> None:
    """Every word of --words once in the cues as a parser reads them back, its times the cue's."""
    command = [sys.executable, "-m", "core.cli", "generate", "--model", str(Path(timed.name)), "--text", text]
    command += ["--voice", str(VOICE_24K), "--temperature", "0", "--eos-threshold", "inf"]
    command += [] if normalized else ["--no-normalize"]
    out = tmp_path / f"out{suffix}"
    command += ["--words", str(tmp_path / "words.json"), "--subtitles", str(out), "-o", str(tmp_path / "out.wav"), "-q"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
    words = json.loads((tmp_path / "words.json").read_text())
    assert words
    cues = read_cues(out)
    assert " ".join(text for text, _, _ in cues).split() == [w["word"] for w in words]
    assert cues[0][1] == pytest.approx(words[0]["start"], abs=1e-3)
    if suffix == ".srt":
        assert cues[-1][2] == pytest.approx(words[-1]["end"], abs=1e-3)


@pytest.mark.parametrize("suffix", [".srt", ".vtt"])
def test_a_cue_holds_its_words_whatever_they_hold(tmp_path, suffix) -> None:
    """Words with an arrow, markup, a character reference or a blank line in them: each cue is one
    line, no line but a timing line holds "-->", and a parser reads back each word as shown."""
    from core.portable.synthesis.timestamps import TimedWord
    from core.subtitles import cues, subtitles

    written = ["1-->2", "<b>bold</b>", "a&amp;b", "one\n\ntwo", "\u2028", "--->", "<", "end"]
    words = [TimedWord(w, i, i * 0.1, i * 0.1 + 0.08) for i, w in enumerate(written)]
    shown = [" ".join(w.split()) for w in written if w.split()]
    out = tmp_path / f"out{suffix}"
    out.write_bytes(subtitles(words, suffix))
    blocks = out.read_text(encoding="utf-8").split("\n\n")
    blocks = blocks if suffix == ".srt" else blocks[1:]  # WebVTT's header
    assert len(blocks) == len(cues(words)) >= 1
    for block in blocks:
        lines = block.strip("\n").split("\n")
        assert len(lines) == (3 if suffix == ".srt" else 2), block
        assert "-->" not in lines[-1]
    assert " ".join(text for text, _, _ in read_cues(out)) == " ".join(shown)


def test_subtitles_of_another_kind_are_refused_before_any_work(tmp_path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "core.cli", "generate", "--text", "Hi.", "--subtitles", str(tmp_path / "x.txt")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert done.returncode == 1 and done.stderr.strip().splitlines() == [
        f"error: --subtitles {tmp_path / 'x.txt'}: name a .srt or a .vtt file"
    ]


def test_a_batch_job_writes_each_lines_words_and_resumes(timed, tmp_path) -> None:
    config = next(Path(timed.name).parent.glob("config.yaml"))
    lines = tmp_path / "lines.jsonl"
    texts = {"a": "One two three.", "b": "Four five six seven."}
    lines.write_text(
        "".join(json.dumps({"id": i, "text": t, "temperature": 0, "max_frames": 20}) + "\n" for i, t in texts.items())
    )
    out = tmp_path / "out"
    command = [sys.executable, "-m", "core.cli", "batch", str(lines), "--out", str(out), "--model", str(config)]
    command += ["--voice", str(VOICE_24K), "--workers", "1", "-q"]
    first = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert first.returncode == 0, first.stderr
    assert not list(out.glob("*.words.json"))
    again = subprocess.run(command + ["--words"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert again.returncode == 0, again.stderr
    for line_id, text in texts.items():
        _, words = timed.generate(text, str(VOICE_24K), temperature=0.0, max_frames=20, seed=None, words=True)
        written = json.loads((out / f"{line_id}.words.json").read_text())
        assert [w["word"] for w in written] == [w.word for w in words] and written
    stamp = (out / "a.words.json").stat().st_mtime_ns
    resumed = subprocess.run(command + ["--words"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert resumed.returncode == 0 and (out / "a.words.json").stat().st_mtime_ns == stamp


@pytest.mark.parametrize(
    "text", ["a" * 4999, "\ufb01" * 4999, "a\u2018b " * 1250, "e" + "\u0301" * 4998, "a 1 " * 1250]
)
def test_finding_the_words_costs_what_the_text_is_long(timed, monkeypatch, text) -> None:
    """Hostile texts that take the slow way (a word the chunks cut, words the text preparation
    rewrites, a cluster of thousands of marks): the characters NFKC reads stay in proportion to the
    text (the fork's way read every prefix of a chunk: ~n²/2)."""
    import unicodedata

    from core.portable.text import words

    class Counted:
        """unicodedata, counting the characters `normalize` reads."""

        read = 0

        def normalize(self, form: str, value: str) -> str:
            Counted.read += len(value)
            return unicodedata.normalize(form, value)

        def __getattr__(self, name: str) -> object:
            return getattr(unicodedata, name)

    monkeypatch.setattr(words, "unicodedata", Counted())
    chunks = [c for c in planning.plan(timed.reader, text, 50, True, 0) if isinstance(c, Chunk)]
    assert chunks and Counted.read <= 40 * len(text), Counted.read
