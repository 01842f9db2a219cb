"""The WebSocket at /tts/ws: LiveKit's Pocket TTS protocol (the `livekit-plugins-pocket` plugin,
a client of the `livekit-streaming-tts` server), as a front of the one session every front drives:
each turn is a session of the engine (its slot, budget, segments, cancellation, idle and lifetime
rules and errors are the session's, server/session.py); this module reads and writes its frames.

Client to server, JSON text frames:
    {"type": "config", "data": {"sample_rate", "normalize", "pauses", "format": "pcm", "binary",
                                "voice", "language"}}     a turn begins (and any turn under way ends)
    {"type": "text", "data": {"text": "..."}}            any number; each complete sentence is spoken
    {"type": "flush"}                                    speak the rest, then `final`: the turn is over
    {"type": "cancel"}                                   stop now (barge-in): no `final`
    {"type": "ping"}                                     answered by {"type": "pong"}
Server to client: {"type": "event", "data": {"event_type": "config_accepted", "request_id"}}, the
audio as binary frames of 16-bit little-endian mono PCM at the asked `sample_rate` (default the
model's), or, with `binary: false`, {"type": "audio", "data": {"audio": base64, "sample_rate",
"format": "pcm"}}; then {"type": "event", "data": {"event_type": "final", "request_id"}}; errors
{"type": "error", "data": {"message", "code"}} (the codes of every front, server/errors.py).

A refused frame (out of order, malformed, a voice the server does not know, a language the model
does not speak) is an error frame, and the connection goes on; a refusal that ends it (too much
text or audio, a frame too large, the server shutting down, idle, a fault of ours) is an error
frame, then a close with its kind's code. `voice` is a name the server knows (GET
/v1/audio/voices): the plugin also lets a client name a server-side file or an hf:// URL, which
this server never opens. `pauses` (the plugin's default: false) says whether pause markup is
silence or text. The server listens only once its model is loaded, so it answers 1013 only while
it shuts down (with its `shutting_down` error first), never while its model loads.
"""

from __future__ import annotations

import base64
import secrets
from typing import Any, Literal, Optional, Union

import msgspec
from litestar import WebSocket, websocket
from litestar.di import NamedDependency

from core import audio_formats
from core.portable.synthesis.options import GenerationOptions
from core.portable.voices.sources import FILE_ENDINGS
from server import errors
from server.access import Caller
from server.engine import ServerEngine
from server.errors import ServiceError
from server.frames import BadFrame, FrameSocket, Turn
from server.schemas import SampleRate
from server.session import Session

PATH = "/tts/ws"
FRAMES = ("config", "text", "flush", "cancel", "ping")


class ConfigData(msgspec.Struct, forbid_unknown_fields=True):
    sample_rate: Optional[SampleRate] = None
    normalize: bool = True
    pauses: bool = False
    format: Literal["pcm"] = "pcm"
    binary: bool = True
    voice: Optional[str] = None
    language: Optional[str] = None
    loudness: Optional[float] = None  # ours: the voice brought to this loudness (LUFS)


class TextData(msgspec.Struct, forbid_unknown_fields=True):
    text: str


class Config(msgspec.Struct, tag="config", tag_field="type", forbid_unknown_fields=True):
    data: ConfigData = msgspec.field(default_factory=ConfigData)


class Text(msgspec.Struct, tag="text", tag_field="type", forbid_unknown_fields=True):
    data: TextData


class Flush(msgspec.Struct, tag="flush", tag_field="type", forbid_unknown_fields=True):
    pass


class Cancel(msgspec.Struct, tag="cancel", tag_field="type", forbid_unknown_fields=True):
    pass


class Ping(msgspec.Struct, tag="ping", tag_field="type", forbid_unknown_fields=True):
    pass


Frame = Union[Config, Text, Flush, Cancel, Ping]


@websocket(PATH)
async def livekit_stream(
    socket: WebSocket,
    engine: NamedDependency[ServerEngine],
    caller: NamedDependency[Caller],
    client_timeout: NamedDependency[float],
) -> None:
    """LiveKit's Pocket TTS protocol (see server/livekit_ws.py for the frames)."""
    await _Turns(socket, engine, caller, client_timeout).serve()


class _Turn(Turn):
    """A turn of the protocol: its speech, with its request id and how its audio is sent."""

    def __init__(self, session: Session, config: ConfigData):
        super().__init__(session, audio_formats.Output("pcm", session.sample_rate, config.sample_rate))
        self.binary = config.binary
        self.request_id = secrets.token_hex(8)


class _Turns(FrameSocket):
    """A connection of turns: a session per turn, one at a time."""

    path = PATH

    async def _read(self) -> None:
        while True:
            message = await self._receive()
            try:
                frame = self._frame(message, FRAMES, Frame)
            except BadFrame as bad:
                await self._send_error(bad.error)
                continue
            try:
                await self._handle(frame)
            except ServiceError as error:
                if error.kind in _ENDING:
                    raise
                await self._send_error(error)

    async def _handle(self, frame: Any) -> None:
        turn = self.turn
        if isinstance(frame, Ping):
            await self._send_json({"type": "pong"})
        elif isinstance(frame, Config):
            await self._end_turn()
            await self._begin_turn(frame.data)
        elif isinstance(frame, Cancel):
            await self._end_turn()
        elif turn is None:
            raise ServiceError(errors.UNEXPECTED_EVENT, f"{_kind(frame)} before config: send config first", "type")
        elif turn.session.ending:
            raise ServiceError(errors.AFTER_END, f"{_kind(frame)} after flush: the turn's text has ended", "type")
        elif isinstance(frame, Text):
            await turn.session.push(frame.data.text)
        else:
            await turn.session.end()

    async def _begin_turn(self, config: ConfigData) -> None:
        voice = config.voice
        if voice is not None and ("/" in voice or "\\" in voice or voice.lower().endswith(FILE_ENDINGS)):
            message = f"voice {voice!r}: name a voice of this server (GET /v1/audio/voices); files are not opened"
            raise ServiceError(errors.UNKNOWN_VOICE, message, "voice")
        model = self.engine.model_speaking(config.language)
        options = GenerationOptions(normalize=config.normalize, pauses=config.pauses, loudness=config.loudness)
        session = await Session.open(self.engine, voice, options, self.clock, caller=self.caller, model=model)
        self.turn = turn = _Turn(session, config)
        await self._event("config_accepted", turn)
        self._begin(turn)

    async def _end_turn(self) -> None:
        """The turn under way, if any, over (barge-in, or a new config): cut, with no `final`, or,
        all said, its `final` sent first (the plugin takes any `final` after its `config_accepted`
        as its turn's); its slot free before the next turn asks for one."""
        turn = self.turn
        if turn is None:
            return
        await self._stop(turn)
        await turn.session.close_and_free()
        self.turn = None

    async def _send_audio(self, turn: _Turn, data: bytes) -> None:
        if turn.binary:
            await self._send(bytes=data)
            return
        audio = {"audio": base64.b64encode(data).decode(), "sample_rate": turn.output.rate, "format": "pcm"}
        await self._send_json({"type": "audio", "data": audio})

    async def _send_end(self, turn: _Turn) -> None:
        await self._event("final", turn)

    async def _event(self, kind: str, turn: _Turn) -> None:
        data = {"event_type": kind, "request_id": turn.request_id}
        await self._send_json({"type": "event", "data": data})

    async def _send_error(self, error: ServiceError) -> None:
        await self._send_json({"type": "error", "data": {"message": error.message, "code": error.code}})


# The refusals that end the connection: the session's limits (its text, its audio), a frame too large,
# and a server shutting down (it takes no more turns).
_ENDING = (errors.TEXT_TOO_LONG, errors.AUDIO_LIMIT, errors.FRAME_TOO_LARGE, errors.SHUTTING_DOWN)


def _kind(frame: Any) -> str:
    return type(frame).__name__.lower()
