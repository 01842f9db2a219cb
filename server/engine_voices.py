"""The voices of the engine, for every front: the model's predefined voices, OpenAI's names for
them, the voices folder's recordings (server/voice_folder.py) and uploads, each prepared once
(core.portable.voice_registry.VoiceRegistry behind a lock: request threads share it), and who may
use which (a guest: no upload but the voices folder's).

Everything here may block (cloning, a download, the file system): call it in a worker thread,
never on the event loop. A voice is prepared by one thread at a time (the others wait for its
result), and a predefined voice that could not be prepared (no network) is not tried again for
FAILURE_SECONDS.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Protocol, Set, Tuple

from core import AudioError, PocketTTSError, TTSModel, VoiceError, VoiceState
from core.portable.audio import pcm as audio
from core.portable.voice_registry import RECORDING, VoiceRegistry
from core.portable.weights import catalog
from server.access import KEY_HOLDER, Caller
from server.hosting import public_name
from server.saved_voices import SavedVoices
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


class Voice(NamedTuple):
    """A voice a request may name, as every front lists it: `id` is what to send. Kinds: "default"
    (`voice` says which it is), "predefined" (the model's), "alias" (an OpenAI name: `voice` says
    which of ours), "folder" (a recording of the voices folder), "uploaded" (an upload still kept).
    `language`: the one it was recorded in, where known."""

    id: str
    kind: str
    voice: Optional[str]
    language: Optional[str]


class EngineVoices:
    def __init__(
        self,
        model: TTSModel,
        default_voice: Optional[str],
        recordings: Optional[Recordings] = None,
        voices_dir: Optional[Path] = None,
    ):
        """The default voice is loaded now: one that cannot load fails at startup, not on the first
        request. `recordings`: where uploads go for the other servers behind the same address, and
        where this one finds the recording of a voice id that another server cloned. `voices_dir`:
        recordings offered by name on every front (server/voice_folder.py), guests included."""
        self.model = model
        self.recordings = recordings
        self._lock = threading.Lock()
        self._pending: Dict[str, concurrent.futures.Future] = {}
        self._failures: Dict[str, Tuple[BaseException, float]] = {}
        aliases = {name: mapped if mapped in model.voices else "default" for name, mapped in OPENAI_VOICES.items()}
        self.registry = VoiceRegistry(model, default_voice, aliases)
        if self.registry.default is None:  # every front's request may name no voice
            raise VoiceError(f"{model.name} has no voice of its own: give the server one (--voice NAME_OR_FILE)")
        # Uploads kept across restarts (with a voices folder): back as uploads of this server.
        self.saved = SavedVoices(voices_dir, model.flow_spec.transformer)
        self._uploads: Dict[str, str] = dict(self.saved.names())  # ids of the uploads here -> their names
        self._open_to_guests: Set[str] = set()  # ids of the uploads guests may use (the voices folder's)
        self.folder = VoiceFolder(voices_dir)
        self._cloned: Dict[Tuple[str, int, int], str] = {}  # a folder's recording (path, size, mtime) -> its id

    @property
    def default_name(self) -> str:
        """The default voice as clients see it: a predefined name, or a file's own name."""
        return public_name(str(self.registry.default_name))

    def names(self) -> List[str]:
        """The model's predefined voices."""
        return self.registry.names()

    def is_predefined(self, name: str) -> bool:
        return name in self.model.voices

    def openai(self) -> Dict[str, str]:
        """Each OpenAI voice name and the voice it stands for here (a predefined name, or "default")."""
        return dict(self.registry.aliases)

    def uploaded(self, caller: Caller = KEY_HOLDER) -> List[str]:
        """Ids of the recordings uploaded here that are still kept and `caller` may use, oldest first."""
        with self._lock:
            self._forget_dropped_uploads()
            return [key for key in self._uploads if self._may_use(key, caller)]

    def in_folder(self) -> List[str]:
        """The names of the voices folder's recordings."""
        return list(self.folder.recordings())

    def listed(self, caller: Caller = KEY_HOLDER) -> List[Voice]:
        """Every voice `caller` may name, the default first, on every front."""
        catalog_model = catalog.is_model(self.model.name)

        def language(name: Optional[str]) -> Optional[str]:
            return catalog.voice_language(name) if catalog_model and name in self.model.voices else None

        listed = [Voice("default", "default", self.default_name, language(str(self.registry.default_name)))]
        listed += [Voice(name, "predefined", None, language(name)) for name in self.names()]
        listed += [Voice(name, "alias", voice, language(voice)) for name, voice in self.openai().items()]
        listed += [Voice(name, "folder", None, None) for name in self.in_folder()]
        with self._lock:
            names = dict(self._uploads)
        listed += [Voice(key, "uploaded", names.get(key), None) for key in self.uploaded(caller)]
        return listed

    def voice(self, name: Optional[str], caller: Caller = KEY_HOLDER) -> VoiceState:
        """ "default"/None, a predefined voice, an OpenAI voice name, a recording of the voices
        folder (cloned the first time), or an uploaded voice's id (one uploaded to another server is
        cloned here from `recordings`) that `caller` may use: to a guest, an upload not open to it is
        as unknown as any other name."""
        with self._lock:
            try:
                key: Optional[str] = self.registry.key(name)
            except VoiceError:
                key = None
        if key is None:
            key = self._folder_voice(str(name))
        with self._lock:
            if not self._may_use(key, caller):
                raise self._unknown(key)
            found = self.registry.find(key)
        return found if found is not None else self._prepared(key)

    def upload(self, data: bytes, filename: str = "upload", open_to_guests: bool = False) -> str:
        """Clone an uploaded recording (any format soundfile reads; only its first 30 s are decoded);
        returns its voice id (the hash of its samples: the same recording is cloned once), and keeps
        the recording in `recordings`. A recording that cannot be cloned is not kept. Guests may use
        it if `open_to_guests` (a recording of the voices folder)."""
        key = self._keep_recording(data, f"the uploaded voice {filename!r}")
        try:
            state = self._prepared(key)
        except BaseException:
            with self._lock:
                if key not in self._uploads:
                    self.registry.drop_recording(key)
            raise
        if self.recordings is not None:
            self.recordings[key] = data
        if not open_to_guests:  # saved before it is offered: a deletion never races the save
            self.saved.save(key, state, filename, KEY_HOLDER.name)
        with self._lock:
            self._uploads[key] = self._uploads.get(key) or filename
            if open_to_guests:
                self._open_to_guests.add(key)
            self._forget_dropped_uploads()
        return key

    def delete(self, key: str, caller: Caller = KEY_HOLDER) -> None:
        """Forget the uploaded voice `key`, and its saved file: only an upload a key holder made (to
        a guest, as to anyone, any other name is unknown; a recording of the voices folder is the
        operator's, removed from there)."""
        with self._lock:
            self._forget_dropped_uploads()
            if key in self._open_to_guests:
                raise VoiceError(
                    f"{self._uploads.get(key, key)!r} is a recording of the voices folder: remove its file there"
                )
            if not caller.trusted or key not in self._uploads:
                raise self._unknown(key)
            del self._uploads[key]
            self.registry.drop_recording(key)
        self.saved.delete(key)

    def _may_use(self, key: str, caller: Caller) -> bool:
        """Whether `caller` may use the voice `key`: a guest, no upload but the voices folder's."""
        return caller.trusted or not key.startswith(RECORDING) or key in self._open_to_guests

    def _forget_dropped_uploads(self) -> None:
        """Drop the ids whose recording the registry no longer keeps (a saved voice stays)."""
        for key in list(self._uploads):
            if not self.registry.has_recording(key) and key not in self.saved.voices:
                del self._uploads[key]
                self._open_to_guests.discard(key)

    def _unknown(self, name: str) -> VoiceError:
        return self.registry.unknown(name, self.in_folder())

    def _folder_voice(self, name: str) -> str:
        """The id of the voices folder's recording `name`, cloned the first time (and again when its
        file changes); a VoiceError naming the voices there are when there is none."""
        path = self.folder.recordings().get(name)
        if path is None:
            raise self._unknown(name)
        try:
            stat = path.stat()
            key = (str(path), stat.st_size, int(stat.st_mtime))
            with self._lock:
                known = self._cloned.get(key)
            if known is not None and known in self.uploaded():
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

    def _keep_recording(self, data: bytes, where: str) -> str:
        """Decode a recording's bytes (an upload here, or another server's from `recordings`: the one
        place uploaded audio is decoded) and keep what the registry keeps of it; returns its id."""
        if not data:
            raise VoiceError(f"{where} is empty")
        samples, rate = audio.read(data, where)
        key, kept = self.registry.recording(samples, rate)
        with self._lock:
            self.registry.add_recording(key, kept)
        return key

    def _prepared(self, key: str) -> VoiceState:
        """The voice of `key`, prepared by one thread (the others wait for its result)."""
        with self._lock:
            found = self.registry.find(key)
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
        saved = self.saved.state(key)
        if saved is not None:
            with self._lock:
                return self.registry.keep(key, saved)
        try:
            with self._lock:
                recipe = self.registry.recipe(key)
        except VoiceError:
            shared = self.recordings.get(key) if self.recordings is not None and key.startswith(RECORDING) else None
            if shared is None:
                raise
            self._keep_recording(shared, "the uploaded voice")
            with self._lock:
                recipe = self.registry.recipe(key)
        state = recipe()
        with self._lock:
            return self.registry.keep(key, state)
