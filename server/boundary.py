"""What every request passes before the app sees it: a path the app can take, and an origin the
server trusts.

Cross-site requests: a web page on any site can make the browser of someone who visits it send a
request to a server on their machine or network (a form post, a `fetch` that needs no CORS
preflight); the browser then names that page's origin in the request's `Origin` header. A request
that changes something (any method but GET, HEAD and OPTIONS), or opens a WebSocket, from an origin
other than the server's own (the `Host` it was asked under) or one of `allowed` is refused with a
403. Clients that are not browsers send no `Origin` and pass.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Sequence
from urllib.parse import urlsplit

from server.schemas import error_json

SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}


def middleware(allowed: Sequence[str]) -> Callable[[Any], Any]:
    """The ASGI middleware factory; `allowed`: other origins to trust ("https://app.example"), or "*"."""
    trusted = {origin.rstrip("/").lower() for origin in allowed}

    def wrap(app: Any) -> Any:
        async def guarded(scope: Dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] in ("http", "websocket"):
                refusal = _refusal(scope, trusted)
                if refusal is not None:
                    status, message, code = refusal
                    await _refuse(scope, receive, send, status, message, code)
                    return
            await app(scope, receive, send)

        return guarded

    return wrap


def _refusal(scope: Dict[str, Any], trusted: set) -> Any:
    if any(ord(c) < 32 or ord(c) == 127 for c in scope["path"]):
        return 400, "the path holds a control character", "bad_path"
    if scope["type"] == "http" and scope["method"] in SAFE_METHODS:
        return None
    headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
    origin = headers.get("origin")
    if origin is None or "*" in trusted or origin.rstrip("/").lower() in trusted:
        return None
    netloc = urlsplit(origin).netloc.lower()
    if netloc and netloc == headers.get("host", "").lower():
        return None
    return 403, f"requests from the web page at {origin} are not allowed here (see --allow-origin)", "forbidden_origin"


async def _refuse(scope: Dict[str, Any], receive: Any, send: Any, status: int, message: str, code: str) -> None:
    body = error_json(status, message, None, code)
    if scope["type"] == "websocket":
        await receive()  # websocket.connect
        await send({"type": "websocket.close", "code": 1008, "reason": message[:120]})
        return
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
