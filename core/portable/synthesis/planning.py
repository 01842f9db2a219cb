"""A text to a generation: normalized, split into chunks and pauses, tokenized, with its frame
cap, its noise and its options, as the official `TTSModel.generate_audio_stream` prepares it.

Everything that can be refused is refused here, before any model work: text with nothing to say,
malformed markup, options out of range, max_frames or pauses longer than the session's budget.
"""

from __future__ import annotations

import math
from typing import Any, List, Optional, Tuple

import numpy as np

from ..errors import NoTimestampsError
from ..text import normalize, words
from ..text.prepare import check_text, normalized, prepare_text_prompt, split_into_chunks, split_pauses
from ..voices.state import VoiceState
from ..weights import catalog
from . import timestamps
from .budget import Budget
from .generation import Chunk, Generation, Plan, planned_frames
from .options import GenerationOptions

# Official generation constants (pocket_tts/models/tts_model.py and default_parameters.py).
TOKENS_PER_SECOND_ESTIMATE = 3.0
GEN_SECONDS_PADDING = 2.0


def spoken(text: str, language: str, normalize_words: bool = True) -> str:
    """`text` as the model reads it: normalized in `language` around its pause markup (unless
    `normalize_words` is false), before the official cleaning."""
    return normalized(text, language) if normalize_words else text


def estimate_max_frames(token_count: int, frame_rate: float) -> int:
    """The official length cap of a chunk: 3 tokens per second plus 2 s."""
    seconds = token_count / TOKENS_PER_SECOND_ESTIMATE + GEN_SECONDS_PADDING
    return math.ceil(seconds * frame_rate)


def plan(
    model: Any,
    text: str,
    max_tokens: int,
    normalize_words: bool = True,
    first_word: Optional[int] = None,
    pauses: bool = True,
) -> Plan:
    """The text as a generation of `model` (a TTSModel) reads it: normalized (unless
    `normalize_words` is false: the official behaviour), in chunks of at most `max_tokens` tokens,
    prepared and tokenized, and the pauses of its markup as samples of silence. With `first_word`
    (the index its first word gets: word timestamps), each chunk carries its units
    (core.portable.text.words), the text's words numbered on from it across its pauses. Without
    `pauses`, pause markup is text like any other."""
    check_text(text)
    frame_rate = model.config.mimi.frame_rate
    items: Plan = []
    for part in split_pauses(text) if pauses else [text]:
        if isinstance(part, float):
            items.append(int(round(part * model.sample_rate)))
            continue
        written, origins = part, [(i, i + 1) for i in range(len(part))]
        if normalize_words:
            if first_word is None:
                part = normalize.normalize_text(part, model.language)
            else:
                part, origins = normalize.normalize_aligned(part, model.language)
            if not part.strip():
                continue
        chunks = [
            prepare_text_prompt(c, model.text_options)
            for c in split_into_chunks(model.tokenizer, part, max_tokens, model.text_options)
        ]
        units = None
        if first_word is not None:
            units = _units(model, written, part, origins, [prepared for prepared, _ in chunks], first_word)
        for k, (prepared, guess) in enumerate(chunks):
            tokens = model.tokenizer.encode(prepared)
            items.append(
                Chunk(tokens, estimate_max_frames(len(tokens), frame_rate), guess, units[k] if units else None)
            )
        if units:
            first_word = 1 + max((w.index for chunk in units for w in chunk.users.values()), default=first_word - 1)
    return items


def _units(
    model: Any, written: str, spoken: str, origins: List[Tuple[int, int]], chunks: List[str], first_word: int
) -> List[words.ChunkWords]:
    """The chunks' units, each word said for the user's word of `written` it stands for."""
    said = words.said_for(written, spoken, origins)
    units = words.chunk_words(spoken, chunks, model.tokenizer)
    out = []
    for chunk in units:
        users = {}
        for index, word in chunk.users.items():
            user = said.get(index, word)
            users[index] = words.Word(user.text, first_word + user.index, user.begin, user.end)
        out.append(chunk._replace(users=users))
    return out


def timed(model: Any) -> List[Tuple[int, int]]:
    """The heads `model` reads word times from; a NoTimestampsError saying how to give them where
    its config has none."""
    heads = timestamps.heads_of(model.config)
    if heads is None:
        raise NoTimestampsError(
            f"{model.name} has no timestamp heads, so no word timestamps: the models that have them are "
            f"{', '.join(catalog.timed_models())}; for another checkpoint, add timestamp_heads: "
            "[{layer, head}, ...] to its config (see the word timestamps docs)"
        )
    return heads


def generation(
    model: Any,
    text: str,
    voice: VoiceState,
    options: GenerationOptions,
    budget: Budget,
    rng: Optional[np.random.Generator] = None,
    first_word: Optional[int] = None,
) -> Generation:
    """A generation of `text` by `model` (a TTSModel whose flow LM is loaded), drawing on `budget`;
    `options` already checked. It may make max_frames frames when set (the official max_frames
    replaces the length estimate), else what its plan can make; a LimitError when max_frames, or
    the pauses alone, ask for more than the whole budget. With `first_word`, its words are timed
    (numbered from it); a PocketTTSError where the model has no timestamp heads."""
    cfg = model.config
    temperature = cfg.default_temperature if options.temperature is None else options.temperature
    eos_threshold = cfg.default_eos_threshold if options.eos_threshold is None else options.eos_threshold
    frames_after_eos = options.frames_after_eos
    if frames_after_eos is None:
        frames_after_eos = cfg.model_recommended_frames_after_eos
    heads = timed(model) if first_word is not None else None
    items = plan(model, text, options.max_tokens, options.normalize, first_word, options.pauses)
    if options.max_frames is not None:
        budget.refuse_frames(options.max_frames, f"max_frames {options.max_frames}")
        frames = options.max_frames
    else:
        frames, silent = planned_frames(items, model.frame_size)
        budget.refuse_frames(silent, "the pauses of this text", "are")
    noise = noise_source(model.flow_spec.latent_dim, temperature, options.noise_clamp, options.seed, rng)
    times = model.time_terms(options.lsd_decode_steps)
    return Generation(
        model,
        items,
        voice,
        eos_threshold,
        frames_after_eos,
        frames,
        budget,
        options.max_frames is not None,
        noise,
        times,
        options.speed,
        heads,
    )


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
