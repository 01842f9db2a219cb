"""Text normalization (core.portable.text.normalize): the table of written -> spoken forms in every
catalog language, text that has nothing to normalize, hostile inputs, and model names."""

from __future__ import annotations

import random
import re
from collections import Counter
from typing import Callable, List, Match, Pattern, Union

import pytest

from core.portable.errors import TextError
from core.portable.text import normalize
from core.portable.text.normalize import LANGUAGES, MAX_DIGITS, language_of, normalize_aligned, normalize_text
from tests.support.normalize_cases import cases
from tests.support.paths import ROOT


@pytest.mark.parametrize("language, written, spoken", cases(), ids=lambda v: v if len(v) < 40 else v[:40])
def test_the_table(language: str, written: str, spoken: str) -> None:
    assert normalize_text(written, language) == spoken
    aligned, origins = normalize_aligned(written, language)
    assert aligned == spoken and len(origins) == len(spoken)
    assert all(0 <= b <= e <= len(written) for b, e in origins)
    assert [b for b, _ in origins] == sorted(b for b, _ in origins)  # the text's order, kept


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_aligned_normalization_says_the_same(language: str) -> None:
    """normalize_aligned writes what normalize_text writes, whatever the text; its origins follow
    the text's order and lie in it."""
    rng = random.Random(7)
    alphabet = "0123456789.,:;$€£%/-+@ aAbBmMsSdDrR\u00a0"
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 50)))
        spoken, origins = normalize_aligned(text, language)
        assert spoken == normalize_text(text, language) and len(origins) == len(spoken), text
        assert [b for b, _ in origins] == sorted(b for b, _ in origins)
        assert all(0 <= b <= e <= len(text) for b, e in origins)


def test_the_table_covers_every_language() -> None:
    counts = Counter(language for language, _, _ in cases())
    assert sum(counts.values()) >= 200
    assert counts["english"] >= 110
    assert set(counts) == set(LANGUAGES)
    assert min(counts.values()) >= 15


UNTOUCHED = [
    "",
    " ",
    "Hello, world! How are you today?",
    "She said: \u201cwait\u2026\u201d, then left; nobody followed.",
    "A well-known e-mail-free sentence (with brackets) [and more].",
    "It's the U.S. and the U.K., not the E.U.",
    "Missus Robinson? No, the mr. was late, the drs. too.",
    "Tabs\tand\nnew lines\r\n  stay   as they are.",
    "Emoji \U0001f600 and accents: caf\u00e9, na\u00efve, \u00fcber.",
    "Version A, plan B, mp3 files, H2O and COVID-free text.",
]


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("text", UNTOUCHED)
def test_text_without_numbers_or_symbols_is_untouched(text: str, language: str) -> None:
    assert normalize_text(text, language) == text


@pytest.mark.parametrize("language", LANGUAGES)
def test_sentence_punctuation_is_kept(language: str) -> None:
    spoken = normalize_text("Wait 5 s. Really? Yes! 3, 2; 1.", language)
    assert [c for c in spoken if c in ".!?,;"] == [".", "?", "!", ",", ";", "."]


def test_long_numbers_are_read_digit_by_digit() -> None:
    assert normalize_text("9" * MAX_DIGITS) == normalize_text("999,999,999,999,999")
    assert normalize_text("1" + "0" * MAX_DIGITS) == "one " + " ".join(["zero"] * MAX_DIGITS)
    spoken = normalize_text("1" * 10_000)
    assert spoken == " ".join(["one"] * 10_000)


# Each repeated into a hostile text.
HOSTILE = [
    "1",
    "9",
    "$",
    "$1",
    "€1,5",
    "1,",
    "1.",
    "1-",
    "-",
    " ",
    "a.",
    "a@",
    "a%",
    "a-a.",
    "http://",
    "www.",
    "x.com/",
    "(",
    "...",
    "?!;,.",
    "1:",
    "1/",
    "+1 ",
    "1,000",
    "1.000",
    "1 000 ",
    "1\u202f",
    "St. ",
    "e.g.",
    "&",
    "= ",
    "#1",
    "-1",
    "1st",
    "1990s ",
    "1.1.1.",
    "12:30 ",
    "5 km ",
    "3/4/2025 ",
    "On March 4, 2025 ",
    "name@example.com ",
    "3 March; ",
    "1 000 000 000 ",
    "1\u00a0000\u00a0000\u00a0000 ",
]


def hostile(unit: str, length: int) -> str:
    return unit * max(1, length // len(unit))


@pytest.mark.parametrize("language", LANGUAGES)
def test_hostile_inputs_are_read(language: str) -> None:
    for unit in HOSTILE:
        assert isinstance(normalize_text(hostile(unit, 5000), language), str)


class CountedText(str):
    """The text a rule is given, as its matches' `string`: counts the characters the rule's speakers
    read around their match (a speaker that read all the text before each match would be quadratic)."""

    tally: List[int]

    def __getitem__(self, key: Union[int, slice]) -> str:
        read = str.__getitem__(self, key)
        self.tally[0] += len(read)
        return read


class CountingRule:
    """A rule's compiled pattern that tallies the characters read for it: the whole text once, what
    its speakers read around their matches and, where the rule reads a number, at every position the
    number its pattern reads from there (the engine reads all of it before it tries the rest of the
    rule; a rule that started again at every group of a long run of digit groups would read the rest
    of the run each time, a cost quadratic in the run's length that no Python call shows)."""

    def __init__(self, pattern: Pattern[str], language: str, tally: List[int]) -> None:
        self.pattern = pattern
        self.tally = tally
        number = "(?P<num>" + normalize._number_pattern(language) + ")"
        cut = pattern.pattern.find(number)
        self.up_to_number = re.compile(pattern.pattern[: cut + len(number)], pattern.flags) if cut >= 0 else None

    def sub(self, replace: Callable[[Match[str]], str], text: str) -> str:
        self.tally[0] += len(text)
        if self.up_to_number is not None:
            for start in range(len(text)):
                number = self.up_to_number.match(text, start)
                if number:
                    self.tally[0] += number.end() - start
        counted = CountedText(text)
        counted.tally = self.tally
        return self.pattern.sub(replace, counted)


def characters_scanned(text: str, language: str) -> int:
    rules = normalize._rules(language)
    tally = [0]
    counting = [(CountingRule(pattern, language, tally), speak) for pattern, speak in rules]
    # Currency before and after, percentages, plain numbers: a count that missed them would miss
    # what it is for.
    assert sum(rule.up_to_number is not None for rule, _ in counting) >= 5
    normalize._RULES[language] = counting
    try:
        normalize_text(text, language)
    finally:
        normalize._RULES[language] = rules
    return tally[0]


def assert_linear(make: Callable[[int], str], language: str, small: int, times: int = 4) -> None:
    """The scan of `times` times the input reads at most about `times` times as many characters."""
    few, many = characters_scanned(make(small), language), characters_scanned(make(small * times), language)
    assert many <= (times + 0.5) * few + 200, (make(small)[:24], few, many)


# Runs of thousands groups with every separator (a failed match must not start again at each group),
# runs ending in what makes each number rule fail (a letter, a currency, a percent sign, a range,
# a decimal), long digit runs, and mixes.
GROUP_RUNS = [
    ("1", "\u00a0000", ""),
    ("1", "\u202f000", ""),
    ("1", " 000", ""),
    ("1", ".000", ""),
    ("1", ",000", ""),
    ("1", "1", ""),
    ("x1", "\u00a0000", "a"),
    ("1", "\u00a0000", " \u20ac"),
    ("1", "\u00a0000", "\u00a0%"),
    ("1", " 000", " %"),
    ("-1", "\u00a0000", "-5 %"),
    ("1", "\u00a0000", ",5x"),
    ("1", "\u00a0000", ".000 \u20ac"),
    ("\u20ac1", "\u00a0000", "a"),
    ("1", "\u00a0000 000.000,000", ""),
    ("", "1\u00a0000 ", ""),
    ("", "1 2 ", "%"),
    ("", "12\u00a0345\u202f", "x"),
    ("", "1.000\u00a0", "\u20ac"),
]


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("head, group, tail", GROUP_RUNS, ids=ascii)
def test_digit_group_runs_are_read_in_linear_time(head: str, group: str, tail: str, language: str) -> None:
    assert_linear(lambda n: head + group * n + tail, language, small=60)


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("unit", HOSTILE, ids=ascii)
def test_hostile_inputs_are_read_in_linear_time(unit: str, language: str) -> None:
    assert_linear(lambda n: hostile(unit, n), language, small=240)


def test_the_cost_grows_linearly() -> None:
    unit = "On 3/4/2025 at 10:30 Dr. Smith paid $5.20 (50% of 1,234) to name@example.com; 5 km & 2 GB. "
    assert_linear(lambda n: unit * n, "english", small=4)


@pytest.mark.parametrize("language", LANGUAGES)
def test_random_strings_never_raise(language: str) -> None:
    rng = random.Random(18)
    alphabet = (
        "0123456789" * 4 + ".,:;-/+%$€£¥@&#=()[]'\"–−°ºª " * 2 + "aAeEmMpPsStThHkKgG\u00a0\u202f\n\u00e9\U0001f600"
    )
    for _ in range(400):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        assert isinstance(normalize_text(text, language), str)


def test_an_unknown_language_is_an_error() -> None:
    with pytest.raises(TextError, match="klingon"):
        normalize_text("5", "klingon")


@pytest.mark.parametrize(
    "name, language",
    [
        ("english", "english"),
        ("english_2m_2026-10", "english"),
        ("english_2026-04_24l", "english"),
        ("french_24l", "french"),
        ("german", "german"),
        ("spanish_24l", "spanish"),
        ("italian", "italian"),
        ("portuguese_24l", "portuguese"),
        ("dutch_24l", "dutch"),
        ("Dutch", "dutch"),
        ("my-custom-model", "english"),
        ("", "english"),
    ],
)
def test_language_of(name: str, language: str) -> None:
    assert language_of(name) == language


def test_every_catalog_model_has_a_language() -> None:
    import json

    catalog = json.loads((ROOT / "core" / "portable" / "weights" / "catalog.json").read_text())
    names = catalog.get("models", catalog)
    for name in names:
        if isinstance(names[name], dict):
            assert language_of(name) == name.split("_")[0], name
