"""The MCP server's voice on this machine's own speakers (`speak_aloud`, `stop_speaking`): a call is
checked at once (its text, voice and language: a refusal is the call's own error), queued behind
what is playing, and answered with its place in the queue; one task plays the queue, each call a
session of the engine (its slot, limits and error codes, server/session.py), its audio written to
the default output device as it is made (core.audio_formats.speakers: sounddevice over PortAudio).
`stop_speaking` drops the queue and cuts what is playing within a chunk. A call that fails once
it plays (the device gone) is logged on stderr; the queue goes on.
"""

from __future__ import annotations

import logging
from typing import Any, List, NamedTuple, Optional

import anyio
import numpy as np

from core import PocketTTSError, audio_formats
from core.portable.synthesis.options import GenerationOptions
from server import errors
from server.access import KEY_HOLDER
from server.engine import ServerEngine
from server.errors import ServiceError
from server.session import Session, WholeText, whole_text

# Calls waiting at most: more is `busy` until some have been said.
MAX_QUEUE = 16
log = logging.getLogger("pocket_tts.mcp")


class Utterance(NamedTuple):
    text: WholeText
    voice: Optional[str]
    options: GenerationOptions
    served: Optional[str]  # the served model that speaks the call's language (None: the default)


class Loudspeaker:
    def __init__(self, engine: ServerEngine):
        self.engine = engine
        self._queue: List[Utterance] = []
        self._more = anyio.Event()
        self._playing: Optional[anyio.CancelScope] = None

    async def say(
        self, text: str, voice: Optional[str], speed: float, language: Optional[str], loudness: Optional[float] = None
    ) -> int:
        """Queue `text`, checked first; its place: 0 plays now, 1 after what is playing, ..."""
        if self.engine.shutting_down:
            raise errors.shutting_down()
        whole = whole_text(text)
        model = self.engine.model_speaking(language)
        options = GenerationOptions(speed=speed, loudness=loudness)
        try:
            options.check_request()
        except PocketTTSError as e:
            raise errors.from_core(e) from None
        try:
            await anyio.to_thread.run_sync(audio_formats.speakers)
        except PocketTTSError as e:
            raise ServiceError(errors.NO_AUDIO_OUTPUT, str(e)) from None
        try:  # its model and a voice this caller may name, prepared now (a load, a clone, a download)
            served = await anyio.to_thread.run_sync(self.engine.models.get, model)
            await anyio.to_thread.run_sync(served.voices.voice, voice, KEY_HOLDER)
        except PocketTTSError as e:
            raise errors.from_core(e) from None
        if len(self._queue) >= MAX_QUEUE:
            raise ServiceError(errors.BUSY, f"{MAX_QUEUE} calls wait to be said already: call again once some are")
        self._queue.append(Utterance(whole, voice, options, model))
        self._more.set()
        return len(self._queue) - (0 if self._playing is not None else 1)

    def stop(self) -> dict:
        """Drop the queue and cut what is playing."""
        dropped, self._queue = len(self._queue), []
        playing = self._playing is not None
        if self._playing is not None:
            self._playing.cancel()
        return {"stopped": playing, "dropped": dropped}

    async def run(self) -> None:
        """Play the queue, for as long as the server runs."""
        while True:
            if not self._queue:
                self._more = anyio.Event()
                await self._more.wait()
                continue
            utterance = self._queue.pop(0)
            with anyio.CancelScope() as scope:
                self._playing = scope
                try:
                    await self._play(utterance, scope)
                except ServiceError as e:
                    log.error("speak_aloud: %s: %s", e.code, e.message)
                except Exception as e:  # the device failed mid-way: the next call may find it again
                    log.error("speak_aloud failed", exc_info=e)
                finally:
                    self._playing = None

    async def _play(self, utterance: Utterance, scope: anyio.CancelScope) -> None:
        sounddevice = audio_formats.speakers()
        session = await Session.open(
            self.engine, utterance.voice, utterance.options, caller=KEY_HOLDER, model=utterance.served
        )
        device: Any = sounddevice.OutputStream(samplerate=self.engine.sample_rate, channels=1, dtype="float32")
        device.start()
        try:
            await session.say(utterance.text)
            await session.end()
            async for chunk in session.audio():
                block = np.ascontiguousarray(chunk, dtype=np.float32).reshape(-1, 1)
                await anyio.to_thread.run_sync(device.write, block)  # waits while the device's buffer is full
        finally:
            session.close()
            with anyio.CancelScope(shield=True):  # cut: drop what the device holds; else let it play out
                await anyio.to_thread.run_sync(device.abort if scope.cancel_called else device.stop)
                device.close()
