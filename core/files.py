"""Writing output files (audio, voice states, bundles' weights, a batch job's manifest): never a
half-written file, whatever happens, and never through a file or link someone else put in the way;
and never in place of what is not a file (a FIFO or a device such as /dev/null or /dev/stdout is
written to, not replaced)."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from contextlib import contextmanager
from typing import BinaryIO, Dict, Iterator, Optional

import numpy as np

from .portable import safetensors_file
from .portable.errors import PocketTTSError, WeightsError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# Read once: reading it means setting it, which no thread should see half-way.
_UMASK = _umask()


def write_atomically(path: str, data: bytes) -> None:
    """Write to a new temporary file beside `path` (created exclusively under a name nobody can
    guess, so nothing planted there is followed), then rename it over `path`: an error or Ctrl-C
    leaves the old file (or none), never part of the new one. Where `path` is a FIFO or a character
    device, `data` is written to it (a FIFO waits for its reader); anything else that is not a
    regular file (a folder, a socket, a block device) is a PocketTTSError, and left as it is."""
    if _write_through(path, data):
        return
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    except OSError as e:  # the temporary file's name would mean nothing to the user
        raise PocketTTSError(f"cannot write {path}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_UMASK)  # as a plain open() would have made it (mkstemp makes 0600)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def writes_through(path: str) -> bool:
    """Whether `path` is written to in place (a FIFO, a character device) rather than replaced (a
    regular file, or nothing yet); a PocketTTSError for anything else, before any work is done."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISREG(mode):
        return False
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        return True
    kind = "a folder" if stat.S_ISDIR(mode) else "a block device" if stat.S_ISBLK(mode) else "not a regular file"
    raise PocketTTSError(f"{path} is {kind}: not written (name a file, a FIFO or a character device)")


def check_writable(path: str) -> None:
    """A PocketTTSError now, before any work, where `path` could not be written: it is a folder
    (or another thing `writes_through` refuses), or its folder is not there or not writable."""
    if writes_through(path):
        if not os.access(path, os.W_OK):
            raise PocketTTSError(f"cannot write {path}: permission denied")
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise PocketTTSError(f"cannot write {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PocketTTSError(f"cannot write {path}: no permission to write in the folder {folder}")


def _write_through(path: str, data: bytes) -> bool:
    if not writes_through(path):
        return False
    with open(path, "wb") as f:
        f.write(data)
    return True


# Opening a name never follows it where the system can refuse a link (every POSIX system).
_NO_LINK = getattr(os, "O_NOFOLLOW", 0)


@contextmanager
def appending(path: str) -> Iterator[BinaryIO]:
    """`path` opened to add to its end (made if it is not there): a link put in its place is
    replaced by a new file (what it points to is neither read nor written, as `write_atomically`
    treats it), and anything but a regular file is a PocketTTSError."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NO_LINK
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
        os.unlink(path)
        fd = os.open(path, flags | os.O_EXCL, 0o666)  # a link put back meanwhile: refused
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise PocketTTSError(f"{path} is not a regular file: not written")
    with os.fdopen(fd, "ab") as f:
        yield f


def read_regular(path: str) -> Optional[bytes]:
    """The bytes of the regular file at `path`, or None where there is none (nothing, a link, a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _NO_LINK)
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ELOOP):
            return None
        raise
    with os.fdopen(fd, "rb") as f:
        return f.read() if stat.S_ISREG(os.fstat(f.fileno()).st_mode) else None


def save_tensors(path: str, tensors: Dict[str, np.ndarray], metadata: Optional[Dict[str, str]] = None) -> None:
    """Write a safetensors file atomically: a reader never sees a half-written file."""
    try:
        write_atomically(path, safetensors_file.dumps(tensors, metadata))
    except OSError as e:
        raise WeightsError(f"cannot write {path}: {e.strerror or e}") from None


@contextmanager
def only_writer(folder: str) -> Iterator[None]:
    """Hold a folder for one process's writes (a lock on the folder itself, released when the
    process ends however it ends): a second one gets a PocketTTSError at once."""
    try:
        import fcntl
    except ImportError:  # Windows: no flock; a second writer there is not detected
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise PocketTTSError(
                f"another process is writing to {folder}: wait for it to end, or choose another folder"
            ) from None
        yield
    finally:
        os.close(fd)
