"""The server's generation engine: one loaded model, by job. The fronts reach it through sessions
(server/session.py), and its parts for what else they ask:

- `hosted` (server/hosting.py): the model as clients see it (its name, rate, language, listing);
- `voices` (server/engine_voices.py): every voice a request may name, prepared once;
- `generations` (server/generations.py): the slots and the scheduler that runs every generation,
  and the shutdown that refuses what comes after;
- `access` (server/access.py): who may ask for what; `connections` (server/pool.py): the process's
  one pool of connections.

What a session asks of it (server/session.py Engine) is here: a slot, its text with its voice, a
scheduler stream and its wake-up. Its health, as GET /health reports it: server/health.py.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable, Optional

from core import TTSModel
from core.portable.synthesis.options import GenerationOptions
from core.portable.synthesis.text_stream import TextStream
from server import voice_folder
from server.access import KEY_HOLDER, Access, Caller
from server.engine_voices import EngineVoices, Recordings
from server.generations import Generations
from server.hosting import HostedModel
from server.pool import ConnectionPool
from server.relay import Relay
from server.scheduler import Stream
from server.settings import MAX_CONNECTIONS, Settings
from server.slots import Slot


def load_engine(settings: Settings, recordings: Optional[Recordings] = None) -> ServerEngine:
    """The engine of every way the server starts (python -m server, uvicorn's factory, a Ray Serve
    replica), from its settings (server/settings.py): the model (a catalog name, a config file or a
    bundle folder) loaded, with its default voice (None: the model's), its slots, its API key and
    guests' share, its connections and its voices folder; with a --loudness, the default voice's
    loudness measured. A PocketTTSError when the model or the voice cannot load."""
    folder = voice_folder.checked(settings.voices_dir)  # before the model: an error at once
    access = Access(settings.api_key or None, settings.guest_slots)
    model = TTSModel.load(settings.model, adapter=None if settings.adapter is None else str(settings.adapter))
    if settings.pronunciations is not None:
        model.pronounce(str(settings.pronunciations))
    engine = ServerEngine(
        model, settings.voice, settings.max_concurrent, recordings, access, settings.max_connections, folder
    )
    engine.loudness = settings.loudness
    if settings.loudness is not None:
        model.voice_loudness(engine.voices.voice(None))  # measured now: the first request does not wait for it
    return engine


class ServerEngine:
    def __init__(
        self,
        model: TTSModel,
        default_voice: Optional[str],
        max_concurrent: int,
        recordings: Optional[Recordings] = None,
        access: Optional[Access] = None,
        max_connections: int = MAX_CONNECTIONS,
        voices_dir: Optional[Path] = None,
    ):
        """`default_voice` is loaded now (server/engine_voices.py); `recordings` and `voices_dir`:
        the voices' too."""
        self.model = model
        self.hosted = HostedModel(model)
        self.access = access if access is not None else Access()
        self.connections = ConnectionPool(max_connections)
        self.voices = EngineVoices(model, default_voice, recordings, voices_dir)
        self.loudness: Optional[float] = None  # LUFS every request is brought to unless it asks otherwise
        self.generations = Generations(model, max_concurrent, self.access.guest_share(max_concurrent))

    # What a session asks (server/session.py Engine)

    @property
    def sample_rate(self) -> int:
        return self.hosted.sample_rate

    def admit(self, caller: Caller = KEY_HOLDER) -> Slot:
        return self.generations.admit(caller)

    def text_stream(
        self,
        voice: Optional[str],
        options: GenerationOptions,
        seconds: float,
        caller: Caller = KEY_HOLDER,
        ssml: bool = False,
        words: bool = False,
    ) -> TextStream:
        """A session's text (SSML if `ssml`, its words timed if `words`): its voice (one `caller`
        may use, prepared now: blocking, call it in a worker thread), its options, its noise
        generator and its budget of `seconds` of audio; the server's loudness (--loudness) where the
        request asks for none."""
        voice_state = self.voices.voice(voice, caller)
        if options.loudness is None and self.loudness is not None:
            options = dataclasses.replace(options, loudness=self.loudness)
        return self.model.text_stream(voice_state, options, max_seconds=seconds, ssml=ssml, words=words)

    def open_stream(self, relay: Relay, release: Callable[[], None]) -> Stream:
        return self.generations.open_stream(relay, release)

    def wake(self) -> None:
        self.generations.wake()

    # Its life

    @property
    def active(self) -> int:
        """Requests in flight (each holds a slot)."""
        return self.generations.active

    @property
    def shutting_down(self) -> bool:
        return self.generations.shutting_down

    def close(self) -> None:
        """Shut down: from now on every front's request is refused `shutting_down`, and the
        scheduler's threads stop (generations still running end with the same refusal)."""
        self.generations.close()
