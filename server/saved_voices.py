"""Uploaded voices kept across restarts (with --voices-dir): each upload's voice state, not only its
recording, in VOICES_DIR/.uploads/ as ID.safetensors (the official voice-state format), and a record
of them there (voices.json: each id's name as uploaded, its owner, and the digest of its file),
read back when the server starts; DELETE /v1/audio/voices/{id} removes one.

Every file goes through core/files.py: nothing is written through a link, and nothing is replaced
or removed but a regular file whose digest the record holds (a file put there by someone else, or
changed since, is left as it is and not offered). The record is the product's own file, replaced
only where it is what this server last wrote. A `.uploads` that is a link, or not a folder, is
refused at start. Everything here touches the file system: call it off the event loop.
"""

from __future__ import annotations

import json
import os
import re
import stat
import threading
import time
from pathlib import Path
from typing import Dict, NamedTuple, Optional

from core import PocketTTSError, VoiceState
from core.files import digest, is_own, read_regular, remove_own, write_own
from core.portable.network import transformer
from core.portable.voice_registry import RECORDING
from core.portable.voices import state as voice_state
from core.portable.weights import safetensors_file

FOLDER = ".uploads"
RECORD = "voices.json"
MAX_RECORD = 4 * 1024 * 1024
# A voice state of english (a 5 s prompt) is ~4 MB; of a 30 s prompt, ~25 MB.
MAX_STATE = 64 * 1024 * 1024
# Voices kept at most, so that uploads cannot fill the disk (english: 1 GB for 5 s prompts); an
# upload beyond them is kept in memory only, until one is deleted.
MAX_SAVED = 250
_ID = re.compile(r"^" + re.escape(RECORDING) + r"[0-9a-f]{24}$")


class Saved(NamedTuple):
    name: str  # the uploaded file's name
    owner: str  # who uploaded it (the key holder: guests cannot upload)
    digest: str  # of its file


class SavedVoices:
    def __init__(self, voices_dir: Optional[Path], spec: transformer.TransformerSpec):
        """The uploads kept in `voices_dir` (none without one), for a model of `spec`."""
        self.spec = spec
        self.folder = None if voices_dir is None else Path(voices_dir) / FOLDER
        self._lock = threading.Lock()
        self._record_digest: Optional[str] = None
        self.voices: Dict[str, Saved] = {}
        if self.folder is not None:
            self._open()

    def _open(self) -> None:
        assert self.folder is not None
        try:
            found = os.lstat(self.folder)
        except FileNotFoundError:
            os.mkdir(self.folder, 0o700)
            return
        if not stat.S_ISDIR(found.st_mode):
            raise PocketTTSError(f"{self.folder} is not a folder (a link or a file there is not followed)")
        data = read_regular(str(self.folder / RECORD), MAX_RECORD)
        if data is None:
            return
        self._record_digest = digest(data)
        try:
            entries = json.loads(data.decode("utf-8"))["voices"]
        except (ValueError, KeyError, TypeError):
            raise PocketTTSError(f"{self.folder / RECORD} is not a record of saved voices") from None
        for key, entry in entries.items():
            if _ID.match(key) and is_own(self._path(key), entry.get("digest")):
                self.voices[key] = Saved(str(entry.get("name", key)), str(entry.get("owner", "")), entry["digest"])

    def _path(self, key: str) -> str:
        assert self.folder is not None and _ID.match(key)
        return str(self.folder / (key[len(RECORDING) :] + ".safetensors"))

    @property
    def keeps(self) -> bool:
        return self.folder is not None

    def names(self) -> Dict[str, str]:
        """The saved voices' ids and their names as uploaded."""
        with self._lock:
            return {key: saved.name for key, saved in self.voices.items()}

    def save(self, key: str, state: VoiceState, name: str, owner: str) -> bool:
        """Keep the voice `key` (an upload's id): its state's file, then the record. Whether it is
        kept: not where something else is at its file's place (it is left there, the voice kept in
        memory only)."""
        if self.folder is None:
            return False
        with self._lock:
            if key in self.voices:
                return True
            if len(self.voices) >= MAX_SAVED:
                return False
            data = safetensors_file.dumps(voice_state.to_tensors(state))
            saved = Saved(os.path.basename(name)[:200] or key, owner, digest(data))
            try:
                write_own(self._path(key), data, None)
            except (PocketTTSError, OSError):
                return False
            self.voices[key] = saved
            try:
                self._write_record()
            except (PocketTTSError, OSError):  # the record is not ours to replace: nothing is kept
                del self.voices[key]
                remove_own(self._path(key), saved.digest)
                return False
            return True

    def state(self, key: str) -> Optional[VoiceState]:
        """The saved voice `key`, read from its file (None where it is not saved, or its file changed)."""
        with self._lock:
            saved = self.voices.get(key)
        if saved is None:
            return None
        data = read_regular(self._path(key), MAX_STATE)
        if data is None or digest(data) != saved.digest:
            return None
        tensors, _ = safetensors_file.loads(data, self._path(key))
        return voice_state.from_tensors(tensors, self.spec, saved.name)

    def delete(self, key: str) -> bool:
        """Remove the saved voice `key`: its file (where it is still the one written) and its entry.
        Whether it was saved."""
        with self._lock:
            saved = self.voices.pop(key, None)
            if saved is None:
                return False
            remove_own(self._path(key), saved.digest)
            try:
                self._write_record()
            except (PocketTTSError, OSError):  # the record was replaced by someone: left as it is
                pass
            return True

    def _write_record(self) -> None:
        assert self.folder is not None
        entries = {key: {"name": s.name, "owner": s.owner, "digest": s.digest} for key, s in self.voices.items()}
        data = json.dumps({"voices": entries, "written_at": int(time.time())}, indent=1).encode("utf-8")
        write_own(str(self.folder / RECORD), data, self._record_digest)
        self._record_digest = digest(data)
