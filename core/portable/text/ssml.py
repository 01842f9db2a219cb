"""SSML (as Home Assistant's Wyoming clients may send it) as the text the model reads.

`<break time="500ms"/>` stays a pause (core.portable.text.prepare reads it); `<break strength="strong"/>`
becomes a pause of that strength's length, and `<break/>` a medium one. Every other tag is dropped,
its text kept (`<p>` and `<s>` end with a space, so their sentences stay apart); XML comments and
declarations are dropped; entities (`&amp;`, `&#8364;`) are read as the characters they stand for.
Malformed SSML is never an error: what is not markup is read as text.

`SsmlStream` does the same to text that arrives in pieces (any split, inside a tag or an entity
too): a piece's text comes out as soon as no tag or entity is left open in it.

The text is a user's, so reading it is linear in its length: no regular expression runs on it,
a tag is at most MAX_TAG characters (a "<" whose ">" is further away is text), and what a stream
holds back between pieces is at most one such tag.
"""

from __future__ import annotations

import html
from typing import Dict, List, Optional

# Pauses of the SSML break strengths (the SSML 1.1 defaults leave them to the processor).
BREAK_STRENGTHS = {"none": 0.0, "x-weak": 0.1, "weak": 0.25, "medium": 0.5, "strong": 0.75, "x-strong": 1.0}
# The longest tag, ">" included (a <speak> with its namespaces is ~150); a longer one is text.
MAX_TAG = 1000
# The longest entity kept open across pieces ("&thetasym;"); one longer is text.
_ENTITY_CHARACTERS = 10
_SPACED = {"p", "s", "speak", "br"}


def to_markup(ssml: str) -> str:
    """A whole SSML text as the text the model reads (see the module's docstring)."""
    stream = SsmlStream()
    return stream.push(ssml) + stream.finish()


class SsmlStream:
    def __init__(self) -> None:
        self._pending = ""  # an open tag or entity (at most MAX_TAG characters), waiting for its end

    @property
    def pending(self) -> str:
        """What is held back: the start of a tag or an entity that is still open."""
        return self._pending

    def push(self, piece: str) -> str:
        """The text of `piece` as far as it can be read now."""
        text = self._pending + piece
        out: List[str] = []
        start = 0
        while True:
            at = _next_markup(text, start)
            if at is None:
                out.append(text[start:])
                self._pending = ""
                break
            out.append(text[start:at])
            end = _markup_end(text, at)
            if end is None:  # still open: wait for more
                self._pending = text[at:]
                break
            out.append(_read(text[at:end]))
            start = end
        return "".join(out)

    def finish(self) -> str:
        """What is left at the end of the text: an entity never closed is text, a tag never closed is dropped."""
        pending, self._pending = self._pending, ""
        return pending if pending.startswith("&") else ""


def _next_markup(text: str, start: int) -> Optional[int]:
    tag, entity = text.find("<", start), text.find("&", start)
    found = [at for at in (tag, entity) if at >= 0]
    return min(found) if found else None


def _markup_end(text: str, at: int) -> Optional[int]:
    """The end of the tag or entity at `at`, or None while it may still be open. One that cannot
    be one (a tag or an entity too long, an entity broken by a character no entity holds) ends
    where it starts: its first character is text."""
    if text[at] == "<":
        if at + 1 == len(text):
            return None
        if not (text[at + 1].isalpha() or text[at + 1] in "/!?"):  # "a < b": no tag starts so
            return at + 1
        end = text.find(">", at, at + MAX_TAG)
        if end >= 0:
            return end + 1
        return None if len(text) - at < MAX_TAG else at + 1
    for i in range(at + 1, min(len(text), at + 1 + _ENTITY_CHARACTERS)):
        if text[i] == ";":
            return i + 1
        if not (text[i].isalnum() or text[i] == "#"):
            return at + 1
    return None if len(text) - at <= _ENTITY_CHARACTERS else at + 1


def _read(markup: str) -> str:
    """What a tag or an entity says (a "<" or "&" that starts neither says itself)."""
    if markup.startswith("&") or markup == "<":
        return html.unescape(markup)
    body = markup[1:-1]  # a whole tag: "<" ... ">"
    closing = body.startswith("/")
    if closing:
        body = body[1:]
    body = body.lstrip()
    name_end = _word_end(body, 0)
    name = body[:name_end].lower()
    if name == "break" and not closing:
        attributes = _attributes(body, name_end)
        if "time" in attributes:
            return f' <break time="{attributes["time"]}"/> '
        seconds = BREAK_STRENGTHS.get(attributes.get("strength", "medium").lower(), BREAK_STRENGTHS["medium"])
        return f" [pause:{seconds:g}s] " if seconds else " "
    return " " if name in _SPACED else ""


def _is_name_character(c: str) -> bool:
    return c.isalnum() or c in "_:-"


def _word_end(text: str, i: int) -> int:
    while i < len(text) and _is_name_character(text[i]):
        i += 1
    return i


def _attributes(body: str, i: int) -> Dict[str, str]:
    """The quoted attributes (name="value" or name='value') of a tag's body from `i`, by lowercase
    name (the last of a name kept): one pass, each character looked at a bounded number of times."""
    found: Dict[str, str] = {}
    n = len(body)
    while i < n:
        if not _is_name_character(body[i]):
            i += 1
            continue
        end = _word_end(body, i)
        j = end
        while j < n and body[j].isspace():
            j += 1
        if j < n and body[j] == "=":
            j += 1
            while j < n and body[j].isspace():
                j += 1
            if j < n and body[j] in "\"'":
                close = body.find(body[j], j + 1)
                if close >= 0:
                    found[body[i:end].lower()] = body[j + 1 : close].strip()
                    i = close + 1
                    continue
        i = end
    return found
