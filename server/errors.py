"""The one error vocabulary of the server: every refusal, whichever front it reaches.

A `Kind` is a code with the HTTP status the HTTP routes answer it with and the close code a
WebSocket ends with when it ends one. A `ServiceError` is one refusal: its kind, its message (which
names the field or value at fault) and the field (`param`, OpenAI's name for it). The HTTP routes
answer it as JSON in OpenAI's shape (server/http_errors.py), the WebSocket as an `error` frame (and a
close when it ends the connection), the Wyoming server as an `error` event; `from_core` turns the
core's own errors (core.portable.errors) into it, the same way for all.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from core import (
    AudioError,
    DownloadError,
    EmptyTextError,
    LimitError,
    NoTimestampsError,
    PocketTTSError,
    TextError,
    VoiceError,
)

# WebSocket close codes (RFC 6455): normal, policy violation, message too big, internal error, try again later.
NORMAL, POLICY, TOO_BIG, INTERNAL, TRY_LATER = 1000, 1008, 1009, 1011, 1013


class Kind(NamedTuple):
    code: str
    status: int
    close: int = POLICY


# Bad input (400)
INVALID_REQUEST = Kind("invalid_request", 400)  # a body that does not fit the route's schema
INVALID_JSON = Kind("invalid_json", 400)
INVALID_VALUE = Kind("invalid_value", 400)  # an option out of its range, or of the wrong type
MALFORMED_FORM = Kind("malformed_form", 400)
MISSING_FIELD = Kind("missing_field", 400)
CONFLICTING_FIELDS = Kind("conflicting_fields", 400)
UNSUPPORTED_VALUE = Kind("unsupported_value", 400)
EMPTY_TEXT = Kind("empty_text", 400)
INVALID_TEXT = Kind("invalid_text", 400)  # malformed pause markup, a pause too long
TEXT_TOO_LONG = Kind("text_too_long", 400)
AUDIO_LIMIT = Kind("audio_limit", 400)
UNKNOWN_VOICE = Kind("unknown_voice", 400)
UNKNOWN_MODEL = Kind("unknown_model", 400)  # a model or language this server does not serve
INVALID_AUDIO = Kind("invalid_audio", 400)
DOWNLOAD_FAILED = Kind("download_failed", 400)
BAD_PATH = Kind("bad_path", 400)
NO_AUDIO_OUTPUT = Kind("no_audio_output", 400)  # speaking aloud where this machine cannot play
# Frames of a stream that the connection can do without (it goes on after their error)
BINARY_FRAME = Kind("binary_frame", 400)
UNKNOWN_TYPE = Kind("unknown_type", 400)
UNEXPECTED_START = Kind("unexpected_start", 400)
AFTER_END = Kind("after_end", 400)
UNEXPECTED_EVENT = Kind("unexpected_event", 400)  # Wyoming: an event out of order
# Who asks, and how
UNAUTHORIZED = Kind("unauthorized", 401)
FORBIDDEN_ORIGIN = Kind("forbidden_origin", 403)
NOT_FOUND = Kind("not_found", 404)  # a path the app has no route or file for
MODEL_NOT_FOUND = Kind("model_not_found", 404)
METHOD_NOT_ALLOWED = Kind("method_not_allowed", 405)
BODY_TIMEOUT = Kind("body_timeout", 408)
IDLE_TIMEOUT = Kind("idle_timeout", 408)
SESSION_EXPIRED = Kind("session_expired", 408)
BODY_TOO_LARGE = Kind("body_too_large", 413)
FRAME_TOO_LARGE = Kind("frame_too_large", 413, TOO_BIG)
UNSUPPORTED_MEDIA_TYPE = Kind("unsupported_media_type", 415)
MISDIRECTED = Kind("misdirected_request", 421)
# The server
INTERNAL_ERROR = Kind("internal_error", 500, INTERNAL)
BUSY = Kind("busy", 503, TRY_LATER)
TOO_MANY_CONNECTIONS = Kind("too_many_connections", 503, TRY_LATER)
OUT_OF_MEMORY = Kind("out_of_memory", 503, INTERNAL)
MODEL_UNAVAILABLE = Kind("model_unavailable", 503, TRY_LATER)  # a served model that could not load
SHUTTING_DOWN = Kind("shutting_down", 503, TRY_LATER)

BUSY_MESSAGE = "the server is busy: every generation slot is taken, retry shortly"
RETRY_AFTER = 1  # seconds a refusal for lack of room asks the client to wait


class ServiceError(Exception):
    def __init__(self, kind: Kind, message: str, param: Optional[str] = None):
        super().__init__(message)
        self.kind, self.message, self.param = kind, message, param

    @property
    def code(self) -> str:
        return self.kind.code

    @property
    def status(self) -> int:
        return self.kind.status

    @property
    def retry_after(self) -> Optional[int]:
        """Seconds to wait before trying again, where waiting helps (the server was full)."""
        return RETRY_AFTER if self.kind in (BUSY, TOO_MANY_CONNECTIONS, SHUTTING_DOWN) else None


def busy() -> ServiceError:
    return ServiceError(BUSY, BUSY_MESSAGE)


def shutting_down() -> ServiceError:
    return ServiceError(SHUTTING_DOWN, "the server is shutting down: retry on another, or once it is back")


def too_many_connections() -> ServiceError:
    return ServiceError(TOO_MANY_CONNECTIONS, "the server has as many connections open as it takes, retry shortly")


def from_core(error: PocketTTSError, text_field: str = "text") -> ServiceError:
    """The refusal a core error stands for; `text_field`: the name the front gives its text."""
    if isinstance(error, LimitError):
        return ServiceError(AUDIO_LIMIT, str(error))
    if isinstance(error, VoiceError):
        return ServiceError(UNKNOWN_VOICE, str(error), "voice")
    if isinstance(error, AudioError):
        return ServiceError(INVALID_AUDIO, str(error), "voice")
    if isinstance(error, DownloadError):
        return ServiceError(DOWNLOAD_FAILED, str(error), "voice")
    if isinstance(error, NoTimestampsError):
        return ServiceError(UNSUPPORTED_VALUE, str(error), "words")
    if isinstance(error, EmptyTextError):
        return ServiceError(EMPTY_TEXT, str(error), text_field)
    if isinstance(error, TextError):
        return ServiceError(INVALID_TEXT, str(error), text_field)
    return ServiceError(INVALID_VALUE, str(error))


def unexpected(error: BaseException, what: str) -> ServiceError:
    """A fault of ours, as the client may see it: its kind only (the operator's log has the rest)."""
    if isinstance(error, MemoryError):
        return ServiceError(OUT_OF_MEMORY, f"the server ran out of memory for this {what}")
    return ServiceError(INTERNAL_ERROR, f"internal error: {type(error).__name__}")
