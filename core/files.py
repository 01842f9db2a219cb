"""Everything the product writes, written here: audio, word times and subtitles, voice states,
bundles, a batch job's files and manifest, an MCP tool's files, the built site. Three kinds of
target, three rules, so that no user's file is lost and nothing planted is followed:

- A path the user named (`-o out.wav`, `--words`, `export-voice PATH`): `write_atomically`. The
  whole file is written beside it, then renamed over it: an error or Ctrl-C leaves the old file
  (or none), never part of the new one; a link there is replaced, never written through; a FIFO or a
  character device the user named (`-o /dev/stdout`) is written to.
- A name the product picks (an MCP tool's `file`, in the folder the user gave): `write_new`. It
  never takes a name that is there already, of whatever kind: the next free one instead.
- A file of the product's own making that it may remake (a batch job's line, on a rerun):
  `write_own`. It replaces only the regular file whose digest it recorded when it wrote it.
- A folder the product makes whole (a bundle, a site): `NewFolder`. It is built beside its place
  and put there when whole; a folder already there is replaced only when it is empty, or when it
  holds exactly the files this product recorded writing there (RECORD), unchanged.

Nothing here opens what it did not create, but for the user's own FIFO or device: a temporary
file is created exclusively under a name nobody can guess (O_EXCL, O_NOFOLLOW), and put in place
by a rename or a link, which act on the name, never on what a link there points to.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import stat
import tempfile
from contextlib import contextmanager
from typing import BinaryIO, Dict, Iterator, Optional

import numpy as np

from .portable.errors import PocketTTSError, WeightsError
from .portable.weights import safetensors_file


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# Read once: reading it means setting it, which no thread should see half-way.
_UMASK = _umask()
# Opening a name never follows it where the system can refuse a link (every POSIX system).
NO_LINK = getattr(os, "O_NOFOLLOW", 0)
# The record of a folder the product made: its files and their digests (NewFolder).
RECORD = ".pocket-tts-numpy.json"
MAX_RECORD = 16 * 1024 * 1024
# Fresh names tried for a name that is taken, before giving up.
MAX_FRESH = 1000


def digest(data: bytes) -> str:
    """The digest a file's bytes are recorded by (SHA-256, hex)."""
    return hashlib.sha256(data).hexdigest()


def write_atomically(path: str, data: bytes) -> None:
    """`data` to `path`, a path the user named: written to a new temporary file beside it, then
    renamed over it (a regular file or a link there is replaced, what a link points to is never
    touched). Where `path` is a FIFO or a character device, `data` is written to it (a FIFO waits
    for its reader); anything else that is not a regular file (a folder, a socket, a block device)
    is a PocketTTSError, and left as it is."""
    if writes_through(path):
        with open(path, "wb") as f:
            f.write(data)
        return
    tmp = _temporary(path, data)
    try:
        os.replace(tmp, path)
    except BaseException:
        _remove(tmp)
        raise


def write_new(folder: str, name: str, data: bytes) -> str:
    """`data` as a new file named `name` in `folder` (a name the product picked, never a path): where
    anything is there by that name (a file, a link, a FIFO, a folder), the first free name of
    NAME-2.EXT, NAME-3.EXT, ...; nothing there is opened or replaced. Returns the path written."""
    if not name or os.path.basename(name) != name or name in (".", ".."):
        raise PocketTTSError(f"{name!r} is not a file name")
    tmp = _temporary(os.path.join(folder, name), data)
    stem, extension = os.path.splitext(name)
    try:
        for number in range(1, MAX_FRESH + 1):
            path = os.path.join(folder, name if number == 1 else f"{stem}-{number}{extension}")
            try:
                os.link(tmp, path, follow_symlinks=False)  # fails where the name is taken, whatever it is
            except FileExistsError:
                continue
            except OSError as e:
                if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                    raise PocketTTSError(f"cannot write {path}: {e.strerror or e}") from None
                if not _create_exclusively(path, data):  # a file system without hard links
                    continue
            return path
    finally:
        _remove(tmp)
    raise PocketTTSError(f"cannot write {name} in {folder}: {MAX_FRESH} names like it are taken")


def write_own(path: str, data: bytes, made: Optional[str]) -> None:
    """`data` to `path`, a file of the product's own naming that it may have written before: where
    something is there, it is replaced only if it is a regular file whose digest is `made` (what was
    recorded when it was written; None: nothing was); anything else is a PocketTTSError, and left
    as it is."""
    tmp = _temporary(path, data)
    try:
        if os.path.lexists(path) and not is_own(path, made):
            raise PocketTTSError(f"{path} is there and was not made by this job: not replaced")
        os.replace(tmp, path)
    except BaseException:
        _remove(tmp)
        raise


def is_own(path: str, made: Optional[str]) -> bool:
    """Whether `path` is a regular file whose digest is `made`, one the product recorded writing (a
    link or a FIFO there is not opened; None: nothing was recorded)."""
    return made is not None and _regular_digest(path) == made


def remove_own(path: str, made: Optional[str]) -> bool:
    """Remove `path` where it is a file the product wrote (`is_own`); anything else is left as it
    is. Whether it was removed."""
    if not is_own(path, made):
        return False
    os.unlink(path)
    return True


def writes_through(path: str) -> bool:
    """Whether `path` (a path the user named) is written to in place (a FIFO, a character device)
    rather than replaced (a regular file, a link, or nothing yet); a PocketTTSError for anything
    else, before any work is done."""
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
    check_folder(os.path.dirname(os.path.abspath(path)), f"cannot write {path}")


def check_folder(folder: str, what: str) -> None:
    """A PocketTTSError (`what`: the start of its message) where files cannot be made in `folder`."""
    if not os.path.isdir(folder):
        raise PocketTTSError(f"{what}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PocketTTSError(f"{what}: no permission to write in the folder {folder}")


def _temporary(path: str, data: bytes) -> str:
    """A new file holding `data` beside `path`, created exclusively (mkstemp: O_EXCL, O_NOFOLLOW),
    with the permissions a plain open() would give it; its name."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)[:64]}.", suffix=".tmp")
    except OSError as e:  # the temporary file's name would mean nothing to the user
        raise PocketTTSError(f"cannot write {path}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_UMASK)  # as a plain open() would have made it (mkstemp makes 0600)
    except BaseException:
        _remove(tmp)
        raise
    return tmp


def _create_exclusively(path: str, data: bytes) -> bool:
    """`data` as a new file at `path`, or False where the name is taken."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NO_LINK, 0o666)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return True


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _regular_digest(path: str) -> Optional[str]:
    data = read_regular(path)
    return None if data is None else digest(data)


@contextmanager
def appending(path: str) -> Iterator[BinaryIO]:
    """`path` opened to add to its end (made if it is not there): a link put in its place is
    replaced by a new file (what it points to is neither read nor written), and anything but a
    regular file is a PocketTTSError."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | NO_LINK
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise PocketTTSError(f"cannot write {path}: {e.strerror or e}") from None
        os.unlink(path)
        fd = os.open(path, flags | os.O_EXCL, 0o666)  # a link put back meanwhile: refused
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise PocketTTSError(f"{path} is not a regular file: not written")
    with os.fdopen(fd, "ab") as f:
        yield f


def read_regular(path: str, limit: Optional[int] = None) -> Optional[bytes]:
    """The bytes of the regular file at `path`, or None where there is none (nothing, a link, a FIFO,
    a device: none is opened to wait on, nor read), or where it holds more than `limit` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | NO_LINK)
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ELOOP, errno.ENXIO, errno.ENOTDIR):
            return None
        raise
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        data = f.read() if limit is None else f.read(limit + 1)
    return None if limit is not None and len(data) > limit else data


def save_tensors(path: str, tensors: Dict[str, np.ndarray], metadata: Optional[Dict[str, str]] = None) -> None:
    """A safetensors file at `path` (a path the user named, or one in a NewFolder), written
    atomically: a reader never sees a half-written file."""
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
    fd = os.open(folder, os.O_RDONLY | os.O_NONBLOCK)
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


# Folders made whole


def check_replaceable(folder: str) -> None:
    """A PocketTTSError where a NewFolder could not be put in place of `folder`: it is something
    other than a folder (a link to one included), or a folder that is not empty and is not one this
    product made, with exactly the files it recorded, unchanged."""
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(mode):
        raise PocketTTSError(f"{folder} exists and is not a folder: choose an empty or new folder")
    if not os.listdir(folder):
        return
    problem = _differences(folder)
    if problem is not None:
        raise PocketTTSError(
            f"{folder} is not a folder this tool made ({problem}): not replaced; choose an empty or new folder"
        )


def _differences(folder: str) -> Optional[str]:
    """What in `folder` differs from its RECORD (None: it holds what was recorded, unchanged)."""
    data = read_regular(os.path.join(folder, RECORD), MAX_RECORD)
    if data is None:
        return f"no {RECORD}"
    try:
        recorded = json.loads(data.decode("utf-8"))["files"]
        assert isinstance(recorded, dict)
    except (ValueError, KeyError, TypeError, AssertionError):
        return f"{RECORD} is not this tool's"
    found = _contents(folder)
    if isinstance(found, str):
        return found
    for name in sorted(set(found) | set(recorded)):
        if name not in recorded:
            return f"{name} was not written by it"
        if name not in found:
            return f"{name} is gone"
        if found[name] != recorded[name]:
            return f"{name} was changed"
    return None


def _contents(folder: str) -> object:
    """Every file under `folder` (but RECORD) by its path there, with its digest; or, where something
    in it is not a regular file or a folder (a link, a FIFO, ...), what."""
    files = {}
    for root, folders, names in os.walk(folder):
        for name in folders:
            if os.path.islink(os.path.join(root, name)):
                return f"{os.path.relpath(os.path.join(root, name), folder)} is a link"
        for name in names:
            path = os.path.join(root, name)
            relative = os.path.relpath(path, folder).replace(os.sep, "/")
            if relative == RECORD:
                continue
            data = read_regular(path)
            if data is None:
                return f"{relative} is not a regular file"
            files[relative] = digest(data)
    return files


class NewFolder:
    """A folder made whole beside `out`, then put in its place (`publish`): an error before that
    leaves `out` as it was and removes what was built. `out` is checked first (check_replaceable),
    before any work. Everything under `path` is this builder's own (a new private folder), so its
    files may be written there directly; `publish` records them (RECORD) and checks `out` again."""

    def __init__(self, out: str):
        self.out = os.path.abspath(out)
        check_replaceable(self.out)
        parent = os.path.dirname(self.out)
        os.makedirs(parent, exist_ok=True)
        self.path = tempfile.mkdtemp(prefix=f".{os.path.basename(self.out)}.", suffix=".building", dir=parent)
        os.chmod(self.path, 0o777 & ~_UMASK)  # it is meant to be read (served, shared): mkdtemp's is private

    def __enter__(self) -> NewFolder:
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        if os.path.isdir(self.path):  # not published: an error, or Ctrl-C
            shutil.rmtree(self.path, ignore_errors=True)

    def publish(self) -> None:
        """Record what was built and put it in place of `out` (replaced only if check_replaceable
        still allows it; the old folder is removed once the new one is in place)."""
        contents = _contents(self.path)
        if isinstance(contents, str):
            raise PocketTTSError(f"the new folder for {self.out} holds something that is not a file: {contents}")
        record = {"format": "pocket-tts-numpy-folder", "files": contents}
        with open(os.path.join(self.path, RECORD), "x") as f:
            json.dump(record, f, indent=0, sort_keys=True)
        os.chmod(os.path.join(self.path, RECORD), 0o666 & ~_UMASK)
        old = None
        if os.path.lexists(self.out):
            check_replaceable(self.out)
            old = tempfile.mkdtemp(
                prefix=f".{os.path.basename(self.out)}.", suffix=".old", dir=os.path.dirname(self.out)
            )
            os.rename(self.out, os.path.join(old, "folder"))
        os.rename(self.path, self.out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
