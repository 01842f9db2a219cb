"""The server's own routes: health, voices and uploads, and speech as a WAV file (`/generate`), as
raw PCM while it is made (`/stream`) and as the official pocket-tts server's form (`/tts`).

Every request is read whole (its body bounded in size and time: server/guard.py) before it takes a
slot; a request that speaks is a session of the engine (server/session.py), whose slot its answer
holds until its last byte is handed to the server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional, Tuple

import anyio
from litestar import Request, Response, get, post
from litestar.datastructures import CacheControlHeader, UploadFile
from litestar.di import NamedDependency
from litestar.params import JSONBody
from litestar.response import Stream

import core
from core import audio_formats
from core.portable.audio.pcm import MAX_PROMPT_SECONDS, MAX_SAMPLE_RATE, MIN_SAMPLE_RATE
from server import bodies, errors, reading
from server.access import Caller
from server.engine import ServerEngine
from server.errors import ServiceError
from server.guard import PUBLIC
from server.health import report as health_report
from server.schemas import GenerateRequest, Health, StreamRequest, UploadedVoice, Voices
from server.session import Session, WholeText, whole_text

MAX_UPLOAD = 20 * 1024 * 1024  # bytes of a request with a recording (POST /voices, POST /tts)
MAX_JSON = 256 * 1024  # bytes of a JSON request: 5000 characters, each escaped, fit many times
STREAM_HEADERS = ("X-Sample-Rate", "X-Sample-Format", "X-Channels")


async def cloned(engine: ServerEngine, upload: UploadFile) -> str:
    """The voice id of an uploaded recording (every route's uploads: EngineVoices.upload decodes
    and clones it, off the event loop)."""
    content = await upload.read()
    try:
        return await anyio.to_thread.run_sync(engine.voices.upload, content, upload.filename or "upload")
    except core.PocketTTSError as e:
        raise errors.from_core(e) from None


@get("/health", summary="Server status and the loaded model", opt=PUBLIC)
async def health(engine: NamedDependency[ServerEngine]) -> Health:
    return health_report(engine)


@get(
    "/site.json",
    summary="What the page may use here: this server, and the in-browser engine where a built site is served",
    media_type="application/json",
    cache_control=CacheControlHeader(no_cache=True),
    opt=PUBLIC,
)
async def site_description(site: NamedDependency[bytes]) -> Response:
    return Response(site, media_type="application/json")


def describe_site(web: Path) -> bytes:
    """GET /site.json of a server serving `web`: its site's site.json (pocket-tts-numpy build-site) where it
    is a built site, with `server: true`; else only that. The page reads this one file to learn
    which engines it has (a static host's site.json says no server): no request of it is a 404."""
    path = web / "site.json"
    site = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"format": "pocket-tts-numpy-site"}
    return json.dumps(dict(site, server=True)).encode()


@get("/voices", summary="Predefined voices of the loaded model, and OpenAI's names")
async def voices(engine: NamedDependency[ServerEngine]) -> Voices:
    folder = await anyio.to_thread.run_sync(engine.voices.in_folder)  # the file system: not on the event loop
    return Voices(engine.voices.default_name, engine.voices.names(), engine.voices.openai(), folder)


@post(
    "/voices",
    summary="Upload a recording to clone (wav, flac, ogg or mp3); returns its voice id",
    description=f"A multipart form with the recording as the field `voice_wav` (at most {MAX_UPLOAD // 2**20} MB; "
    f"its first {MAX_PROMPT_SECONDS:g} s are kept, at {MIN_SAMPLE_RATE // 1000}-{MAX_SAMPLE_RATE // 1000} kHz).",
    status_code=200,
    request_max_body_size=MAX_UPLOAD,
)
async def upload_voice(
    request: Request, engine: NamedDependency[ServerEngine], caller: NamedDependency[Caller]
) -> UploadedVoice:
    data = await reading.form(request)
    upload = data.get("voice_wav") or data.get("file")
    if not isinstance(upload, UploadFile):
        raise ServiceError(errors.MISSING_FIELD, "send the recording as the multipart field 'voice_wav'", "voice_wav")
    slot = engine.admit(caller)
    try:
        return UploadedVoice(voice=await cloned(engine, upload))
    finally:
        slot.release()


@post(
    "/generate",
    summary="Speak a text; the whole WAV file",
    status_code=200,
    media_type="audio/wav",
    dto=reading.StrictJSON[GenerateRequest],
    return_dto=None,
    request_max_body_size=MAX_JSON,
)
async def generate(
    request: Request,
    data: JSONBody[GenerateRequest],
    engine: NamedDependency[ServerEngine],
    caller: NamedDependency[Caller],
) -> Response:
    text, session = await _opened(engine, caller, data)
    async with bodies.saying(session, text) as answer:
        return await bodies.whole_file(request, answer, "wav", data.sample_rate)


@post(
    "/stream",
    summary="Speak a text; raw 16-bit PCM (or G.711 mu-law / A-law) streamed as it is generated",
    status_code=200,
    dto=reading.StrictJSON[StreamRequest],
    return_dto=None,
    request_max_body_size=MAX_JSON,
)
async def stream(
    request: Request,
    data: JSONBody[StreamRequest],
    engine: NamedDependency[ServerEngine],
    caller: NamedDependency[Caller],
) -> Stream:
    text, session = await _opened(engine, caller, data)
    async with bodies.saying(session, text) as answer:
        output = audio_formats.Output(data.format, session.sample_rate, data.sample_rate)
        headers = {
            "X-Sample-Rate": str(output.rate),
            "X-Sample-Format": audio_formats.SAMPLE_FORMATS[data.format],
            "X-Channels": "1",
        }
        body = answer.body(bodies.streamed(session.audio(), output))
        return Stream(body, media_type="application/octet-stream", headers=headers)


@post(
    "/generate/words",
    summary="Speak a text; the whole WAV (base64) and when each word is spoken, as JSON",
    description="The body of POST /generate. Word timestamps: for models with timestamp heads (400 otherwise).",
    status_code=200,
    dto=reading.StrictJSON[GenerateRequest],
    return_dto=None,
    request_max_body_size=MAX_JSON,
)
async def generate_words(
    request: Request,
    data: JSONBody[GenerateRequest],
    engine: NamedDependency[ServerEngine],
    caller: NamedDependency[Caller],
) -> Response:
    text, session = await _opened(engine, caller, data, words=True)
    async with bodies.saying(session, text) as answer:
        return await bodies.words_file(request, answer)


@post(
    "/stream/words",
    summary="Speak a text; its audio and its words as JSON lines (NDJSON) while they are made",
    description="The body of POST /stream. Lines: started, audio (base64 16-bit PCM), word, word_end, done.",
    status_code=200,
    dto=reading.StrictJSON[GenerateRequest],
    return_dto=None,
    request_max_body_size=MAX_JSON,
)
async def stream_words(
    request: Request,
    data: JSONBody[GenerateRequest],
    engine: NamedDependency[ServerEngine],
    caller: NamedDependency[Caller],
) -> Stream:
    text, session = await _opened(engine, caller, data, words=True)
    async with bodies.saying(session, text) as answer:
        return Stream(answer.body(bodies.word_lines(session)), media_type="application/x-ndjson")


async def _opened(
    engine: ServerEngine, caller: Caller, data: JSONBody[GenerateRequest], words: bool = False
) -> Tuple[WholeText, Session]:
    """A JSON request's text (checked) and its session (its words timed if `words`)."""
    text = whole_text(data.text)
    session = await Session.open(
        engine,
        data.voice,
        data.options(),
        caller=caller,
        words=words,
        model=data.model_name,
        pronunciations=data.pronunciations,
    )
    return text, session


@post(
    "/tts",
    summary="The official pocket-tts server's form: text, voice_url or voice_wav; a streamed WAV",
    status_code=200,
    request_max_body_size=MAX_UPLOAD,
)
async def tts(request: Request, engine: NamedDependency[ServerEngine], caller: NamedDependency[Caller]) -> Stream:
    """Form fields as the official server's (multipart, or url-encoded without an upload)."""
    data = await reading.form(request)
    text = whole_text(data.get("text"), empty="Text cannot be empty")  # the official server's words
    voice_url, voice_wav = data.get("voice_url"), data.get("voice_wav")
    if voice_url is not None and voice_wav is not None:
        raise ServiceError(errors.CONFLICTING_FIELDS, "Cannot provide both voice_url and voice_wav", "voice_url")
    if voice_url is not None and (not isinstance(voice_url, str) or not engine.voices.is_predefined(voice_url)):
        raise ServiceError(
            errors.UNKNOWN_VOICE,
            f"voice_url must be a predefined voice of this model: {engine.voices.names()}",
            "voice_url",
        )
    options = reading.form_options(data)
    voice: Optional[str] = voice_url
    slot = engine.admit(caller)  # for the cloning too: then the session's
    try:
        if isinstance(voice_wav, UploadFile):
            voice = await cloned(engine, voice_wav)
    except BaseException:
        slot.release()
        raise
    session = await Session.open(engine, voice, options, slot=slot, caller=caller)
    async with bodies.saying(session, text) as answer:
        return Stream(
            answer.body(bodies.streamed(session.audio(), audio_formats.Output("wav", session.sample_rate))),
            media_type="audio/wav",
            headers={"Content-Disposition": "attachment; filename=generated_speech.wav"},
        )
