"""When each word is spoken, from the flow LM's own attention, as `pocket-tts-timestamped` reads it.

At every frame, a few chosen heads of the flow LM (the config's `timestamp_heads`) attend from the
frame's query (after RoPE) to the keys of the chunk's text tokens: that attention, softmaxed over
the text keys alone, spread onto the chunk's units by each token's shares (core.portable.text.words)
and averaged over the heads, is the frame's score per unit (`unit_scores`). A state machine reads
the scores frame by frame with the frame's audio (`WordAligner`): a voiced frame (RMS above 1e-3)
opens the next word; the next word's score overtaking the current one's moves on; silence closes
the word. Times are those of the frames' starts: 80 ms resolution.

The decoder runs the aligner as it decodes each frame (core.portable.synthesis.decoding.WordTimer).
"""

from __future__ import annotations

import math
from typing import List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from ..network.transformer import QueryTap, TransformerState
from ..text.words import Unit, Word

# Below this RMS a frame is silence (the fork's threshold, a float32 as torch holds it).
SILENCE_RMS = float(np.float32(1e-3))
# Where the current word's score is below this, a later word that overtakes it moves on too.
NON_NEXT_ATTENTION = 0.001


class WordStart(NamedTuple):
    """A word begins at `sample` (of the generation's audio, or of a session's: see the fronts)."""

    word: str
    index: int
    sample: int


class WordEnd(NamedTuple):
    """A word ends: its start and its end."""

    word: str
    index: int
    start: int
    end: int


WordEvent = Union[WordStart, WordEnd]


class TimedWord(NamedTuple):
    """A word and when it is spoken, in seconds of the audio."""

    word: str
    index: int
    start: float
    end: float


def timed_words(events: Sequence[object], sample_rate: int) -> List[TimedWord]:
    """The words of a whole utterance's events (their ends), in seconds."""
    return [
        TimedWord(e.word, e.index, e.start / sample_rate, e.end / sample_rate) for e in events if isinstance(e, WordEnd)
    ]


def shifted(event: WordEvent, samples: int) -> WordEvent:
    """The event `samples` later (a segment's words in the samples of the whole stream)."""
    if isinstance(event, WordStart):
        return event._replace(sample=event.sample + samples)
    return event._replace(start=event.start + samples, end=event.end + samples)


def unit_scores(
    heads: Sequence[Tuple[int, int]],
    tap: QueryTap,
    state: TransformerState,
    text: Tuple[int, int],
    token_to_unit: np.ndarray,
    num_heads: int,
) -> np.ndarray:
    """A frame's score per unit [U]: the heads' attention on the text positions text[0]:text[1] of
    `state`'s cache, from the frame's queries in `tap`, through the tokens' shares [T, U]."""
    keys_per_query = num_heads // state.keys[0].shape[0]
    total: Optional[np.ndarray] = None
    for layer in sorted({layer for layer, _ in heads}):  # layer by layer, as the forward pass meets them
        chosen = [head for head_layer, head in heads if head_layer == layer]
        q = tap.queries[layer][chosen]  # [h, D]
        keys = state.keys[layer][[head // keys_per_query for head in chosen], text[0] : text[1]]  # [h, T, D]
        logits = np.einsum("hd,htd->ht", q, keys) / np.float32(math.sqrt(q.shape[-1]))  # [h, T]
        logits = logits - logits.max(axis=-1, keepdims=True)
        weights = np.exp(logits)
        weights /= weights.sum(axis=-1, keepdims=True)  # [h, T]
        reduced = (weights @ token_to_unit).sum(axis=0)  # [U]
        total = reduced if total is None else total + reduced
    assert total is not None
    return (total / np.float32(len(heads))).astype(np.float32)


def above(value: float, than: float) -> bool:
    """Every comparison the word timing makes (one place, so that a test can see how close each is)."""
    return bool(value > than)


def is_voiced(pcm: np.ndarray) -> bool:
    """Whether a frame's audio is above the silence threshold."""
    samples = np.asarray(pcm, dtype=np.float32).reshape(-1)
    return bool(samples.size) and above(float(np.dot(samples, samples)), SILENCE_RMS**2 * samples.size)


class WordAligner:
    """One chunk's state machine over its units: `frame` with each frame's scores, whether it is
    voiced and its start; `finish` at the chunk's end. Events name the units' words."""

    def __init__(self, units: Sequence[Unit]):
        self.units = units
        self._words = [i for i, unit in enumerate(units) if unit.word is not None]
        self._next = 0  # position (among the words) of the next word to open
        self._open: Optional[int] = None  # position of the open word
        self._open_start = 0

    def _word(self, position: int) -> Word:
        word = self.units[self._words[position]].word
        assert word is not None
        return word

    def _open_next(self, at: int) -> WordStart:
        word = self._word(self._next)
        self._open, self._open_start = self._next, at
        self._next += 1
        return WordStart(word.text, word.index, at)

    def _close(self, at: int) -> WordEnd:
        assert self._open is not None
        word = self._word(self._open)
        self._open = None
        return WordEnd(word.text, word.index, self._open_start, at)

    def _overtaken(self, scores: np.ndarray, unit: int) -> bool:
        current = float(scores[unit])
        if above(float(scores[self._words[self._next]]), current):
            return True
        if not above(NON_NEXT_ATTENTION, current):
            return False
        return any(above(float(scores[later]), current) for later in self._words[self._next + 1 :])

    def frame(self, scores: np.ndarray, voiced: bool, at: int) -> List[WordEvent]:
        events: List[WordEvent] = []
        if not voiced:
            if self._open is None:
                return events
            unit = self._words[self._open]
            later = scores[unit + 1 :]
            closes = bool(later.size) and above(float(later.max()), float(scores[unit]))
            last_word = self._open == len(self._words) - 1
            punctuation_after = any(u.word is None and not u.synthetic for u in self.units[unit + 1 :])
            if closes or (last_word and not punctuation_after):
                events.append(self._close(at))
            return events
        if self._open is None:
            if self._next < len(self._words):
                events.append(self._open_next(at))
            return events
        if self._next < len(self._words) and self._overtaken(scores, self._words[self._open]):
            events.append(self._close(at))
            events.append(self._open_next(at))
        return events

    def finish(self, at: int) -> List[WordEvent]:
        events = [self._close(at)] if self._open is not None else []
        self._next = len(self._words)
        return events


def heads_of(config: object) -> Optional[List[Tuple[int, int]]]:
    """The config's timestamp heads as (layer, head), or None."""
    heads = getattr(config, "timestamp_heads", None)
    return None if heads is None else [(h.layer, h.head) for h in heads]
