"""Text arriving in pieces (an LLM's output, split anywhere) cut into segments to speak as soon as each
is complete, with the chunking rules of `text.split_into_chunks`.

Every decision is taken at a word end (the first whitespace after a non-whitespace character), from
the text before it only, and word ends are visited in order whatever the pieces were: so any split
of the same text gives the same segments, and a segment comes out at the push that brings the
whitespace after it. At a word end the segment in progress is:

- a sentence, given out, when it ends in a run of . ! ? ... (closing quotes or brackets may follow),
  unless that run is a single period after a common abbreviation or title ("Dr.", "e.g."), an
  initial ("J. R. R. Tolkien"), or a bare list number ("1. "): normalization reads those as words;
- cut at its clause breaks (, ; : then whitespace) once it has grown past `max_tokens` tokens, into
  the longest runs of clauses that fit, as split_into_chunks's fallback regroups them; with no
  clause break and past MAX_SEGMENT_TOKENS, cut between words into runs that fit.

Nothing is cut inside pause markup ("[pause:..." or "<break ..." not yet closed). A "3.14" or a "5."
followed by "20" is never cut, since no whitespace follows the period.

Tokens are counted only of the segment in progress, and only when an upper bound on its count could
exceed the limit: a token covers at least one UTF-8 byte of the normalized text, except a leading
word-boundary piece, so appending a text adds at most its byte length (after NFKC) plus one to the
count measured before it (tests/core/test_segmenter.py checks this on both tokenizer kinds).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Dict, List, Optional

from ..errors import TextError
from .prepare import MAX_SEGMENT_TOKENS, TextOptions
from .tokenizer import Tokenizer

_WORD_END = re.compile(r"(?<=\S)\s")
_PAUSE_START = re.compile(r"\[\s*pause\b|<\s*break\b", re.IGNORECASE)
_TERMINAL = ".!?\u2026"
_CLOSERS = "\"'\u201d\u2019)]\u00bb"
_OPENERS = "\"'\u201c\u2018([\u00ab"
_CLAUSE = ",;:"
# A single period after these does not end a sentence (the normalizer reads them as words).
_ABBREVIATIONS = frozenset("Mr Mrs Ms Dr Prof St Jr Sr No vs Vs etc Etc e.g E.g i.e I.e approx Approx".split())
_INITIALS = re.compile(r"[^\W\d_](?:\.[^\W\d_])+")  # U.S, e.g, a.m (the final period excluded)
_LIST_NUMBER = re.compile(r"\d+\.")


class Segmenter:
    """`push(piece)` -> the segments it completed, `flush()` -> the rest; `pending` is what waits.

    Segments are raw text, stripped (not normalized or prepared); joined, they are the input text
    up to whitespace.
    """

    def __init__(self, tokenizer: Tokenizer, max_tokens: int, options: TextOptions):
        self._tokenizer = tokenizer
        self._max_tokens = max_tokens
        # Counted as split_into_chunks counts the prepared text: replaced characters, no semicolons.
        table: Dict[str, str] = dict(options.replace_characters)
        if options.remove_semicolons:
            table[";"] = ","
        self._table = str.maketrans(table)
        self._char_costs: Dict[str, int] = {}
        self._reset()

    def _reset(self) -> None:
        self._text = ""  # the buffer: pending text starts at self._start
        self._start = 0
        self._clause_breaks: List[int] = []  # word ends after , ; : in the segment in progress
        self._word_ends: List[int] = []
        self._markup: Optional[int] = None  # where an unclosed pause markup starts
        self._scanned = 0  # markup is tracked up to here
        # Tokens of text[start:bound_at] plus one (a word boundary piece), at most: text appended
        # adds at most its cost, so tokens are counted only once this passes max_tokens.
        self._bound = 1
        self._bound_at = 0

    @property
    def pending(self) -> str:
        """The text received and not yet given out in a segment."""
        return self._text[self._start :].lstrip()

    def push(self, text: str) -> List[str]:
        """The segments that this piece of text completes, in order."""
        if not isinstance(text, str):
            raise TextError(f"text must be a string, got {type(text).__name__}")
        self._compact()
        old_length = len(self._text)
        self._text += text
        segments: List[str] = []
        for match in _WORD_END.finditer(self._text, max(old_length, 1)):
            self._word_end(match.start(), segments)
        return segments

    def flush(self) -> List[str]:
        """Everything still buffered, as segments (the end of the text is a word end); the
        segmenter then starts afresh."""
        self._compact()
        segments: List[str] = []
        end = len(self._text)
        if end and not self._text[end - 1].isspace():
            self._word_end(end, segments)
        self._emit(end, segments)
        self._reset()
        return segments

    def _compact(self) -> None:
        """Drops the text already given out (once per push, so a piece costs its own length)."""
        shift = self._start
        if shift == 0:
            return
        self._text = self._text[shift:]
        self._start = 0
        self._clause_breaks = [p - shift for p in self._clause_breaks]
        self._word_ends = [p - shift for p in self._word_ends]
        self._markup = None if self._markup is None else self._markup - shift
        self._scanned = max(0, self._scanned - shift)
        self._bound_at = max(0, self._bound_at - shift)

    def _word_end(self, end: int, segments: List[str]) -> None:
        if self._inside_markup(end):
            return
        if self._ends_sentence(end):
            self._emit(end, segments)
            return
        self._word_ends.append(end)
        if self._text[end - 1] in _CLAUSE:
            self._clause_breaks.append(end)
        self._cut_long(end, segments)

    def _inside_markup(self, end: int) -> bool:
        """Whether `end` lies in pause markup not yet closed, tracking the markup from where the
        last word end left it."""
        text = self._text
        position = max(self._start, self._scanned)
        if position > self._start and text[position - 1] in "[<":
            position -= 1  # "[ pause" read from its bracket
        while True:
            if self._markup is None:
                match = _PAUSE_START.search(text, position, end)
                if match is None:
                    break
                self._markup, position = match.start(), match.end()
            closer = text.find("]" if text[self._markup] == "[" else ">", position, end)
            if closer < 0:
                break
            self._markup, position = None, closer + 1
        self._scanned = end
        return self._markup is not None

    def _ends_sentence(self, end: int) -> bool:
        text, start = self._text, self._start
        stop = end
        while stop > start and text[stop - 1] in _CLOSERS:
            stop -= 1
        run = stop
        while run > start and text[run - 1] in _TERMINAL:
            run -= 1
        if run == stop:
            return False
        if text[run:stop] != ".":
            return True
        word_start = run
        while word_start > start and not text[word_start - 1].isspace():
            word_start -= 1
        word = text[word_start:run].lstrip(_OPENERS)
        if word in _ABBREVIATIONS or _INITIALS.fullmatch(word):
            return False
        if len(word) == 1 and word.isalpha() and word.isupper():
            return False
        return not _LIST_NUMBER.fullmatch(text[start:stop].strip())

    def _cut_long(self, end: int, segments: List[str]) -> None:
        """Cuts the segment in progress while it is longer than max_tokens and has a clause break,
        or longer than MAX_SEGMENT_TOKENS and has a word end before `end`."""
        word_limit = max(self._max_tokens, MAX_SEGMENT_TOKENS)
        # Without a clause break only the word limit can cut: the count waits until it may pass that.
        while self._may_exceed(end, self._max_tokens if self._clause_breaks else word_limit):
            count = self._count(self._start, end)
            self._bound, self._bound_at = count + 1, end
            if count <= self._max_tokens:
                return
            if self._clause_breaks:
                self._emit(self._longest_fitting(self._clause_breaks), segments)
            elif count > word_limit and self._word_ends[0] < end:
                # Cut down to what fits: the next cut comes only after it grows that far again.
                while self._word_ends[0] < end and self._count(self._start, end) > self._max_tokens:
                    self._emit(self._longest_fitting([p for p in self._word_ends if p < end]), segments)
            else:
                return
            self._bound, self._bound_at = self._cost(self._start, end) + 1, end

    def _may_exceed(self, end: int, limit: int) -> bool:
        self._bound += self._cost(self._bound_at, end)
        self._bound_at = end
        return self._bound > limit

    def _longest_fitting(self, positions: List[int]) -> int:
        """The last of `positions` up to which the segment fits in max_tokens (token counts grow
        with the text: a binary search), or the first if none does."""
        lo, hi = 0, len(positions) - 1
        if self._count(self._start, positions[0]) > self._max_tokens:
            return positions[0]
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._count(self._start, positions[mid]) <= self._max_tokens:
                lo = mid
            else:
                hi = mid - 1
        return positions[lo]

    def _emit(self, end: int, segments: List[str]) -> None:
        segment = self._text[self._start : end].strip()
        if segment:
            segments.append(segment)
        self._start = end
        self._clause_breaks = [p for p in self._clause_breaks if p > end]
        self._word_ends = [p for p in self._word_ends if p > end]
        self._bound, self._bound_at = 1, end

    def _count(self, start: int, end: int) -> int:
        return len(self._tokenizer.encode(" ".join(self._text[start:end].translate(self._table).split())))

    def _cost(self, start: int, end: int) -> int:
        """An upper bound on the tokens that text[start:end] adds to a text it is appended to."""
        text = self._text[start:end].translate(self._table)
        if text.isascii():
            return len(text)
        costs = self._char_costs
        total = 0
        for char in text:
            cost = costs.get(char)
            if cost is None:
                normalized = unicodedata.normalize("NFKC", char)
                cost = costs[char] = max(len(char.encode("utf-8")), len(normalized.encode("utf-8")))
            total += cost
        return total
