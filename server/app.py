"""The Litestar app: the API over one loaded model, and the web UI at /.

    python -m server --model english --voice alba           # see server/__main__.py
    POCKET_TTS_MODEL=english uvicorn server.app:app         # the same app for uvicorn directly

Routes: GET /health, GET /voices, POST /voices (upload), POST /generate (WAV), POST /stream
(raw 16-bit PCM as it is generated), POST /tts (the official server's form): server/routes.py;
POST /v1/audio/speech (OpenAI's), GET /v1/audio/voices and GET /v1/models: server/openai_routes.py;
the WebSocket /v1/audio/speech/stream (text spoken as it arrives): server/websocket.py. OpenAPI at
/schema. What every request passes first: server/guard.py; every error is a JSON body in OpenAI's
shape from one vocabulary (server/errors.py, server/http_errors.py).
"""

from __future__ import annotations

import os
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, List, Optional, Sequence

from litestar import Litestar
from litestar.config.cors import CORSConfig
from litestar.datastructures import State
from litestar.openapi import OpenAPIConfig
from litestar.static_files import create_static_files_router

from server import guard, http_errors, livekit_ws, openai_routes, routes, websocket
from server.access import Access
from server.engine import CLIENT_TIMEOUT, DEFAULT_MODEL, MAX_CONCURRENT, ServerEngine, load_engine, serving_threads

WEB = Path(__file__).resolve().parent / "web"
HANDLERS = [
    routes.health,
    routes.voices,
    routes.upload_voice,
    routes.generate,
    routes.stream,
    routes.generate_words,
    routes.stream_words,
    routes.tts,
    routes.site_description,
    openai_routes.openai_speech,
    openai_routes.openai_voices,
    openai_routes.models,
    openai_routes.model,
    websocket.speech_stream,
    livekit_ws.livekit_stream,
]


def create_app(
    engine: Optional[ServerEngine] = None,
    web: Path = WEB,
    allowed_origins: Sequence[str] = (),
    client_timeout: float = CLIENT_TIMEOUT,
    hosts: Sequence[str] = (),
    body_seconds: float = guard.BODY_SECONDS,
) -> Litestar:
    """The app over `engine`, serving the page from `web` (server/web/, or a site from scripts.build_site);
    without an engine, the lifespan loads the model the environment names (POCKET_TTS_MODEL,
    POCKET_TTS_VOICE, POCKET_TTS_MAX_CONCURRENT, POCKET_TTS_API_KEY, POCKET_TTS_SITE), as
    `uvicorn server.app:app` does. `allowed_origins`: web pages of other origins that may use the
    API (CORS headers for them), beside the server's own page; `hosts`: the names it answers to
    beside localhost; the API key every API request must bear is the engine's (server/access.py);
    `body_seconds`: the time a request's body may take
    (server/guard.py). `client_timeout`: the seconds a WebSocket may speak nothing, or leave a
    frame untaken (server/session.py; python -m server gives the HTTP connections the same,
    server/connections.py)."""

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        with serving_threads():
            app.state.engine = engine or engine_from_environment()
            try:
                yield
            finally:
                if engine is None:  # the app's own engine: its scheduler's threads end with it
                    app.state.engine.close()

    handlers: List[Any] = list(HANDLERS)
    if (web / "index.html").exists():  # the built site (both engines), or the UI's sources (server mode)
        handlers.append(create_static_files_router(path="/", directories=[web], html_mode=True, name="web"))
    return Litestar(
        route_handlers=handlers,
        lifespan=[lifespan],
        state=State({"client_timeout": client_timeout, "site": routes.describe_site(web)}),
        openapi_config=OpenAPIConfig(title="Pocket TTS in NumPy", version="0.1.0", path="/schema"),
        request_max_body_size=routes.MAX_UPLOAD,
        middleware=[guard.middleware(allowed_origins, hosts, body_seconds)],
        logging_config=None,  # the host's logging (python -m server sets it up; uvicorn's own otherwise)
        cors_config=CORSConfig(allow_origins=list(allowed_origins), expose_headers=list(routes.STREAM_HEADERS))
        if allowed_origins
        else None,
        exception_handlers=http_errors.HANDLERS,
    )


def _listed(variable: str) -> List[str]:
    return [item.strip() for item in os.environ.get(variable, "").split(",") if item.strip()]


def engine_from_environment() -> ServerEngine:
    model = os.environ.get("POCKET_TTS_MODEL", DEFAULT_MODEL)
    slots = int(os.environ.get("POCKET_TTS_MAX_CONCURRENT", MAX_CONCURRENT))
    access = Access(os.environ.get("POCKET_TTS_API_KEY") or None)
    return load_engine(model, os.environ.get("POCKET_TTS_VOICE"), slots, access=access)


# `uvicorn server.app:app`: the environment's settings (POCKET_TTS_ALLOW_ORIGINS and
# POCKET_TTS_ALLOW_HOSTS, comma-separated; POCKET_TTS_API_KEY: engine_from_environment).
app = create_app(
    web=Path(os.environ.get("POCKET_TTS_SITE", str(WEB))),
    allowed_origins=_listed("POCKET_TTS_ALLOW_ORIGINS"),
    hosts=_listed("POCKET_TTS_ALLOW_HOSTS"),
)
