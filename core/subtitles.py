"""Word times as files: a JSON list of words, and subtitles (SubRip .srt, WebVTT .vtt).

A cue holds a few words, as captions show them: at most MAX_WORDS words and MAX_CHARACTERS
characters on its line, and a new cue after a silence of GAP_SECONDS or more; it is shown from its
first word's start to its last word's end.
"""

from __future__ import annotations

import json
from typing import List, Sequence

from .portable.errors import PocketTTSError
from .portable.timestamps import TimedWord

MAX_WORDS = 7
MAX_CHARACTERS = 42
GAP_SECONDS = 0.5
FORMATS = (".srt", ".vtt")


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


def cues(words: Sequence[TimedWord]) -> List[List[TimedWord]]:
    out: List[List[TimedWord]] = []
    for word in words:
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


def subtitles(words: Sequence[TimedWord], fmt: str) -> bytes:
    """The cues of `words` as a .srt or .vtt file's bytes (UTF-8)."""
    separator = "," if fmt == ".srt" else "."
    blocks = []
    for number, cue in enumerate(cues(words), 1):
        timing = f"{_clock(cue[0].start, separator)} --> {_clock(cue[-1].end, separator)}"
        line = " ".join(w.word for w in cue)
        blocks.append(f"{number}\n{timing}\n{line}\n" if fmt == ".srt" else f"{timing}\n{line}\n")
    head = "" if fmt == ".srt" else "WEBVTT\n\n"
    return (head + "\n".join(blocks)).encode("utf-8")
