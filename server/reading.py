"""Reading requests: JSON bodies (JSON only, strictly of the schema's types), and forms."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any, Dict, Generic, TypeVar

import msgspec
from litestar import Request
from litestar.dto import MsgspecDTO
from litestar.openapi.spec import Reference, Schema
from litestar.typing import FieldDefinition

from core import PocketTTSError
from core.portable.audio.tsm import check_speed
from core.portable.synthesis.options import LOUDNESS_RANGE, SPEED_RANGE, GenerationOptions
from server import errors
from server.errors import ServiceError

if TYPE_CHECKING:  # the type Litestar hands its DTOs (it names it only in a module of its own)
    from litestar._openapi.schema_generation import SchemaCreator

T = TypeVar("T")
FORM_BOOLEANS = {**dict.fromkeys(("true", "1", "yes", "on"), True), **dict.fromkeys(("false", "0", "no", "off"), False)}


class StrictJSON(MsgspecDTO[T], Generic[T]):
    """A route's body (`dto=StrictJSON[Schema]`, its handler's `data: Schema`), decoded once, from its
    bytes, before anything else reads it: JSON only (a body a web page could send another site
    without asking, a "simple" text/plain request, no CORS preflight, is refused unread), and of the
    schema's types exactly: "2" is no number and "0" no boolean (msgspec's strict decoding;
    Litestar's own decoding converts them). The route's OpenAPI body is the schema's own."""

    def decode_bytes(self, value: bytes) -> Any:
        media_type = self.asgi_connection.headers.get("content-type", "").split(";")[0].strip().lower()
        if media_type != "application/json":
            raise ServiceError(
                errors.UNSUPPORTED_MEDIA_TYPE, "send the body as JSON, with Content-Type: application/json"
            )
        return decode(value, self.model_type)

    @classmethod
    def create_openapi_schema(
        cls, field_definition: FieldDefinition, handler_id: str, schema_creator: SchemaCreator
    ) -> Reference | Schema:
        # The schema as the handler declares it: Litestar's DTO models cannot describe a bounded
        # optional number (Annotated[Optional[float], Meta(ge=...)]), which the schema has.
        return schema_creator.for_field_definition(field_definition)


def decode(data: Any, schema: type, what: str = "request body") -> Any:
    """JSON text or bytes, strictly of `schema`; the refusal names `what` and the field at fault."""
    try:
        return msgspec.json.decode(data, type=schema, strict=True)
    except msgspec.ValidationError as e:
        found = re.search(r"`\$\.(\w+)|field `(\w+)`", str(e))
        param = next((name for name in found.groups() if name), None) if found else None
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
    """The options the official form lacks, as optional fields of ours: `speed` and `loudness`
    (numbers) and `normalize` (true/false)."""
    values: Dict[str, Any] = {}
    if data.get("speed") is not None:
        values["speed"] = _form_speed(data.get("speed"))
    if data.get("loudness") is not None:
        values["loudness"] = _form_loudness(data.get("loudness"))
    normalize = data.get("normalize")
    if normalize is not None:
        flag = normalize.strip().lower() if isinstance(normalize, str) else ""
        if flag not in FORM_BOOLEANS:
            raise ServiceError(errors.INVALID_VALUE, "normalize must be true or false", "normalize")
        values["normalize"] = FORM_BOOLEANS[flag]
    return GenerationOptions(**values)


def _form_loudness(value: Any) -> float:
    """A form's `loudness` (text) as LUFS, by the options' own check."""
    try:
        loudness = float(value) if isinstance(value, str) and len(value) < 32 else math.nan
        GenerationOptions(loudness=loudness).check()
    except (ValueError, PocketTTSError):
        low, high = LOUDNESS_RANGE
        raise ServiceError(
            errors.INVALID_VALUE, f"loudness must be a number of LUFS, {low:g} to {high:g}", "loudness"
        ) from None
    return loudness


def _form_speed(value: Any) -> float:
    """A form's `speed` (text) as the speed it asks for, by the options' own check."""
    try:
        return check_speed(float(value) if isinstance(value, str) else math.nan)
    except (ValueError, PocketTTSError):
        low, high = SPEED_RANGE
        raise ServiceError(errors.INVALID_VALUE, f"speed must be a number from {low:g} to {high:g}", "speed") from None
