"""Pronunciations: how to say words the model reads wrong, written as the words to say instead.

A pronunciation file is plain text, one `word = respelling` a line (a word or a phrase; `#` starts
a comment; blank lines are skipped):

    Kyutai = kyoo-tie
    GIF = jif
    Nguyen = win

A text's words are replaced before the normalizer reads them (core.portable.text.normalize applies
the lexicon as its first rule), whole words only, the case of the file's word ignored; word
timestamps still report the word as written. A request may bring its own (`added`): the same
checks, its words over the model's.
"""

from __future__ import annotations

import re
from typing import Callable, Dict, Mapping, NamedTuple, Optional, Pattern, Tuple

from ..errors import TextError

# What one file may hold: enough for a household's names, bounded for a request's cost.
MAX_ENTRIES = 1000
MAX_LENGTH = 100  # characters of a word, or of a respelling
MAX_FILE = 1024 * 1024  # characters of a pronunciation file, comments included


Rule = Tuple[Pattern[str], Callable[["re.Match[str]", str], str]]


class Lexicon(NamedTuple):
    entries: Tuple[Tuple[str, str], ...]  # (word as written, respelling), the longest words first
    rule: Optional[Rule]  # the normalizer's rule that says each word as its respelling (None: no entries)


def _lexicon(entries: Dict[str, Tuple[str, str]]) -> Lexicon:
    """The lexicon of `entries` (casefolded word -> (word, respelling)), its rule compiled once."""
    if not entries:
        return Lexicon((), None)
    ordered = tuple(sorted(entries.values(), key=lambda entry: -len(entry[0])))
    words = "|".join(r"\s+".join(re.escape(part) for part in word.split()) for word, _ in ordered)
    pattern = re.compile(rf"(?<![\w-])(?:{words})(?![\w-])", re.IGNORECASE)
    said = {folded: respelling for folded, (_, respelling) in entries.items()}
    return Lexicon(ordered, (pattern, lambda match, language: said[" ".join(match.group(0).split()).casefold()]))


EMPTY = _lexicon({})


def read(path: str) -> Lexicon:
    """The lexicon of a pronunciation file; a TextError saying why where it is not one."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(MAX_FILE + 1)
    except (OSError, UnicodeDecodeError) as e:
        raise TextError(f"cannot read the pronunciations {path}: {getattr(e, 'strerror', None) or e}") from None
    if len(text) > MAX_FILE:
        raise TextError(f"the pronunciations {path} are longer than {MAX_FILE} characters")
    return parse(text, path)


def parse(text: str, source: str) -> Lexicon:
    """The lexicon of a pronunciation file's text; a TextError naming the line that is not one."""
    entries: Dict[str, Tuple[str, str]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        word, equals, respelling = line.partition("=")
        if not equals or not word.strip() or not respelling.strip():
            raise TextError(f"{source}, line {number}: expected `word = respelling`, got {line!r}")
        _add(entries, word, respelling, f"{source}, line {number}")
        if len(entries) > MAX_ENTRIES:
            raise TextError(f"{source}: more than {MAX_ENTRIES} pronunciations")
    return _lexicon(entries)


def added(base: Lexicon, pronunciations: Mapping[str, str], source: str = "pronunciations") -> Lexicon:
    """`base` with a request's `pronunciations` (word -> respelling; at most MAX_ENTRIES, each
    checked as a file's line), its words over the base's; a TextError naming the first that is
    not one."""
    if not isinstance(pronunciations, Mapping) or len(pronunciations) > MAX_ENTRIES:
        raise TextError(f"{source}: at most {MAX_ENTRIES} pairs of a word and its respelling")
    entries = {word.casefold(): (word, respelling) for word, respelling in base.entries}
    for word, respelling in pronunciations.items():
        if not isinstance(word, str) or not isinstance(respelling, str) or not word.strip() or not respelling.strip():
            raise TextError(f"{source}: each word and its respelling are non-blank text")
        _add(entries, word, respelling, f"{source}, {word[:MAX_LENGTH]!r}")
    return _lexicon(entries)


def _add(entries: Dict[str, Tuple[str, str]], word: str, respelling: str, where: str) -> None:
    word, respelling = " ".join(word.split()), " ".join(respelling.split())
    if len(word) > MAX_LENGTH or len(respelling) > MAX_LENGTH:
        raise TextError(f"{where}: a word and its respelling have at most {MAX_LENGTH} characters")
    if not re.match(r"^\w", word) or not re.search(r"\w$", word):
        raise TextError(f"{where}: {word!r} does not begin and end with a letter or digit")
    entries[word.casefold()] = (word, respelling)
