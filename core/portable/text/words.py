"""The words of a text, and how each prepared chunk's tokens spread over them: what word
timestamps read the flow LM's attention through (core.portable.synthesis.timestamps).

A text's words are its lexical words: runs of letters and digits (with their combining marks),
joined across an apostrophe or a hyphen between two of them ("don't", "well-known"). A prepared
chunk (core.portable.text.prepare: what one generation step of the official package reads) is cut into
units: each word it says, each run of punctuation, and each word of the chunk that is no word of
the text (kept, never reported). A token's share of a unit is the part of the token's span (as
its tokenizer's library gives it: bytes for sentencepiece, characters for `tokenizers`) that lies
in the unit, over the part that lies in any unit.

Words are found in the chunks as `pocket-tts-timestamped` finds them: in order, compared without
case, Unicode compatibility forms or the curly apostrophe and dashes; a word the chunks cut in two
is two words; where the chunks do not hold the text's words in order (a normalization that
rewrote them), only the words that occur once on both sides are kept, in order, and the others are
no words. Its one difference: a chunk's units are read on the chunk itself, where the fork reads
them on the chunk's NFKC form and tokenizes that (the two are the same text but for compatibility
characters such as ligatures; the official tokens, which our audio is made from, are kept).
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from .tokenizer.graphemes import graphemes


class Word(NamedTuple):
    """A word of the text: as written, its index among the text's words, its span in the text."""

    text: str
    index: int
    begin: int
    end: int


class Unit(NamedTuple):
    """A unit of a chunk: a word (`word` set), or punctuation, or a word that is no word of the
    text; `synthetic`: not written by the user (punctuation the text preparation added)."""

    text: str
    begin: int  # in the chunk's characters
    end: int
    word: Optional[Word]
    synthetic: bool = False


class ChunkWords(NamedTuple):
    """A chunk's units, each of its tokens' share of each unit (token_to_unit [tokens, units]), and
    the user's word each of its words is said for, by the word's index (`users`: the word itself
    where the text was not normalized)."""

    units: Tuple[Unit, ...]
    token_to_unit: np.ndarray
    users: Dict[int, Word]

    @property
    def words(self) -> List[Word]:
        return [unit.word for unit in self.units if unit.word is not None]


_FOLD = str.maketrans({"\u2019": "'", "\u2010": "-", "\u2011": "-"})
_CANONICAL_EXTRA = frozenset("'-")
_JOINERS = frozenset("-\u2010\u2011'\u2019")
# A grapheme cluster NFKC rewrites is followed character by character up to this length.
MAX_CLUSTER = 32


def _fold(text: str) -> str:
    return text.casefold().translate(_FOLD)


def _is_canonical(c: str) -> bool:
    return c.isalnum() or c in _CANONICAL_EXTRA


def canonical(text: str) -> str:
    """A word as words are compared: NFKC, case-folded, the curly apostrophe and dashes plain,
    letters, digits, apostrophes and hyphens only."""
    return "".join(c for c in _fold(unicodedata.normalize("NFKC", text)) if _is_canonical(c))


def _is_mark(c: str) -> bool:
    return unicodedata.category(c).startswith("M")


def _word_spans(text: str) -> List[Tuple[int, int]]:
    spans = []
    i, n = 0, len(text)
    while i < n:
        if not text[i].isalnum():
            i += 1
            continue
        begin = i
        while True:
            while i < n and (text[i].isalnum() or _is_mark(text[i])):
                i += 1
            if i + 1 < n and text[i] in _JOINERS and text[i + 1].isalnum():
                i += 1
                continue
            break
        if canonical(text[begin:i]):
            spans.append((begin, i))
    return spans


def lexical_words(text: str) -> List[Word]:
    """The words of `text`, in order."""
    return [Word(text[b:e], k, b, e) for k, (b, e) in enumerate(_word_spans(text))]


def chunk_words(source: str, chunks: Sequence[str], tokenizer: Any) -> List[ChunkWords]:
    """The units of each of `chunks` (the prepared chunks of `source`, in order) and the shares of
    its tokens (`tokenizer`: core.portable.text.tokenizer.Tokenizer, whose `layout` gives the spans of
    the tokens its `encode` gives)."""
    words = lexical_words(source)
    prepared = [(k, b, e, canonical(chunk[b:e])) for k, chunk in enumerate(chunks) for b, e in _word_spans(chunk)]
    ignored: List[List[Tuple[int, int]]] = [[] for _ in chunks]
    mapped = _mapped_in_order(words, prepared, len(chunks))
    if mapped is None:
        try:
            mapped = _mapped_across_chunks(source, list(chunks), words)
            words = [found for chunk in mapped for found, _ in chunk]
        except ValueError:
            mapped, ignored = _mapped_where_unique(words, prepared, len(chunks))
    out = []
    for chunk, chunk_mapped, chunk_ignored in zip(chunks, mapped, ignored):
        units = _units(source, words, chunk, chunk_mapped, chunk_ignored)
        users = {unit.word.index: unit.word for unit in units if unit.word is not None}
        out.append(ChunkWords(units, _token_shares(chunk, units, tokenizer), users))
    return out


def said_for(source: str, spoken: str, origins: List[Tuple[int, int]]) -> Dict[int, Word]:
    """For each word of `spoken` (the normalizer's `source`; `origins`: the span of the source each
    of its characters comes from: core.portable.text.normalize.normalize_aligned), by index, the word
    of `source` it is said for: the same where the normalizer left it; where it rewrote a run of
    words ("$5.20" as "five dollars and twenty cents", "Dr." as "Doctor"), one word for the run,
    written as the user wrote it: what the normalizer read (a period it read kept: "Dr."), widened
    to the whole of the text's words it holds part of, and nothing it did not read (the quotes
    around "10:30", the arrow of "1-->2"). A sign read as a word of its own ("#" of "#1", said
    "number one") is one word with the word it touches; touching two or none ("A&B", "A & B"), it
    is a word of its own. The user's words are numbered in order, each said for once."""
    groups = _widened(_said_groups(spoken, origins), lexical_words(source))
    for group in groups:
        while group.begin < group.end and source[group.begin].isspace():
            group.begin += 1
        while group.begin < group.end and source[group.end - 1].isspace():
            group.end -= 1
    said: Dict[int, Word] = {}
    for index, run in enumerate(_with_signs(groups)):
        user = Word(source[run[0].begin : run[-1].end], index, run[0].begin, run[-1].end)
        for group in run:
            for word in group.spoken:
                said[word.index] = user
    return said


class _Group:
    """Spoken words said for one span of the source; `holds_word`: the span holds part of a word
    of the source."""

    def __init__(self, begin: int, end: int, word: Word):
        self.begin, self.end, self.spoken, self.holds_word = begin, end, [word], False


def _said_groups(spoken: str, origins: List[Tuple[int, int]]) -> List[_Group]:
    """The words of `spoken` by the spans of the source they come from: words from one rewrite
    (whose spans meet) are one group. In order, and their spans apart."""
    groups: List[_Group] = []
    for word in lexical_words(spoken):
        chars = origins[word.begin : word.end]
        begin, end = min(b for b, _ in chars), max(e for _, e in chars)
        if groups and begin < groups[-1].end:
            groups[-1].begin = min(begin, groups[-1].begin)
            groups[-1].end = max(end, groups[-1].end)
            groups[-1].spoken.append(word)
        else:
            groups.append(_Group(begin, end, word))
    return groups


def _widened(groups: List[_Group], words: List[Word]) -> List[_Group]:
    """Each group widened to the whole of the source's `words` it holds part of; groups that then
    share a word are one. One pass over both lists: a word is looked at by the groups it meets."""
    first = 0
    for group in groups:
        while first < len(words) and words[first].end <= group.begin:
            first += 1
        at = first
        while at < len(words) and words[at].begin < group.end:
            group.begin, group.end = min(group.begin, words[at].begin), max(group.end, words[at].end)
            group.holds_word = True
            at += 1
    merged: List[_Group] = []
    for group in groups:
        if merged and group.begin < merged[-1].end:
            merged[-1].end = max(merged[-1].end, group.end)
            merged[-1].spoken += group.spoken
            merged[-1].holds_word = merged[-1].holds_word or group.holds_word
        else:
            merged.append(group)
    return merged


def _with_signs(groups: List[_Group]) -> List[List[_Group]]:
    """The groups as the user's words: each with the groups that join it (_joins)."""
    joins = [_joins(groups, i) for i in range(len(groups))]
    runs: List[List[_Group]] = []
    for i, group in enumerate(groups):
        if runs and (joins[i] < 0 or joins[i - 1] > 0):
            runs[-1].append(group)
        else:
            runs.append([group])
    return runs


def _joins(groups: List[_Group], i: int) -> int:
    """Whether group i joins the group before it (-1), after it (1) or none (0): one that holds no
    word joins the one it touches alone; holding nothing, the one before it (else after)."""
    group = groups[i]
    if group.holds_word:
        return 0
    before, after = i > 0, i + 1 < len(groups)
    if group.begin == group.end:
        return -1 if before else int(after)
    touches_before = before and groups[i - 1].end == group.begin
    touches_after = after and groups[i + 1].begin == group.end
    return int(touches_after) - int(touches_before) if touches_before != touches_after else 0


# Finding the text's words in the chunks

Mapped = List[List[Tuple[Word, Tuple[int, int]]]]  # per chunk: (word, its span in the chunk)


def _mapped_in_order(words: List[Word], prepared: List[Tuple[int, int, int, str]], count: int) -> Optional[Mapped]:
    """Where the chunks' words are the text's, one for one."""
    if len(words) != len(prepared) or any(canonical(w.text) != p[3] for w, p in zip(words, prepared)):
        return None
    mapped: Mapped = [[] for _ in range(count)]
    for word, (k, b, e, _) in zip(words, prepared):
        mapped[k].append((word, (b, e)))
    return mapped


def _mapped_where_unique(
    words: List[Word], prepared: List[Tuple[int, int, int, str]], count: int
) -> Tuple[Mapped, List[List[Tuple[int, int]]]]:
    """Only the words found once on both sides, in order; the chunks' other words are no words."""
    keys = [canonical(w.text) for w in words]
    ours, theirs = Counter(keys), Counter(p[3] for p in prepared)
    position = {p[3]: i for i, p in enumerate(prepared)}
    pairs, last = [], -1
    for i, key in enumerate(keys):
        if ours[key] == 1 and theirs[key] == 1 and position[key] > last:
            pairs.append((i, position[key]))
            last = position[key]
    mapped: Mapped = [[] for _ in range(count)]
    for i, j in pairs:
        k, b, e, _ = prepared[j]
        mapped[k].append((words[i], (b, e)))
    paired = {j for _, j in pairs}
    ignored: List[List[Tuple[int, int]]] = [[] for _ in range(count)]
    for j, (k, b, e, _) in enumerate(prepared):
        if j not in paired:
            ignored[k].append((b, e))
    return mapped, ignored


def _canonical_projection(text: str) -> Tuple[str, List[Tuple[int, int]]]:
    """The canonical characters of `text`, each with the span of `text` it comes from (a
    character NFKC writes from several carries all of them). Cluster by cluster (NFKC composes
    within a grapheme cluster), so that its cost follows the text's length."""
    characters, spans = [], []
    at = 0
    for cluster in graphemes(text):
        normalized, origins = _nfkc_origins(cluster, at)
        for c, origin in zip(normalized, origins):
            for folded in _fold(c):
                if _is_canonical(folded):
                    characters.append(folded)
                    spans.append(origin)
        at += len(cluster)
    return "".join(characters), spans


def _nfkc_origins(cluster: str, at: int) -> Tuple[str, List[Tuple[int, int]]]:
    """NFKC of a grapheme cluster starting at `at`, and where each of its characters comes from:
    as NFKC grows character by character, what it rewrote when a character came carries that
    character and all it rewrote (a cluster past MAX_CLUSTER: every character the whole cluster)."""
    normalized = unicodedata.normalize("NFKC", cluster)
    if normalized == cluster:
        return cluster, [(at + i, at + i + 1) for i in range(len(cluster))]
    if len(cluster) > MAX_CLUSTER:
        return normalized, [(at, at + len(cluster))] * len(normalized)
    normalized = ""
    origins: List[Tuple[int, int]] = []
    for i in range(len(cluster)):
        updated = unicodedata.normalize("NFKC", cluster[: i + 1])
        common = 0
        while common < min(len(normalized), len(updated)) and normalized[common] == updated[common]:
            common += 1
        changed = origins[common:] + [(at + i, at + i + 1)]
        span = (min(b for b, _ in changed), max(e for _, e in changed))
        origins = origins[:common] + [span] * (len(updated) - common)
        normalized = updated
    return normalized, origins


def _capitalized(text: str) -> List[str]:
    return list(dict.fromkeys([text, text[:1].upper() + text[1:]])) if text else [text]


def _surface(text: str, chunk: str, span: Tuple[int, int], capitalize: bool) -> Tuple[int, int]:
    """The span in the chunk of a word part as written there: the closest match of its written
    form that holds its canonical span, then its combining marks."""
    matches = []
    for candidate in _capitalized(text) if capitalize else [text]:
        surface = unicodedata.normalize("NFKC", candidate)
        # Only where it can hold the span: starting from span[1] - len(surface) to span[0].
        at = chunk.find(surface, max(0, span[1] - len(surface)), span[0] + len(surface))
        while 0 <= at <= span[0]:
            if span[1] <= at + len(surface):
                matches.append((at, at + len(surface)))
            at = chunk.find(surface, at + 1, span[0] + len(surface))
    if matches:
        span = min(matches, key=lambda m: (span[0] - m[0] + m[1] - span[1], m[0]))
    end = span[1]
    while end < len(chunk) and _is_mark(chunk[end]):
        end += 1
    return span[0], end


def _mapped_across_chunks(source: str, chunks: List[str], words: List[Word]) -> Mapped:
    """Each word found in the chunks' canonical text, in order (a word the chunks cut in two is two
    words, numbered anew); a ValueError where one is not found or is cut inside a character."""
    canonical_text, origins = "", []  # origins: (chunk, span in it) of each canonical character
    for k, chunk in enumerate(chunks):
        text, spans = _canonical_projection(chunk)
        canonical_text += text
        origins.extend((k, b, e) for b, e in spans)
    if canonical_text not in {canonical(v) for v in _capitalized(source.strip())}:
        raise ValueError("the prepared text does not match the text")
    mapped: Mapped = [[] for _ in chunks]
    floor = 0
    index = 0
    for word in words:
        candidates = {canonical(v) for v in (_capitalized(word.text) if word.index == 0 else [word.text])}
        found = [(canonical_text.find(c, floor), len(c)) for c in candidates]
        found = [(at, at + size) for at, size in found if at >= 0]
        if not found:
            raise ValueError("the prepared text does not hold a word of the text")
        begin, end = min(found)
        if begin == end:
            raise ValueError(f"the word {word.text!r} has no text to time")
        _, projection = _canonical_projection(word.text)
        if len(projection) != end - begin:
            raise ValueError(f"the word {word.text!r} cannot be found in the prepared text")
        groups = []  # (chunk, first, last + 1) runs of canonical positions in one chunk
        for position in range(begin, end):
            k = origins[position][0]
            if groups and groups[-1][0] == k:
                groups[-1][2] = position + 1
            else:
                groups.append([k, position, position + 1])
        starts = [min(b for b, _ in projection[g[1] - begin : g[2] - begin]) for g in groups]
        if any(later <= earlier for earlier, later in zip(starts, starts[1:])):
            raise ValueError(f"the chunks cut a character of {word.text!r}")
        for g, (k, first, last) in enumerate(groups):
            part_begin = 0 if g == 0 else starts[g]
            part_end = starts[g + 1] if g + 1 < len(groups) else len(word.text)
            part = Word(word.text[part_begin:part_end], index, word.begin + part_begin, word.begin + part_end)
            index += 1
            span = (origins[first][1], origins[last - 1][2])
            mapped[k].append((part, _surface(part.text, chunks[k], span, word.index == 0 and g == 0)))
        floor = end
    return mapped


# A chunk's units and its tokens' shares


def _is_punctuation(c: str) -> bool:
    return unicodedata.category(c).startswith("P")


def _units(
    source: str,
    words: List[Word],
    chunk: str,
    mapped: List[Tuple[Word, Tuple[int, int]]],
    ignored: List[Tuple[int, int]],
) -> Tuple[Unit, ...]:
    units = [Unit(word.text, b, e, word) for word, (b, e) in mapped]
    units += [Unit(chunk[b:e], b, e, None, True) for b, e in ignored]
    covered = [False] * len(chunk)
    for unit in units:
        covered[unit.begin : unit.end] = [True] * (unit.end - unit.begin)
    i = 0
    while i < len(chunk):
        if covered[i] or not _is_punctuation(chunk[i]):
            i += 1
            continue
        end = i + 1
        while end < len(chunk) and not covered[end] and _is_punctuation(chunk[end]):
            end += 1
        units.append(Unit(chunk[i:end], i, end, None, _added_punctuation(source, words, mapped, i)))
        i = end
    return tuple(sorted(units, key=lambda unit: (unit.begin, unit.end)))


def _added_punctuation(source: str, words: List[Word], mapped: List[Tuple[Word, Tuple[int, int]]], at: int) -> bool:
    """Punctuation after a chunk's last word where the text has none after that word."""
    if not mapped or at < mapped[-1][1][1]:
        return False
    last = mapped[-1][0]
    boundary = words[last.index + 1].begin if last.index + 1 < len(words) else len(source)
    return not any(_is_punctuation(c) for c in source[last.end : boundary])


def _byte_value(piece: str) -> Optional[int]:
    if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
        try:
            return int(piece[3:5], 16)
        except ValueError:
            return None
    return None


def _utf8_length(lead: int) -> int:
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 1


def _whole_characters(spans: List[Tuple[int, int]], pieces: List[str]) -> List[Tuple[int, int]]:
    """Every byte piece of one character given the character's whole span."""
    out = list(spans)
    i = 0
    while i < len(pieces):
        lead = _byte_value(pieces[i])
        if lead is None:
            i += 1
            continue
        size = _utf8_length(lead)
        values = [_byte_value(p) for p in pieces[i : i + size]]
        whole = len(values) == size and all(v is not None and 0x80 <= v <= 0xBF for v in values[1:])  # type: ignore[operator]
        end = i + size if whole else i + 1
        begin, stop = min(b for b, _ in spans[i:end]), max(e for _, e in spans[i:end])
        if stop > begin:
            out[i:end] = [(begin, stop)] * (end - i)
        i = end
    return out


def _token_shares(chunk: str, units: Tuple[Unit, ...], tokenizer: Any) -> np.ndarray:
    layout = tokenizer.layout(chunk)
    spans = _whole_characters([(b, e) for _, b, e in layout], [tokenizer.piece(i) for i, _, _ in layout])
    if tokenizer.offset_unit == "byte":
        at = [0]
        for c in chunk:
            at.append(at[-1] + len(c.encode("utf-8")))
        unit_spans = [(at[u.begin], at[u.end]) for u in units]
    else:
        unit_spans = [(u.begin, u.end) for u in units]
    if not spans or not unit_spans:
        return np.zeros((len(spans), len(unit_spans)), np.float32)
    token = np.array(spans, dtype=np.int64)  # [T, 2]
    unit = np.array(unit_spans, dtype=np.int64)  # [U, 2]
    overlap = np.minimum(token[:, 1:], unit[None, :, 1]) - np.maximum(token[:, :1], unit[None, :, 0])  # [T, U]
    overlap = np.maximum(overlap, 0).astype(np.float32)
    total = overlap.sum(axis=1, keepdims=True)  # [T, 1]
    return np.where(total > 0, overlap / np.maximum(total, 1), overlap).astype(np.float32)
