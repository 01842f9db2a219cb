"""`TTSModel`: load a model, make voice states, and generate speech as a stream of PCM chunks.

Generation follows the official `TTSModel.generate_audio_stream`: the text is cleaned and split
into chunks; each chunk starts from the voice state, prompts the flow LM with its tokens, then
generates one latent per 80 ms frame until the EOS rule stops it, and each latent is decoded by a
fresh streaming Mimi decoder as soon as it exists (so the first audio arrives after one frame).
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
from typing import Any, Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from . import (
    audio,
    catalog,
    config,
    flow_lm,
    mimi,
    normalize,
    ops,
    params,
    quantize,
    safetensors_file,
    sources,
    transformer,
    tsm,
    voice_state,
)
from .errors import ConfigError, LimitError, PocketTTSError, VoiceError
from .generation import Chunk, Frame, Generation, Plan, advance, planned_frames
from .options import GenerationOptions
from .segmenter import Segmenter
from .text import TextOptions, check_text, normalized, prepare_text_prompt, split_into_chunks, split_pauses
from .tokenizer import Tokenizer
from .voice_state import VoiceSource, VoiceState

# Official generation constants (pocket_tts/models/tts_model.py and default_parameters.py).
TOKENS_PER_SECOND_ESTIMATE = 3.0
GEN_SECONDS_PADDING = 2.0
# The most audio one generation may make, pauses included (an hour): speech that could run longer
# stops there, and pauses or a max_frames asking for more are refused. The server allows less.
MAX_SECONDS = 3600.0
# The first decoded samples of a fresh Mimi decoder carry a small step, heard as a click.
FADE_IN_SECONDS = 1 / 200


class FrameDecoder:
    """Decodes frames to audio in order, one text chunk after another (each chunk, as in the
    official package, on a fresh decoder state with a 5 ms fade-in against its start click), at
    the generation's speed."""

    def __init__(self, model: TTSModel, speed: float = 1.0):
        self.model = model
        self.state: Optional[mimi.DecoderState] = None
        self.fade = np.linspace(0, 1, int(model.sample_rate * FADE_IN_SECONDS), dtype=np.float32)
        # The audio at `speed` (core.portable.tsm): it holds back a few ms, given out by `finish`.
        self.stretch = tsm.TimeStretch(speed, model.sample_rate)

    def decode(self, frames: Sequence[Frame]) -> np.ndarray:
        """Audio of consecutive frames: one silence, or latents where only the first may be `first`."""
        if frames[0].latent is None:
            return self.stretch.push(np.zeros(frames[0].silence, np.float32))
        model = self.model
        self.begin(frames[0])
        latents = np.stack([frame.latent for frame in frames])  # [N, latent_dim]
        pcm = mimi.decode_step(model.mimi_spec, model.params["mimi"], latents, self.state)  # [N * frame_size]
        return self.stretch.push(self.faded(pcm, frames[0]))

    def finish(self) -> np.ndarray:
        """The audio still held back by the speed change (none at speed 1): once, at the end."""
        return self.stretch.finish()

    def begin(self, frame: Frame) -> None:
        if frame.first or self.state is None:
            self.state = mimi.init_decoder_state(self.model.mimi_spec, self.model.params["mimi"])

    def faded(self, pcm: np.ndarray, frame: Frame) -> np.ndarray:
        if frame.first:
            pcm[: self.fade.shape[0]] *= self.fade[: pcm.shape[0]]
        return pcm


def decode_together(decoders: Sequence[FrameDecoder], frames: Sequence[Frame]) -> List[np.ndarray]:
    """Each decoder's next frame (the decoders of several streams of one model): the latents in one
    pass through Mimi's decoder for all of them, each stream on its own state; silences as zeros."""
    pcm: List[np.ndarray] = [np.zeros(frame.silence, np.float32) for frame in frames]
    speaking = [i for i, frame in enumerate(frames) if frame.latent is not None]
    if speaking:
        model = decoders[speaking[0]].model
        for i in speaking:
            decoders[i].begin(frames[i])
        latents = np.stack([frames[i].latent for i in speaking])[:, None]  # [B, 1, latent_dim]
        states = [decoders[i].state for i in speaking]
        audio = mimi.decode_streams(model.mimi_spec, model.params["mimi"], latents, states)  # [B, frame_size]
        for j, i in enumerate(speaking):
            pcm[i] = decoders[i].faded(audio[j], frames[i])
    return [decoder.stretch.push(samples) for decoder, samples in zip(decoders, pcm)]


class TTSModel:
    """A loaded Pocket TTS model. Not thread-safe for one stream, but streams do not share state."""

    def __init__(
        self,
        cfg: config.Config,
        tensors: Dict[str, np.ndarray],
        tokenizer: Tokenizer,
        name: str,
        weights_source: str,
        voices: Optional[Dict[str, str]] = None,
        default_voice: Optional[str] = None,
        voice_cloning: bool = True,
        parts: Sequence[str] = params.PARTS,
    ):
        """Use `TTSModel.load`. `weights_source` names the file the tensors came from (for errors);
        `voices` maps predefined voice names to their state files (local or hf://); `parts` are the
        parts of the checkpoint that `tensors` hold (params.PARTS)."""
        self.config = cfg
        self.name = name
        self.parts = tuple(parts)
        has_encoder = params.check(tensors, cfg, weights_source, self.parts)
        self.can_clone_voices = has_encoder and voice_cloning
        if tokenizer.vocab_size != cfg.flow_lm.lookup_table.n_bins:
            raise ConfigError(
                f"{name}: the tokenizer has {tokenizer.vocab_size} tokens but "
                f"flow_lm.lookup_table.n_bins is {cfg.flow_lm.lookup_table.n_bins}"
            )
        self.tokenizer = tokenizer
        # The checkpoint's tensors nested by name, with the derived layouts the layers read (new
        # dicts from the prepare functions, which change nothing they are given).
        self.params = params.nest(tensors)
        self.flow_spec = flow_lm.FlowLMSpec.from_config(cfg)
        if params.FLOW_LM in self.parts:
            self.params["flow_lm"] = flow_lm.prepare(self.params["flow_lm"])
        self.mimi_spec = mimi.MimiSpec.from_config(cfg.mimi)
        if params.DECODER in self.parts:
            self.params["mimi"] = mimi.prepare(self.mimi_spec, self.params["mimi"])
        self.text_options = TextOptions.from_config(cfg)
        # Of the words that numbers, dates, ... are read as (core.portable.normalize).
        self.language = normalize.language_of(name)
        self.voices = dict(voices or {})
        self.default_voice = default_voice
        self._time_terms: Dict[int, List[np.ndarray]] = {}
        # The files it was loaded from (set by `from_files`): where `add_parts` reads more parts.
        self.files: Optional[sources.ModelFiles] = None

    @property
    def sample_rate(self) -> int:
        return self.config.mimi.sample_rate

    @property
    def frame_size(self) -> int:
        """Samples per generated frame (and per streamed chunk)."""
        return self.config.mimi.frame_size

    @classmethod
    def load(cls, source: str, parts: Optional[Sequence[str]] = None) -> TTSModel:
        """Load a catalog model by name ("english", downloaded and cached), an official-schema
        config file (.yaml or .json; local or hf:// paths), or a bundle folder (`core.cli export`).

        `parts` (of params.PARTS) loads only those parts, each tensor read into memory of its own;
        by default the whole weights file is memory-mapped.
        """
        return cls.from_files(sources.resolve(os.fspath(source)), parts=parts)

    @classmethod
    def from_files(
        cls,
        files: sources.ModelFiles,
        tensors: Optional[Dict[str, quantize.Weight]] = None,
        parts: Optional[Sequence[str]] = None,
    ) -> TTSModel:
        """A model from resolved files; `tensors` when the caller has read the weights already.
        int8 weights stay int8 where the core.portable.ops backend multiplies them (see quantize)."""
        if tensors is None:
            tensors = load_weights(files.weights, ops.current().keeps_int8, parts)
        model = cls(
            files.config,
            tensors,
            Tokenizer.from_file(files.tokenizer),
            files.name,
            ", ".join(dict.fromkeys(files.weights.values())),
            files.voices,
            files.default_voice,
            files.voice_cloning,
            params.PARTS if parts is None else parts,
        )
        model.files = files
        return model

    def add_parts(self, parts: Sequence[str]) -> None:
        """Load more parts of the checkpoint (params.PARTS) into this model, from the files it was
        loaded from, each tensor read and prepared as `load` does (the browser's flow worker adds
        voice cloning when the first voice is uploaded). Parts it holds already are left as they are."""
        new = [part for part in params.PARTS if part in parts and part not in self.parts]
        if not new:
            return
        files = self.files
        if files is None:
            raise PocketTTSError(f"{self.name} was not loaded from files: it cannot add {', '.join(new)}")
        tensors = load_weights(files.weights, ops.current().keeps_int8, new)
        source = ", ".join(dict.fromkeys(path for part, path in files.weights.items() if part in new))
        has_encoder = params.check(tensors, self.config, source or self.name, new)
        added = params.nest(tensors)
        if params.FLOW_LM in new:
            added["flow_lm"] = flow_lm.prepare(_merged(self.params.get("flow_lm", {}), added["flow_lm"]))
        if params.DECODER in new:
            added["mimi"] = mimi.prepare(self.mimi_spec, _merged(self.params.get("mimi", {}), added["mimi"]))
        self.params = _merged(self.params, added)
        self.parts = tuple(part for part in params.PARTS if part in self.parts or part in new)
        self.can_clone_voices = self.can_clone_voices or (has_encoder and files.voice_cloning)

    # Voices

    def voice_state(self, source: VoiceSource, sample_rate: Optional[int] = None) -> VoiceState:
        """A voice from a predefined name, an audio file, a .safetensors voice state (local or hf://),
        or samples (with `sample_rate`). None is the model's default voice."""
        return _resolve_voice(self, source, sample_rate)

    def clone_voice(self, samples: np.ndarray, sample_rate: int, where: str) -> VoiceState:
        """The voice of a recording (samples [T] or [channels, T]); `where` names it in errors."""
        self._require(params.VOICE_CLONING)
        if not self.can_clone_voices:
            raise VoiceError(
                f"{self.name} cannot clone voices: its weights come without voice cloning (for the official "
                "models, accept the terms at https://huggingface.co/kyutai/pocket-tts and log in with "
                "`hf auth login` or HF_TOKEN). Use a predefined voice or a .safetensors voice state."
            )
        prompt = audio.prepare_prompt(samples, sample_rate, self.sample_rate, where)
        latents = mimi.encode(self.mimi_spec, self.params["mimi"], prompt)  # [frames, C]
        conditioning = flow_lm.voice_conditioning(self.flow_spec, self.params["flow_lm"], latents)
        state = transformer.init_state(self.flow_spec.transformer, capacity=conditioning.shape[0])
        flow_lm.prompt(self.flow_spec, self.params["flow_lm"], state, conditioning)
        return VoiceState(state)

    # Generation

    def generate(
        self, text: str, voice: VoiceSource, options: Optional[GenerationOptions] = None, **overrides: Any
    ) -> np.ndarray:
        """The whole utterance as float32 PCM [n] at `sample_rate`; options as for `generation`."""
        chunks = list(self.stream(text, voice, options, **overrides))
        return np.concatenate(chunks) if chunks else np.zeros(0, np.float32)

    def stream(
        self, text: str, voice: VoiceSource, options: Optional[GenerationOptions] = None, **overrides: Any
    ) -> Iterator[np.ndarray]:
        """Yield float32 PCM chunks as the frames are decoded (`frame_size` samples each at speed 1);
        options as for `generation`, checked now (bad input fails before any work)."""
        return self.audio(self.generation(text, voice, options, **overrides))

    def stream_text(
        self,
        pieces: Iterable[str],
        voice: VoiceSource,
        options: Optional[GenerationOptions] = None,
        rng: Optional[np.random.Generator] = None,
        **overrides: Any,
    ) -> Iterator[np.ndarray]:
        """Speak text that arrives in pieces (an LLM's tokens: any split): yield float32 PCM chunks of
        each segment as soon as it is complete (core.portable.segmenter), the rest at the end. The
        audio equals `stream` of the whole text whenever the segments are the whole text's chunks
        (one noise generator runs through them). Voice and options are checked now; `pieces` is
        read lazily, so a generation starts before the last piece exists."""
        text = self.text_stream(voice, options, rng, **overrides)

        def spoken() -> Iterator[np.ndarray]:
            for piece in pieces:
                for segment in text.push(piece):
                    yield from self.audio(segment.generation)
            for segment in text.flush():
                yield from self.audio(segment.generation)

        return spoken()

    def text_stream(
        self,
        voice: VoiceSource,
        options: Optional[GenerationOptions] = None,
        rng: Optional[np.random.Generator] = None,
        max_seconds: float = MAX_SECONDS,
        **overrides: Any,
    ) -> TextStream:
        """Text arriving in pieces, as one generation per segment to run one after another (for
        callers that push: the server's WebSocket, the browser worker); see `stream_text`."""
        options = _options(options, overrides)
        return TextStream(self, self.voice_state(voice), options, rng, max_seconds)

    def audio(self, generation: Generation) -> Iterator[np.ndarray]:
        """A generation run alone to its end: its decoded audio at its speed, chunk by chunk."""
        decoder = self.decoder(generation.speed)
        for frame in self.step(generation):
            yield decoder.decode([frame])
        tail = decoder.finish()
        if tail.shape[0]:
            yield tail

    def frames(
        self, text: str, voice: VoiceSource, options: Optional[GenerationOptions] = None, **overrides: Any
    ) -> Iterator[Frame]:
        """The flow LM half of `stream`: the generated frames, not yet decoded (see `decoder`)."""
        return self.step(self.generation(text, voice, options, **overrides))

    def step(self, generation: Generation) -> Iterator[Frame]:
        """The frames of a generation stepped alone (core.portable.generation.advance steps several)."""
        while True:
            frame = advance(self, [generation])[0]
            if frame is not None:
                yield frame
            elif generation.done:
                return

    def generation(
        self,
        text: str,
        voice: VoiceSource,
        options: Optional[GenerationOptions] = None,
        rng: Optional[np.random.Generator] = None,
        max_seconds: float = MAX_SECONDS,
        **overrides: Any,
    ) -> Generation:
        """A generation of `text` to step frame by frame (core.portable.generation), alone or with others.

        `options` (core.portable.options.GenerationOptions), or any of them by name as keywords
        (`model.generate(text, voice, temperature=0)`); `rng`: the noise source, instead of a seed.
        Options are checked, and the text is split and tokenized now, so that bad input fails before
        any work. The audio lasts at most `max_seconds`, pauses included: a LimitError when
        max_frames or the pauses alone ask for more; speech that could run longer stops there.
        """
        self._require(params.FLOW_LM)
        options = _options(options, overrides)
        cfg = self.config
        temperature = cfg.default_temperature if options.temperature is None else options.temperature
        eos_threshold = cfg.default_eos_threshold if options.eos_threshold is None else options.eos_threshold
        frames_after_eos = options.frames_after_eos
        if frames_after_eos is None:
            frames_after_eos = cfg.model_recommended_frames_after_eos
        plan = self.plan(text, options.max_tokens, options.normalize)
        budget = self._budget(plan, options.max_frames, max_seconds)
        state = self.voice_state(voice)
        noise = _noise_source(self.flow_spec.latent_dim, temperature, options.noise_clamp, options.seed, rng)
        times = self._times(options.lsd_decode_steps)
        fixed = options.max_frames is not None
        return Generation(
            self, plan, state, eos_threshold, frames_after_eos, budget, fixed, noise, times, options.speed
        )

    def spoken(self, text: str, normalize_words: bool = True) -> str:
        """`text` as the model reads it: normalized in its language around its pause markup (unless
        `normalize_words` is false), before the official cleaning."""
        return normalized(text, self.language) if normalize_words else text

    def plan(self, text: str, max_tokens: int, normalize_words: bool = True) -> Plan:
        """The text as the generation reads it: normalized (unless `normalize_words` is false: the
        official behaviour), in chunks of at most `max_tokens` tokens, prepared and tokenized, and
        the pauses of its markup as samples of silence."""
        check_text(text)
        plan: Plan = []
        for part in split_pauses(text):
            if isinstance(part, float):
                plan.append(int(round(part * self.sample_rate)))
                continue
            if normalize_words:
                part = normalize.normalize_text(part, self.language)
                if not part.strip():
                    continue
            for chunk in split_into_chunks(self.tokenizer, part, max_tokens, self.text_options):
                prepared, guess = prepare_text_prompt(chunk, self.text_options)
                tokens = self.tokenizer.encode(prepared)
                plan.append(Chunk(tokens, self.estimate_max_frames(len(tokens)), guess))
        return plan

    def _budget(self, plan: Plan, max_frames: Optional[int], max_seconds: float) -> int:
        """The frames a generation of `plan` may make, silent ones included: `max_frames` when set,
        else what the plan can make, at most `max_seconds` (speech that could run longer stops
        there); a LimitError when max_frames, or the pauses alone, ask for more."""
        rate = self.config.mimi.frame_rate
        limit = int(max_seconds * rate)
        if max_frames is not None:
            if max_frames > limit:
                raise LimitError(
                    f"max_frames {max_frames} ({max_frames / rate:g} s) is more than the "
                    f"{max_seconds:g} s of audio a request may make"
                )
            return max_frames
        planned, silent = planned_frames(plan, self.frame_size)
        if silent > limit:
            raise LimitError(
                f"the pauses of this text last {silent / rate:.0f} s, more than the {max_seconds:g} s of audio a "
                "request may make"
            )
        return min(planned, limit)

    def decoder(self, speed: float = 1.0) -> FrameDecoder:
        """The Mimi half of `stream`: turns frames into audio at `speed`, keeping the decoder's state."""
        self._require(params.DECODER)
        return FrameDecoder(self, speed)

    def segmenter(self, max_tokens: int = GenerationOptions.max_tokens) -> Segmenter:
        """Cuts text arriving in pieces into segments to speak as soon as each is complete."""
        return Segmenter(self.tokenizer, max_tokens, self.text_options)

    def _require(self, part: str) -> None:
        if part not in self.parts:
            raise PocketTTSError(f"{self.name} was loaded without its {part.replace('_', ' ')} (parts: {self.parts})")

    def estimate_max_frames(self, token_count: int) -> int:
        """The official length cap of a chunk: 3 tokens per second plus 2 s."""
        seconds = token_count / TOKENS_PER_SECOND_ESTIMATE + GEN_SECONDS_PADDING
        return math.ceil(seconds * self.config.mimi.frame_rate)

    def _times(self, steps: int) -> List[np.ndarray]:
        if steps not in self._time_terms:
            self._time_terms[steps] = flow_lm.time_terms(self.flow_spec, self.params["flow_lm"], steps)
        return self._time_terms[steps]


class Segment(NamedTuple):
    """A segment of a text stream: the text as received, as the model reads it, and its generation."""

    text: str
    spoken: str
    generation: Generation


class TextStream:
    """Text arriving in pieces (`push`, `flush`), as the generations of its segments, to run one
    after another: the same voice and options for all, and one noise generator through them (the
    options' seed: a rerun with the same segments is the same audio). All of them make at most
    `max_seconds` of audio: a segment past it is a LimitError."""

    def __init__(
        self,
        model: TTSModel,
        voice: VoiceState,
        options: GenerationOptions,
        rng: Optional[np.random.Generator],
        max_seconds: float,
    ):
        self.model = model
        self.voice = voice
        self.options = options
        self.rng = rng if rng is not None else np.random.default_rng(options.seed)
        self.segmenter = model.segmenter(options.max_tokens)
        self.max_seconds = max_seconds
        self._frames_left = int(max_seconds * model.config.mimi.frame_rate)
        self._running: List[Generation] = []

    @property
    def pending(self) -> str:
        """Text received but not yet part of a segment."""
        return self.segmenter.pending

    def push(self, text: str) -> List[Segment]:
        """The segments this piece of text completes, each with its generation."""
        return [self._segment(text) for text in self.segmenter.push(text)]

    def flush(self) -> List[Segment]:
        """All the text still buffered, as segments (at the end of the text, or to speak it now)."""
        return [self._segment(text) for text in self.segmenter.flush()]

    def _segment(self, text: str) -> Segment:
        # What earlier segments may still make is held for them; what they did not use comes back.
        for earlier in [g for g in self._running if g.done]:
            self._frames_left += earlier.budget
            self._running.remove(earlier)
        rate = self.model.config.mimi.frame_rate
        if self._frames_left <= 0:
            raise LimitError(f"this text stream has made the {self.max_seconds:g} s of audio it may make")
        generation = self.model.generation(
            text, self.voice, self.options, rng=self.rng, max_seconds=self._frames_left / rate
        )
        self._frames_left -= generation.budget
        self._running.append(generation)
        return Segment(text, self.model.spoken(text, self.options.normalize), generation)


def _merged(old: Any, new: Any) -> Any:
    """Nested params `old` with those of `new` added (params.nest's dicts and lists; a leaf of `new`
    replaces one of `old`), as new containers: `old` is left as it is."""
    if isinstance(old, dict) and isinstance(new, dict):
        return dict(old, **{key: _merged(old[key], value) if key in old else value for key, value in new.items()})
    if isinstance(old, list) and isinstance(new, list):
        size = max(len(old), len(new))
        pad = lambda items: items + [None] * (size - len(items))  # noqa: E731
        return [a if b is None else b if a is None else _merged(a, b) for a, b in zip(pad(old), pad(new))]
    return new


def _options(options: Optional[GenerationOptions], overrides: Dict[str, Any]) -> GenerationOptions:
    """`options` with the keyword `overrides`, checked."""
    options = GenerationOptions.of({**dataclasses.asdict(options or GenerationOptions()), **overrides})
    options.check()
    return options


def _resolve_voice(model: TTSModel, source: VoiceSource, sample_rate: Optional[int]) -> VoiceState:
    """A voice from a predefined name, an audio file, a .safetensors voice state (local or hf://),
    or samples (with `sample_rate`). None is the model's default voice."""
    if source is None:
        if model.default_voice is None:
            raise VoiceError(f"{model.name} has no default voice: pass an audio file or a voice state")
        source = model.default_voice
    if isinstance(source, VoiceState):
        return source
    if isinstance(source, np.ndarray):
        if sample_rate is None:
            raise VoiceError("voice samples need their sample_rate")
        return model.clone_voice(source, sample_rate, "voice samples")
    path = os.fspath(source)
    if path in model.voices:
        path = model.voices[path]
    elif path in catalog.voice_names() and not os.path.exists(path):
        raise VoiceError(
            f"the predefined voice {path!r} is a state computed with the released weights of a catalog "
            f"model; {model.name} cannot use it: pass an audio file instead"
        )
    if path.startswith("hf://"):
        path = sources.fetch(path)
    if path.endswith(".safetensors"):
        if not os.path.isfile(path):
            raise VoiceError(f"voice state file not found: {path}")
        return voice_state.load(path, model.flow_spec.transformer)
    if not os.path.isfile(path):
        known = f" (predefined voices: {', '.join(sorted(model.voices))})" if model.voices else ""
        raise VoiceError(f"voice not found: {path!r} is neither a voice name, an audio file nor a voice state{known}")
    samples, rate = audio.read(path)
    return model.clone_voice(samples, rate, path)


def load_weights(
    files: Dict[str, str],
    keep_int8: Callable[[Tuple[int, ...]], bool] = lambda shape: False,
    parts: Optional[Sequence[str]] = None,
) -> Dict[str, quantize.Weight]:
    """The tensors of a model's weights files (part -> file, as sources.ModelFiles has them), of
    `parts` only when given: float32, int8 ones dequantized, except that matrices of linear layers
    whose shape `keep_int8` accepts stay `Int8Matrix` (for a core.portable.ops backend that multiplies them)."""
    selected = None if parts is None else (lambda key: params.part_of(key) in parts)
    paths = dict.fromkeys(path for part, path in files.items() if parts is None or part in parts)
    tensors: Dict[str, quantize.Weight] = {}
    for path in paths:
        raw, metadata = safetensors_file.load(path, selected)
        tensors.update(
            quantize.dequantize(
                raw, metadata, path, lambda key, shape: params.is_linear_matrix(key) and keep_int8(shape)
            )
        )
    return tensors


def _noise_source(
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
    # Truncated normal by inverting the CDF between the bounds (as torch's trunc_normal_ does).
    normal = statistics.NormalDist(0.0, std)
    low, high = normal.cdf(-clamp), normal.cdf(clamp)

    def truncated() -> np.ndarray:
        u = generator.uniform(low, high, dim)
        return np.array([normal.inv_cdf(min(max(v, 1e-300), 1 - 1e-16)) for v in u], dtype=np.float32)

    return truncated
