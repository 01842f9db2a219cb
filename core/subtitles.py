"""Word times as files: a JSON list of words, and subtitles (SubRip .srt, WebVTT .vtt).

A cue holds a few words, as captions show them: at most MAX_WORDS words and MAX_CHARACTERS
characters on its line, and a new cue after a silence of GAP_SECONDS or more; it is shown from its
first word's start to its last word's end.

A cue's text is one line, whatever its words hold: a blank line would end the cue, and a line of
its own could be read as a cue's number or timing. In WebVTT, "&", "<" and ">" are written as
character references (the format's escapes; an arrow "-->" in a cue makes readers take the line
for a timing line). SubRip has no escapes: there "-->" is written with a WORD JOINER (U+2060, not
shown) between "--" and ">", so that no line but a timing line holds the arrow.
"""

from __future__ import annotations

import json
from typing import List, Sequence

from .portable.errors import PocketTTSError
from .portable.synthesis.timestamps import TimedWord

MAX_WORDS = 7
MAX_CHARACTERS = 42
GAP_SECONDS = 0.5
FORMATS = (".srt", ".vtt")
_ARROW = "-->"
_SRT_ARROW = "--\u2060>"
_VTT_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def words_json(words: Sequence[TimedWord]) -> bytes:
    """[{"word", "start", "end"}, ...] in order, times in seconds (to the millisecond)."""
    entries = [{"word": w.word, "start": round(w.start, 3), "end": round(w.end, 3)} for w in words]
    return (json.dumps(entries, ensure_ascii=False, indent=1) + "\n").encode("utf-8")


def subtitle_format(path: str) -> str:
    """ ".srt" or ".vtt", by the file's name; a PocketTTSError for any other."""
    for suffix in FORMATS:
        if path.lower().endswith(suffix):
            return suffix
    raise PocketTTSError(f"--subtitles {path}: name a .srt or a .vtt file")


def _shown(word: str) -> str:
    """A word as a cue shows it: each run of whitespace in it (a line break among them) one space."""
    return " ".join(word.split())


def cues(words: Sequence[TimedWord]) -> List[List[TimedWord]]:
    """The words in cues, each word as it is shown; a word with nothing to show is in none."""
    out: List[List[TimedWord]] = []
    for word in words:
        word = word._replace(word=_shown(word.word))
        if not word.word:
            continue
        current = out[-1] if out else None
        if (
            current is None
            or len(current) >= MAX_WORDS
            or len(" ".join(w.word for w in current + [word])) > MAX_CHARACTERS
            or word.start - current[-1].end >= GAP_SECONDS
        ):
            out.append([word])
        else:
            current.append(word)
    return out


def _clock(seconds: float, separator: str) -> str:
    ms = int(round(seconds * 1000))
    return f"{ms // 3600000:02d}:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d}{separator}{ms % 1000:03d}"


def _cue_text(cue: Sequence[TimedWord], fmt: str) -> str:
    """A cue's line in a .srt or .vtt file (its words as `cues` gives them)."""
    line = " ".join(w.word for w in cue)
    return line.replace(_ARROW, _SRT_ARROW) if fmt == ".srt" else line.translate(_VTT_ESCAPES)


def subtitles(words: Sequence[TimedWord], fmt: str) -> bytes:
    """The cues of `words` as a .srt or .vtt file's bytes (UTF-8)."""
    separator = "," if fmt == ".srt" else "."
    blocks = []
    for number, cue in enumerate(cues(words), 1):
        timing = f"{_clock(cue[0].start, separator)} --> {_clock(cue[-1].end, separator)}"
        line = _cue_text(cue, fmt)
        blocks.append(f"{number}\n{timing}\n{line}\n" if fmt == ".srt" else f"{timing}\n{line}\n")
    head = "" if fmt == ".srt" else "WEBVTT\n\n"
    return (head + "\n".join(blocks)).encode("utf-8")
