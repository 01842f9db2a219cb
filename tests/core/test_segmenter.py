"""The segmenter: text pieces in (split anywhere), segments out as soon as each is complete."""

from __future__ import annotations

import random
import re
from typing import List, Tuple

import pytest

from core import TextError
from core.portable.text.prepare import MAX_SEGMENT_TOKENS, TextOptions, split_into_chunks
from core.portable.text.segmenter import Segmenter
from core.portable.text.tokenizer import Tokenizer
from tests.support.paths import FIXTURES

KINDS = {"sentencepiece": "unigram4000.model", "tokenizers": "unigram4000.json"}


@pytest.fixture(scope="module", params=sorted(KINDS))
def tokenizer(request: pytest.FixtureRequest) -> Tokenizer:
    return Tokenizer.from_file(str(FIXTURES / "tokenizers" / KINDS[request.param]))


def tokens(tokenizer: Tokenizer, text: str) -> int:
    return len(tokenizer.encode(text))


def pushed_and_flushed(tokenizer: Tokenizer, pieces: List[str], max_tokens: int, options: TextOptions = None) -> tuple:
    segmenter = Segmenter(tokenizer, max_tokens, options or TextOptions())
    pushed = [s for piece in pieces for s in segmenter.push(piece)]
    return pushed, segmenter.flush()


def segment(tokenizer: Tokenizer, pieces: List[str], max_tokens: int = 50, options: TextOptions = None) -> List[str]:
    pushed, flushed = pushed_and_flushed(tokenizer, pieces, max_tokens, options)
    return pushed + flushed


def splits(text: str, seed: int) -> List[Tuple[str, List[str]]]:
    rng = random.Random(seed)
    random_cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, len(text) // 3)))
    return [
        ("whole", [text]),
        ("words", re.findall(r"\S+\s*|\s+", text)),
        ("characters", list(text)),
        ("random", [text[a:b] for a, b in zip([0] + random_cuts, random_cuts + [len(text)])]),
        ("random with empty pieces", [p for c in list(text) for p in (c, "")]),
    ]


def squeeze(text: str) -> str:
    return "".join(text.split())


CLAUSES = (
    "This long sentence keeps going, with a clause here, another one there, and yet another after it; "
    "then a semicolon part that runs on for a while: and a colon part, until at last it stops. "
)
TEXTS = [
    "Hello world. How are you? I am fine! Thanks\u2026 Bye.",
    "Mr. Smith and Mrs. Jones met Dr. Who, Prof. X and St. John vs. the others, etc. in the U.S. today.",
    "J. R. R. Tolkien wrote it e.g. in 1937, i.e. long ago. It cost 3.14 dollars or approx. 5.20 now. Done.",
    'She said "Stop!" and left. (He stayed.) The end\u00bb Next one. \u201cQuoted?\u201d Yes.',
    'Wait [pause:500ms] for it. Then <break time="1.5 s"/> again [PAUSE: 2s] and done. [pause:1s]',
    "1. Preheat the oven. 2. Mix the flour. 3. Bake it for 20.5 minutes.",
    "Line one.\nLine two!\n\n  Line three?\tTab.  ",
    "\u00c9l\u00e8ve \u00e9cole, \u65e5\u672c\u8a9e\u306e\u6587\u3002 Emoji \U0001f600 here. Stra\u00dfe ist lang.",
    CLAUSES * 3,
    " ".join(f"word{i}" for i in range(700)) + ". After the run-on.",
    "ab" * 300 + " and then some words. " + "x" * 50,
    "No final punctuation and trailing words",
]


@pytest.mark.parametrize("max_tokens", [50, 12, 1])
@pytest.mark.slow
def test_any_split_of_the_pieces_gives_the_segments_of_the_whole_text(tokenizer: Tokenizer, max_tokens: int) -> None:
    for index, text in enumerate(TEXTS):
        pushed, flushed = pushed_and_flushed(tokenizer, [text], max_tokens)
        whole = pushed + flushed
        assert all(s == s.strip() and s for s in whole) and squeeze("".join(whole)) == squeeze(text), text
        assert len(flushed) <= 1 and (pushed or text == TEXTS[-1]), (text, whole)
        for name, pieces in splits(text, seed=index)[1:]:
            assert pushed_and_flushed(tokenizer, pieces, max_tokens) == (pushed, flushed), (name, text)


def test_a_sentence_comes_out_at_the_push_that_brings_the_whitespace_after_it(tokenizer: Tokenizer) -> None:
    text = 'First one. Is it 5.20 or 5...? "Quoted!" Mr. Smith said so\u2026\nLast.'
    segmenter = Segmenter(tokenizer, 50, TextOptions())
    given = {i: segmenter.push(char) for i, char in enumerate(text)}
    came_out = {i: s for i, s in given.items() if s}
    sentences = ["First one.", "Is it 5.20 or 5...?", '"Quoted!"', "Mr. Smith said so\u2026"]
    assert came_out == {text.index(s) + len(s): [s] for s in sentences}
    assert all(text[i].isspace() for i in came_out)
    assert segmenter.pending == "Last." and segmenter.flush() == ["Last."] and segmenter.pending == ""


def test_a_period_before_digits_or_more_periods_is_not_cut_until_whitespace_follows(tokenizer: Tokenizer) -> None:
    segmenter = Segmenter(tokenizer, 50, TextOptions())
    assert segmenter.push("It costs 5.") == []
    assert segmenter.push("20 now.") == []
    assert segmenter.push(".") == [] and segmenter.push(".") == []
    assert segmenter.pending == "It costs 5.20 now..."
    assert segmenter.push(" And") == ["It costs 5.20 now..."]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Mr. Smith and Dr. Jones met Prof. Plum. Then", ["Mr. Smith and Dr. Jones met Prof. Plum."]),
        ("Mrs. A, Ms. B, St. C, Jr. D and Sr. E came. Then", ["Mrs. A, Ms. B, St. C, Jr. D and Sr. E came."]),
        ("Apples vs. pears, etc. and more. Then", ["Apples vs. pears, etc. and more."]),
        ("Use tools e.g. a hammer, i.e. this one. Then", ["Use tools e.g. a hammer, i.e. this one."]),
        ("It weighs approx. ten kilos. Then", ["It weighs approx. ten kilos."]),
        ("See No. 5 here. Then", ["See No. 5 here."]),
        ("J. R. R. Tolkien wrote it. Then", ["J. R. R. Tolkien wrote it."]),
        ("At 10 a.m. in the U.S. we ate. Then", ["At 10 a.m. in the U.S. we ate."]),
        ("(Dr. Who) came. Then", ["(Dr. Who) came."]),
        ("It was 3.14 and 2.5 and 10.0 in total. Then", ["It was 3.14 and 2.5 and 10.0 in total."]),
        ("1. Preheat the oven. 2. Mix. Then", ["1. Preheat the oven.", "2. Mix."]),
        ("Wait [pause: 1. 5s] here. Then", ["Wait [pause: 1. 5s] here."]),
        ('Wait <break time="1. 5s"/> here. Then', ['Wait <break time="1. 5s"/> here.']),
        # Lowercase words, and a period after a word that is not an abbreviation, do end a sentence.
        ("I said no. Then", ["I said no."]),
        ("The mr. Then", ["The mr."]),
        ("Plan b. Then", ["Plan b."]),
        ("In 1999. Then", ["In 1999."]),
        ("She said, \u201cHi.\u201d Then", ["She said, \u201cHi.\u201d"]),
        ("Really?! Then", ["Really?!"]),
    ],
)
def test_abbreviations_initials_decimals_and_pause_markup_are_not_cut(
    tokenizer: Tokenizer, text: str, expected: List[str]
) -> None:
    segmenter = Segmenter(tokenizer, 50, TextOptions())
    assert [s for c in text for s in segmenter.push(c)] == expected
    assert segmenter.pending == "Then"


def test_pause_markup_split_across_pieces_is_kept_whole(tokenizer: Tokenizer) -> None:
    segmenter = Segmenter(tokenizer, 50, TextOptions())
    out = [
        s
        for p in ["Hi [pa", "use: 2", ". ", "5s] there. ", "Now <bre", "ak time='1. s' ", "/> ok. "]
        for s in segmenter.push(p)
    ]
    assert out == ["Hi [pause: 2. 5s] there.", "Now <break time='1. s' /> ok."]


@pytest.mark.parametrize("split", ["whole", "characters"])
def test_no_clause_cut_falls_inside_pause_markup(tokenizer: Tokenizer, split: str) -> None:
    """Markup with a clause break inside (a malformed duration, reported when the segment is planned)
    stays in one segment, its "[" or "<" apart from the keyword or not, while the clauses around it
    are cut."""
    markups = ["[pause: 1, 5s]", "[ pause: 2, 5s]", "<break time='1, 5s'/>", "< break time = '3; 5s' />"]
    text = "".join(f"One, two, three, {m} four, five, six, " for m in markups) + "end."
    got = segment(tokenizer, [text] if split == "whole" else list(text), 2)
    assert len(got) > 20 and squeeze("".join(got)) == squeeze(text)
    for markup in markups:
        assert sum(markup in s for s in got) == 1, markup


@pytest.mark.parametrize("max_tokens", [12, 20, 30])
def test_a_long_sentence_is_cut_at_clauses_as_split_into_chunks_cuts_it(tokenizer: Tokenizer, max_tokens: int) -> None:
    sentence = CLAUSES.strip()
    assert tokens(tokenizer, sentence) > max_tokens
    got = segment(tokenizer, list(sentence), max_tokens)
    assert got == split_into_chunks(tokenizer, sentence, max_tokens, TextOptions())
    assert len(got) >= 2 and all(s[-1] in ",;:." for s in got)
    assert all(tokens(tokenizer, s) <= max_tokens for s in got if re.search(r"[,;:]\s", s))


def test_a_clause_comes_out_at_the_word_end_that_takes_the_sentence_past_max_tokens(tokenizer: Tokenizer) -> None:
    sentence = "one two, three four, five six seven eight nine ten eleven twelve thirteen fourteen"
    segmenter = Segmenter(tokenizer, 12, TextOptions())
    first = None
    for i in range(len(sentence)):
        out = segmenter.push(sentence[i])
        if out:
            first = (i, out)
            break
    assert first is not None
    i, out = first
    assert sentence[i] == " " and tokens(tokenizer, sentence[:i]) > 12
    assert tokens(tokenizer, sentence[: sentence.rfind(" ", 0, i)]) <= 12  # not a word earlier
    assert out in (["one two,"], ["one two, three four,"])


def test_a_sentence_without_clause_breaks_is_cut_between_words_past_the_segment_bound(tokenizer: Tokenizer) -> None:
    words = " ".join(f"word{i}" for i in range(1500)) + "."
    assert tokens(tokenizer, words) > 2 * MAX_SEGMENT_TOKENS
    segmenter = Segmenter(tokenizer, 20, TextOptions())
    pushed = [(i, s) for i, c in enumerate(words) for s in segmenter.push(c)]
    assert pushed and all(words[i] == " " for i, _ in pushed)
    # Nothing comes out before the sentence passes the segment bound, and then in pieces that fit.
    assert tokens(tokenizer, words[: pushed[0][0]]) > MAX_SEGMENT_TOKENS
    assert all(1 <= tokens(tokenizer, s) <= 20 for _, s in pushed)
    rest = segmenter.flush()
    assert len(rest) == 1 and tokens(tokenizer, rest[0]) <= MAX_SEGMENT_TOKENS
    assert " ".join([s for _, s in pushed] + rest) == words
    # Below the bound, a sentence with no clause break stays whole however far past max_tokens.
    short = " ".join(f"word{i}" for i in range(100)) + "."
    assert 20 < tokens(tokenizer, short) < MAX_SEGMENT_TOKENS
    assert segment(tokenizer, list(short), 20) == [short]


def sentences_of(tokenizer: Tokenizer, max_tokens: int, count: int, seed: int) -> List[str]:
    """Sentences (with commas) of max_tokens/2+1 to max_tokens tokens, one token spare each side."""
    words = "the a cat sat on mat, quick brown fox jumps over lazy dog, and then we went home; it rained".split()
    rng = random.Random(seed)
    found: List[str] = []
    while len(found) < count:
        sentence = " ".join(rng.choice(words) for _ in range(rng.randint(3, max_tokens))).rstrip(",;")
        sentence = sentence[0].upper() + sentence[1:] + rng.choice(".!?")
        if max_tokens // 2 + 2 <= tokens(tokenizer, sentence) <= max_tokens - 1:
            found.append(sentence)
    return found


@pytest.mark.parametrize("max_tokens", [50, 16])
def test_sentences_too_long_to_share_a_chunk_are_the_chunks_of_the_whole_text(
    tokenizer: Tokenizer, max_tokens: int
) -> None:
    """The case where speaking the segments is speaking the whole text: its chunks are its sentences."""
    sentences = sentences_of(tokenizer, max_tokens, 12, seed=max_tokens)
    text = " ".join(sentences)
    chunks = split_into_chunks(tokenizer, text, max_tokens, TextOptions())
    assert chunks == sentences  # the premise
    assert any("," in s and tokens(tokenizer, s) > max_tokens // 2 for s in sentences)
    for name, pieces in splits(text, seed=1):
        assert segment(tokenizer, pieces, max_tokens) == chunks, name


def test_empty_and_whitespace_pieces_give_nothing(tokenizer: Tokenizer) -> None:
    segmenter = Segmenter(tokenizer, 50, TextOptions())
    assert segmenter.push("") == [] and segmenter.push("   \n\t") == [] and segmenter.pending == ""
    assert segmenter.flush() == [] and segmenter.flush() == []
    assert segmenter.push("Hi.") == [] and segmenter.push("") == [] and segmenter.push("  ") == ["Hi."]
    assert segmenter.push("\n") == [] and segmenter.flush() == []


def test_flush_gives_out_what_is_buffered_and_the_segmenter_goes_on(tokenizer: Tokenizer) -> None:
    segmenter = Segmenter(tokenizer, 50, TextOptions())
    assert segmenter.push("Dr. Who arrived. And then") == ["Dr. Who arrived."]
    assert segmenter.pending == "And then"
    assert segmenter.flush() == ["And then"] and segmenter.pending == ""
    assert segmenter.push("he left") == [] and segmenter.push(". Next") == ["he left."]
    assert segmenter.flush() == ["Next"]
    # An unclosed markup at flush goes out as it is (the model's plan reports it).
    assert segmenter.push("Wait [pause:5") == [] and segmenter.flush() == ["Wait [pause:5"]


@pytest.mark.parametrize("piece", [None, 3, b"bytes", ["a"]])
def test_a_piece_that_is_not_a_string_is_a_text_error(tokenizer: Tokenizer, piece: object) -> None:
    segmenter = Segmenter(tokenizer, 50, TextOptions())
    segmenter.push("Kept")
    with pytest.raises(TextError, match="must be a string"):
        segmenter.push(piece)  # type: ignore[arg-type]
    assert segmenter.pending == "Kept"


def test_tokens_are_counted_as_the_prepared_text_is(tokenizer: Tokenizer) -> None:
    """A config's replaced characters count as what replaces them, as split_into_chunks counts them."""
    sentence = "Bread & butter & jam, tea & cakes."
    options = TextOptions(replace_characters={"&": ""})
    assert len(split_into_chunks(tokenizer, sentence, 16, TextOptions())) == 2
    assert len(split_into_chunks(tokenizer, sentence, 16, options)) == 1
    assert segment(tokenizer, [sentence], 16) == ["Bread & butter & jam,", "tea & cakes."]
    assert segment(tokenizer, [sentence], 16, options) == [sentence]


class CountingTokenizer:
    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer, self.characters = tokenizer, 0

    def encode(self, text: str) -> List[int]:
        self.characters += len(text)
        return self.tokenizer.encode(text)


@pytest.mark.parametrize("kind", ["sentences", "clauses", "no breaks", "no whitespace"])
def test_a_long_text_pushed_character_by_character_costs_a_bounded_multiple_of_its_length(
    tokenizer: Tokenizer, kind: str
) -> None:
    rng = random.Random(7)
    vocabulary = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi".split()
    words = [rng.choice(vocabulary) for _ in range(5000)]
    mark = {"sentences": lambda i: "." if i % 17 == 16 else "", "clauses": lambda i: "," if i % 9 == 8 else ""}
    separator = "" if kind == "no whitespace" else " "
    text = separator.join(w + mark.get(kind, lambda i: "")(i) for i, w in enumerate(words))[:20000]
    assert len(text) == 20000
    counting = CountingTokenizer(tokenizer)
    got = segment(counting, list(text), 50)  # type: ignore[arg-type]
    assert got == segment(tokenizer, [text], 50) and squeeze("".join(got)) == squeeze(text)
    assert counting.characters < 40 * len(text), counting.characters
    assert got == [text] if kind == "no whitespace" else len(got) > 200


class Unbounded(Segmenter):
    """Counts tokens at every word end (no upper bound skips a count)."""

    def _may_exceed(self, end: int, limit: int) -> bool:
        return True


@pytest.mark.parametrize("name", ["unigram4000.model", "unigram4000.json", "unigram1000_bytes.model", "bpe300.json"])
def test_skipping_counts_below_the_bound_changes_no_segment(name: str) -> None:
    """The cost bound holds (appending text adds at most its cost plus one token), so the counts it
    skips cannot change a decision: random texts dense in multi-byte characters, digits and breaks."""
    tokenizer = Tokenizer.from_file(str(FIXTURES / "tokenizers" / name))
    rng = random.Random(5)
    alphabet = list("abcdefgh  ,.;:0123456789") + ["\u00e9", "\u65e5", "\U0001f600", "\u2026", "\ufb01", "\u00bd"]
    for _ in range(30):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 400)))
        for max_tokens in (5, 12, 40):
            bounded = Segmenter(tokenizer, max_tokens, TextOptions())
            unbounded = Unbounded(tokenizer, max_tokens, TextOptions())
            assert bounded.push(text) + bounded.flush() == unbounded.push(text) + unbounded.flush(), text
        cuts = sorted(rng.sample(range(len(text) + 1), 2))
        head, tail = text[: cuts[0]].strip(), text[cuts[0] : cuts[1]]
        cost = Segmenter(tokenizer, 1, TextOptions())
        cost._text = tail
        whole, before = " ".join((head + tail).split()), " ".join(head.split())
        assert tokens(tokenizer, whole) <= tokens(tokenizer, before) + cost._cost(0, len(tail)) + 1, (head, tail)
