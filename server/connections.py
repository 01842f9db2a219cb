"""The connection limits uvicorn leaves out, for `python -m server`: a client must send a request's
headers, and keep its body coming, within `timeout` seconds, and must take the answer's bytes
(its socket accepting more) within `timeout` seconds too, or the connection is closed; and the cap
on open connections (uvicorn's `limit_concurrency`) counts WebSockets too, whose upgrade uvicorn
makes before it counts: one past the cap is refused, HTTP or WebSocket, with a JSON 503
`too_many_connections` (server/errors.py).

Without them, a client that sends a request's headers a byte at a time (slowloris), or asks for
audio and never reads it, holds its connection (and, for the second, its generation slot) for as
long as it likes. uvicorn has a keep-alive timeout between requests and a cap on connections, but
no timeout for a request in progress or an answer not taken. This is uvicorn's own HTTP/1.1
protocol (h11) with timers added where uvicorn's flow control already looks: a closed connection
reaches the app as a client that went away (its generation stops, its slot is freed). A connection
upgraded to a WebSocket leaves these timers: the WebSocket's handler applies the same timeout to
its frames (server/text_stream.py).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Dict, Optional

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from server import errors
from server.errors import ServiceError
from server.schemas import error_json

_FULL = ServiceError(errors.TOO_MANY_CONNECTIONS, "the server has as many connections open as it takes, retry shortly")


class _DenialsAreNotErrors(logging.Filter):
    """uvicorn's WebSocket protocol logs "ASGI callable returned without completing handshake" after
    an app refuses a handshake with an HTTP response of its own (the ASGI denial response, as
    server/guard.py sends a 401, 403 or 421), which is a complete handshake: that line only."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "ASGI callable returned without completing handshake."


def protocol(timeout: float) -> type:
    """uvicorn's HTTP/1.1 protocol with the client timeouts (pass it as uvicorn's `http`)."""
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _DenialsAreNotErrors) for f in logger.filters):
        logger.addFilter(_DenialsAreNotErrors())

    class TimedH11Protocol(_Timed):
        pass

    TimedH11Protocol.timeout = timeout
    return TimedH11Protocol


class _Timed(H11Protocol):
    timeout = 30.0

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        # The cap is ours to apply, to requests and upgrades alike, with our refusal.
        self._cap, self.limit_concurrency = self.limit_concurrency, None
        self.app = self._capped(self.app)

    def _full(self, own_task: bool) -> bool:
        """Whether the connections (WebSockets among them, this one too) are past the cap, or the
        requests in flight at it."""
        tasks = len(self.tasks) - own_task
        return self._cap is not None and (len(self.connections) > self._cap or tasks >= self._cap)

    def _capped(self, app: Any) -> Any:
        async def capped(scope: Dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] == "http" and self._full(own_task=True):
                headers = [(b"connection", b"close"), (b"retry-after", str(_FULL.retry_after).encode())]
                await _send_json(send, headers)
                return
            await app(scope, receive, send)

        return capped

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._reading: Optional[asyncio.TimerHandle] = None
        self._writing: Optional[asyncio.TimerHandle] = None
        self._upgraded = False
        super().connection_made(transport)
        self._arm_reading()

    def data_received(self, data: bytes) -> None:
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
        """A WebSocket counts among the connections (refused here at the cap, as a request would be),
        and keeps its own time (server/session.py): the request's timer ends here, or it would drop
        the connection mid-conversation."""
        if self._full(own_task=False):
            self._refuse_upgrade()
            return
        self._upgraded = True
        self._cancel_reading()
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

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self._cancel_reading()
        if self._writing is not None:
            self._writing.cancel()
            self._writing = None
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


async def _send_json(send: Any, headers: list) -> None:
    body = error_json(_FULL.status, _FULL.message, None, _FULL.code)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())] + headers
    await send({"type": "http.response.start", "status": _FULL.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
