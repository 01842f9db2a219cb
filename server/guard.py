"""What every request and WebSocket passes before the app sees it (two ASGI middlewares): a path the
app can take, a Host the server answers to, the API key when one is set, an origin the server
trusts, and a body that arrives in time.

- Host: a web page on any site can make its visitor's browser send requests to a server on their
  machine: by naming it (a cross-site request, which the origin check refuses), or by pointing its
  own domain at 127.0.0.1 once the page is loaded (DNS rebinding), after which the browser treats
  the server as the page's own site. The `Host` header still names the attacker's domain: only
  localhost, 127.0.0.1, [::1], the names the server was started with (`--host`, `--allow-host`) and
  the hosts of the allowed origins are answered; any other is a 421. A server bound to every
  interface (0.0.0.0, ::) also answers to an IP address (a page cannot rebind an address).
- API key (`--api-key`): `Authorization: Bearer KEY` on every route and WebSocket, as OpenAI's
  clients send it; 401 otherwise. Only a route marked public (`opt=PUBLIC` on its handler or its
  router: the page's files, `/site.json` and `/health`) is open, so a route added without the
  mark is closed. The key is the engine's (server/access.py decides who the caller is, for every
  front); a route receives its caller as a dependency (server/provide.py). These checks stay an
  ASGI middleware, not Litestar guards, because a WebSocket refused at its handshake must get an
  HTTP answer (401, 403, 421 with its JSON error), which a guard cannot send: Litestar closes a
  WebSocket whose guard raised with its own code (4500).
- Origin: a request that changes something (any method but GET, HEAD and OPTIONS), or opens a
  WebSocket, from a web page of another site than the server's own (the `Host` it was asked under)
  or one of `allowed_origins`, is a 403. Clients that are not browsers send no `Origin` and pass.
- Body (`body_in_time`, a middleware of its own: it times the request's `receive`, where the
  others refuse at once): a request's body must have arrived within its seconds of the request,
  however it trickles in (a 408 then); the route's size limit is Litestar's (413).
"""

from __future__ import annotations

import ipaddress
import time
from typing import Any, Callable, Dict, Optional, Sequence, Tuple
from urllib.parse import urlsplit

import anyio

from server import errors
from server.errors import ServiceError
from server.schemas import error_json

SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}
WILDCARD_BINDS = {"0.0.0.0", "::", ""}
# The mark of a route open without the API key: `opt=PUBLIC` on its handler or its router (Litestar
# merges a router's opt into its handlers'). Every other route needs the key.
PUBLIC = {"public": True}


def host_name(value: str) -> Optional[str]:
    """The host of a Host header or an origin's netloc ("[::1]:8000" -> "::1"), lowercase; None when malformed."""
    try:
        name = urlsplit("//" + value).hostname
    except ValueError:
        return None
    return name.rstrip(".") if name else None


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


Refusal = Tuple[ServiceError, Dict[str, str]]  # the error, and the headers its answer carries


def middleware(allowed_origins: Sequence[str], hosts: Sequence[str]) -> Callable[[Any], Any]:
    """The ASGI middleware factory: each check below in turn, the first refusal answered.
    `allowed_origins`: other web pages' origins that may use the API ("https://app.example"), or
    "*"; `hosts`: names the server answers to beside localhost (its `--host`, `--allow-host`). The
    API key is the engine's (`access`), read at each request."""
    trusted = {origin.rstrip("/").lower() for origin in allowed_origins}
    names = set(LOOPBACK_NAMES)
    names.update(filter(None, (host_name(host) for host in hosts)))
    names.update(filter(None, (host_name(urlsplit(origin).netloc) for origin in trusted if origin != "*")))
    any_address = any(host.strip("[]") in WILDCARD_BINDS for host in hosts)
    any_host = "*" in trusted  # every page may use the API: a Host proves nothing more

    def host_refusal(scope: Dict[str, Any], headers: Dict[str, str]) -> Optional[Refusal]:
        value = headers.get("host")
        if value is None or any_host:
            return None  # no Host: not a browser (HTTP/1.0)
        name = host_name(value)
        if name is not None and (name in names or (any_address and _is_address(name))):
            return None
        message = (
            f"this server does not answer to the host {value!r} (see --allow-host): "
            "a web page's domain pointed at it is refused"
        )
        return ServiceError(errors.MISDIRECTED, message), {}

    def origin_refusal(scope: Dict[str, Any], headers: Dict[str, str]) -> Optional[Refusal]:
        if scope["type"] == "http" and scope.get("method") in SAFE_METHODS:
            return None
        origin = headers.get("origin")
        if origin is None or "*" in trusted or origin.rstrip("/").lower() in trusted:
            return None
        netloc = urlsplit(origin).netloc.lower()
        if netloc and netloc == headers.get("host", "").lower():
            return None
        message = f"requests from the web page at {origin} are not allowed here (see --allow-origin)"
        return ServiceError(errors.FORBIDDEN_ORIGIN, message), {}

    checks = (_path_refusal, host_refusal, _key_refusal, origin_refusal)

    def wrap(app: Any) -> Any:
        async def guarded(scope: Dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] in ("http", "websocket"):
                headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
                for check in checks:
                    refused = check(scope, headers)
                    if refused is not None:
                        await refuse(scope, receive, send, *refused)
                        return
            await app(scope, receive, send)

        return guarded

    return wrap


def body_in_time(seconds: float) -> Callable[[Any], Any]:
    """The ASGI middleware factory of the body's time: a request's body must have arrived within
    `seconds` of the request, however it trickles in (a 408 then)."""

    def wrap(app: Any) -> Any:
        async def timed(scope: Dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                receive = _in_time(receive, time.monotonic() + seconds, seconds)
            await app(scope, receive, send)

        return timed

    return wrap


def _path_refusal(scope: Dict[str, Any], headers: Dict[str, str]) -> Optional[Refusal]:
    if any(ord(c) < 32 or ord(c) == 127 for c in scope["path"]):
        return ServiceError(errors.BAD_PATH, "the path holds a control character"), {}
    return None


def _key_refusal(scope: Dict[str, Any], headers: Dict[str, str]) -> Optional[Refusal]:
    """The API key, where one is set and the route needs it."""
    caller = scope["litestar_app"].state.engine.access.caller(headers.get("authorization"))
    if caller.trusted or not _needs_key(scope, scope.get("method", "GET")):
        return None
    error = ServiceError(errors.UNAUTHORIZED, "send the server's API key as Authorization: Bearer KEY")
    return error, {"www-authenticate": "Bearer"}


def _needs_key(scope: Dict[str, Any], method: str) -> bool:
    """Every route but those marked PUBLIC, and not a browser's CORS preflight (which carries no
    credentials; the request it asks for does)."""
    if scope["type"] == "http" and method == "OPTIONS":
        return False
    return not scope["route_handler"].opt.get("public", False)


def _in_time(receive: Any, deadline: float, seconds: float) -> Any:
    """`receive` whose body must have arrived by `deadline` (a ServiceError, a 408, otherwise)."""
    state = {"body": True}

    async def received() -> Dict[str, Any]:
        if not state["body"]:
            return await receive()
        with anyio.move_on_after(max(0.0, deadline - time.monotonic())):
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                state["body"] = False
            return message
        raise ServiceError(errors.BODY_TIMEOUT, f"the request's body did not arrive within {seconds:g} s")

    return received


async def refuse(scope: Dict[str, Any], receive: Any, send: Any, error: ServiceError, extra: Dict[str, str]) -> None:
    """`error` as the answer to a request, or to a WebSocket's handshake (an HTTP answer where the
    server can send one, else a close with the error's code), with `extra` headers."""
    body = error_json(error.status, error.message, error.param, error.code)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(name.encode(), value.encode()) for name, value in extra.items()]
    if scope["type"] == "websocket":
        await receive()  # websocket.connect
        if "websocket.http.response" in scope.get("extensions", {}):
            await send({"type": "websocket.http.response.start", "status": error.status, "headers": headers})
            await send({"type": "websocket.http.response.body", "body": body})
        else:
            await send({"type": "websocket.close", "code": error.kind.close, "reason": error.message[:120]})
        return
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
