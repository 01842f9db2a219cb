"""The bounds the app owns, whatever server runs it (`python -m server`, `uvicorn --factory
server.app:create_app`, a Ray Serve replica): an ASGI middleware, the app's outermost.

- Each message of an answer is taken by the client within the client timeout: a `send` that waits
  longer (the client stopped reading, its socket's buffers are full) ends the request there, so its
  session ends and its generation slot is free (the WebSocket fronts time their frames the same
  way: server/frames.py). What is left of the socket is the server's to close: `python -m server`'s
  protocol drops it at the same moment (server/connections.py).
- Every request being answered and every WebSocket open holds a place in the engine's pool of
  connections (server/pool.py, shared with Wyoming's), unless the server's protocol took one for its
  connection when it accepted it (it marks the requests it serves, CONNECTION); one with no place is
  a 503 `too_many_connections`, but /health and key holders, who may use the pool's reserve.

What only a server process can bound, an app cannot: a request whose headers trickle in is not the
app's until its headers are whole, and a connection that sends nothing never reaches it. Those are
server/connections.py's, which `python -m server` runs and uvicorn's factory takes with
`--http server.connections:Protocol`; the app says once in the log when it is served without it
(docs/deployment.md).
"""

from __future__ import annotations

import logging
from typing import Any, Dict

import anyio

from server import errors
from server.guard import refuse

# The mark server/connections.py leaves on a request's scope: its connection holds a place already.
CONNECTION = "pocket_tts.connection"
log = logging.getLogger("pocket_tts.server")


class ClientTooSlow(Exception):
    """The client did not take a message of its answer within the client timeout."""


def may_use_reserve(scope: Dict[str, Any], access: Any) -> bool:
    """Whether a request (or a WebSocket) is one the pool's reserve is for: /health, or a key
    holder's (`access`: the engine's, server/access.py)."""
    if scope["path"] == "/health":
        return True
    authorization = next((v for k, v in scope["headers"] if k.lower() == b"authorization"), None)
    return access.keyed and access.caller(authorization and authorization.decode("latin-1")).trusted


def middleware(client_timeout: float) -> Any:
    """The middleware factory (Litestar's `middleware=`)."""
    told = []

    def wrap(app: Any) -> Any:
        async def bounded(scope: Dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] not in ("http", "websocket"):
                await app(scope, receive, send)
                return
            place = None
            if CONNECTION not in scope.get("extensions", {}):
                if not told:
                    told.append(True)
                    log.warning(
                        "served without server.connections.Protocol: headers that trickle in are not timed out and "
                        "connections that send nothing are not counted (uvicorn: --http server.connections:Protocol)"
                    )
                engine = scope["litestar_app"].state.engine
                place = engine.connections.enter(may_use_reserve(scope, engine.access))
                if place is None:
                    error = errors.too_many_connections()
                    await refuse(scope, receive, send, error, {"retry-after": str(error.retry_after)})
                    return
            try:
                await app(scope, receive, _in_time(send, client_timeout) if scope["type"] == "http" else send)
            finally:
                if place is not None:
                    place.leave()

        return bounded

    return wrap


def _in_time(send: Any, seconds: float) -> Any:
    async def sent(message: Dict[str, Any]) -> None:
        with anyio.move_on_after(seconds):
            await send(message)
            return
        raise ClientTooSlow(f"the client took nothing for {seconds:g} s")

    return sent


class QuietLog(logging.Filter):
    """uvicorn's error log without two lines that are not errors: "ASGI callable returned without
    completing handshake" after the app refused a WebSocket with an HTTP answer of its own (the
    ASGI denial response, as server/guard.py sends a 401, 403 or 421: a complete handshake), and the
    traceback of a request ended because its client stopped reading (ClientTooSlow)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage() == "ASGI callable returned without completing handshake.":
            return False
        return not (record.exc_info and _too_slow(record.exc_info[1]))


def _too_slow(error: object) -> bool:
    """Whether `error` is ClientTooSlow: itself, in a group of them (anyio's task groups group what
    their tasks raise) or as the cause of another (Litestar's for an error after an answer began)."""
    if isinstance(error, ClientTooSlow):
        return True
    inner = getattr(error, "exceptions", None)
    if inner:
        return all(_too_slow(e) for e in inner)
    return error is not None and _too_slow(getattr(error, "__cause__", None))


def quiet_uvicorn_log() -> None:
    """QuietLog on uvicorn's error log (once)."""
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, QuietLog) for f in logger.filters):
        logger.addFilter(QuietLog())
