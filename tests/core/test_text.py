"""Text preparation against the official 4.0.1 functions on tricky texts, and the pause markup."""

from __future__ import annotations

import json

import numpy as np
import pytest

from core import TextError
from core.portable.text.prepare import TextOptions, prepare_text_prompt, split_into_chunks, split_pauses
from core.portable.text.tokenizer import Tokenizer
from tests.support.paths import FIXTURES
from tests.support.reference import run_reference

LONG = " ".join(f"word{i}" for i in range(80))
TEXTS = [
    "hello world",
    "  leading and trailing spaces  ",
    "multiple   spaces\tand\ttabs  inside",
    "line\nbreaks\r\nand  double  spaces",
    "No final punctuation",
    "Ends with a comma,",
    "Ends with a colon:",
    "Ends with a dash -",
    "Ends with an em dash \u2014",
    '"A quoted sentence."',
    '"Hi?", she said.',
    "(A parenthetical remark)",
    "Trailing guillemet \u00bb",
    "It costs 3.14 dollars. Then 2.5 more! Or 10.0?",
    "Dr. Smith went to Washington. He arrived at 10 a.m. sharp.",
    "Semi; colons; everywhere;",
    "\u2018Curly\u2019 quotes and \u201cdouble\u201d ones\u201d",
    "\u00e9cole \u00e9l\u00e8ve",
    "stra\u00dfe",
    "i",
    "1234",
    "...",
    "?!",
    "Wait\u2026 what",
    "one two three four",
    "one two three four five",
    LONG,
    "A long sentence, with commas, semicolons; and colons: that goes on, and on, and on well past "
    "the chunk size so that it has to be split, somewhere, somehow, by the fallback rule.",
    "\u65e5\u672c\u8a9e\u306e\u6587\u3002 Then English.",
    "Emoji \U0001f600 in text.",
    "Hello.World and A.B.C. initials.",
    "Numbers like 1,000,000.50 and 2.",
    "mixed: lists; of, items - and \u2013 dashes \u2014 too",
    "First. Second! Third? Fourth\u2026 Fifth.",
    "",
    "   ",
]
OPTIONS = [
    {},
    {
        "remove_semicolons": True,
        "replace_characters": {
            '"': "",
            "\u201c": "",
            "\u201d": "",
            "(": "",
            ")": "",
            ":": ",",
            "\u2019": "'",
            "\u2013": ",",
        },
    },
    {"pad_with_spaces_for_short_inputs": True},
    {"capitalize_first_letter": False, "append_terminal_punctuation": False},
]
TOKENIZERS = [("unigram4000.json", "tokenizers"), ("unigram4000.model", "sentencepiece")]
MAX_TOKENS = [50, 12, 5]

OFFICIAL = """
import json, sys
from pocket_tts.models.text_chunking import prepare_text_prompt, split_into_best_sentences
from pocket_tts.modules.text_conditioner import build_tokenizer
job = json.load(sys.stdin)
out = []
for path, kind in job["tokenizers"]:
    tokenizer = build_tokenizer(4000, path, kind)
    for options in job["options"]:
        args = (options.get("pad_with_spaces_for_short_inputs", False), options.get("remove_semicolons", False),
                options.get("append_terminal_punctuation", True), options.get("capitalize_first_letter", True),
                options.get("replace_characters", {}))
        for text in job["texts"]:
            try:
                prepared = list(prepare_text_prompt(text, *args))
            except ValueError:
                prepared = "error"
            chunks = {}
            for max_tokens in job["max_tokens"]:
                try:
                    chunks[str(max_tokens)] = split_into_best_sentences(tokenizer, text, max_tokens, args[0],
                        remove_semicolons=args[1], append_terminal_punctuation=args[2],
                        capitalize_first_letter=args[3], replace_characters=args[4])
                except ValueError:
                    chunks[str(max_tokens)] = "error"
            out.append({"prepared": prepared, "chunks": chunks})
print(json.dumps(out))
"""


def ours(text: str, options: TextOptions, tokenizer: Tokenizer) -> dict:
    try:
        prepared = list(prepare_text_prompt(text, options))
    except TextError:
        prepared = "error"
    chunks = {}
    for max_tokens in MAX_TOKENS:
        try:
            chunks[str(max_tokens)] = split_into_chunks(tokenizer, text, max_tokens, options)
        except TextError:
            chunks[str(max_tokens)] = "error"
    return {"prepared": prepared, "chunks": chunks}


@pytest.mark.slow
def test_text_preparation_and_chunking_equal_the_official(reference_python) -> None:
    import subprocess

    tokenizers = [(str(FIXTURES / "tokenizers" / name), kind) for name, kind in TOKENIZERS]
    job = json.dumps({"texts": TEXTS, "options": OPTIONS, "tokenizers": tokenizers, "max_tokens": MAX_TOKENS})
    done = subprocess.run([str(reference_python), "-c", OFFICIAL], input=job, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    official = iter(json.loads(done.stdout))
    compared = 0
    for path, _ in tokenizers:
        tokenizer = Tokenizer.from_file(path)
        for options in OPTIONS:
            text_options = TextOptions(**options)
            for text in TEXTS:
                expected = next(official)
                assert ours(text, text_options, tokenizer) == expected, (text, options, path)
                compared += 1
    assert compared == len(TEXTS) * len(OPTIONS) * len(TOKENIZERS)


@pytest.mark.slow
def test_reference_helper_is_wired(reference_python) -> None:
    assert run_reference(reference_python, "import pocket_tts; print('ok')").strip() == "ok"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Hello [pause:500ms] world", ["Hello ", 0.5, " world"]),
        ("[pause:1.5s]", [1.5]),
        ("a <break time=\"300ms\"/> b <BREAK time='2s' /> c", ["a ", 0.3, " b ", 2.0, " c"]),
        ("[PAUSE:250MS]start", [0.25, "start"]),
        ("no pause [here] or <b>bold</b>", ["no pause [here] or <b>bold</b>"]),
        ("x [pause:0ms] y", ["x ", 0.0, " y"]),
        ("x [pause:10s]", ["x ", 10.0]),
        # The syntax of the official package's pull request #242, which other tools write.
        ("a [pause] b [Pause]", ["a ", 0.5, " b ", 0.5]),
        ("a [pause:1.5] b [pause:2]", ["a ", 1.5, " b ", 2.0]),
        ("a <break/> b <break /> c <break>", ["a ", 0.5, " b ", 0.5, " c ", 0.5]),
        ('a <break time="5"/> b', ["a ", 5.0, " b"]),
        ("a <break strength='weak'/> b <break strength=\"x-strong\"/>", ["a ", 0.25, " b ", 1.0]),
        ('a <break time="300ms" strength="strong"/> b', ["a ", 0.3, " b"]),
    ],
)
def test_pause_markup(text: str, expected: list) -> None:
    assert split_pauses(text) == expected


@pytest.mark.parametrize(
    "text, message",
    [
        ("x [pause:abc] y", "duration"),
        ("x [pause:10.5s]", "longer than"),
        ('x <break time="5 minutes"/>', "duration"),
        ('x <break time="11"/>', "longer than"),
        ("x <break time=3/> y", "malformed pause markup"),
        ('x <break strength="loud"/>', "strength must be one of none, x-weak, weak, medium, strong, x-strong"),
        ('x <break pitch="high"/>', "a break takes time or strength, not pitch"),
        ("x [pause 2s] y", "malformed pause markup"),
        ("x [pause:-1s]", "duration"),
        ("x [pause:]", "duration"),
    ],
)
def test_bad_pause_markup_is_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(TextError, match=message):
        split_pauses(text)


def test_pauses_insert_exact_silence(model, voice) -> None:
    options = dict(temperature=0.0, eos_threshold=-float("inf"), frames_after_eos=0)  # each text: 6 frames
    plain = model.generate("Before.", voice, **options)
    paused = list(model.stream("Before. [pause:1.234s]", voice, **options))
    pcm = np.concatenate(paused)
    silence = int(round(1.234 * model.sample_rate))
    assert plain.shape == (6 * model.frame_size,) and pcm.shape == (plain.shape[0] + silence,)
    assert np.array_equal(pcm[: plain.shape[0]], plain) and not np.any(pcm[plain.shape[0] :])
    assert max(c.shape[0] for c in paused) == model.frame_size  # silence streams in frame-sized pieces
    only = model.generate("<break time='40ms'/>", voice, **options)
    assert only.shape == (int(0.04 * model.sample_rate),) and not np.any(only)


def test_the_other_tools_pauses_insert_their_silence(model, voice) -> None:
    """[pause], [pause:1.5] and <break/> as the official pull request #242 writes them; a break of
    strength none splits the text and adds no silence."""
    options = dict(temperature=0.0, eos_threshold=-float("inf"), frames_after_eos=0)
    plain = model.generate("Before.", voice, **options)
    for markup, seconds in (
        ("[pause]", 0.5),
        ("[pause:0.75]", 0.75),
        ("<break/>", 0.5),
        ('<break strength="weak"/>', 0.25),
    ):
        pcm = model.generate(f"Before. {markup}", voice, **options)
        assert pcm.shape == (plain.shape[0] + int(round(seconds * model.sample_rate)),), markup
        assert np.array_equal(pcm[: plain.shape[0]], plain) and not np.any(pcm[plain.shape[0] :]), markup
    both = model.generate("Before. <break strength='none'/> Before.", voice, **options)
    assert np.array_equal(both, np.concatenate([plain, plain]))


def test_max_frames_counts_the_frames_of_pauses_too(model, voice) -> None:
    """Silence is audio like speech: a pause's frames come out of the same budget."""
    options = dict(temperature=0.0, eos_threshold=-float("inf"), frames_after_eos=0)
    plain = model.generate("Before.", voice, **options)
    for budget, silent in ((6, 0), (8, 2), (1, 0)):
        pcm = model.generate("Before. [pause:1.234s] After.", voice, max_frames=budget, **options)
        assert pcm.shape == (min(budget, 6) * model.frame_size + silent * model.frame_size,), budget
        assert np.array_equal(pcm[: min(budget, 6) * model.frame_size], plain[: min(budget, 6) * model.frame_size])
    pauses = model.generate("[pause:10s]" * 10 + "Hi.", voice, max_frames=3, **options)
    assert pauses.shape == (3 * model.frame_size,) and not np.any(pauses)


def test_text_between_pauses_is_spoken_as_separate_texts(model, voice) -> None:
    options = dict(temperature=0.0, eos_threshold=-1e9, frames_after_eos=0)
    both = model.generate("First part [pause:100ms] second part", voice, **options)
    first = model.generate("First part", voice, **options)
    second = model.generate("second part", voice, **options)
    gap = np.zeros(int(0.1 * model.sample_rate), np.float32)
    assert np.array_equal(both, np.concatenate([first, gap, second]))


def official_decimal_boundary(tokens: list, start: int, tokenizer: Tokenizer) -> bool:
    """The official 4.0.1 test, which decodes the whole prefix and suffix."""
    prefix, suffix = tokenizer.decode(tokens[:start]), tokenizer.decode(tokens[start:])
    return len(prefix) >= 2 and prefix[-1] == "." and prefix[-2].isdigit() and bool(suffix) and suffix[0].isdigit()


@pytest.mark.parametrize("name", sorted(p.name for p in (FIXTURES / "tokenizers").iterdir()))
def test_the_decimal_point_check_reads_near_the_boundary_as_the_official_reads_it_all(name: str) -> None:
    """Ours decodes a few tokens around each boundary; on texts dense in digits, periods, spaces and
    multi-byte characters (byte-fallback tokens cut by a window), it decides as the official does
    at every token of the text."""
    from core.portable.text.prepare import _is_decimal_period_boundary

    tokenizer = Tokenizer.from_file(str(FIXTURES / "tokenizers" / name))
    rng = np.random.default_rng(3)
    alphabet = list("0123456789....  ,!?ab") + ["\u00e9", "\u65e5", "\U0001f600", "\u2026", "\u20ac5", "3.\U0001f600"]
    compared = decimal = 0
    for _ in range(40):
        text = "".join(rng.choice(alphabet, size=int(rng.integers(1, 60))))
        tokens = tokenizer.encode(text)
        for start in range(len(tokens) + 1):
            expected = official_decimal_boundary(tokens, start, tokenizer)
            assert _is_decimal_period_boundary(tokens, start, tokenizer) == expected, (text, start)
            compared += 1
            decimal += expected
    assert compared > 500 and decimal > 20


@pytest.mark.parametrize("text", ["ab" * 2500, "\U0001f600" * 1500, " ".join(["word"] * 2000), "1." * 2500])
def test_a_segment_without_breaks_is_split_between_words_past_the_segment_bound(text: str) -> None:
    """The official keeps a sentence with no break whole however long (its prompt and length estimate
    grow with it); ours cuts one past MAX_SEGMENT_TOKENS into chunks of at most max_tokens, words
    kept whole where they fit, and drops no character."""
    from core.portable.text.prepare import MAX_SEGMENT_TOKENS

    tokenizer = Tokenizer.from_file(str(FIXTURES / "tokenizers" / "unigram1000_bytes.model"))
    assert len(tokenizer.encode(text)) > MAX_SEGMENT_TOKENS
    for max_tokens in (50, 5, 1):
        chunks = split_into_chunks(tokenizer, text, max_tokens, TextOptions())
        counts = [len(tokenizer.encode(chunk)) for chunk in chunks]
        assert max(counts) <= max(max_tokens, 5) + 1, (max_tokens, max(counts))
        assert "".join("".join(chunks).split()) == "".join(prepare_text_prompt(text, TextOptions())[0].split())
