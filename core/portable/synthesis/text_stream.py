"""Text that arrives in pieces (an LLM's reply, a user typing), as one generation per segment.

The segmenter (core.portable.text.segmenter) gives out each sentence as soon as it is complete; each
becomes a generation of the same voice and options, to run one after another. One noise generator
runs through them (the options' seed: a rerun with the same segments is the same audio), and one
budget (core.portable.synthesis.budget) holds them all: each draws on it as it makes frames. A stream of
SSML (`ssml`) is read as markup first (core.portable.text.ssml), piece by piece, before it is segmented.
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Protocol

import numpy as np

from ..config import Config
from ..text.lexicon import Lexicon
from ..text.prepare import check_text
from ..text.segmenter import Segmenter
from ..text.ssml import SsmlStream, to_markup
from ..voices.state import VoiceState
from .budget import Budget
from .generation import Generation, word_count
from .options import GenerationOptions


class Segment(NamedTuple):
    """A segment of a text stream: the text as received, as the model reads it, and its generation."""

    text: str
    spoken: str
    generation: Generation


class SpeakingModel(Protocol):
    """What a text stream asks of its model (TTSModel is one): its config (the frame rate), the
    segmenter that cuts text arriving in pieces, a generation of each segment, and what a text is
    read as."""

    config: Config

    def segmenter(self, max_tokens: int) -> Segmenter: ...

    def generation(
        self,
        text: str,
        voice: VoiceState,
        options: GenerationOptions,
        rng: Optional[np.random.Generator] = None,
        budget: Optional[Budget] = None,
        first_word: Optional[int] = None,
        lexicon: Optional[Lexicon] = None,
    ) -> Generation: ...

    def spoken(self, text: str, normalize_words: bool = True, lexicon: Optional[Lexicon] = None) -> str: ...


class TextStream:
    """`push` pieces of text, `flush` what is buffered, `end` the text, `cancel` what is being said;
    `model` is a TTSModel (its `generation`, `segmenter` and `spoken`). A segment once the budget is
    spent is a LimitError; `budget`: the session's, when the caller keeps one (default:
    `max_seconds` of audio at the options' speed); `ssml`: the text is SSML; `words`: its words are
    timed, numbered on from one segment to the next."""

    def __init__(
        self,
        model: SpeakingModel,
        voice: VoiceState,
        options: GenerationOptions,
        rng: Optional[np.random.Generator],
        max_seconds: float,
        budget: Optional[Budget] = None,
        ssml: bool = False,
        words: bool = False,
        lexicon: Optional[Lexicon] = None,
    ):
        self.model = model
        self.lexicon = lexicon  # the request's pronunciations with the model's (None: the model's)
        self.ssml = ssml
        # Word timestamps: the index of the next segment's first word (None: not timed).
        self.next_word: Optional[int] = 0 if words else None
        self.voice = voice
        self.options = options
        self.rng = rng if rng is not None else np.random.default_rng(options.seed)
        self.budget = budget if budget is not None else Budget(max_seconds, model.config.mimi.frame_rate, options.speed)
        self.segmenter = model.segmenter(options.max_tokens)
        self._markup = SsmlStream()
        self._saying: List[Generation] = []  # generations given out and not finished: `cancel` stops them

    @property
    def pending(self) -> str:
        """Text received but not yet part of a segment (an SSML tag still open included)."""
        return self.segmenter.pending + (self._markup.pending if self.ssml else "")

    def push(self, text: str) -> List[Segment]:
        """The segments this piece of text completes, each with its generation."""
        if self.ssml:
            text = self._markup.push(text)
        return self._segments(self.segmenter.push(text))

    def say(self, text: str) -> Segment:
        """A whole text as one segment: one generation, chunked as a request is (not segmented); an
        EmptyTextError when it says nothing (SSML of tags alone among them)."""
        check_text(text)
        return self._segment(check_text(to_markup(text)) if self.ssml else text)

    def flush(self) -> List[Segment]:
        """The text buffered, as segments, to speak it now (an SSML tag still open stays open)."""
        return self._segments(self.segmenter.flush())

    def end(self) -> List[Segment]:
        """The end of the text: all that is still buffered, as segments."""
        rest = self._markup.finish() if self.ssml else ""
        return self._segments(self.segmenter.push(rest) + self.segmenter.flush())

    def cancel(self) -> None:
        """Drop the text buffered and stop the generations given out (barge-in): what they did not
        make stays in the budget, and the noise generator goes on where they left it."""
        self.segmenter = self.model.segmenter(self.options.max_tokens)
        self._markup = SsmlStream()
        for generation in self._saying:
            generation.stop()
        self._saying = []

    def _segments(self, texts: List[str]) -> List[Segment]:
        return [self._segment(text) for text in texts]

    def _segment(self, text: str) -> Segment:
        self.budget.refuse_more()
        self._saying = [generation for generation in self._saying if not generation.finished]
        generation = self.model.generation(
            text,
            self.voice,
            self.options,
            rng=self.rng,
            budget=self.budget,
            first_word=self.next_word,
            lexicon=self.lexicon,
        )
        if self.next_word is not None:
            self.next_word += word_count(generation.plan)
        self._saying.append(generation)
        return Segment(text, self.model.spoken(text, self.options.normalize, self.lexicon), generation)
