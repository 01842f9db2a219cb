"""The connection limits uvicorn leaves out, for `python -m server` (and for uvicorn's factory,
`--http server.connections:Protocol`: docs/deployment.md): a client must send a request's
headers, and keep its body coming, within `timeout` seconds, and must take the answer's bytes
(its socket accepting more) within `timeout` seconds too, or the connection is closed; and every
connection, a WebSocket's for as long as it lasts, holds a place in the process's one pool
(server/pool.py, the engine's, which Wyoming's connections share), taken when it is accepted: one
with no place is refused there and then, with a JSON 503 `too_many_connections`
(server/errors.py) and its socket closed, so that connections that send nothing cannot pile up
beyond the pool. A connection in the pool's reserve is served `/health` and key holders' requests
(server/access.py) only; anything else gets the same 503.

Without them, a client that sends a request's headers a byte at a time (slowloris), or asks for
audio and never reads it, holds its connection (and, for the second, its generation slot) for as
long as it likes. uvicorn has a keep-alive timeout between requests and a cap on connections, but
no timeout for a request in progress or an answer not taken, and its cap refuses requests, not
connections. This is uvicorn's own HTTP/1.1 protocol (h11) with timers added where uvicorn's flow
control already looks: a closed connection reaches the app as a client that went away (its
generation stops, its slot is freed). A connection upgraded to a WebSocket leaves these timers:
the WebSocket's handler applies the same timeout to its frames (server/websocket.py).
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Dict, Optional

import h11
from litestar import Litestar
from uvicorn.protocols.http.h11_impl import H11Protocol

from server import bounds, errors
from server.engine import ServerEngine
from server.pool import Place
from server.schemas import error_json

_FULL = errors.too_many_connections()
# A refusal at accept waits this long for the client to read its 503 and close (beyond it, or
# beyond LINGERING such refusals at once, the socket is closed at once).
LINGER_SECONDS = 1.0
LINGERING = 16


class Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with the client timeout and the engine's pool of connections of
    the app it serves (server/app.py's: its state's `client_timeout` and `engine`). `python -m
    server` runs it; `uvicorn --factory server.app:create_app --http server.connections:Protocol`
    does too."""

    lingering = [0]  # refusals at accept waiting for their client, all the protocol's together

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        state = _served(self.app).state
        self.engine: ServerEngine = state.engine
        self.timeout: float = state.client_timeout
        self.limit_concurrency = None  # the pool is the cap, at accept
        self.app = self._reserved(_marked(self.app))

    def _may_use_reserve(self, scope: Dict[str, Any]) -> bool:
        return bounds.may_use_reserve(scope, self.engine.access)

    def _reserved(self, app: Any) -> Any:
        """The app, refusing a request whose connection's place is in the reserve where the request
        is not what the reserve is for."""

        async def reserved(scope: Dict[str, Any], receive: Any, send: Any) -> None:
            place = self._place
            if scope["type"] == "http" and place is not None and place.in_reserve and not self._may_use_reserve(scope):
                headers = [(b"connection", b"close"), (b"retry-after", str(_FULL.retry_after).encode())]
                await _send_json(send, headers)
                return
            await app(scope, receive, send)

        return reserved

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._reading: Optional[asyncio.TimerHandle] = None
        self._writing: Optional[asyncio.TimerHandle] = None
        self._upgraded = False
        self._refused = self._lingering = False
        self._place: Optional[Place] = self.engine.connections.enter(may_use_reserve=True)
        super().connection_made(transport)
        if self._place is None:
            self._refuse_at_accept()
            return
        self._arm_reading()

    def _refuse_at_accept(self) -> None:
        """The 503 at once, before any request is read; the socket is closed once the client has
        closed its end (it may have sent its request: closing on unread bytes would reset the
        connection before the client reads the answer), within LINGER_SECONDS."""
        self._refused = True
        self.transport.write(_full_response())
        if self.lingering[0] >= LINGERING or not self.transport.can_write_eof():
            self.transport.abort()
            return
        self.lingering[0] += 1
        self._lingering = True
        self.transport.write_eof()
        self._reading = self.loop.call_later(LINGER_SECONDS, self.transport.abort)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # the request of a refused connection: read and dropped
        super().data_received(data)
        if self._upgraded:
            return
        if self.conn.their_state is h11.SEND_BODY:  # a body on its way: keep it coming
            self._arm_reading()
        elif self._receiving_headers():
            pass  # the headers' deadline counts from the start of the request, not the last byte
        else:
            self._cancel_reading()

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        """A WebSocket keeps the connection's place until it closes (one in the reserve is refused
        here, unless a key holder's), and keeps its own time (server/session.py): the request's
        timer ends here, or it would drop the connection mid-conversation."""
        place = self._place
        if place is not None and place.in_reserve and not self._may_use_reserve(self.scope):
            self._refuse_upgrade()
            return
        self._upgraded = True
        self._cancel_reading()
        self._place = None  # the WebSocket's now
        self.ws_protocol_class = _leaving(self.ws_protocol_class, place)
        super().handle_websocket_upgrade(event)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_reading()  # the next request's headers, if the client sends one

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._writing is None:
            self._writing = self.loop.call_later(self.timeout, self._give_up)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._writing is not None:
            self._writing.cancel()
            self._writing = None

    def eof_received(self) -> Optional[bool]:
        if self._refused:
            return False  # the client has read its 503 and closed: so do we
        return super().eof_received()

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self._cancel_reading()
        if self._writing is not None:
            self._writing.cancel()
            self._writing = None
        if self._lingering:
            self._lingering = False
            self.lingering[0] -= 1
        if self._place is not None:
            self._place.leave()
            self._place = None
        super().connection_lost(exc)

    def _refuse_upgrade(self) -> None:
        body = error_json(_FULL.status, _FULL.message, None, _FULL.code)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"retry-after", str(_FULL.retry_after).encode()),
            (b"connection", b"close"),
        ]
        for event in (h11.Response(status_code=_FULL.status, headers=headers), h11.Data(data=body), h11.EndOfMessage()):
            self.transport.write(self.conn.send(event))
        self.transport.close()

    def _receiving_headers(self) -> bool:
        return self.conn.their_state is h11.IDLE or self.cycle is None or self.cycle.response_complete

    def _arm_reading(self) -> None:
        self._cancel_reading()
        self._reading = self.loop.call_later(self.timeout, self._reading_timed_out)

    def _cancel_reading(self) -> None:
        if self._reading is not None:
            self._reading.cancel()
            self._reading = None

    def _reading_timed_out(self) -> None:
        self._reading = None
        if self._receiving_headers() or self.conn.their_state is h11.SEND_BODY:
            self._give_up()

    def _give_up(self, *_: Any) -> None:
        """Drop the connection now: what it had not taken is discarded, and the app sees a client
        that went away."""
        self._writing = None
        if not self.transport.is_closing():
            self.transport.abort()


def _served(app: Any) -> Any:
    """The Litestar app uvicorn serves, inside uvicorn's own middleware (each keeps what it wraps as `app`)."""
    while not isinstance(app, Litestar):
        app = getattr(app, "app", None)
        if app is None:
            raise RuntimeError("server.connections.Protocol serves the app of server.app:create_app only")
    return app


def _full_response() -> bytes:
    """The whole 503 of a connection refused at accept, written before its request is read."""
    body = error_json(_FULL.status, _FULL.message, None, _FULL.code)
    head = (
        f"HTTP/1.1 {_FULL.status} Service Unavailable\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nretry-after: {_FULL.retry_after}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


def _marked(app: Any) -> Any:
    """The app, each scope it is given marked as holding its connection's place (server/bounds.py)."""

    async def marked(scope: Dict[str, Any], receive: Any, send: Any) -> None:
        scope.setdefault("extensions", {})[bounds.CONNECTION] = {}
        await app(scope, receive, send)

    return marked


def _leaving(ws_protocol_class: Any, place: Optional[Place]) -> Callable[..., Any]:
    """uvicorn's WebSocket protocol whose connection holds `place` (its scope marked so) and gives
    it back when it is lost."""

    def made(**kwargs: Any) -> Any:
        protocol = ws_protocol_class(**kwargs)
        protocol.app = _marked(protocol.app)
        lost = protocol.connection_lost

        def connection_lost(exc: Optional[Exception]) -> None:
            try:
                lost(exc)
            finally:
                if place is not None:
                    place.leave()

        protocol.connection_lost = connection_lost
        return protocol

    return made


async def _send_json(send: Any, headers: list) -> None:
    body = error_json(_FULL.status, _FULL.message, None, _FULL.code)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())] + headers
    await send({"type": "http.response.start", "status": _FULL.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
