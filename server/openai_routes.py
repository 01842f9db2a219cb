"""OpenAI's API: `POST /v1/audio/speech`, and the listings clients ask for (`GET /v1/audio/voices`,
as Kokoro-FastAPI's path; `GET /v1/models`)."""

from __future__ import annotations

from typing import List, Optional

import anyio
from litestar import Request, Response, delete, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody
from litestar.response import Stream

import core
from core import audio_formats
from core.portable.text import normalize
from server import bodies, errors, reading
from server.access import Caller
from server.engine import ServerEngine
from server.errors import ServiceError
from server.routes import MAX_JSON
from server.schemas import ModelCard, ModelList, SpeechRequest, VoiceEntry, VoiceList
from server.session import Session, whole_text

# The names OpenAI clients send as `model` (POST /v1/audio/speech takes any): each is the loaded model.
OPENAI_MODELS = ("pocket-tts", "tts-1", "tts-1-hd", "gpt-4o-mini-tts")


@get("/v1/audio/voices", summary="Every voice a request may name (OpenAI-style listing, as Kokoro-FastAPI's path)")
async def openai_voices(engine: NamedDependency[ServerEngine], caller: NamedDependency[Caller]) -> VoiceList:
    # the engine's lock and the voices folder: not on the event loop
    listed = await anyio.to_thread.run_sync(engine.voices.listed, caller)
    entries = [
        VoiceEntry(
            id=voice.id,
            name=voice.voice if voice.kind in ("default", "uploaded") and voice.voice else voice.id,
            kind=voice.kind,
            voice=None if voice.kind in ("default", "uploaded") else voice.voice,
            language=voice.language,
        )
        for voice in listed
    ]
    return VoiceList(voices=entries)


@delete(
    "/v1/audio/voices/{voice_id:str}",
    summary="Forget an uploaded voice, and its saved file (with --voices-dir): a key holder's upload only",
    status_code=204,
)
async def delete_voice(
    engine: NamedDependency[ServerEngine], caller: NamedDependency[Caller], voice_id: FromPath[str]
) -> None:
    try:  # the engine's lock and the voices folder: not on the event loop
        await anyio.to_thread.run_sync(engine.voices.delete, voice_id, caller)
    except core.PocketTTSError as e:
        raise errors.from_core(e) from None


def _model_cards(engine: ServerEngine) -> List[ModelCard]:
    """The default model under its name and OpenAI's, then every other served model."""
    hosted = engine.hosted
    cards = [
        ModelCard(id=name, created=hosted.loaded_at, loaded=True, **hosted.description)
        for name in (hosted.name,) + OPENAI_MODELS
    ]
    for listed in engine.models.listed()[1:]:
        served = engine.models.loaded(listed.name)
        if served is None:
            cards.append(ModelCard(id=listed.name, created=hosted.loaded_at, language=listed.language, loaded=False))
        else:
            cards.append(
                ModelCard(id=listed.name, created=served.hosted.loaded_at, loaded=True, **served.hosted.description)
            )
    return cards


def _picked(engine: ServerEngine, model: str) -> Optional[str]:
    """What OpenAI's `model` picks: a served model by its name or its language ("fr", "french");
    OpenAI's names and any other, the default (clients send their own names)."""
    return model if model in engine.models.names or normalize.language_of_tag(model) is not None else None


@get("/v1/models", summary="The loaded model under each name OpenAI clients send (OpenAI's list)")
async def models(engine: NamedDependency[ServerEngine]) -> ModelList:
    return ModelList(data=_model_cards(engine))


@get("/v1/models/{model_id:path}", summary="One model of /v1/models (OpenAI's)")
async def model(engine: NamedDependency[ServerEngine], model_id: FromPath[str]) -> ModelCard:
    name = model_id.lstrip("/")  # a path parameter starts with its "/"; a path's own "/" is lost in the URL
    for card in _model_cards(engine):
        if card.id.lstrip("/") == name:
            return card
    raise ServiceError(errors.MODEL_NOT_FOUND, f"The model '{name}' does not exist", "model")


@post(
    "/v1/audio/speech",
    summary="OpenAI-compatible speech",
    status_code=200,
    dto=reading.StrictJSON[SpeechRequest],
    return_dto=None,
    request_max_body_size=MAX_JSON,
)
async def openai_speech(
    request: Request,
    data: JSONBody[SpeechRequest],
    engine: NamedDependency[ServerEngine],
    caller: NamedDependency[Caller],
) -> Response:
    fmt = data.response_format
    if fmt == "aac" or not audio_formats.available(fmt):
        why = (
            "no AAC encoder here (libsndfile has none)" if fmt == "aac" else "this machine's libsndfile cannot write it"
        )
        raise ServiceError(
            errors.UNSUPPORTED_VALUE,
            f"response_format {fmt!r} is not supported: {why}; use {', '.join(audio_formats.writable())}",
            "response_format",
        )
    text = whole_text(data.input, "input")
    voice = data.voice if isinstance(data.voice, str) else data.voice.id
    session = await Session.open(
        engine,
        voice,
        data.options(),
        caller=caller,
        model=_picked(engine, data.model_name),
        pronunciations=data.pronunciations,
    )
    async with bodies.saying(session, text) as answer:
        rate = session.sample_rate
        if data.stream_format == "sse":
            events = bodies.sse(
                session.audio(), rate, engine.hosted.frame_size, fmt, data.sample_rate, session.loudness
            )
            return Stream(answer.body(events), media_type="text/event-stream")
        if fmt in audio_formats.STREAMED:  # raw samples stream as they are made; a WAV is a whole file
            output = audio_formats.Output(fmt, rate, data.sample_rate)
            return Stream(
                answer.body(bodies.streamed(session.audio(), output)),
                media_type=audio_formats.MEDIA_TYPES[fmt],
                headers={"X-Sample-Rate": str(output.rate)},
            )
        return await bodies.whole_file(request, answer, fmt, data.sample_rate)
