"""The Litestar app: the API over one loaded model, and the web UI at /.

    python -m server --model english --voice alba                       # see server/__main__.py
    POCKET_TTS_MODEL=english uvicorn --factory server.app:create_app \
        --http server.connections:Protocol                               # the same, for uvicorn directly

Routes: GET /health, GET /voices, POST /voices (upload), POST /generate (WAV), POST /stream
(raw 16-bit PCM as it is generated), POST /tts (the official server's form): server/routes.py;
POST /v1/audio/speech (OpenAI's), GET /v1/audio/voices and GET /v1/models: server/openai_routes.py;
the WebSocket /v1/audio/speech/stream (text spoken as it arrives): server/websocket.py. OpenAPI at
/schema. What every request passes first: server/bounds.py and server/guard.py; every error is a JSON body in OpenAI's
shape from one vocabulary (server/errors.py, server/http_errors.py).
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, List, Optional

import anyio
from litestar import Litestar
from litestar.config.cors import CORSConfig
from litestar.datastructures import State
from litestar.file_system import BaseLocalFileSystem
from litestar.openapi import OpenAPIConfig
from litestar.static_files import create_static_files_router

from core import threads
from core.ui import web_folder
from server import bounds, guard, http_errors, livekit_ws, openai_routes, provide, routes, websocket
from server.engine import ServerEngine, load_engine
from server.settings import Settings

WEB = web_folder()
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
    openai_routes.delete_voice,
    openai_routes.models,
    openai_routes.model,
    websocket.speech_stream,
    livekit_ws.livekit_stream,
]


class PageFiles(BaseLocalFileSystem):
    """The page's files as the static router finds them: a path the file system refuses to look up
    (a file's name used as a folder, a name too long, no permission) is a file that is not there,
    a 404, not Litestar's 500."""

    async def info(self, path: Any, **kwargs: Any) -> Any:
        try:
            return await super().info(path, **kwargs)
        except OSError as e:
            raise FileNotFoundError(path) from e


def create_app(engine: Optional[ServerEngine] = None, settings: Optional[Settings] = None) -> Litestar:
    """The app over `engine`, with `settings` (default: the environment's, server/settings.py):
    the page from `settings.site` (a site from pocket-tts-numpy build-site) or the UI's own files
    (web/); web pages of `settings.allow_origins` may use the API beside the server's own page
    (CORS headers for them); it answers to localhost and `settings.hosts`; a request's body must
    arrive within `settings.body_timeout` (server/guard.py); each piece of an answer must be taken
    within `settings.client_timeout`, and every request and WebSocket holds a place in the engine's
    pool of connections (server/bounds.py); a WebSocket may speak nothing, or leave a frame untaken,
    for `settings.client_timeout` (server/session.py). What only the server process can bound is
    server/connections.py's (docs/deployment.md). The API key every route but the public ones needs
    is the engine's (server/access.py). Without an engine, the lifespan loads the settings' model:
    `uvicorn --factory server.app:create_app --http server.connections:Protocol`."""
    settings = settings if settings is not None else Settings.from_environment()
    web = settings.site if settings.site is not None else WEB

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        with threads.serving():
            app.state.engine = engine or await anyio.to_thread.run_sync(load_engine, settings)
            try:
                yield
            finally:
                if engine is None:  # the app's own engine: its scheduler's threads end with it
                    app.state.engine.close()

    handlers: List[Any] = list(HANDLERS)
    if (web / "index.html").exists():  # the built site (both engines), or the UI's sources (server mode)
        page = create_static_files_router(
            path="/", directories=[web], html_mode=True, name="web", opt=guard.PUBLIC, file_system=PageFiles()
        )
        handlers.append(page)
    origins = list(settings.allow_origins)
    bounds.quiet_uvicorn_log()
    return Litestar(
        route_handlers=handlers,
        lifespan=[lifespan],
        state=State({"client_timeout": settings.client_timeout, "site": routes.describe_site(web)}),
        openapi_config=OpenAPIConfig(title="Pocket TTS in NumPy", version="0.1.0", path="/schema"),
        request_max_body_size=routes.MAX_UPLOAD,
        dependencies=provide.DEPENDENCIES,
        guards=[provide.serving],
        middleware=[
            bounds.middleware(settings.client_timeout),
            guard.middleware(origins, settings.hosts),
            guard.body_in_time(settings.body_timeout),
        ],
        logging_config=None,  # the host's logging (python -m server sets it up; uvicorn's own otherwise)
        cors_config=CORSConfig(allow_origins=origins, expose_headers=list(routes.STREAM_HEADERS)) if origins else None,
        exception_handlers=http_errors.HANDLERS,
    )
