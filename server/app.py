"""The Litestar app: the API over one loaded model, and the web UI at /.

    python -m server --model english --voice alba           # see server/__main__.py
    POCKET_TTS_MODEL=english uvicorn server.app:app         # the same app for uvicorn directly

Routes: GET /health, GET /voices, POST /voices (upload), POST /generate (WAV), POST /stream
(raw 16-bit PCM as it is generated), POST /tts (the official server's form), POST /v1/audio/speech
(OpenAI's), GET /v1/audio/voices and GET /v1/models (OpenAI-style listings), and the WebSocket
/v1/audio/speech/stream (text spoken as it arrives: server/text_stream.py). OpenAPI at /schema.
Every error is a JSON body in OpenAI's shape.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import os
import socket
import sys
import weakref
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Dict, Iterator, List, Optional, Sequence

import anyio
import numpy as np
from litestar import Litestar, MediaType, Request, Response, get, post
from litestar.config.cors import CORSConfig
from litestar.datastructures import State, UploadFile
from litestar.exceptions import HTTPException, ValidationException
from litestar.openapi import OpenAPIConfig
from litestar.params import FromPath, JSONBody
from litestar.response import Stream
from litestar.static_files import create_static_files_router

import core
from core import PocketTTSError, TextError, VoiceError
from core.portable.audio import MAX_PROMPT_SECONDS, MAX_SAMPLE_RATE, MIN_SAMPLE_RATE, pcm16, wav_header
from core.portable.options import SPEED_RANGE, GenerationOptions
from core.portable.text import check_text
from core.portable.tsm import check_speed
from server import audio_out, boundary, text_stream
from server.engine import CLIENT_TIMEOUT, DEFAULT_MODEL, MAX_CONCURRENT, ServerEngine, load_engine
from server.schemas import (
    MAX_TEXT,
    GenerateRequest,
    Health,
    ModelCard,
    ModelList,
    SpeechRequest,
    UploadedVoice,
    VoiceEntry,
    VoiceList,
    Voices,
    error_json,
)
from server.slots import Busy, Slot

WEB = Path(__file__).resolve().parent.parent / "web"
INSTANCE = f"{socket.gethostname()}:{os.getpid()}"
MAX_UPLOAD = 20 * 1024 * 1024  # bytes of a request with a recording (POST /voices, POST /tts)
MAX_JSON = 256 * 1024  # bytes of a JSON request: 5000 characters, each escaped, fit many times
PCM_HEADERS = {"X-Sample-Format": "s16le", "X-Channels": "1"}
STREAM_HEADERS = ("X-Sample-Rate", "X-Sample-Format", "X-Channels")
PIECE = 64 * 1024  # bytes of a whole file sent at a time
FORM_BOOLEANS = {**dict.fromkeys(("true", "1", "yes", "on"), True), **dict.fromkeys(("false", "0", "no", "off"), False)}
# The names OpenAI clients send as `model` (POST /v1/audio/speech takes any): each is the loaded model.
OPENAI_MODELS = ("pocket-tts", "tts-1", "tts-1-hd", "gpt-4o-mini-tts")
log = logging.getLogger("pocket_tts.server")


class ApiError(Exception):
    def __init__(self, status: int, message: str, param: Optional[str] = None, code: Optional[str] = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code


def _error(
    status: int,
    message: str,
    param: Optional[str] = None,
    code: Optional[str] = None,
    headers: Optional[Dict[str, str]] = None,
) -> Response:
    body = error_json(status, message, param, code)
    return Response(body, status_code=status, media_type=MediaType.JSON, headers=headers)


def _engine(request: Request) -> ServerEngine:
    return request.app.state.engine


async def _json_only(request: Request) -> None:
    """JSON routes take JSON only: a body a web page could send another site without asking (a
    "simple" text/plain request, no CORS preflight) is refused before it is read."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json":
        raise ApiError(
            415, "send the body as JSON, with Content-Type: application/json", None, "unsupported_media_type"
        )


# A request's slot, from before its work to its answer's last byte


class _Delivery:
    """A response body that holds its request's slot until its last byte is handed to the server,
    or the client is gone (the body closed, or dropped unread: a finalizer lets go then too)."""

    def __init__(self, body: AsyncIterator[bytes], slot: Slot):
        self._body = body
        self._done = weakref.finalize(self, slot.release)

    def __aiter__(self) -> _Delivery:
        return self

    async def __anext__(self) -> bytes:
        try:
            return await self._body.__anext__()
        except BaseException:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        try:
            await self._body.aclose()
        finally:
            self._done()


class _Answer:
    """What a handler holds while it works: its slot, until a response body takes it over."""

    def __init__(self, slot: Slot):
        self.slot = slot
        self.handed = False

    def body(self, chunks: AsyncIterator[bytes]) -> _Delivery:
        self.handed = True
        return _Delivery(chunks, self.slot)


@contextmanager
def _answering(engine: ServerEngine) -> Iterator[_Answer]:
    """A slot for the request (Busy, a 503, when none is free), released when the handler fails or
    returns without a body that holds it."""
    answer = _Answer(engine.admit())
    try:
        yield answer
    finally:
        if not answer.handed:
            answer.slot.release()


def _text_to_speak(text: object, field: str, message: Optional[str] = None) -> str:
    """A request's text through the core's one check (core.portable.text.check_text), before any
    work: nothing to speak is a 400 about `field`, in `message` where the API we mirror has its own
    words for it."""
    try:
        return check_text(text)
    except TextError as e:
        raise ApiError(400, message or str(e), field, "empty_text") from None


async def _cloned(engine: ServerEngine, upload: UploadFile) -> str:
    """The voice id of an uploaded recording (every route's uploads: ServerEngine.upload decodes
    and clones it, off the event loop)."""
    content = await upload.read()
    return await anyio.to_thread.run_sync(engine.upload, content, upload.filename or "upload")


def _form_options(data: Any) -> GenerationOptions:
    """The options the official form lacks, as optional fields of ours: `speed` (a number) and
    `normalize` (true/false)."""
    values: Dict[str, Any] = {}
    if data.get("speed") is not None:
        values["speed"] = _form_speed(data.get("speed"))
    normalize = data.get("normalize")
    if normalize is not None:
        flag = normalize.strip().lower() if isinstance(normalize, str) else ""
        if flag not in FORM_BOOLEANS:
            raise ApiError(400, "normalize must be true or false", "normalize", "invalid_value")
        values["normalize"] = FORM_BOOLEANS[flag]
    return GenerationOptions(**values)


def _form_speed(value: Any) -> float:
    """A form's `speed` (text) as the speed it asks for, by the options' own check; a 400 otherwise."""
    try:
        return check_speed(float(value) if isinstance(value, str) else math.nan)
    except (ValueError, PocketTTSError):
        low, high = SPEED_RANGE
        raise ApiError(400, f"speed must be a number from {low:g} to {high:g}", "speed", "invalid_value") from None


async def _form(request: Request) -> Any:
    try:
        return await request.form()
    except UnicodeDecodeError as e:
        raise ApiError(400, f"malformed form: a field is not UTF-8 text ({e.reason})", None, "malformed_form") from None


# Routes


@get("/health", summary="Server status and the loaded model")
async def health(request: Request) -> Health:
    engine = _engine(request)
    return Health(
        status="ok",
        model=engine.name,
        sample_rate=engine.sample_rate,
        default_voice=engine.default_voice_name,
        active_generations=engine.active,
        max_concurrent=engine.max_concurrent,
        kernels=core.backend(),
        instance=INSTANCE,
    )


@get("/voices", summary="Predefined voices of the loaded model, and OpenAI's names")
async def voices(request: Request) -> Voices:
    engine = _engine(request)
    return Voices(default=engine.default_voice_name, voices=engine.voice_names(), openai_voices=engine.openai_voices())


@get("/v1/audio/voices", summary="Every voice a request may name (OpenAI-style listing, as Kokoro-FastAPI's path)")
async def openai_voices(request: Request) -> VoiceList:
    engine = _engine(request)
    entries = [VoiceEntry(id="default", name=engine.default_voice_name, kind="default")]
    entries += [VoiceEntry(id=name, name=name, kind="predefined") for name in engine.voice_names()]
    entries += [
        VoiceEntry(id=name, name=name, kind="alias", voice=voice) for name, voice in engine.openai_voices().items()
    ]
    uploads = await anyio.to_thread.run_sync(engine.uploaded_voices)  # the engine's lock: not on the event loop
    entries += [VoiceEntry(id=key, name=key, kind="uploaded") for key in uploads]
    return VoiceList(voices=entries)


def _model_cards(engine: ServerEngine) -> List[ModelCard]:
    return [ModelCard(id=name, created=engine.loaded_at) for name in (engine.name,) + OPENAI_MODELS]


@get("/v1/models", summary="The loaded model under each name OpenAI clients send (OpenAI's list)")
async def models(request: Request) -> ModelList:
    return ModelList(data=_model_cards(_engine(request)))


@get("/v1/models/{model_id:path}", summary="One model of /v1/models (OpenAI's)")
async def model(request: Request, model_id: FromPath[str]) -> ModelCard:
    name = model_id.lstrip("/")  # a path parameter starts with its "/"; a path's own "/" is lost in the URL
    for card in _model_cards(_engine(request)):
        if card.id.lstrip("/") == name:
            return card
    raise ApiError(404, f"The model '{name}' does not exist", "model", "model_not_found")


@post(
    "/voices",
    summary="Upload a recording to clone (wav, flac, ogg or mp3); returns its voice id",
    description=f"A multipart form with the recording as the field `voice_wav` (at most {MAX_UPLOAD // 2**20} MB; "
    f"its first {MAX_PROMPT_SECONDS:g} s are kept, at {MIN_SAMPLE_RATE // 1000}-{MAX_SAMPLE_RATE // 1000} kHz).",
    status_code=200,
    request_max_body_size=MAX_UPLOAD,
)
async def upload_voice(request: Request) -> UploadedVoice:
    engine = _engine(request)
    with _answering(engine):
        form = await _form(request)
        upload = form.get("voice_wav") or form.get("file")
        if not isinstance(upload, UploadFile):
            raise ApiError(400, "send the recording as the multipart field 'voice_wav'", "voice_wav", "missing_field")
        return UploadedVoice(voice=await _cloned(engine, upload))


@post(
    "/generate",
    summary="Speak a text; the whole WAV file",
    status_code=200,
    media_type="audio/wav",
    before_request=_json_only,
    request_max_body_size=MAX_JSON,
)
async def generate(request: Request, data: JSONBody[GenerateRequest]) -> Response:
    engine = _engine(request)
    text = _text_to_speak(data.text, "text")
    with _answering(engine) as answer:
        chunks = await engine.speak(answer.slot, text, data.voice, data.options())
        return await _file(request, answer, chunks, "wav")


@post(
    "/stream",
    summary="Speak a text; raw 16-bit PCM streamed as it is generated",
    status_code=200,
    before_request=_json_only,
    request_max_body_size=MAX_JSON,
)
async def stream(request: Request, data: JSONBody[GenerateRequest]) -> Stream:
    engine = _engine(request)
    text = _text_to_speak(data.text, "text")
    with _answering(engine) as answer:
        chunks = await engine.speak(answer.slot, text, data.voice, data.options())
        headers = dict(PCM_HEADERS, **{"X-Sample-Rate": str(engine.sample_rate)})
        return Stream(answer.body(_pcm_bytes(chunks)), media_type="application/octet-stream", headers=headers)


@post(
    "/tts",
    summary="The official pocket-tts server's form: text, voice_url or voice_wav; a streamed WAV",
    status_code=200,
    request_max_body_size=MAX_UPLOAD,
)
async def tts(request: Request) -> Stream:
    """Form fields as the official server's (multipart, or url-encoded without an upload)."""
    engine = _engine(request)
    with _answering(engine) as answer:
        data = await _form(request)
        text = _text_to_speak(data.get("text"), "text", "Text cannot be empty")  # the official server's words
        if len(text) > MAX_TEXT:
            raise ApiError(400, f"text is longer than {MAX_TEXT} characters", "text", "text_too_long")
        voice_url, voice_wav = data.get("voice_url"), data.get("voice_wav")
        if voice_url is not None and voice_wav is not None:
            raise ApiError(400, "Cannot provide both voice_url and voice_wav", "voice_url", "conflicting_fields")
        voice: Optional[str] = None
        if isinstance(voice_wav, UploadFile):
            voice = await _cloned(engine, voice_wav)
        elif voice_url is not None:
            if not isinstance(voice_url, str) or not engine.is_predefined(voice_url):
                raise ApiError(
                    400,
                    f"voice_url must be a predefined voice of this model: {engine.voice_names()}",
                    "voice_url",
                    "unknown_voice",
                )
            voice = voice_url
        chunks = await engine.speak(answer.slot, text, voice, _form_options(data))
        return Stream(
            answer.body(_wav_stream(chunks, engine.sample_rate)),
            media_type="audio/wav",
            headers={"Content-Disposition": "attachment; filename=generated_speech.wav"},
        )


@post(
    "/v1/audio/speech",
    summary="OpenAI-compatible speech",
    status_code=200,
    before_request=_json_only,
    request_max_body_size=MAX_JSON,
)
async def openai_speech(request: Request, data: JSONBody[SpeechRequest]) -> Response:
    engine = _engine(request)
    fmt = data.response_format
    if fmt == "aac" or not audio_out.available(fmt):
        raise ApiError(
            400,
            f"response_format {fmt!r} is not supported here: use wav, pcm, flac"
            + (", mp3" if audio_out.available("mp3") else "")
            + (", opus" if audio_out.available("opus") else ""),
            "response_format",
            "unsupported_value",
        )
    text = _text_to_speak(data.input, "input")
    voice = data.voice if isinstance(data.voice, str) else data.voice.id
    with _answering(engine) as answer:
        try:
            chunks = await engine.speak(answer.slot, text, voice, data.options())
        except VoiceError as e:
            raise ApiError(400, str(e), "voice", "unknown_voice") from None
        rate = engine.sample_rate
        if data.stream_format == "sse":
            events = _sse(chunks, rate, engine.frame_size, fmt)
            return Stream(answer.body(events), media_type="text/event-stream")
        if fmt in ("pcm", "wav"):
            return Stream(
                answer.body(_wav_stream(chunks, rate) if fmt == "wav" else _pcm_bytes(chunks)),
                media_type=audio_out.MEDIA_TYPES[fmt],
                headers={"X-Sample-Rate": str(rate)},
            )
        return await _file(request, answer, chunks, fmt)


# Response bodies


async def _pcm_bytes(chunks: AsyncIterator[np.ndarray]) -> AsyncIterator[bytes]:
    async for chunk in chunks:
        yield pcm16(chunk)


async def _wav_stream(chunks: AsyncIterator[np.ndarray], sample_rate: int) -> AsyncIterator[bytes]:
    yield wav_header(sample_rate)
    async for chunk in chunks:
        yield pcm16(chunk)


async def _sse(chunks: AsyncIterator[np.ndarray], sample_rate: int, frame_size: int, fmt: str) -> AsyncIterator[bytes]:
    """OpenAI's speech events: base64 audio deltas, then `speech.audio.done`.

    PCM and WAV deltas stream; a compressed format comes as one delta at the end.
    """

    def event(payload: dict) -> bytes:
        return b"data: " + json.dumps(payload).encode() + b"\n\n"

    samples = 0
    kept: List[np.ndarray] = []
    if fmt == "wav":
        yield event({"type": "speech.audio.delta", "audio": base64.b64encode(wav_header(sample_rate)).decode()})
    async for chunk in chunks:
        samples += chunk.shape[0]
        if fmt in ("pcm", "wav") and chunk.shape[0]:  # a speed change holds back its first few ms
            yield event({"type": "speech.audio.delta", "audio": base64.b64encode(pcm16(chunk)).decode()})
        else:
            kept.append(chunk)
    if kept:
        data = await anyio.to_thread.run_sync(audio_out.encode, np.concatenate(kept), sample_rate, fmt)
        yield event({"type": "speech.audio.delta", "audio": base64.b64encode(data).decode()})
    frames = -(-samples // frame_size)  # audio of 80 ms frames (at a speed other than 1, not those generated)
    usage = {"input_tokens": 0, "output_tokens": frames, "total_tokens": frames}
    yield event({"type": "speech.audio.done", "usage": usage})


async def _file(request: Request, answer: _Answer, chunks: AsyncIterator[np.ndarray], fmt: str) -> Response:
    """The whole audio as one file in `fmt`, encoded off the event loop, then sent a piece at a time
    under the request's slot (a client that reads nothing holds it only until the client timeout)."""
    pcm = await _collect(request, chunks)
    if pcm is None:
        return Response(b"", status_code=499)
    data = await anyio.to_thread.run_sync(audio_out.encode, pcm, _engine(request).sample_rate, fmt)

    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(data), PIECE):
            yield data[start : start + PIECE]

    headers = {"Content-Length": str(len(data))}
    return Stream(answer.body(pieces()), media_type=audio_out.MEDIA_TYPES[fmt], headers=headers)


async def _collect(request: Request, chunks: AsyncIterator[np.ndarray]) -> Optional[np.ndarray]:
    """All the audio of a generation; None if the client went away first (which stops it)."""
    parts: List[np.ndarray] = []
    gone = False
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            nonlocal gone
            while (await request.receive())["type"] != "http.disconnect":
                pass
            gone = True
            group.cancel_scope.cancel()

        group.start_soon(watch)
        async for chunk in chunks:
            parts.append(chunk)
        group.cancel_scope.cancel()
    if gone:
        await chunks.aclose()
        return None
    return np.concatenate(parts) if parts else np.zeros(0, np.float32)


# Errors


def _api_error(_: Request, error: ApiError) -> Response:
    return _error(error.status, error.message, error.param, error.code)


def _bad_input(_: Request, error: PocketTTSError) -> Response:
    field = {"VoiceError": "voice", "AudioError": "voice", "TextError": "text"}.get(type(error).__name__)
    return _error(400, str(error), field, type(error).__name__)


def _too_deep(_: Request, error: RecursionError) -> Response:
    return _error(400, "malformed request body: nested too deeply", None, "400")


def _busy(_: Request, error: Busy) -> Response:
    return _error(
        503,
        "the server is busy: every generation slot is taken, retry shortly",
        None,
        "busy",
        headers={"Retry-After": str(error.retry_after)},
    )


def _validation(_: Request, error: ValidationException) -> Response:
    extra = error.extra if isinstance(error.extra, list) else []
    first = extra[0] if extra and isinstance(extra[0], dict) else {}
    param = str(first.get("key") or "") or None
    message = str(first.get("message") or error.detail or "invalid request")
    return _error(400, f"{error.detail}: {message}" if first else message, param, "invalid_request")


def _http(request: Request, error: HTTPException) -> Response:
    limit = request.route_handler.request_max_body_size if request.scope.get("route_handler") else MAX_UPLOAD
    messages = {
        400: f"malformed request body: {error.detail}",
        413: f"request body larger than the {limit} bytes this route takes",
        415: "unsupported content type",
    }
    message = messages.get(error.status_code, str(error.detail))
    return _error(error.status_code, message, None, str(error.status_code), headers=error.headers)


def _unexpected(request: Request, error: Exception) -> Response:
    """A fault of ours: the client gets its kind, the operator's log the whole traceback."""
    log.error("%s %s failed", request.method, request.url.path, exc_info=error)
    if isinstance(error, MemoryError):
        return _error(503, "the server ran out of memory for this request", None, "out_of_memory")
    return _error(500, f"internal error: {type(error).__name__}", None, "internal_error")


# The app


def create_app(
    engine: Optional[ServerEngine] = None,
    web: Path = WEB,
    allowed_origins: Sequence[str] = (),
    client_timeout: float = CLIENT_TIMEOUT,
) -> Litestar:
    """The app over `engine`, serving the page from `web` (web/, or a site from scripts.build_site);
    without an engine, the lifespan loads the model the environment names (POCKET_TTS_MODEL,
    POCKET_TTS_VOICE, POCKET_TTS_MAX_CONCURRENT, POCKET_TTS_SITE), as `uvicorn server.app:app` does.
    `allowed_origins`: web pages of other origins that may use the API (server/boundary.py; CORS
    headers for them), beside the server's own page. `client_timeout`: the seconds a WebSocket
    client may stay silent while nothing is spoken, or leave a frame untaken (server/text_stream.py;
    python -m server gives the HTTP connections the same, server/connections.py)."""

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        from threadpoolctl import threadpool_limits

        # One BLAS thread per caller: the scheduler's two threads (flow LM, decoder) run side by side
        # on two cores. A chunk crosses three threads (flow LM, decoder, event loop): hand the GIL
        # over quickly, or each crossing may wait out the default 5 ms switch interval.
        sys.setswitchinterval(0.0005)
        with threadpool_limits(limits=1, user_api="blas"):
            app.state.engine = engine or engine_from_environment()
            try:
                yield
            finally:
                if engine is None:  # the app's own engine: its scheduler's threads end with it
                    app.state.engine.close()

    handlers: List[Any] = [
        health,
        voices,
        openai_voices,
        models,
        model,
        upload_voice,
        generate,
        stream,
        tts,
        openai_speech,
        text_stream.speech_stream,
    ]
    if (web / "index.html").exists():  # the built site (both engines), or the UI's sources (server mode)
        handlers.append(create_static_files_router(path="/", directories=[web], html_mode=True, name="web"))
    return Litestar(
        route_handlers=handlers,
        lifespan=[lifespan],
        state=State({"client_timeout": client_timeout}),
        openapi_config=OpenAPIConfig(title="Pocket TTS in NumPy", version="0.1.0", path="/schema"),
        request_max_body_size=MAX_UPLOAD,
        middleware=[boundary.middleware(allowed_origins)],
        logging_config=None,  # the host's logging (python -m server sets it up; uvicorn's own otherwise)
        cors_config=CORSConfig(allow_origins=list(allowed_origins), expose_headers=list(STREAM_HEADERS))
        if allowed_origins
        else None,
        exception_handlers={
            ApiError: _api_error,
            PocketTTSError: _bad_input,
            Busy: _busy,
            ValidationException: _validation,
            HTTPException: _http,
            RecursionError: _too_deep,
            Exception: _unexpected,
        },
    )


def origins_from_environment() -> List[str]:
    return [origin for origin in os.environ.get("POCKET_TTS_ALLOW_ORIGINS", "").split(",") if origin.strip()]


def engine_from_environment() -> ServerEngine:
    model = os.environ.get("POCKET_TTS_MODEL", DEFAULT_MODEL)
    slots = int(os.environ.get("POCKET_TTS_MAX_CONCURRENT", MAX_CONCURRENT))
    return load_engine(model, os.environ.get("POCKET_TTS_VOICE"), slots)


app = create_app(web=Path(os.environ.get("POCKET_TTS_SITE", str(WEB))), allowed_origins=origins_from_environment())
