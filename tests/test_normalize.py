"""Text normalization (core.portable.normalize): the table of written -> spoken forms in every
catalog language, text that has nothing to normalize, hostile inputs, and model names."""

from __future__ import annotations

import random
import time
from collections import Counter
from pathlib import Path
from typing import List, Tuple

import pytest

from core.portable.errors import TextError
from core.portable.normalize import LANGUAGES, MAX_DIGITS, language_of, normalize_text

CASES_FILE = Path(__file__).parent / "fixtures" / "normalize_cases.tsv"


def cases() -> List[Tuple[str, str, str]]:
    rows = []
    for line in CASES_FILE.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            language, written, spoken = line.split("\t")
            rows.append((language, written, spoken))
    return rows


@pytest.mark.parametrize("language, written, spoken", cases(), ids=lambda v: v if len(v) < 40 else v[:40])
def test_the_table(language: str, written: str, spoken: str) -> None:
    assert normalize_text(written, language) == spoken


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


HOSTILE = [
    "1" * 5000,
    "9" * 20_000,
    "$" * 5000,
    "$1" * 2500,
    "€1,5" * 1200,
    "1," * 2500,
    "1." * 2500,
    "1-" * 2500,
    "-" * 5000,
    " " * 5000,
    "a." * 2500,
    "a@" * 2500,
    "a%" * 2500,
    "a-a." * 1200,
    "http://" * 700,
    "www." * 1200,
    "x.com/" * 800,
    "(" * 5000,
    "..." * 1600,
    "?!;,." * 1000,
    "1:" * 2500,
    "1/" * 2500,
    "+1 " * 1600,
    "1,000" * 1000,
    "1.000" * 1000,
    "1 000 " * 1000,
    "1\u202f" * 2500,
    "St. " * 1200,
    "e.g." * 1200,
    "&" * 5000,
    "= " * 2500,
    "#1" * 2500,
    "-1" * 2500,
    "1st" * 1600,
    "1990s " * 800,
    "1.1.1." * 800,
    "12:30 " * 800,
    "5 km " * 1000,
    "3/4/2025 " * 500,
    "On March 4, 2025 " * 300,
    "name@example.com " * 300,
]


@pytest.mark.parametrize("language", LANGUAGES)
def test_hostile_inputs_finish_fast(language: str) -> None:
    for text in HOSTILE:
        start = time.perf_counter()
        spoken = normalize_text(text, language)
        elapsed = time.perf_counter() - start
        assert elapsed < 1.0, (text[:20], elapsed)
        assert isinstance(spoken, str)


def test_the_cost_grows_linearly() -> None:
    """Ten times the text costs about ten times the time (a quadratic rule would cost a hundred)."""
    unit = "On 3/4/2025 at 10:30 Dr. Smith paid $5.20 (50% of 1,234) to name@example.com; 5 km & 2 GB. "

    def cost(repeats: int) -> float:
        text = unit * repeats
        start = time.perf_counter()
        normalize_text(text)
        return time.perf_counter() - start

    cost(5)  # the rules are compiled on first use
    small = min(cost(20) for _ in range(3))
    large = min(cost(200) for _ in range(3))
    assert large < 30 * small, (small, large)


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

    catalog = json.loads((Path(__file__).parent.parent / "core" / "portable" / "catalog.json").read_text())
    names = catalog.get("models", catalog)
    for name in names:
        if isinstance(names[name], dict):
            assert language_of(name) == name.split("_")[0], name
