"""Request and response bodies of the HTTP API (msgspec structs: validated, and in the OpenAPI schema)."""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Literal, Optional, Union

import msgspec
from msgspec import Meta
from typing_extensions import Annotated

from core.portable.synthesis.options import LOUDNESS_RANGE, REQUEST_RANGES, SPEED_RANGE, GenerationOptions
from core.portable.synthesis.options import names as option_names
from core.portable.text import lexicon
from server.session import MAX_TEXT


def _doc(name: str) -> str:
    return next(f.metadata["doc"] for f in dataclasses.fields(GenerationOptions) if f.name == name)


def _ranged(kind: type, name: str, low: str = "ge") -> type:
    """An option with the range a request may ask for (core.portable.synthesis.options.REQUEST_RANGES)."""
    first, last = REQUEST_RANGES[name]
    return Annotated[kind, Meta(**{low: kind(first)}, le=kind(last), description=_doc(name))]


# Checked by the session (server/session.py whole_text: something to speak, its length), once, not here.
Text = Annotated[str, Meta(description=f"text to speak (pause markup allowed), at most {MAX_TEXT} characters")]
Temperature = _ranged(float, "temperature")
EosThreshold = _ranged(float, "eos_threshold")
Frames = _ranged(int, "max_frames")
FramesAfterEos = _ranged(int, "frames_after_eos")
DecodeSteps = _ranged(int, "lsd_decode_steps")
Seed = _ranged(int, "seed")
MaxTokens = _ranged(int, "max_tokens")
NoiseClamp = _ranged(float, "noise_clamp", low="gt")
Speed = Annotated[float, Meta(ge=SPEED_RANGE[0], le=SPEED_RANGE[1], description=_doc("speed"))]
Normalize = Annotated[bool, Meta(description=_doc("normalize"))]
Pauses = Annotated[bool, Meta(description=_doc("pauses"))]
Loudness = Annotated[float, Meta(ge=LOUDNESS_RANGE[0], le=LOUDNESS_RANGE[1], description=_doc("loudness"))]
Pronunciations = Annotated[
    Dict[str, str],
    Meta(
        max_length=lexicon.MAX_ENTRIES,
        description="words to say otherwise: word -> respelling (at most 1000, each at most 100 characters)",
    ),
]
SampleRate = Annotated[
    Literal[8000, 16000, 22050, 24000, 44100, 48000],  # core.audio_formats.RATES
    Meta(description="the audio's sample rate (default: the model's, 24000), resampled with soxr"),
]


class OptionFields(msgspec.Struct, forbid_unknown_fields=True):
    """Every generation option by name, each in the range a request may ask for (None: its default)."""

    temperature: Optional[Temperature] = None
    eos_threshold: Optional[EosThreshold] = None
    max_frames: Optional[Frames] = None
    frames_after_eos: Optional[FramesAfterEos] = None
    lsd_decode_steps: Optional[DecodeSteps] = None
    seed: Optional[Seed] = None
    max_tokens: Optional[MaxTokens] = None
    noise_clamp: Optional[NoiseClamp] = None
    speed: Optional[Speed] = None
    normalize: Optional[Normalize] = None
    pauses: Optional[Pauses] = None
    loudness: Optional[Loudness] = None

    def options(self) -> GenerationOptions:
        """The options this request sets (the others keep their defaults)."""
        chosen = {name: getattr(self, name) for name in option_names()}
        return GenerationOptions.of({name: value for name, value in chosen.items() if value is not None})


class GenerateRequest(OptionFields, kw_only=True):
    """Body of POST /generate and POST /stream: the text, a voice, any generation option, the
    audio's sample rate."""

    text: Text
    voice: Optional[str] = None
    sample_rate: Optional[SampleRate] = None
    # `model`: a served model's name, or a language (fr, fr-FR, french); none: the default
    model_name: Optional[str] = msgspec.field(default=None, name="model")
    pronunciations: Optional[Pronunciations] = None  # this request's words to say otherwise


class StreamRequest(GenerateRequest, kw_only=True):
    """Body of POST /stream: POST /generate's, and the samples' format: 16-bit PCM, or G.711."""

    format: Literal["pcm", "mulaw", "alaw"] = "pcm"


class TimedWordEntry(msgspec.Struct):
    """A word and when it is spoken: `start` and `end` in seconds of the audio, `index` its place
    among the text's words (a word said as several, "$5.20", is one)."""

    word: str
    index: int
    start: float
    end: float


class WordsResponse(msgspec.Struct):
    """POST /generate/words: the whole WAV (base64) and its words."""

    audio: str
    sample_rate: int
    words: List[TimedWordEntry]


class VoiceRef(msgspec.Struct):
    id: str


class SpeechRequest(msgspec.Struct):
    """Body of POST /v1/audio/speech (OpenAI's)."""

    model_name: str = msgspec.field(name="model")
    input: Text
    voice: Union[str, VoiceRef]
    response_format: Literal["mp3", "opus", "aac", "flac", "wav", "pcm", "mulaw", "alaw"] = "mp3"
    speed: Speed = 1.0
    stream_format: Literal["audio", "sse"] = "audio"
    instructions: Optional[str] = None
    # Not OpenAI's: numbers, dates, ... read as words unless false (as every other entry of ours);
    # the audio's rate; and mulaw / alaw (G.711, telephone audio) among the formats.
    normalize: Normalize = True
    sample_rate: Optional[SampleRate] = None
    loudness: Optional[Loudness] = None  # not OpenAI's either: the voice brought to this loudness
    pronunciations: Optional[Pronunciations] = None  # nor this: the request's words to say otherwise

    def options(self) -> GenerationOptions:
        return GenerationOptions(speed=self.speed, normalize=self.normalize, loudness=self.loudness)


class ServedModel(msgspec.Struct):
    """A model the server speaks with (GET /health): its name, its language, whether it is loaded
    now (another is loaded on its first request), whether it is the default."""

    name: str
    language: str
    loaded: bool
    default: bool


class Health(msgspec.Struct):
    status: str
    model: str
    sample_rate: int
    default_voice: str
    active_generations: int
    max_concurrent: int
    kernels: str  # what runs the model's products: the compiled kernels with NumPy, or NumPy alone
    instance: str  # which process answered (a replica behind a load balancer): a random id, not its name
    word_timestamps: bool  # whether the model times words (timestamp heads): POST /generate/words, ...
    timed_models: List[str]  # the catalog's models that time words (the page names them where this one does not)
    max_text: int  # characters of text a request may give
    models: List[ServedModel]  # every model a request may pick by name or language, the default first


class Voices(msgspec.Struct):
    """GET /voices: the default voice, the predefined ones, OpenAI's names, the voices folder's."""

    default: str
    voices: List[str]
    openai_voices: dict
    folder: List[str]


class UploadedVoice(msgspec.Struct):
    voice: str


class VoiceEntry(msgspec.Struct, omit_defaults=True):
    """A voice a request may name: `id` is what to send as `voice`. Kinds: "default" (the voice of a
    request that names none; `name` says which it is), "predefined" (the model's), "alias" (an
    OpenAI name; `voice` says which of ours it stands for), "folder" (a recording of the server's
    voices folder) and "uploaded" (a recording POST /voices cloned, while the server keeps it).
    `language`: the language it was recorded in, where known (every voice speaks the model's)."""

    id: str
    name: str
    kind: Literal["default", "predefined", "alias", "folder", "uploaded"]
    voice: Optional[str] = None
    language: Optional[str] = None


class VoiceList(msgspec.Struct):
    """GET /v1/audio/voices: the default, the predefined voices, OpenAI's names, the uploads kept."""

    voices: List[VoiceEntry]


class ModelCard(msgspec.Struct, kw_only=True):
    """A model in OpenAI's shape (GET /v1/models), and what OpenAI's leaves out: the language it
    speaks, whether it is loaded now, and once it is, its parameters and whether it times words (null
    before)."""

    id: str
    object: Literal["model"] = "model"
    created: int  # when this server loaded it, or started (a model not loaded yet): unix seconds
    owned_by: str = "kyutai"
    language: str
    loaded: bool
    parameters: Optional[int] = None
    word_timestamps: Optional[bool] = None


class ModelList(msgspec.Struct, kw_only=True):
    object: Literal["list"] = "list"
    data: List[ModelCard]


class ErrorDetail(msgspec.Struct):
    message: str
    type: str
    param: Optional[str]
    code: Optional[str]


class ErrorBody(msgspec.Struct):
    """Every error of the API, in OpenAI's shape."""

    error: ErrorDetail


def error_json(status: int, message: str, param: Optional[str] = None, code: Optional[str] = None) -> bytes:
    """The JSON of an error in OpenAI's shape."""
    return msgspec.json.encode(ErrorBody(error_detail(status, message, param, code)))


def error_detail(status: int, message: str, param: Optional[str] = None, code: Optional[str] = None) -> ErrorDetail:
    """An error in OpenAI's shape (a server_error from 500 on, else invalid_request_error)."""
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return ErrorDetail(message=message, type=kind, param=param, code=code)


# The WebSocket's client frames (server/websocket.py), JSON text frames told apart by "type"


class StreamStart(OptionFields, tag="start", tag_field="type"):
    """The first frame (optional): the voice and any generation option, for the whole connection;
    `words`: send `word` and `word_end` frames (word timestamps); the audio's `sample_rate` and
    `format` (16-bit PCM, or G.711), every sample count of the stream's frames at that rate."""

    voice: Optional[str] = None
    words: bool = False
    sample_rate: Optional[SampleRate] = None
    format: Literal["pcm", "mulaw", "alaw"] = "pcm"
    # `model`: a served model's name, or a language (fr, fr-FR, french); none: the default
    model_name: Optional[str] = msgspec.field(default=None, name="model")
    pronunciations: Optional[Pronunciations] = None  # this request's words to say otherwise


class StreamText(msgspec.Struct, tag="text", tag_field="type", forbid_unknown_fields=True):
    text: str  # a piece of text, any split (inside a word too)


class StreamFlush(msgspec.Struct, tag="flush", tag_field="type", forbid_unknown_fields=True):
    """Speak what is buffered now, complete or not."""


class StreamEnd(msgspec.Struct, tag="end", tag_field="type", forbid_unknown_fields=True):
    """No more text: speak the rest, answer `done`, close."""


class StreamCancel(msgspec.Struct, tag="cancel", tag_field="type", forbid_unknown_fields=True):
    """Stop speaking now (barge-in) and drop the text buffered; answered by `done`."""


ClientFrame = Union[StreamStart, StreamText, StreamFlush, StreamEnd, StreamCancel]
CLIENT_FRAMES = ("start", "text", "flush", "end", "cancel")
