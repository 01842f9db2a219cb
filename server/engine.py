"""The server's generation engine: its models, by job. The fronts reach it through sessions
(server/session.py), and its parts for what else they ask:

- `models` (server/served_models.py): every model it serves (its languages), the default first,
  the others loaded on first use within a memory budget;
- `hosted` (server/hosting.py): the default model as clients see it (its name, rate, language,
  listing);
- `voices` (server/engine_voices.py): every voice a request of the default model may name,
  prepared once (another model's are its own: `models`);
- `generations` (server/generations.py): the slots and the scheduler that runs every generation,
  and the shutdown that refuses what comes after;
- `access` (server/access.py): who may ask for what; `connections` (server/pool.py): the process's
  one pool of connections.

What a session asks of it (server/session.py Engine) is here: a slot, its text with its voice, a
scheduler stream and its wake-up. Its health, as GET /health reports it: server/health.py.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from pathlib import Path
from typing import Callable, Dict, Mapping, Optional, Sequence, Tuple

from core import PocketTTSError, TTSModel, threads
from core.portable.synthesis.options import GenerationOptions
from core.portable.synthesis.text_stream import TextStream
from core.portable.text import normalize
from server import errors, voice_folder
from server.access import KEY_HOLDER, Access, Caller
from server.engine_voices import EngineVoices, Recordings
from server.errors import ServiceError
from server.generations import Generations
from server.hosting import HostedModel, public_name
from server.pool import ConnectionPool
from server.relay import Relay
from server.scheduler import Stream
from server.served_models import Other, Served, ServedModels
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

    def pronouncing(loaded: TTSModel) -> TTSModel:
        if settings.pronunciations is not None:
            loaded.pronounce(str(settings.pronunciations))
        return loaded

    engine = ServerEngine(
        pronouncing(model),
        settings.voice,
        settings.max_concurrent,
        recordings,
        access,
        settings.max_connections,
        folder,
        others=settings.also_models,
        load=lambda source: pronouncing(TTSModel.load(source)),
        memory_budget=None if settings.memory_budget is None else settings.memory_budget * 2**20,
        adapters=[tuple(pair.split("=", 1)) for pair in settings.also_adapters],
    )
    engine.loudness = settings.loudness
    with threads.one_blas_thread():  # as a request's work runs (ServerEngine's docstring)
        if settings.loudness is not None:
            model.voice_loudness(engine.voices.voice(None))  # measured now: the first request does not wait for it
        if settings.preload:
            engine.models.preload()
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
        others: Sequence[str] = (),
        load: Callable[[str], TTSModel] = TTSModel.load,
        memory_budget: Optional[int] = None,
        adapters: Sequence[Tuple[str, str]] = (),
    ):
        """`default_voice` is loaded now (server/engine_voices.py); `recordings` and `voices_dir`:
        the voices' too. `others`: more models to serve (what `load` loads each from), and
        `adapters` (name, path): LoRA fine-tunes of the model served as models of those names,
        each sharing the model's weights, checked now; all within `memory_budget` bytes
        (server/served_models.py).

        What is computed here (the voices' states, the adapters' checks) runs on one BLAS thread,
        as a request's work does (core/threads.py's `serving`): the rounding of a BLAS product
        depends on its thread count on some processors (OpenBLAS's Zen kernels), and the default
        voice encoded from its file at start must be the one a model loaded on a first request
        encodes, sample for sample."""
        with threads.one_blas_thread():
            self.model = model
            self.hosted = HostedModel(model)
            self.access = access if access is not None else Access()
            self.connections = ConnectionPool(max_connections)
            self.voices = EngineVoices(model, default_voice, recordings, voices_dir)
            self._default_voice = default_voice
            served: Dict[str, Other] = {}
            for source in others:
                served[public_name(source)] = Other(
                    normalize.language_of(public_name(source)), partial(self._served, load, source)
                )
            language = str(self.hosted.description["language"])
            for name, path in adapters:
                if name in served or name == self.hosted.name:
                    raise PocketTTSError(f"--also-adapter {name}: a model of this server has that name already")
                served[name] = Other(language, partial(self._served, model.adapted, path))
            self.models = ServedModels(Served(self.hosted, self.voices), served, memory_budget)
            for name, _ in adapters:  # an adapter costs its pairs alone: a bad one fails at start
                try:
                    self.models.get(name)
                except ServiceError as e:
                    raise PocketTTSError(e.message) from None
            self.loudness: Optional[float] = None  # LUFS every request is brought to unless it asks otherwise
            self.generations = Generations(max_concurrent, self.access.guest_share(max_concurrent))

    def _served(self, load: Callable[[str], TTSModel], source: str) -> Served:
        """Another model, `load(source)`, with its voices: the server's default voice where that
        model can speak with it (a recording, a voice it has), else its own."""
        model = load(source)
        try:
            voices = EngineVoices(model, self._default_voice)
        except PocketTTSError:
            voices = EngineVoices(model, None)
        return Served(HostedModel(model), voices)

    # What a session asks (server/session.py Engine)

    @property
    def sample_rate(self) -> int:
        return self.hosted.sample_rate

    def pick_model(self, selector: Optional[str]) -> str:
        """The served model's name `selector` picks (an unknown_model ServiceError for none)."""
        return self.models.pick(selector)

    def model_speaking(self, language: Optional[str], kind: errors.Kind = errors.UNSUPPORTED_VALUE) -> Optional[str]:
        """The served model that speaks `language` (a tag: "fr", "fr-FR", "french"; None: the
        default), refused as `kind` where none does."""
        if not language:
            return None
        speaking = self.models.speaking(language)
        if speaking is None:
            spoken = ", ".join(self.models.language_codes())
            raise ServiceError(kind, f"language {language[:40]!r}: this server speaks {spoken}", "language")
        return speaking

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
        model: Optional[str] = None,
        pronunciations: Optional[Mapping[str, str]] = None,
    ) -> TextStream:
        """A session's text (SSML if `ssml`, its words timed if `words`) for the served model
        `model` picks (a name or a language; None: the default), loaded now if it is not: its voice
        (one `caller` may use, prepared now: blocking, call it in a worker thread), its options,
        its noise generator and its budget of `seconds` of audio; the server's loudness
        (--loudness) where the request asks for none; the request's `pronunciations` over the
        model's."""
        served = self.models.get(model)
        voice_state = served.voices.voice(voice, caller)
        if options.loudness is None and self.loudness is not None:
            options = dataclasses.replace(options, loudness=self.loudness)
        return served.model.text_stream(
            voice_state, options, max_seconds=seconds, ssml=ssml, words=words, pronunciations=pronunciations
        )

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
