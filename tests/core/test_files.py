"""The one writer (core/files.py), tried as a user's folder looks after a hostile process had its
way in it: planted links (to a file, to nothing), FIFOs that hang whoever opens them, a file of the
same name that is the user's. Nothing is opened, followed or replaced that the writer did not make,
but a path the user named."""

from __future__ import annotations

import json
import os
import stat

import pytest

from core import PocketTTSError
from core.files import RECORD, NewFolder, check_replaceable, digest, write_atomically, write_new, write_own


@pytest.fixture
def folder(tmp_path):
    """A folder with the user's file, a link to a file elsewhere, a dangling link and a FIFO."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.wav").write_bytes(b"the user's")
    (tmp_path / "elsewhere").write_bytes(b"elsewhere")
    (out / "link.wav").symlink_to(tmp_path / "elsewhere")
    (out / "dangling.wav").symlink_to(tmp_path / "created-through-the-link")
    os.mkfifo(out / "fifo.wav")
    return out


def untouched(out) -> None:
    assert (out / "mine.wav").read_bytes() == b"the user's"
    assert (out.parent / "elsewhere").read_bytes() == b"elsewhere" and os.path.islink(out / "link.wav")
    assert not (out.parent / "created-through-the-link").exists() and os.path.islink(out / "dangling.wav")
    assert stat.S_ISFIFO(os.lstat(out / "fifo.wav").st_mode)


def test_a_name_the_product_picks_is_always_a_new_file(folder) -> None:
    written = [write_new(str(folder), name, name.encode()) for name in ("mine.wav", "link.wav", "dangling.wav")]
    written += [write_new(str(folder), "fifo.wav", b"fifo"), write_new(str(folder), "mine.wav", b"again")]
    names = ["mine-2.wav", "link-2.wav", "dangling-2.wav", "fifo-2.wav", "mine-3.wav"]
    assert written == [str(folder / name) for name in names]
    assert (folder / "mine-3.wav").read_bytes() == b"again" and (folder / "fifo-2.wav").read_bytes() == b"fifo"
    untouched(folder)
    assert len(list(folder.iterdir())) == 4 + len(names)  # no temporary file left
    for bad in ("", "..", "a/b.wav"):
        with pytest.raises(PocketTTSError):
            write_new(str(folder), bad, b"x")


def test_a_file_of_its_own_naming_replaces_only_what_it_wrote(folder) -> None:
    write_own(str(folder / "line-1.wav"), b"first", None)
    write_own(str(folder / "line-1.wav"), b"second", digest(b"first"))
    assert (folder / "line-1.wav").read_bytes() == b"second"
    for name, made in (("mine.wav", None), ("mine.wav", digest(b"other")), ("link.wav", digest(b"elsewhere"))):
        with pytest.raises(PocketTTSError, match="not made by this job"):
            write_own(str(folder / name), b"new", made)
    with pytest.raises(PocketTTSError, match="not made by this job"):
        write_own(str(folder / "fifo.wav"), b"new", None)
    untouched(folder)
    assert len(list(folder.iterdir())) == 5


def test_a_path_the_user_named_is_replaced_never_written_through_a_link(folder) -> None:
    write_atomically(str(folder / "link.wav"), b"new")
    assert (folder / "link.wav").read_bytes() == b"new" and not os.path.islink(folder / "link.wav")
    assert (folder.parent / "elsewhere").read_bytes() == b"elsewhere"


def test_a_folder_is_replaced_only_while_it_holds_what_was_recorded(tmp_path) -> None:
    out = tmp_path / "bundle"
    with NewFolder(str(out)) as new:
        (tmp_path / "bundle.tmp").write_bytes(b"")  # beside it: not the folder's
        os.makedirs(os.path.join(new.path, "voices"))
        write_atomically(os.path.join(new.path, "voices", "a.safetensors"), b"voice")
        new.publish()
    record = json.loads((out / RECORD).read_text())
    assert record["files"] == {"voices/a.safetensors": digest(b"voice")}
    check_replaceable(str(out))  # unchanged: may be replaced
    (out / "voices" / "a.safetensors").write_bytes(b"edited by the user")
    with pytest.raises(PocketTTSError, match="voices/a.safetensors was changed"):
        NewFolder(str(out))
    (out / "voices" / "a.safetensors").write_bytes(b"voice")
    (out / "voices" / "b.txt").write_bytes(b"the user's")
    with pytest.raises(PocketTTSError, match="voices/b.txt was not written by it"):
        NewFolder(str(out))
    with pytest.raises(KeyboardInterrupt):
        with NewFolder(str(tmp_path / "new")) as new:
            raise KeyboardInterrupt
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle", "bundle.tmp"]  # nothing half-built left
    (tmp_path / "empty").mkdir()
    check_replaceable(str(tmp_path / "empty"))
    (tmp_path / "link").symlink_to(out)
    with pytest.raises(PocketTTSError, match="is not a folder"):
        check_replaceable(str(tmp_path / "link"))
