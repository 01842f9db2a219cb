"""Reading requests: JSON bodies (JSON only, strictly of the schema's types), and forms."""

from __future__ import annotations

import math
import re
from typing import Any, Awaitable, Callable, Dict

import msgspec
from litestar import Request

from core import PocketTTSError
from core.portable.audio.tsm import check_speed
from core.portable.synthesis.options import SPEED_RANGE, GenerationOptions
from server import errors
from server.errors import ServiceError
from server.session import MAX_TEXT

# The fields that hold the text to speak (ours, OpenAI's), whose length is the session's limit.
TEXT_FIELDS = ("text", "input")
FORM_BOOLEANS = {**dict.fromkeys(("true", "1", "yes", "on"), True), **dict.fromkeys(("false", "0", "no", "off"), False)}


def strict_json(schema: type) -> Callable[[Request], Awaitable[None]]:
    """A route's check of its body, before anything else reads it: JSON only (a body a web page
    could send another site without asking, a "simple" text/plain request, no CORS preflight, is
    refused unread), and of the schema's types exactly: "2" is no number and "0" no boolean
    (msgspec's strict decoding; Litestar's own decoding converts them)."""

    async def check(request: Request) -> None:
        media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media_type != "application/json":
            raise ServiceError(
                errors.UNSUPPORTED_MEDIA_TYPE, "send the body as JSON, with Content-Type: application/json"
            )
        decode(await request.body(), schema)

    return check


def decode(data: Any, schema: type, what: str = "request body") -> Any:
    """JSON text or bytes, strictly of `schema`; the refusal names `what` and the field at fault."""
    try:
        return msgspec.json.decode(data, type=schema, strict=True)
    except msgspec.ValidationError as e:
        found = re.search(r"`\$\.(\w+)|field `(\w+)`", str(e))
        param = next((name for name in found.groups() if name), None) if found else None
        if param in TEXT_FIELDS and str(e).startswith("Expected `str` of length <="):  # the one code of every front
            raise ServiceError(errors.TEXT_TOO_LONG, f"{param} is longer than {MAX_TEXT} characters", param) from None
        raise ServiceError(errors.INVALID_VALUE, f"invalid {what}: {e}", param) from None
    except msgspec.DecodeError as e:
        raise ServiceError(errors.INVALID_JSON, f"malformed JSON: {e}") from None
    except RecursionError:
        raise ServiceError(errors.INVALID_JSON, "malformed JSON: nested too deeply") from None


async def form(request: Request) -> Any:
    try:
        return await request.form()
    except UnicodeDecodeError as e:
        raise ServiceError(errors.MALFORMED_FORM, f"malformed form: a field is not UTF-8 text ({e.reason})") from None


def form_options(data: Any) -> GenerationOptions:
    """The options the official form lacks, as optional fields of ours: `speed` (a number) and
    `normalize` (true/false)."""
    values: Dict[str, Any] = {}
    if data.get("speed") is not None:
        values["speed"] = _form_speed(data.get("speed"))
    normalize = data.get("normalize")
    if normalize is not None:
        flag = normalize.strip().lower() if isinstance(normalize, str) else ""
        if flag not in FORM_BOOLEANS:
            raise ServiceError(errors.INVALID_VALUE, "normalize must be true or false", "normalize")
        values["normalize"] = FORM_BOOLEANS[flag]
    return GenerationOptions(**values)


def _form_speed(value: Any) -> float:
    """A form's `speed` (text) as the speed it asks for, by the options' own check."""
    try:
        return check_speed(float(value) if isinstance(value, str) else math.nan)
    except (ValueError, PocketTTSError):
        low, high = SPEED_RANGE
        raise ServiceError(errors.INVALID_VALUE, f"speed must be a number from {low:g} to {high:g}", "speed") from None
