"""SSML as the text the model reads (core/portable/text/ssml.py): breaks are pauses, other tags dropped with
their text kept, entities read; checked against Python's own XML parser for the text, and the same
for any split of the text into pieces."""

from __future__ import annotations

import random
import re
import xml.etree.ElementTree as ElementTree
from html.parser import HTMLParser

import pytest

from core.portable.text.prepare import split_pauses
from core.portable.text.ssml import BREAK_STRENGTHS, MAX_TAG, SsmlStream, to_markup

DOCUMENTS = [
    '<speak>Hello <break time="500ms"/> world.</speak>',
    "<speak><p>One.</p><p>Two &amp; three.</p></speak>",
    '<speak><prosody rate="slow" pitch="+2st">Slowly</prosody>, <emphasis>then</emphasis> on.</speak>',
    '<speak><say-as interpret-as="date">3/4/2025</say-as> at <sub alias="ten">10</sub>.</speak>',
    '<?xml version="1.0"?><!-- a note --><speak xml:lang="en-US">It costs &#36;5 &lt;now&gt;.</speak>',
    '<speak>Wait<break strength="strong"/>then<break/>go<break strength="none"/>!</speak>',
]


def letters(text: str) -> str:
    """The text without its spaces (ours keeps <p> and <s> and breaks apart with one; XML's does not)."""
    return "".join(text.split())


def plain(markup: str) -> str:
    """The text of a markup without its pauses."""
    return letters(" ".join(part for part in split_pauses(markup) if isinstance(part, str)))


@pytest.mark.parametrize("document", DOCUMENTS)
def test_the_text_is_what_an_xml_parser_reads(document) -> None:
    root = ElementTree.fromstring(re.sub(r"<\?.*?\?>|<!--.*?-->", "", document))
    assert plain(to_markup(document)) == letters("".join(root.itertext()))


def test_breaks_are_pauses_of_their_time_or_strength() -> None:
    pauses = [part for part in split_pauses(to_markup(DOCUMENTS[0] + DOCUMENTS[5])) if isinstance(part, float)]
    assert pauses == [0.5, 0.75, 0.5]


@pytest.mark.parametrize("document", DOCUMENTS + ["a < b and c > d", "AT&T &euro;5 &unknown; & more", "<speak>cut"])
def test_any_split_of_the_text_reads_the_same(document) -> None:
    whole = to_markup(document)
    rng = random.Random(len(document))
    for _ in range(30):
        cuts = sorted(rng.sample(range(1, len(document)), min(len(document) - 1, rng.randint(1, 8))))
        pieces = [document[a:b] for a, b in zip([0] + cuts, cuts + [len(document)])]
        stream = SsmlStream()
        assert "".join(stream.push(piece) for piece in pieces) + stream.finish() == whole, pieces


def test_what_is_not_markup_is_text() -> None:
    assert to_markup("a < b and c > d") == "a < b and c > d"
    assert to_markup("AT&T & co &amp; &#8364;5") == "AT&T & co & €5"
    assert to_markup("an open <tag never closed") == "an open "
    stream = SsmlStream()
    assert stream.push("Tom &") == "Tom " and stream.push("amp; Jerry") == "& Jerry"


def test_a_tag_longer_than_the_bound_is_text_and_nothing_waits_for_its_end() -> None:
    """A "<" whose ">" is MAX_TAG characters away or more starts no tag: it is read as text, and a
    stream never holds back more than one tag's worth, however the text is cut (here, the hostile
    text that backtracked the tag pattern of old, in 64 KB Wyoming chunks)."""
    hostile = "<break" + " " * 64000 + "a>"
    assert to_markup(hostile) == hostile
    assert to_markup("<x" + "y" * (MAX_TAG - 3) + ">") == ""  # at the bound: still a tag
    assert to_markup("<x" + "y" * (MAX_TAG - 2) + ">") == "<x" + "y" * (MAX_TAG - 2) + ">"
    stream = SsmlStream()
    out = [stream.push("<x")]
    for _ in range(250):
        out.append(stream.push("a" * 6000))
        assert len(stream.pending) < MAX_TAG
    assert "".join(out) + stream.finish() == "<x" + "a" * 1_500_000


def attributes(tag: str) -> dict:
    """A tag's attributes as Python's HTML parser reads them (names lowercase, values stripped)."""
    found: dict = {}

    class Reader(HTMLParser):
        def handle_starttag(self, name, attrs):
            found.update({key: (value or "").strip() for key, value in attrs})

        handle_startendtag = handle_starttag

    Reader().feed(tag)
    return found


@pytest.mark.parametrize("seed", range(5))
def test_a_tags_attributes_are_what_an_html_parser_reads(seed) -> None:
    """The hand-written attribute reader (no pattern on user text) against Python's HTML parser,
    on tags of random quoted attributes, spaces and junk between them."""
    rng = random.Random(seed)
    names = ["time", "strength", "Time", "x-y", "a:b", "data_1"]
    values = ["500ms", " 1.5s ", "strong", "", "a b", "x=y", "it's"]
    for _ in range(200):
        parts = []
        for _ in range(rng.randint(0, 4)):
            name, value = rng.choice(names), rng.choice(values)
            quote = '"' if "'" in value or rng.random() < 0.5 else "'"
            parts.append(f"{name}{rng.choice(['', ' '])}={rng.choice(['', '  '])}{quote}{value}{quote}")
        tag = "<break " + " ".join(parts) + rng.choice(["", " ", "/", " /"]) + ">"
        expected = attributes(tag)
        time = expected.get("time")
        strength = BREAK_STRENGTHS.get(expected.get("strength", "medium").lower(), BREAK_STRENGTHS["medium"])
        if time is not None:
            assert to_markup(tag) == f' <break time="{time}"/> ', tag
        else:
            assert to_markup(tag) == (f" [pause:{strength:g}s] " if strength else " "), tag
