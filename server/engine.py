"""The server's generation engine: one loaded model, the voices it has prepared, its slots
(server/slots.py) and the scheduler that runs every generation (server/scheduler.py: all running
streams step together). The fronts reach it through sessions (server/session.py) and its methods,
never its parts.

Everything slow runs in worker threads, never on the event loop, and outside the engine's lock:
text preparation, decoding and cloning an upload, preparing or downloading a voice. A voice is
prepared by one thread at a time (the others wait for its result), and a predefined voice that
could not be prepared (no network) is not tried again for a while.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple, Optional, Protocol, Set, Tuple

from core import AudioError, PocketTTSError, TTSModel, VoiceError, VoiceState
from core.portable.audio import pcm as audio
from core.portable.synthesis.options import GenerationOptions
from core.portable.synthesis.text_stream import TextStream
from core.portable.text import normalize
from core.portable.voice_registry import RECORDING, VoiceRegistry
from core.portable.weights import catalog, params
from server import errors, voice_folder
from server.access import KEY_HOLDER, Access, Caller
from server.pool import ConnectionPool
from server.relay import Relay
from server.scheduler import Scheduler, Stream
from server.settings import MAX_CONNECTIONS, Settings
from server.slots import Busy, Slot, Slots
from server.voice_folder import MAX_RECORDING, VoiceFolder

# How long a predefined voice that could not be prepared (a failed download) is not tried again.
FAILURE_SECONDS = 30.0
# OpenAI's voice names, each mapped to a predefined voice of the same register when the model has
# predefined voices (the catalog models), else to the server's default voice.
OPENAI_VOICES = {
    "alloy": "alba",
    "ash": "marius",
    "ballad": "javert",
    "coral": "cosette",
    "echo": "jean",
    "fable": "fantine",
    "onyx": "charles",
    "nova": "eponine",
    "sage": "azelma",
    "shimmer": "vera",
    "verse": "paul",
}


class Recordings(Protocol):
    """Uploaded recordings (the bytes as uploaded) by voice id, shared by the servers behind one
    address (server/cluster.py); a dict in one process."""

    def get(self, key: str) -> Optional[bytes]: ...

    def __setitem__(self, key: str, data: bytes) -> None: ...


def load_engine(settings: Settings, recordings: Optional[Recordings] = None) -> ServerEngine:
    """The engine of every way the server starts (python -m server, uvicorn's factory, a Ray Serve
    replica), from its settings (server/settings.py): the model (a catalog name, a config file or a
    bundle folder) loaded, with its default voice (None: the model's), its slots, its API key and
    guests' share, its connections and its voices folder. A PocketTTSError when the model or the
    voice cannot load."""
    folder = voice_folder.checked(settings.voices_dir)  # before the model: an error at once
    access = Access(settings.api_key or None, settings.guest_slots)
    model = TTSModel.load(settings.model)
    return ServerEngine(
        model, settings.voice, settings.max_concurrent, recordings, access, settings.max_connections, folder
    )


class Voice(NamedTuple):
    """A voice a request may name, as every front lists it: `id` is what to send. Kinds: "default"
    (`voice` says which it is), "predefined" (the model's), "alias" (an OpenAI name: `voice` says
    which of ours), "folder" (a recording of the voices folder), "uploaded" (an upload still kept).
    `language`: the one it was recorded in, where known."""

    id: str
    kind: str
    voice: Optional[str]
    language: Optional[str]


class ServerEngine:
    """The server's engine: one model, its voices (core.portable.voice_registry.VoiceRegistry
    behind a lock: request threads share it), the slots and the scheduler that runs the generations,
    who may ask for what (`access`: server/access.py) and the process's connections (`connections`:
    server/pool.py, `max_connections` of them). The app asks it through its methods, never its parts."""

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
        """The default voice is loaded now: one that cannot load fails at startup, not on the first
        request. `recordings`: where uploads go for the other servers behind the same address, and
        where this one finds the recording of a voice id that another server cloned. `voices_dir`:
        recordings offered by name on every front (server/voice_folder.py), guests included."""
        self.model = model
        self.max_concurrent = max_concurrent
        self.recordings = recordings
        self.access = access if access is not None else Access()
        self.connections = ConnectionPool(max_connections)
        self.slots = Slots(max_concurrent, self.access.guest_share(max_concurrent))
        self._lock = threading.Lock()
        self._pending: Dict[str, concurrent.futures.Future] = {}
        self._failures: Dict[str, Tuple[BaseException, float]] = {}
        aliases = {name: mapped if mapped in model.voices else "default" for name, mapped in OPENAI_VOICES.items()}
        self.voices = VoiceRegistry(model, default_voice, aliases)
        if self.voices.default is None:  # every front's request may name no voice
            raise VoiceError(f"{model.name} has no voice of its own: give the server one (--voice NAME_OR_FILE)")
        self._uploads: Dict[str, None] = {}  # ids of the recordings uploaded here, oldest first
        self._open_to_guests: Set[str] = set()  # ids of the uploads guests may use (the voices folder's)
        self.voices_folder = VoiceFolder(voices_dir)
        self._cloned: Dict[Tuple[str, int, int], str] = {}  # a folder's recording (path, size, mtime) -> its id
        self.scheduler = Scheduler(model)
        self.shutting_down = False
        self.loaded_at = int(time.time())
        # What a listing says of the model: the language it speaks, its parameters, whether it times words.
        self.description: Dict[str, object] = {
            "language": normalize.language_of(self.name),
            "parameters": params.parameter_count(model.config),
            "word_timestamps": self.word_timestamps,
        }

    # What the app asks

    @property
    def name(self) -> str:
        """The model's name as clients see it: a catalog name, or a config file's or bundle's own
        name (never the path it was loaded from)."""
        return public_name(self.model.name)

    @property
    def sample_rate(self) -> int:
        return self.model.sample_rate

    @property
    def word_timestamps(self) -> bool:
        """Whether the model times words (its config names timestamp heads)."""
        return self.model.config.timestamp_heads is not None

    @property
    def frame_size(self) -> int:
        """Samples per generated frame."""
        return self.model.frame_size

    @property
    def default_voice_name(self) -> str:
        """The default voice as clients see it: a predefined name, or a file's own name."""
        return public_name(str(self.voices.default_name))

    def voice_names(self) -> List[str]:
        """The model's predefined voices."""
        return self.voices.names()

    def is_predefined(self, name: str) -> bool:
        return name in self.model.voices

    def openai_voices(self) -> Dict[str, str]:
        """Each OpenAI voice name and the voice it stands for here (a predefined name, or "default")."""
        return dict(self.voices.aliases)

    def uploaded_voices(self, caller: Caller = KEY_HOLDER) -> List[str]:
        """Ids of the recordings uploaded here that are still kept and `caller` may use, oldest first."""
        with self._lock:
            self._forget_dropped_uploads()
            return [key for key in self._uploads if self._may_use(key, caller)]

    def _may_use(self, key: str, caller: Caller) -> bool:
        """Whether `caller` may use the voice `key`: a guest, no upload but the voices folder's."""
        return caller.trusted or not key.startswith(RECORDING) or key in self._open_to_guests

    def _forget_dropped_uploads(self) -> None:
        """Drop the ids whose recording the registry no longer keeps."""
        for key in list(self._uploads):
            if not self.voices.has_recording(key):
                del self._uploads[key]
                self._open_to_guests.discard(key)

    @property
    def active(self) -> int:
        """Requests in flight (each holds a slot)."""
        return self.slots.taken

    @property
    def running(self) -> bool:
        """Whether the scheduler's threads still run (a server's health)."""
        return self.scheduler.running

    def close(self) -> None:
        """Shut down: from now on every front's request is refused `shutting_down`, and the
        scheduler's threads stop (generations still running end with the same refusal)."""
        self.shutting_down = True
        self.scheduler.close()

    def admit(self, caller: Caller = KEY_HOLDER) -> Slot:
        """A slot for `caller`'s request, before any of its work; `busy` at once when all are
        taken, or a guest's when the guests hold their share; `shutting_down` once the engine is
        closing."""
        if self.shutting_down:
            raise errors.shutting_down()
        try:
            return self.slots.take(guest=not caller.trusted)
        except Busy:
            raise errors.busy() from None

    def wake(self) -> None:
        """A consumer of a relay took audio or left (server/relay.py)."""
        self.scheduler.wake()

    def open_stream(self, relay: Relay, release: Callable[[], None]) -> Stream:
        """A stream of generations said one after another into `relay` (server/scheduler.py)."""
        return self.scheduler.open(relay, release)

    # Voices (blocking: call them in worker threads)

    def voice(self, name: Optional[str], caller: Caller = KEY_HOLDER) -> VoiceState:
        """ "default"/None, a predefined voice, an OpenAI voice name, a recording of the voices
        folder (cloned the first time), or an uploaded voice's id (one uploaded to another server is
        cloned here from `recordings`) that `caller` may use: to a guest, an upload not open to it is
        as unknown as any other name."""
        with self._lock:
            try:
                key: Optional[str] = self.voices.key(name)
            except VoiceError:
                key = None
        if key is None:
            key = self._folder_voice(str(name))
        with self._lock:
            if not self._may_use(key, caller):
                raise self._unknown(key)
            found = self.voices.find(key)
        return found if found is not None else self._prepared(key)

    def voice_list(self, caller: Caller = KEY_HOLDER) -> List[Voice]:
        """Every voice `caller` may name, the default first, on every front (blocking: the engine's
        lock, the voices folder)."""
        catalog_model = catalog.is_model(self.model.name)

        def language(name: Optional[str]) -> Optional[str]:
            return catalog.voice_language(name) if catalog_model and name in self.model.voices else None

        default = self.default_voice_name
        listed = [Voice("default", "default", default, language(str(self.voices.default_name)))]
        listed += [Voice(name, "predefined", None, language(name)) for name in self.voice_names()]
        listed += [Voice(name, "alias", voice, language(voice)) for name, voice in self.openai_voices().items()]
        listed += [Voice(name, "folder", None, None) for name in self.folder_voices()]
        listed += [Voice(key, "uploaded", None, None) for key in self.uploaded_voices(caller)]
        return listed

    def folder_voices(self) -> List[str]:
        """The names of the voices folder's recordings (blocking: the file system)."""
        return list(self.voices_folder.recordings())

    @property
    def language_code(self) -> str:
        """The language the model speaks, as clients name it ("en", "fr", ...)."""
        return normalize.LANGUAGE_CODES[normalize.language_of(self.name)]

    def _unknown(self, name: str) -> VoiceError:
        return self.voices.unknown(name, self.folder_voices())

    def _folder_voice(self, name: str) -> str:
        """The id of the voices folder's recording `name`, cloned the first time (and again when its
        file changes); a VoiceError naming the voices there are when there is none."""
        path = self.voices_folder.recordings().get(name)
        if path is None:
            raise self._unknown(name)
        try:
            stat = path.stat()
            key = (str(path), stat.st_size, int(stat.st_mtime))
            with self._lock:
                known = self._cloned.get(key)
            if known is not None and known in self.uploaded_voices():
                return known
            if stat.st_size > MAX_RECORDING:
                raise AudioError(f"the recording {path.name} is larger than {MAX_RECORDING // 2**20} MB")
            data = path.read_bytes()
        except OSError:  # gone since the folder was read
            raise VoiceError(f"the recording {path.name} of the voices folder cannot be read") from None
        cloned = self.upload(data, path.name, open_to_guests=True)
        with self._lock:
            self._cloned[key] = cloned
        return cloned

    def upload(self, data: bytes, filename: str = "upload", open_to_guests: bool = False) -> str:
        """Clone an uploaded recording (any format soundfile reads; only its first 30 s are decoded);
        returns its voice id (the hash of its samples: the same recording is cloned once), and keeps
        the recording in `recordings`. A recording that cannot be cloned is not kept. Guests may use
        it if `open_to_guests` (a recording of the voices folder)."""
        key = self._keep_recording(data, f"the uploaded voice {filename!r}")
        try:
            self._prepared(key)
        except BaseException:
            with self._lock:
                if key not in self._uploads:
                    self.voices.drop_recording(key)
            raise
        if self.recordings is not None:
            self.recordings[key] = data
        with self._lock:
            self._uploads[key] = None
            if open_to_guests:
                self._open_to_guests.add(key)
            self._forget_dropped_uploads()
        return key

    def _keep_recording(self, data: bytes, where: str) -> str:
        """Decode a recording's bytes (an upload here, or another server's from `recordings`: the one
        place uploaded audio is decoded) and keep what the registry keeps of it; returns its id."""
        if not data:
            raise VoiceError(f"{where} is empty")
        samples, rate = audio.read(data, where)
        key, kept = self.voices.recording(samples, rate)
        with self._lock:
            self.voices.add_recording(key, kept)
        return key

    def _prepared(self, key: str) -> VoiceState:
        """The voice of `key`, prepared by one thread (the others wait for its result)."""
        with self._lock:
            found = self.voices.find(key)
            if found is not None:
                return found
            failure = self._failures.get(key)
            if failure is not None and failure[1] > time.monotonic():
                raise failure[0]
            future = self._pending.get(key)
            mine = future is None
            if mine:
                future = self._pending[key] = concurrent.futures.Future()
        if not mine:
            return future.result()
        try:
            state = self._prepare(key)
        except BaseException as error:
            with self._lock:
                del self._pending[key]
                if isinstance(error, PocketTTSError) and not key.startswith(RECORDING):
                    self._failures[key] = (error, time.monotonic() + FAILURE_SECONDS)
            future.set_exception(error)
            raise
        with self._lock:
            del self._pending[key]
        future.set_result(state)
        return state

    def _prepare(self, key: str) -> VoiceState:
        try:
            with self._lock:
                recipe = self.voices.recipe(key)
        except VoiceError:
            shared = self.recordings.get(key) if self.recordings is not None and key.startswith(RECORDING) else None
            if shared is None:
                raise
            self._keep_recording(shared, "the uploaded voice")
            with self._lock:
                recipe = self.voices.recipe(key)
        state = recipe()
        with self._lock:
            return self.voices.keep(key, state)

    # Sessions

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
        generator and its budget of `seconds` of audio."""
        voice_state = self.voice(voice, caller)
        return self.model.text_stream(voice_state, options, max_seconds=seconds, ssml=ssml, words=words)


def public_name(name: str) -> str:
    """A model's or voice's name without the folders it was loaded from (a file's own name)."""
    if os.sep in name or (os.altsep and os.altsep in name) or os.path.exists(name):
        stem = os.path.splitext(os.path.basename(os.path.normpath(name)))[0]
        if stem in ("config", "model") and os.path.dirname(os.path.normpath(name)):
            return os.path.basename(os.path.dirname(os.path.normpath(name)))
        return stem
    return name
