"""What the routes receive (Litestar's dependency injection, `Provide`), and the guard every HTTP
route passes: a handler names what it uses (`engine`, `caller`, `client_timeout`, `site`) as
parameters and gets it, never reading the app's state itself.

The engine is the app's from its lifespan on (server/app.py loads it there when the factory made
the app without one), so each is provided per request from the app's state, the one place that
holds it. `caller` is who asks (server/access.py): guests and key holders alike, the key checked
before the app sees the request (server/guard.py); the session a route opens takes it.

`serving` refuses an HTTP request `shutting_down` (503) once the engine is closing, whichever route
it asks for; a WebSocket is accepted and refused in its own protocol by the session it opens (an
`error` frame, then a close with `try again later`), which a guard could not send.
"""

from __future__ import annotations

from typing import Any

from litestar.connection import ASGIConnection
from litestar.datastructures import Headers, State
from litestar.di import Provide
from litestar.handlers.base import BaseRouteHandler

from server import errors
from server.access import Caller
from server.engine import ServerEngine


def engine(state: State) -> ServerEngine:
    return state.engine


def caller(state: State, headers: Headers) -> Caller:
    """Who asks: the API key of the request's `Authorization` header, or a guest."""
    return state.engine.access.caller(headers.get("authorization"))


def client_timeout(state: State) -> float:
    """Seconds a client may leave a piece of an answer, or a WebSocket frame, untaken."""
    return state.client_timeout


def site(state: State) -> bytes:
    """GET /site.json's body (server/routes.py describe_site), made once with the app."""
    return state.site


DEPENDENCIES = {
    name: Provide(provider, sync_to_thread=False)
    for name, provider in {
        "engine": engine,
        "caller": caller,
        "client_timeout": client_timeout,
        "site": site,
    }.items()
}


def serving(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """The app-wide guard: an HTTP request to an engine that is shutting down is refused."""
    if connection.scope["type"] == "http" and connection.app.state.engine.shutting_down:
        raise errors.shutting_down()
