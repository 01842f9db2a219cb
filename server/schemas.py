"""Request and response bodies of the HTTP API (msgspec structs: validated, and in the OpenAPI schema)."""

from __future__ import annotations

from typing import Annotated, List, Literal, Optional, Union

import msgspec
from msgspec import Meta

MAX_TEXT = 5000  # characters per request
MAX_FRAMES = 3000  # 4 minutes of audio

Text = Annotated[str, Meta(min_length=1, max_length=MAX_TEXT, description="text to speak (pause markup allowed)")]
Temperature = Annotated[float, Meta(ge=0.0, le=5.0, description="sampling temperature (default: the model's)")]
DecodeSteps = Annotated[int, Meta(ge=1, le=64, description="flow head steps per frame (default 1)")]
EosThreshold = Annotated[float, Meta(ge=-100.0, le=100.0, description="end-of-speech threshold (default: the model's)")]
Seed = Annotated[int, Meta(ge=0, le=2**63 - 1, description="seed of the sampling noise")]
Frames = Annotated[int, Meta(ge=0, le=MAX_FRAMES, description="cap on the generated 80 ms frames")]


class GenerateRequest(msgspec.Struct, forbid_unknown_fields=True):
    """Body of POST /generate and POST /stream."""

    text: Text
    voice: Optional[str] = None
    temperature: Optional[Temperature] = None
    lsd_decode_steps: Optional[DecodeSteps] = None
    eos_threshold: Optional[EosThreshold] = None
    seed: Optional[Seed] = None
    max_frames: Optional[Frames] = None

    def options(self) -> dict:
        return {
            "temperature": self.temperature,
            "lsd_decode_steps": self.lsd_decode_steps,
            "eos_threshold": self.eos_threshold,
            "seed": self.seed,
            "max_frames": self.max_frames,
        }


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
