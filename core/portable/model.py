"""`TTSModel`: a loaded model, and the entries that generate speech with it.

The work is in modules of their own, each a job: planning.py (a text to a generation: chunks,
pauses, tokens, caps, noise), generation.py (a generation stepped frame by frame, alone or with
others), decoding.py (frames to audio at a speed), text_stream.py (text arriving in pieces, a
generation per segment), voices.py (voices and cloning), budget.py (the audio a session may make).
Generation follows the official `TTSModel.generate_audio_stream`: the text is cleaned and split into
chunks; each chunk starts from the voice state, prompts the flow LM with its tokens, then generates
one latent per 80 ms frame until the EOS rule stops it, and each latent is decoded as soon as it
exists (so the first audio arrives after one frame).
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import os
import weakref
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import config
from .audio import loudness
from .errors import ConfigError, PocketTTSError, VoiceError, WeightsError
from .network import flow_lm, mimi, ops, quantize, transformer
from .synthesis import planning
from .synthesis.budget import Budget
from .synthesis.decoding import FrameDecoder, decoded
from .synthesis.generation import Generation, alone
from .synthesis.options import GenerationOptions
from .synthesis.text_stream import TextStream
from .synthesis.timestamps import shifted, timed_words
from .text import lexicon as lexicons
from .text import normalize
from .text.prepare import TextOptions
from .text.segmenter import Segmenter
from .text.tokenizer import Tokenizer
from .voices import sources as voices
from .voices.state import VoiceSource, VoiceState
from .weights import adapter as lora
from .weights import catalog, params, safetensors_file, sources

# The most audio one generation may make, pauses included (an hour): speech that could run longer
# stops there, and pauses or a max_frames asking for more are refused. The server allows less.
MAX_SECONDS = 3600.0
# The seed of the sample text a voice's loudness is measured on (`voice_loudness`): the same measure
# every time.
CALIBRATION_SEED = 0

# How `TTSModel.stream` runs a generation alone to its end (and so every entry of the Python API):
# on the caller's thread (one_thread), or, where the host has threads, one that gives the same
# chunks sooner (on CPython core/pipeline.py: the flow LM on a thread of its own).
Runner = Callable[["TTSModel", Generation], Iterator[np.ndarray]]


def one_thread(model: TTSModel, generation: Generation) -> Iterator[np.ndarray]:
    """A generation's frames, then their audio, chunk by chunk, on the caller's thread."""
    return decoded(model.decoder(generation.speed, generation.gain_db), alone(model, generation))


@dataclasses.dataclass(frozen=True)
class Runtime:
    """What the host that loads a model gives it (plain data, chosen by whoever loads it): the
    backend its products run on (core.portable.network.ops: NumPy, or compiled kernels; it also decides
    which int8 weights stay int8 at load), how a generation runs alone to its end (`runner`), and
    how its hf:// files are fetched. These defaults are the portable model's own: NumPy, the
    caller's thread, no downloads; a host gives its own (core/host.py on CPython, the browser's
    worker its WebAssembly kernels)."""

    backend: Any = ops.NUMPY
    runner: Runner = one_thread
    fetch: sources.Fetch = sources.no_downloads


class TTSModel:
    """A loaded Pocket TTS model. Not thread-safe for one stream, but streams do not share state."""

    def __init__(
        self,
        cfg: config.Config,
        tensors: Dict[str, np.ndarray],
        tokenizer: Optional[Tokenizer],
        name: str,
        weights_source: str,
        voices: Optional[Dict[str, str]] = None,
        default_voice: Optional[str] = None,
        voice_cloning: bool = True,
        parts: Sequence[str] = params.PARTS,
        runtime: Runtime = Runtime(),
    ):
        """Use `TTSModel.load`. `weights_source` names the file the tensors came from (for errors);
        `voices` maps predefined voice names to their state files (local or hf://); `parts` are the
        parts of the checkpoint that `tensors` hold (params.PARTS); `runtime`: the host's."""
        self.config = cfg
        self.runtime = runtime
        self.name = name
        self.parts = tuple(parts)
        has_encoder = params.check(tensors, cfg, weights_source, self.parts)
        self.can_clone_voices = has_encoder and voice_cloning
        # A model without its flow LM (the browser's decoder worker) reads no text: its tokenizer
        # is read from its files when first asked for (`tokenizer`), checked then.
        self._tokenizer = self._checked(tokenizer) if tokenizer is not None else None
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
        # Of the words that numbers, dates, ... are read as (core.portable.text.normalize).
        self.language = normalize.language_of(name)
        self.voices = dict(voices or {})
        self.default_voice = default_voice
        self._time_terms: Dict[int, List[np.ndarray]] = {}
        # The files it was loaded from (set by `from_files`): where `add_parts` reads more parts.
        self.files: Optional[sources.ModelFiles] = None
        self.adapter: Optional[str] = None  # the LoRA adapter kept beside its flow LM, where one is
        self._unadapted: Optional[Dict[str, Any]] = None  # its flow LM's params without it (shared arrays)
        self.lexicon = lexicons.EMPTY  # its pronunciations (`pronounce`)
        self._loudness: Dict[int, Tuple[Any, float]] = {}  # id of a voice -> (a weak reference to it, its LUFS)

    def _checked(self, tokenizer: Tokenizer) -> Tokenizer:
        if tokenizer.vocab_size != self.config.flow_lm.lookup_table.n_bins:
            raise ConfigError(
                f"{self.name}: the tokenizer has {tokenizer.vocab_size} tokens but "
                f"flow_lm.lookup_table.n_bins is {self.config.flow_lm.lookup_table.n_bins}"
            )
        return tokenizer

    def _read_tokenizer(self) -> Tokenizer:
        """The tokenizer, read from the model's files and checked the first time it is asked for."""
        if self._tokenizer is None:
            if self.files is None:
                raise PocketTTSError(f"{self.name} was loaded without a tokenizer")
            self._tokenizer = self._checked(Tokenizer.from_file(self.files.tokenizer))
        return self._tokenizer

    @property
    def tokenizer(self) -> Tokenizer:
        return self._read_tokenizer()

    @property
    def sample_rate(self) -> int:
        return self.config.mimi.sample_rate

    @property
    def frame_size(self) -> int:
        """Samples per generated frame (and per streamed chunk)."""
        return self.config.mimi.frame_size

    @classmethod
    def default_runtime(cls) -> Runtime:
        """What runs a model loaded without a runtime: the portable defaults (core.TTSModel, the
        CPython host's, gives that host's)."""
        return Runtime()

    @classmethod
    def load(
        cls,
        source: str,
        parts: Optional[Sequence[str]] = None,
        runtime: Optional[Runtime] = None,
        adapter: Optional[str] = None,
    ) -> TTSModel:
        """Load a catalog model by name ("english", downloaded and cached), an official-schema
        config file (.yaml or .json; local or hf:// paths), or a bundle folder (`core.cli export`).

        `parts` (of params.PARTS) loads only those parts, each tensor read into memory of its own;
        by default the whole weights file is memory-mapped. `runtime`: what runs it (Runtime; where
        none is given, `default_runtime`'s). `adapter`: a LoRA adapter (a PEFT folder or a
        .safetensors file) kept beside its weights (`adapted`).
        """
        runtime = runtime or cls.default_runtime()
        files = sources.resolve(os.fspath(source), runtime.fetch)
        return cls.from_files(files, parts=parts, runtime=runtime, adapter=adapter)

    @classmethod
    def from_files(
        cls,
        files: sources.ModelFiles,
        tensors: Optional[Dict[str, quantize.Weight]] = None,
        parts: Optional[Sequence[str]] = None,
        in_memory: Optional[Dict[str, np.ndarray]] = None,
        runtime: Optional[Runtime] = None,
        adapter: Optional[str] = None,
    ) -> TTSModel:
        """A model from resolved files; `tensors` when the caller has read the weights already,
        `in_memory` the bytes of weights files it holds in memory (see load_weights), `adapter` a
        LoRA adapter to merge into them (see `load`).
        int8 weights stay int8 where the runtime's backend multiplies them (see quantize); an
        adapter's updates are kept apart from the weights they change (quantize.LowRank)."""
        runtime = runtime or Runtime()
        if tensors is None:
            tensors = load_weights(files.weights, runtime.backend.keeps_int8, parts, in_memory)
        parts = params.PARTS if parts is None else parts
        model = cls(
            files.config,
            tensors,
            Tokenizer.from_file(files.tokenizer) if params.FLOW_LM in parts else None,
            files.name,
            ", ".join(dict.fromkeys(files.weights.values())),
            files.voices,
            files.default_voice,
            files.voice_cloning,
            parts,
            runtime,
        )
        model.files = files
        return model.adapted(adapter) if adapter is not None and params.FLOW_LM in parts else model

    def adapted(self, adapter: str) -> TTSModel:
        """This model with the LoRA adapter at `adapter` (a PEFT folder or a .safetensors file) in
        place of any it has, sharing every weight with it: each adapted weight's update is kept
        apart (network.flow_lm.adapted), so several adapters of one model hold one copy of its
        weights. Checked now: a key that names no layer, or a pair of another shape, is a
        WeightsError."""
        self.require(params.FLOW_LM)
        variant = copy.copy(self)
        updates = lora.updates(lora.read(adapter))
        base = self._unadapted if self._unadapted is not None else self.params["flow_lm"]
        try:
            variant.params = dict(self.params, flow_lm=flow_lm.adapted(base, updates))
        except WeightsError as e:
            raise WeightsError(f"{adapter}: {e}") from None
        variant.adapter = adapter
        variant._unadapted = base
        variant._time_terms = {}  # the head's time conditioning, of weights an adapter may change
        variant._loudness = {}  # a voice's level, which its adapter may change
        return variant

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
        if params.FLOW_LM in new:
            self._read_tokenizer()  # a bad tokenizer fails here, not at the first request
        tensors = load_weights(files.weights, self.runtime.backend.keeps_int8, new)
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
        return voices.resolve(self._voice_book(), source, sample_rate)

    def clone_voice(self, samples: np.ndarray, sample_rate: int, where: str) -> VoiceState:
        """The voice of a recording (samples [T] or [channels, T]); `where` names it in errors."""
        return voices.clone(self._voice_book(), samples, sample_rate, where)

    def _voice_book(self) -> voices.VoiceBook:
        return voices.VoiceBook(
            self.name,
            self.voices,
            self.default_voice,
            self.sample_rate,
            self.flow_spec.transformer,
            self.runtime.fetch,
            self._encode_voice,
        )

    def _encode_voice(self, prompt: np.ndarray) -> VoiceState:
        """The voice state of a cleaned prompt [T] at the model's rate: the Mimi encoder's latents,
        read by the flow LM as the voice's conditioning."""
        self.require(params.VOICE_CLONING)
        if not self.can_clone_voices:
            raise VoiceError(
                f"{self.name} cannot clone voices: its weights come without voice cloning (for the official "
                "models, accept the terms at https://huggingface.co/kyutai/pocket-tts and log in with "
                "`hf auth login` or HF_TOKEN). Use a predefined voice or a .safetensors voice state."
            )
        with ops.using(self.runtime.backend):
            latents = mimi.encode(self.mimi_spec, self.params["mimi"], prompt)  # [frames, C]
            conditioning = flow_lm.voice_conditioning(self.flow_spec, self.params["flow_lm"], latents)
            state = transformer.init_state(self.flow_spec.transformer, capacity=conditioning.shape[0])
            flow_lm.prompt(self.flow_spec, self.params["flow_lm"], state, conditioning)
        return VoiceState(state)

    # Generation: `stream` is the one way to speak, `generate` its whole audio; `generation` and
    # `text_stream` are the pieces a scheduler steps (the server's, the browser worker's).

    def stream(
        self,
        text: Union[str, Iterable[str]],
        voice: VoiceSource = None,
        options: Optional[GenerationOptions] = None,
        words: bool = False,
        max_seconds: float = MAX_SECONDS,
        pronunciations: Optional[Mapping[str, str]] = None,
        **overrides: Any,
    ) -> Iterator[Any]:
        """Yield float32 PCM chunks as the frames are decoded (`frame_size` samples each at speed 1).

        `text`: a string, or text arriving in pieces (an LLM's tokens: any iterable of strings, any
        split, read lazily), spoken segment by segment as each is complete (core.portable.text.
        segmenter); its audio equals that of the whole text whenever the segments are the whole
        text's chunks (one noise generator runs through them). `options`, or any of them by name
        as keywords (`temperature=0`): checked now, with the voice and a whole text, so that bad
        input fails before any work. With `words`, word events come between the chunks
        (synthesis.timestamps WordStart, WordEnd: sample offsets of the audio at `sample_rate`,
        a word's start before the audio that starts it; a NoTimestampsError now for a model
        without timestamp heads). All of it lasts at most `max_seconds` (after the speed change,
        pauses included). `pronunciations` (word -> respelling, text.lexicon): this call's words
        to say otherwise, over the model's (`pronounce`)."""
        if isinstance(text, str):
            first_word = 0 if words else None
            lexicon = self.lexicon_with(pronunciations)
            generation = self.generation(
                text, voice, options, max_seconds=max_seconds, first_word=first_word, lexicon=lexicon, **overrides
            )
            return self.runtime.runner(self, generation)
        stream = self.text_stream(
            voice, options, max_seconds=max_seconds, words=words, pronunciations=pronunciations, **overrides
        )
        return self._spoken(text, stream)

    def generate(
        self,
        text: Union[str, Iterable[str]],
        voice: VoiceSource = None,
        options: Optional[GenerationOptions] = None,
        words: bool = False,
        max_seconds: float = MAX_SECONDS,
        **overrides: Any,
    ) -> Any:
        """The whole of `stream`: float32 PCM [n] at `sample_rate`; with `words`, (PCM, when each
        word is spoken: TimedWord in seconds, the words as the text writes them). With a
        `loudness`, the whole is brought to it by its own measure (audio.loudness.leveled_whole),
        as a file is: closer than a stream, whose gain is the voice's."""
        chunks, events = [], []
        for item in self.stream(text, voice, options, words, max_seconds, **overrides):
            (chunks if isinstance(item, np.ndarray) else events).append(item)
        target = overrides.get("loudness", options.loudness if options is not None else None)
        if target is not None:
            chunks = loudness.leveled_whole(chunks, self.sample_rate, target)
        pcm = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
        return (pcm, timed_words(events, self.sample_rate)) if words else pcm

    def _spoken(self, pieces: Iterable[str], text: TextStream) -> Iterator[Any]:
        """The audio of `pieces` pushed to `text`, segment by segment; word events in samples of the
        whole stream, their indexes running on from segment to segment."""
        said = 0  # samples given out: where the next segment's audio begins
        segments = (segment for piece in pieces for segment in text.push(piece))
        for segment in itertools.chain(segments, _later(text.end)):
            start = said
            for item in self.runtime.runner(self, segment.generation):
                if isinstance(item, np.ndarray):
                    said += item.shape[0]
                    yield item
                else:
                    yield shifted(item, start)

    def text_stream(
        self,
        voice: VoiceSource,
        options: Optional[GenerationOptions] = None,
        rng: Optional[np.random.Generator] = None,
        max_seconds: float = MAX_SECONDS,
        budget: Optional[Budget] = None,
        ssml: bool = False,
        words: bool = False,
        pronunciations: Optional[Mapping[str, str]] = None,
        **overrides: Any,
    ) -> TextStream:
        """Text arriving in pieces, as one generation per segment to run one after another (for
        callers that push: the server's sessions, the browser worker); see `stream`. All of them
        make at most `max_seconds` of audio (synthesis.budget), or draw on `budget`; `ssml`: the
        text is SSML (text.ssml); `words`: its words are timed (a NoTimestampsError now for a
        model without timestamp heads); `pronunciations`: as `stream`'s, checked now."""
        options = _options(options, overrides)
        if words:
            planning.timed(self.config, self.name)
        lexicon = self.lexicon_with(pronunciations)
        voice_state = self.voice_state(voice)
        return TextStream(self, voice_state, options, rng, max_seconds, budget, ssml, words, lexicon)

    def generation(
        self,
        text: str,
        voice: VoiceSource,
        options: Optional[GenerationOptions] = None,
        rng: Optional[np.random.Generator] = None,
        max_seconds: float = MAX_SECONDS,
        budget: Optional[Budget] = None,
        first_word: Optional[int] = None,
        lexicon: Optional[lexicons.Lexicon] = None,
        **overrides: Any,
    ) -> Generation:
        """A generation of `text` to step frame by frame (synthesis.generation: `alone`, or
        `advance` with others).

        `options` (synthesis.options.GenerationOptions), or any of them by name as keywords;
        `rng`: the noise source, instead of a seed. Options are checked, and the text is split and
        tokenized now, so that bad input fails before any work. The audio lasts at most
        `max_seconds` (after the speed change, pauses included; synthesis.budget), or draws on
        `budget` (a session's, shared by its generations): a LimitError when max_frames or the
        pauses alone ask for more; speech that could run longer stops there. With `first_word`
        (the index of its first word), its words are timed: its frames carry their scores
        (synthesis.timestamps); a NoTimestampsError for a model without timestamp heads.
        `lexicon`: the pronunciations it reads with (None: the model's; `lexicon_with`).
        """
        self.require(params.FLOW_LM)
        options = _options(options, overrides)
        if budget is None:
            budget = Budget(max_seconds, self.config.mimi.frame_rate, options.speed)
        voice_state = self.voice_state(voice)
        heads = planning.timed(self.config, self.name) if first_word is not None else None
        reader = self.reader if lexicon is None else self.reader._replace(lexicon=lexicon)
        items = planning.plan(reader, text, options.max_tokens, options.normalize, first_word, options.pauses)
        chosen = planning.settings(self.config, options)
        frames = planning.frame_cap(items, options, budget, self.frame_size)
        noise = planning.noise_source(
            self.flow_spec.latent_dim, chosen.temperature, options.noise_clamp, options.seed, rng
        )
        gain_db = None
        if options.loudness is not None:
            gain_db = loudness.gain_to(options.loudness, self.voice_loudness(voice_state))
        return Generation(
            self,
            items,
            voice_state,
            chosen.eos_threshold,
            chosen.frames_after_eos,
            frames,
            budget,
            options.max_frames is not None,
            noise,
            self.time_terms(options.lsd_decode_steps),
            options.speed,
            heads,
            gain_db,
        )

    @property
    def reader(self) -> planning.Reader:
        """What reads a text for this model (synthesis.planning)."""
        frame_rate = self.config.mimi.frame_rate
        return planning.Reader(
            self.tokenizer, self.text_options, self.language, self.sample_rate, frame_rate, self.lexicon
        )

    def spoken(self, text: str, normalize_words: bool = True, lexicon: Optional[lexicons.Lexicon] = None) -> str:
        """`text` as the model reads it: its pronunciations (`lexicon`'s, None: the model's)
        respelled, normalized in its language around its pause markup (unless `normalize_words` is
        false), before the official cleaning."""
        return planning.spoken(text, self.language, normalize_words, self.lexicon if lexicon is None else lexicon)

    def pronounce(self, path: str) -> None:
        """Read the words of a pronunciation file (`word = respelling` lines: text.lexicon) as
        their respellings from now on, in every text this model reads."""
        self.lexicon = lexicons.read(path)

    def lexicon_with(self, pronunciations: Optional[Mapping[str, str]]) -> Optional[lexicons.Lexicon]:
        """The model's pronunciations with a request's over them (None where it brings none); a
        TextError naming the first pair that is not one."""
        return None if pronunciations is None else lexicons.added(self.lexicon, pronunciations)

    def decoder(self, speed: float = 1.0, gain_db: Optional[float] = None) -> FrameDecoder:
        """The Mimi half of `stream`: turns frames into audio at `speed` (and `gain_db`: a generation's
        gain to its loudness), keeping the decoder's state."""
        self.require(params.DECODER)
        return FrameDecoder(self, speed, gain_db)

    def voice_loudness(self, voice: VoiceState) -> float:
        """The integrated loudness (LUFS, ITU-R BS.1770-4) of `voice` reading its language's sample
        text (the official default text, seed CALIBRATION_SEED): measured the first time a
        generation asks for a loudness with it, then kept while the voice is. Every chunk of such
        a generation is multiplied by the gain from it (audio.loudness.Leveler)."""
        key = id(voice)
        known = self._loudness.get(key)
        if known is not None and known[0]() is voice:
            return known[1]
        text = catalog.default_text(self.language)
        generation = self.generation(text, voice, GenerationOptions(seed=CALIBRATION_SEED))
        chunks = [chunk for chunk in one_thread(self, generation) if isinstance(chunk, np.ndarray)]
        measured = loudness.integrated(np.concatenate(chunks) if chunks else np.zeros(0, np.float32), self.sample_rate)
        self._loudness[key] = (weakref.ref(voice), measured)
        return measured

    def segmenter(self, max_tokens: int = GenerationOptions.max_tokens) -> Segmenter:
        """Cuts text arriving in pieces into segments to speak as soon as each is complete."""
        return Segmenter(self.tokenizer, max_tokens, self.text_options)

    def require(self, part: str) -> None:
        """A PocketTTSError when `part` (params.PARTS) was not loaded."""
        if part not in self.parts:
            raise PocketTTSError(f"{self.name} was loaded without its {part.replace('_', ' ')} (parts: {self.parts})")

    def time_terms(self, steps: int) -> List[np.ndarray]:
        """The flow head's time conditioning for `steps` decode steps (computed once per count)."""
        if steps not in self._time_terms:
            with ops.using(self.runtime.backend):
                self._time_terms[steps] = flow_lm.time_terms(self.flow_spec, self.params["flow_lm"], steps)
        return self._time_terms[steps]


def _later(make: Callable[[], Iterable[Any]]) -> Iterator[Any]:
    """The items of `make()`, called when the first is asked for."""
    yield from make()


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


def load_weights(
    files: Dict[str, str],
    keep_int8: Callable[[Tuple[int, ...]], bool] = lambda shape: False,
    parts: Optional[Sequence[str]] = None,
    in_memory: Optional[Dict[str, np.ndarray]] = None,
) -> Dict[str, quantize.Weight]:
    """The tensors of a model's weights files (part -> file, as sources.ModelFiles has them), of
    `parts` only when given: float32, int8 ones dequantized, except that matrices of linear layers
    whose shape `keep_int8` accepts stay `Int8Matrix` (for a core.portable.network.ops backend that multiplies them),
    and so does the text embedding table (of which a text reads a few rows).
    A file whose path `in_memory` holds (its bytes, as uint8) is read from there: its tensors are
    views of those bytes (a browser worker puts the downloaded files there, not in its file system)."""
    selected = None if parts is None else (lambda key: params.part_of(key) in parts)
    paths = dict.fromkeys(path for part, path in files.items() if parts is None or part in parts)
    tensors: Dict[str, quantize.Weight] = {}
    for path in paths:
        if in_memory is not None and path in in_memory:
            raw, metadata = safetensors_file.loads(in_memory[path], path, selected)
        else:
            raw, metadata = safetensors_file.load(path, selected)
        tensors.update(
            quantize.dequantize(
                raw,
                metadata,
                path,
                # Asked of 2-D tensors only: the lookup table and the linear layers' matrices.
                lambda key, shape: params.is_lookup_table(key) or keep_int8(shape),
            )
        )
    return tensors
