"""Every error of the HTTP routes as JSON in OpenAI's shape, from the one vocabulary (server/errors.py):
`{"error": {"message", "type", "param", "code"}}` with the kind's status."""

from __future__ import annotations

import logging
from typing import Dict, Optional, Type

from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException, ValidationException

from core import PocketTTSError
from server import errors
from server.errors import ServiceError
from server.schemas import error_json

log = logging.getLogger("pocket_tts.server")


def response(error: ServiceError) -> Response:
    headers: Optional[Dict[str, str]] = None
    if error.retry_after is not None:
        headers = {"Retry-After": str(error.retry_after)}
    body = error_json(error.status, error.message, error.param, error.code)
    return Response(body, status_code=error.status, media_type=MediaType.JSON, headers=headers)


def _refused(_: Request, error: ServiceError) -> Response:
    return response(error)


def _bad_input(_: Request, error: PocketTTSError) -> Response:
    return response(errors.from_core(error))


def _too_deep(_: Request, error: RecursionError) -> Response:
    return response(ServiceError(errors.INVALID_JSON, "malformed request body: nested too deeply"))


def _validation(_: Request, error: ValidationException) -> Response:
    extra = error.extra if isinstance(error.extra, list) else []
    first = extra[0] if extra and isinstance(extra[0], dict) else {}
    param = str(first.get("key") or "") or None
    message = str(first.get("message") or error.detail or "invalid request")
    return response(ServiceError(errors.INVALID_REQUEST, f"{error.detail}: {message}" if first else message, param))


# Litestar's own refusals, in our words.
_HTTP_KINDS = {
    400: errors.INVALID_REQUEST,
    404: errors.NOT_FOUND,
    405: errors.METHOD_NOT_ALLOWED,
    413: errors.BODY_TOO_LARGE,
    415: errors.UNSUPPORTED_MEDIA_TYPE,
}


def _http(request: Request, error: HTTPException) -> Response:
    limit = request.route_handler.request_max_body_size if request.scope.get("route_handler") else None
    messages = {
        400: f"malformed request body: {error.detail}",
        413: f"request body larger than the {limit} bytes this route takes",
        415: "unsupported content type",
    }
    kind = _HTTP_KINDS.get(error.status_code, errors.Kind(str(error.status_code), error.status_code))
    answer = response(ServiceError(kind, messages.get(error.status_code, str(error.detail))))
    answer.headers.update(error.headers or {})
    return answer


def _unexpected(request: Request, error: Exception) -> Response:
    """A fault of ours: the client gets its kind, the operator's log the whole traceback."""
    log.error("%s %s failed", request.method, request.url.path, exc_info=error)
    return response(errors.unexpected(error, "request"))


HANDLERS: Dict[Type[Exception], object] = {
    ServiceError: _refused,
    PocketTTSError: _bad_input,
    ValidationException: _validation,
    HTTPException: _http,
    RecursionError: _too_deep,
    Exception: _unexpected,
}
