"""Text preparation exactly as the official 4.0.1 (`pocket_tts/models/text_chunking.py`).

A prompt is cleaned (character replacements, whitespace, capital letter, final punctuation, padding
of short inputs), then split into sentences and regrouped into chunks of at most `max_tokens`
tokens; each chunk is generated on its own from the voice state.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Dict, List, Tuple, Union

from ..config import Config
from ..errors import EmptyTextError, TextError
from .lexicon import EMPTY, Lexicon
from .normalize import normalize_text
from .tokenizer import Tokenizer

# Pause markup (not in the official package; the syntax of its open pull request #242, which other
# tools write): [pause] (DEFAULT_PAUSE_SECONDS), [pause:1.5] (seconds), [pause:500ms], [pause:1.5s],
# <break/>, <break time="300ms"/> (or "2", seconds), <break strength="weak"/> (SSML's strengths).
MAX_PAUSE_SECONDS = 10.0
DEFAULT_PAUSE_SECONDS = 0.5
STRENGTHS = {"none": 0.0, "x-weak": 0.1, "weak": 0.25, "medium": 0.5, "strong": 0.75, "x-strong": 1.0}
_PAUSE = re.compile(
    r"\[pause(?::([^\]]*))?\]|<break\b((?:\s+[a-z-]+\s*=\s*(?:\"[^\"]*\"|'[^']*'))*)\s*/?>", re.IGNORECASE
)
_ATTRIBUTE = re.compile(r"([a-z-]+)\s*=\s*(?:\"([^\"]*)\"|'([^']*)')", re.IGNORECASE)
_PAUSE_START = re.compile(r"\[\s*pause\b|<\s*break\b", re.IGNORECASE)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s)?\s*$", re.IGNORECASE)

# Ours: the official keeps a sentence without a sentence or clause break whole however long, and
# its prompt and length estimate grow with it; past this many tokens it is split between words.
MAX_SEGMENT_TOKENS = 500

_TERMINAL_PUNCTUATION = ".!?\u2026"
_WEAK_PUNCTUATION = ",;:-\u2013\u2014"
_CLOSERS = "\"'\u201d\u2019)]\u00bb"


@dataclasses.dataclass(frozen=True)
class TextOptions:
    """The text fields of a model config (the official defaults)."""

    pad_with_spaces_for_short_inputs: bool = False
    remove_semicolons: bool = False
    append_terminal_punctuation: bool = True
    capitalize_first_letter: bool = True
    replace_characters: Dict[str, str] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_config(cls, cfg: Config) -> TextOptions:
        return cls(
            cfg.pad_with_spaces_for_short_inputs,
            cfg.remove_semicolons,
            cfg.append_terminal_punctuation,
            cfg.capitalize_first_letter,
            dict(cfg.replace_characters),
        )


def split_pauses(text: str) -> List[Union[str, float]]:
    """The text split at pause markup: non-empty text segments and pause lengths in seconds, in order.

    Markup that starts like a pause but does not parse, or a pause over MAX_PAUSE_SECONDS, is a
    TextError naming it (speaking it as words would surprise more than an error).
    """
    parts: List[Union[str, float]] = []
    position = 0
    for match in _PAUSE.finditer(text):
        _add_text(parts, text[position : match.start()])
        parts.append(_pause(match))
        position = match.end()
    _add_text(parts, text[position:])
    return parts


def normalized(text: str, language: str, lexicon: Lexicon = EMPTY, words: bool = True) -> str:
    """The text as it will be spoken: respelled and normalized (core.portable.text.normalize) between
    its pause markup, which is kept as written."""
    pieces = []
    position = 0
    for match in _PAUSE.finditer(text):
        pieces += [normalize_text(text[position : match.start()], language, lexicon, words), match.group(0)]
        position = match.end()
    return "".join(pieces + [normalize_text(text[position:], language, lexicon, words)])


def _add_text(parts: List[Union[str, float]], segment: str) -> None:
    stray = _PAUSE_START.search(segment)
    if stray:
        end = segment.find("]" if segment[stray.start()] == "[" else ">", stray.start())
        shown = segment[stray.start() : end + 1 if end >= 0 else stray.start() + 20]
        raise TextError(
            f"malformed pause markup {shown!r}: write [pause], [pause:1.5], [pause:500ms], <break/> or "
            '<break time="300ms"/>'
        )
    if segment.strip():
        parts.append(segment)


def _pause(match: re.Match[str]) -> float:
    """The seconds of a pause markup: [pause...]'s duration, or <break>'s time, else its strength."""
    markup = match.group(0)
    if markup.startswith("["):
        return DEFAULT_PAUSE_SECONDS if match.group(1) is None else _pause_seconds(markup, match.group(1))
    attributes = {}
    for name, double, single in _ATTRIBUTE.findall(match.group(2) or ""):
        attributes[name.lower()] = double if double or not single else single
    unknown = set(attributes) - {"time", "strength"}
    if unknown:
        raise TextError(f"malformed pause {markup!r}: a break takes time or strength, not {sorted(unknown)[0]}")
    if "time" in attributes:  # SSML: time wins over strength
        return _pause_seconds(markup, attributes["time"])
    if "strength" in attributes:
        strength = attributes["strength"].strip().lower()
        if strength not in STRENGTHS:
            raise TextError(f"malformed pause {markup!r}: the strength must be one of {', '.join(STRENGTHS)}")
        return STRENGTHS[strength]
    return DEFAULT_PAUSE_SECONDS


def _pause_seconds(markup: str, duration: str) -> float:
    match = _DURATION.match(duration)
    if not match:
        raise TextError(f"malformed pause {markup!r}: the duration must be like 500ms, 1.5s or 1.5 (seconds)")
    unit = (match.group(2) or "s").lower()
    seconds = float(match.group(1)) / (1000.0 if unit == "ms" else 1.0)
    if seconds > MAX_PAUSE_SECONDS:
        raise TextError(f"pause {markup!r} is longer than the {MAX_PAUSE_SECONDS:g} s allowed")
    return seconds


def check_text(text: object) -> str:
    """The text a caller asks to speak, if it is a string with something to say; a TextError
    otherwise (every front-end's one check, before any work)."""
    if not isinstance(text, str):
        raise EmptyTextError(f"text must be a string, got {type(text).__name__}")
    if not text.strip():
        raise EmptyTextError("the text to speak is empty")
    return text


def prepare_text_prompt(text: str, options: TextOptions) -> Tuple[str, int]:
    """The cleaned prompt and the frames-after-EOS guess (3 for up to four words, else 1)."""
    text = text.strip()
    if options.replace_characters:
        text = " ".join(text.translate(str.maketrans(options.replace_characters)).split())
        # Deleted quotes turn '"Hi?", she said' into 'Hi?, she said': keep the sentence mark only.
        text = re.sub(r"([.!?\u2026])\s*[,;:]", r"\1", text)
    if text == "":
        raise EmptyTextError("the text to speak is empty")
    text = text.replace("\n", " ").replace("\r", " ").replace("  ", " ")
    if options.remove_semicolons:
        text = text.replace(";", ",")
    frames_after_eos_guess = 3 if len(text.split()) <= 4 else 1
    if options.capitalize_first_letter and not text[0].isupper():
        text = text[0].upper() + text[1:]
    if options.append_terminal_punctuation:
        text = _ensure_terminal_punctuation(text)
    # The model does poorly on very few tokens; leading spaces add some.
    if options.pad_with_spaces_for_short_inputs and len(text.split()) < 5:
        text = " " * 8 + text
    return text, frames_after_eos_guess


def _ensure_terminal_punctuation(text: str) -> str:
    core = text.rstrip(_CLOSERS + " ")
    closers = text[len(core) :].strip()
    if not core or core[-1] in _TERMINAL_PUNCTUATION:
        return text
    if core[-1] in _WEAK_PUNCTUATION:
        return core.rstrip(_WEAK_PUNCTUATION + " ") + "." + closers
    return text + "."


def _is_decimal_period_boundary(tokens: List[int], start: int, tokenizer: Tokenizer) -> bool:
    """Whether a period ends the text before `start` after a digit, and a digit starts the text from
    it: the official test on the whole prefix and suffix, read from as few tokens around `start` as
    decode the same last two and first characters (decoding it all at every boundary made a text
    of many sentences quadratic)."""
    prefix = _decoded_near(tokens, start, tokenizer, before=True)
    suffix = _decoded_near(tokens, start, tokenizer, before=False)
    return len(prefix) >= 2 and prefix[-1] == "." and prefix[-2].isdigit() and bool(suffix) and suffix[0].isdigit()


def _decoded_near(tokens: List[int], start: int, tokenizer: Tokenizer, before: bool) -> str:
    """The decoded text of tokens[:start] (before) or tokens[start:], exact at the end next to
    `start`: a window of tokens grows until it decodes to enough characters that a character cut
    at its far end (a byte-fallback sequence: at most 4 tokens, each at most one replacement
    character) cannot reach the two next to `start`."""
    width = 8
    while True:
        lo, hi = (max(0, start - width), start) if before else (start, min(len(tokens), start + width))
        text = tokenizer.decode(tokens[lo:hi])
        whole = lo == 0 if before else hi == len(tokens)
        if whole or len(text) >= 6:
            return text
        width *= 2


def _boundaries(tokens: List[int], boundary_tokens: List[int], tokenizer: Tokenizer = None) -> List[int]:
    """Start indices of the segments (a segment ends after a run of boundary tokens), plus len(tokens).

    With a tokenizer, a period between two digits (a decimal point) is not a boundary.
    """
    boundary_set = set(boundary_tokens)
    indices = [0]
    previous_was_boundary = False
    for i, token in enumerate(tokens):
        if token in boundary_set:
            previous_was_boundary = True
            continue
        if previous_was_boundary and not (tokenizer is not None and _is_decimal_period_boundary(tokens, i, tokenizer)):
            indices.append(i)
        previous_was_boundary = False
    indices.append(len(tokens))
    return indices


def _segments(tokens: List[int], bounds: List[int], tokenizer: Tokenizer) -> List[Tuple[int, str]]:
    return [(end - start, tokenizer.decode(tokens[start:end])) for start, end in zip(bounds, bounds[1:])]


def split_into_chunks(tokenizer: Tokenizer, text: str, max_tokens: int, options: TextOptions) -> List[str]:
    """Sentences regrouped into chunks of at most `max_tokens` tokens (oversized sentences are split
    on commas, semicolons and colons when they have some)."""
    text, _ = prepare_text_prompt(text, options)
    text = text.strip()
    tokens = tokenizer.encode(text)
    end_of_sentence = tokenizer.encode(".!...?")[1:]
    sentences = _segments(tokens, _boundaries(tokens, end_of_sentence, tokenizer), tokenizer)

    fallback = tokenizer.encode(",;:")[1:]
    refined: List[Tuple[int, str]] = []
    for count, sentence in sentences:
        if count <= max_tokens:
            refined.append((count, sentence))
            continue
        sub_tokens = tokenizer.encode(sentence.strip())
        parts = _segments(sub_tokens, _boundaries(sub_tokens, fallback), tokenizer)
        for part in parts if len(parts) > 1 else [(count, sentence)]:
            too_long = part[0] > max(max_tokens, MAX_SEGMENT_TOKENS)
            refined.extend(_between_words(tokenizer, part[1], max_tokens) if too_long else [part])

    chunks: List[str] = []
    current, current_count = "", 0
    for count, sentence in refined:
        if current == "":
            current, current_count = sentence, count
        elif current_count + count > max_tokens:
            chunks.append(current.strip())
            current, current_count = sentence, count
        else:
            current += " " + sentence
            current_count += count
    if current != "":
        chunks.append(current.strip())
    return chunks


def _between_words(tokenizer: Tokenizer, text: str, max_tokens: int) -> List[Tuple[int, str]]:
    """A text cut into pieces of at most `max_tokens` tokens between words; a word longer than that
    (no spaces, as in "abab..." or a run of emoji) is cut every few characters (a character is at
    most 4 byte-fallback tokens, and a word may start with a space token)."""
    pieces: List[Tuple[int, str]] = []
    step = max(1, (max_tokens - 1) // 4)
    for word in text.split():
        count = len(tokenizer.encode(word))
        if count <= max_tokens:
            pieces.append((count, word))
            continue
        for i in range(0, len(word), step):
            pieces.append((len(tokenizer.encode(word[i : i + step])), word[i : i + step]))
    return pieces
