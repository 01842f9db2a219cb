"""Request and response bodies of the HTTP API (msgspec structs: validated, and in the OpenAPI schema)."""

from __future__ import annotations

import dataclasses
from typing import List, Literal, Optional, Union

import msgspec
from msgspec import Meta
from typing_extensions import Annotated

from core.portable.options import REQUEST_RANGES, GenerationOptions
from core.portable.options import names as option_names

MAX_TEXT = 5000  # characters per request


def _doc(name: str) -> str:
    return next(f.metadata["doc"] for f in dataclasses.fields(GenerationOptions) if f.name == name)


def _ranged(kind: type, name: str, low: str = "ge") -> type:
    """An option with the range a request may ask for (core.portable.options.REQUEST_RANGES)."""
    first, last = REQUEST_RANGES[name]
    return Annotated[kind, Meta(**{low: kind(first)}, le=kind(last), description=_doc(name))]


# Text with nothing to speak is refused by the routes (core.portable.text.check_text), not here.
Text = Annotated[str, Meta(max_length=MAX_TEXT, description="text to speak (pause markup allowed)")]
Temperature = _ranged(float, "temperature")
EosThreshold = _ranged(float, "eos_threshold")
Frames = _ranged(int, "max_frames")
FramesAfterEos = _ranged(int, "frames_after_eos")
DecodeSteps = _ranged(int, "lsd_decode_steps")
Seed = _ranged(int, "seed")
MaxTokens = _ranged(int, "max_tokens")
NoiseClamp = _ranged(float, "noise_clamp", low="gt")


class GenerateRequest(msgspec.Struct, forbid_unknown_fields=True):
    """Body of POST /generate and POST /stream: the text, a voice, and any generation option."""

    text: Text
    voice: Optional[str] = None
    temperature: Optional[Temperature] = None
    eos_threshold: Optional[EosThreshold] = None
    max_frames: Optional[Frames] = None
    frames_after_eos: Optional[FramesAfterEos] = None
    lsd_decode_steps: Optional[DecodeSteps] = None
    seed: Optional[Seed] = None
    max_tokens: Optional[MaxTokens] = None
    noise_clamp: Optional[NoiseClamp] = None

    def options(self) -> GenerationOptions:
        """The options this request sets (the others keep their defaults)."""
        chosen = {name: getattr(self, name) for name in option_names()}
        return GenerationOptions.of({name: value for name, value in chosen.items() if value is not None})


class VoiceRef(msgspec.Struct):
    id: str


class SpeechRequest(msgspec.Struct):
    """Body of POST /v1/audio/speech (OpenAI's)."""

    model: str
    input: Text
    voice: Union[str, VoiceRef]
    response_format: Literal["mp3", "opus", "aac", "flac", "wav", "pcm"] = "mp3"
    speed: Annotated[float, Meta(ge=0.25, le=4.0)] = 1.0
    stream_format: Literal["audio", "sse"] = "audio"
    instructions: Optional[str] = None


class Health(msgspec.Struct):
    status: str
    model: str
    sample_rate: int
    default_voice: str
    active_generations: int
    max_concurrent: int
    kernels: str  # what runs the model's products: the compiled kernels with NumPy, or NumPy alone
    instance: str  # host:pid of the process that answered (which replica, behind a load balancer)


class Voices(msgspec.Struct):
    default: str
    voices: List[str]
    openai_voices: dict


class UploadedVoice(msgspec.Struct):
    voice: str


class ErrorDetail(msgspec.Struct):
    message: str
    type: str
    param: Optional[str]
    code: Optional[str]


class ErrorBody(msgspec.Struct):
    """Every error of the API, in OpenAI's shape."""

    error: ErrorDetail


def error_json(status: int, message: str, param: Optional[str] = None, code: Optional[str] = None) -> bytes:
    """The JSON of an error in OpenAI's shape (a server_error from 500 on, else invalid_request_error)."""
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return msgspec.json.encode(ErrorBody(ErrorDetail(message=message, type=kind, param=param, code=code)))
