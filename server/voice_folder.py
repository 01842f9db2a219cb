"""The voices folder (`--voices-dir`): recordings a server offers by name (a file's name without its
extension) on every front, read anew each time (files may come and go), each cloned once."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Dict, Optional

from core import VoiceError

log = logging.getLogger("pocket_tts.server")

MAX_RECORDING = 20 * 1024 * 1024  # bytes of a recording the folder may hold (as an upload)
AUDIO_EXTENSIONS = (".wav", ".flac", ".ogg", ".mp3")


def checked(path: Optional[str]) -> Optional[Path]:
    """The voices folder of the command line, checked now (an error at startup, not per request)."""
    if path is None:
        return None
    found = Path(path).expanduser()
    if not found.is_dir():
        raise VoiceError(f"--voices-dir {path} is not a folder")
    if not os.access(found, os.R_OK | os.X_OK):
        raise VoiceError(f"--voices-dir {path} cannot be read")
    return found


class VoiceFolder:
    """The recordings in `path` (None: a server without a folder, which holds none)."""

    def __init__(self, path: Optional[Path] = None):
        self.path = path
        self._unreadable = False  # the folder could not be read last time (said once in the log)

    def recordings(self) -> Dict[str, Path]:
        """The folder's recordings by name (blocking: the file system); a folder that is gone or
        unreadable holds none, and the operator's log says so once."""
        if self.path is None:
            return {}
        found: Dict[str, Path] = {}
        try:
            for path in sorted(self.path.iterdir()):
                if path.suffix.lower() in AUDIO_EXTENSIONS and path.is_file():
                    found.setdefault(path.stem, path)
        except OSError as e:
            if not self._unreadable:
                log.warning("the voices folder %s cannot be read: %s", self.path, e.strerror or e)
            self._unreadable = True
            return {}
        self._unreadable = False
        return found
