"""Text that arrives in pieces (an LLM's reply, a user typing), as one generation per segment.

The segmenter (core.portable.segmenter) gives out each sentence as soon as it is complete; each
becomes a generation of the same voice and options, to run one after another. One noise generator
runs through them (the options' seed: a rerun with the same segments is the same audio), and one
budget (core.portable.budget) holds them all: each draws on it as it makes frames.
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional

import numpy as np

from .budget import Budget
from .generation import Generation
from .options import GenerationOptions
from .voice_state import VoiceState


class Segment(NamedTuple):
    """A segment of a text stream: the text as received, as the model reads it, and its generation."""

    text: str
    spoken: str
    generation: Generation


class TextStream:
    """`push` pieces of text, `flush` what is buffered, `cancel` what is being said; `model` is a
    TTSModel (its `generation`, `segmenter` and `spoken`). A segment once the budget is spent is a
    LimitError; `budget`: the session's, when the caller keeps one (default: `max_seconds` of audio
    at the options' speed)."""

    def __init__(
        self,
        model: object,
        voice: VoiceState,
        options: GenerationOptions,
        rng: Optional[np.random.Generator],
        max_seconds: float,
        budget: Optional[Budget] = None,
    ):
        self.model = model
        self.voice = voice
        self.options = options
        self.rng = rng if rng is not None else np.random.default_rng(options.seed)
        self.budget = budget if budget is not None else Budget(max_seconds, model.config.mimi.frame_rate, options.speed)
        self.segmenter = model.segmenter(options.max_tokens)
        self._saying: List[Generation] = []  # generations given out and not finished: `cancel` stops them

    @property
    def pending(self) -> str:
        """Text received but not yet part of a segment."""
        return self.segmenter.pending

    def push(self, text: str) -> List[Segment]:
        """The segments this piece of text completes, each with its generation."""
        return [self._segment(text) for text in self.segmenter.push(text)]

    def say(self, text: str) -> Segment:
        """A whole text as one segment: one generation, chunked as a request is (not segmented)."""
        return self._segment(text)

    def flush(self) -> List[Segment]:
        """All the text still buffered, as segments (at the end of the text, or to speak it now)."""
        return [self._segment(text) for text in self.segmenter.flush()]

    def cancel(self) -> None:
        """Drop the text buffered and stop the generations given out (barge-in): what they did not
        make stays in the budget, and the noise generator goes on where they left it."""
        self.segmenter = self.model.segmenter(self.options.max_tokens)
        for generation in self._saying:
            generation.stop()
        self._saying = []

    def _segment(self, text: str) -> Segment:
        self.budget.refuse_more()
        self._saying = [generation for generation in self._saying if not generation.finished]
        generation = self.model.generation(text, self.voice, self.options, rng=self.rng, budget=self.budget)
        self._saying.append(generation)
        return Segment(text, self.model.spoken(text, self.options.normalize), generation)
