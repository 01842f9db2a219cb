"""Request and response bodies of the HTTP API (msgspec structs: validated, and in the OpenAPI schema)."""

from __future__ import annotations

import dataclasses
from typing import List, Literal, Optional, Union

import msgspec
from msgspec import Meta
from typing_extensions import Annotated

from core.options import GenerationOptions
from core.options import names as option_names

MAX_TEXT = 5000  # characters per request
MAX_FRAMES = 3000  # 4 minutes of audio


def _doc(name: str) -> str:
    return next(f.metadata["doc"] for f in dataclasses.fields(GenerationOptions) if f.name == name)


Text = Annotated[str, Meta(min_length=1, max_length=MAX_TEXT, description="text to speak (pause markup allowed)")]
# The options of core.options.GenerationOptions, with the ranges a request may ask for.
Temperature = Annotated[float, Meta(ge=0.0, le=5.0, description=_doc("temperature"))]
EosThreshold = Annotated[float, Meta(ge=-100.0, le=100.0, description=_doc("eos_threshold"))]
Frames = Annotated[int, Meta(ge=0, le=MAX_FRAMES, description=_doc("max_frames"))]
FramesAfterEos = Annotated[int, Meta(ge=0, le=100, description=_doc("frames_after_eos"))]
DecodeSteps = Annotated[int, Meta(ge=1, le=64, description=_doc("lsd_decode_steps"))]
Seed = Annotated[int, Meta(ge=0, le=2**63 - 1, description=_doc("seed"))]
MaxTokens = Annotated[int, Meta(ge=1, le=500, description=_doc("max_tokens"))]
NoiseClamp = Annotated[float, Meta(gt=0.0, le=100.0, description=_doc("noise_clamp"))]


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
    input: Annotated[str, Meta(min_length=1, max_length=MAX_TEXT)]
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
