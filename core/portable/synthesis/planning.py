"""A text to a generation: normalized, split into chunks and pauses, tokenized, with its frame
cap, its noise and its options, as the official `TTSModel.generate_audio_stream` prepares it.

Everything that can be refused is refused here, before any model work: text with nothing to say,
malformed markup, options out of range, max_frames or pauses longer than the session's budget.
What it needs of a model comes in a Reader (its tokenizer, text options, language and rates) and
its config: the model object (model.py, above) builds the generation from the plan.
"""

from __future__ import annotations

import math
from typing import Any, List, NamedTuple, Optional, Tuple

import numpy as np

from ..config import Config
from ..errors import NoTimestampsError
from ..text import normalize, words
from ..text.lexicon import EMPTY, Lexicon
from ..text.prepare import (
    TextOptions,
    check_text,
    normalized,
    prepare_text_prompt,
    split_into_chunks,
    split_pauses,
)
from ..text.tokenizer import Tokenizer
from ..weights import catalog
from . import timestamps
from .budget import Budget
from .generation import Chunk, Plan, planned_frames
from .options import GenerationOptions

# Official generation constants (pocket_tts/models/tts_model.py and default_parameters.py).
TOKENS_PER_SECOND_ESTIMATE = 3.0
GEN_SECONDS_PADDING = 2.0


class Reader(NamedTuple):
    """What reads a text for one model: its tokenizer, its text options (from its config), the
    language of its normalization, its sample rate (of pauses) and frame rate (of length caps)."""

    tokenizer: Tokenizer
    options: TextOptions
    language: str
    sample_rate: int
    frame_rate: float
    lexicon: Lexicon = EMPTY  # the model's pronunciations (core.portable.text.lexicon)


class Settings(NamedTuple):
    """A generation's options with the model's defaults filled in (its config's)."""

    temperature: float
    eos_threshold: float
    frames_after_eos: int


def spoken(text: str, language: str, normalize_words: bool = True, lexicon: Lexicon = EMPTY) -> str:
    """`text` as the model reads it: the lexicon's words respelled and normalized in `language`
    around its pause markup (unless `normalize_words` is false), before the official cleaning."""
    return normalized(text, language, lexicon, normalize_words) if normalize_words or lexicon.entries else text


def estimate_max_frames(token_count: int, frame_rate: float) -> int:
    """The official length cap of a chunk: 3 tokens per second plus 2 s."""
    seconds = token_count / TOKENS_PER_SECOND_ESTIMATE + GEN_SECONDS_PADDING
    return math.ceil(seconds * frame_rate)


def plan(
    reader: Reader,
    text: str,
    max_tokens: int,
    normalize_words: bool = True,
    first_word: Optional[int] = None,
    pauses: bool = True,
) -> Plan:
    """The text as a generation reads it: normalized (unless
    `normalize_words` is false: the official behaviour), in chunks of at most `max_tokens` tokens,
    prepared and tokenized, and the pauses of its markup as samples of silence. With `first_word`
    (the index its first word gets: word timestamps), each chunk carries its units
    (core.portable.text.words), the text's words numbered on from it across its pauses. Without
    `pauses`, pause markup is text like any other."""
    check_text(text)
    items: Plan = []
    for part in split_pauses(text) if pauses else [text]:
        if isinstance(part, float):
            items.append(int(round(part * reader.sample_rate)))
            continue
        written, origins = part, [(i, i + 1) for i in range(len(part))]
        if normalize_words or reader.lexicon.entries:
            if first_word is None:
                part = normalize.normalize_text(part, reader.language, reader.lexicon, normalize_words)
            else:
                part, origins = normalize.normalize_aligned(part, reader.language, reader.lexicon, normalize_words)
            if not part.strip():
                continue
        chunks = [
            prepare_text_prompt(c, reader.options)
            for c in split_into_chunks(reader.tokenizer, part, max_tokens, reader.options)
        ]
        units = None
        if first_word is not None:
            units = _units(reader.tokenizer, written, part, origins, [prepared for prepared, _ in chunks], first_word)
        for k, (prepared, guess) in enumerate(chunks):
            tokens = reader.tokenizer.encode(prepared)
            items.append(
                Chunk(tokens, estimate_max_frames(len(tokens), reader.frame_rate), guess, units[k] if units else None)
            )
        if units:
            first_word = 1 + max((w.index for chunk in units for w in chunk.users.values()), default=first_word - 1)
    return items


def _units(
    tokenizer: Tokenizer, written: str, spoken: str, origins: List[Tuple[int, int]], chunks: List[str], first_word: int
) -> List[words.ChunkWords]:
    """The chunks' units, each word said for the user's word of `written` it stands for."""
    said = words.said_for(written, spoken, origins)
    units = words.chunk_words(spoken, chunks, tokenizer)
    out = []
    for chunk in units:
        users = {}
        for index, word in chunk.users.items():
            user = said.get(index, word)
            users[index] = words.Word(user.text, first_word + user.index, user.begin, user.end)
        out.append(chunk._replace(users=users))
    return out


def timed(cfg: Config, model_name: str) -> List[Tuple[int, int]]:
    """The heads a model of `cfg` reads word times from; a NoTimestampsError saying how to give
    them where its config has none."""
    heads = timestamps.heads_of(cfg)
    if heads is None:
        raise NoTimestampsError(
            f"{model_name} has no timestamp heads, so no word timestamps: the models that have them are "
            f"{', '.join(catalog.timed_models())}; for another checkpoint, add timestamp_heads: "
            "[{layer, head}, ...] to its config (see the word timestamps docs)"
        )
    return heads


def settings(cfg: Config, options: GenerationOptions) -> Settings:
    """`options` (checked) with `cfg`'s defaults where they leave a setting to the model."""
    frames_after_eos = options.frames_after_eos
    return Settings(
        cfg.default_temperature if options.temperature is None else options.temperature,
        cfg.default_eos_threshold if options.eos_threshold is None else options.eos_threshold,
        cfg.model_recommended_frames_after_eos if frames_after_eos is None else frames_after_eos,
    )


def frame_cap(items: Plan, options: GenerationOptions, budget: Budget, frame_size: int) -> int:
    """The frames a generation of `items` may make: max_frames when set (the official max_frames
    replaces the length estimate), else what its plan can make; a LimitError when max_frames, or
    the pauses alone, ask for more than the whole budget."""
    if options.max_frames is not None:
        budget.refuse_frames(options.max_frames, f"max_frames {options.max_frames}")
        return options.max_frames
    frames, silent = planned_frames(items, frame_size)
    budget.refuse_frames(silent, "the pauses of this text", "are")
    return frames


def noise_source(
    dim: int, temperature: float, clamp: Optional[float], seed: Optional[int], rng: Optional[np.random.Generator]
) -> Any:
    """A function returning the head's starting noise [dim]: N(0, temperature), optionally truncated."""
    if temperature == 0:
        zeros = np.zeros(dim, np.float32)
        return lambda: zeros
    generator = rng if rng is not None else np.random.default_rng(seed)
    std = math.sqrt(temperature)
    if clamp is None:
        return lambda: (generator.standard_normal(dim) * std).astype(np.float32)
    # Truncated normal by inverting the CDF between the bounds (as torch's trunc_normal_ does). statistics
    # (and fractions with it) imported here: the page's start then has two modules fewer to run.
    import statistics

    normal = statistics.NormalDist(0.0, std)
    low, high = normal.cdf(-clamp), normal.cdf(clamp)

    def truncated() -> np.ndarray:
        u = generator.uniform(low, high, dim)
        return np.array([normal.inv_cdf(min(max(v, 1e-300), 1 - 1e-16)) for v in u], dtype=np.float32)

    return truncated
