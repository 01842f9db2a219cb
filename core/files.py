"""Writing the command line's output files: never a half-written file, whatever happens."""

from __future__ import annotations

import os


def write_atomically(path: str, data: bytes) -> None:
    """Write to a temporary name beside `path`, then rename it: an error or Ctrl-C leaves the old
    file (or none), never part of the new one."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
