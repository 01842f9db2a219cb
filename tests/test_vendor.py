"""Pyodide as the site vendors it (tools/pyodide.py): NumPy's package repacked without what the page
never imports, every file it keeps byte for byte the original's but its patched __init__,
Pyodide's own standard library read out of its LZ4-packed data, and its runtime script the
original's with the lazy linking of tools/pyodide_patches.py and nothing else (the browser runs
that load and use them: tests/test_e2e.py)."""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import List, Tuple

import pytest

from tools import pyodide
from tools.pyodide_patches import RUNTIME, RUNTIME_PATCHES, patched, patched_runtime

pytestmark = pytest.mark.slow


def test_numpy_is_trimmed_to_what_the_page_imports_and_keeps_the_rest_exact(tmp_path: Path) -> None:
    pyodide.vendor(tmp_path / "site")
    original = tmp_path / "original"
    original.mkdir()
    with tarfile.open(pyodide.tarball()) as archive:
        for name in ("numpy.js", "numpy.data", "pyodide.asm.js", "pyodide.asm.data"):
            (original / name).write_bytes(archive.extractfile(f"package/dist/{name}").read())
    before, after = pyodide.package_files(original, "numpy"), pyodide.package_files(tmp_path / "site", "numpy")
    assert (tmp_path / "site" / "numpy.js").read_text().startswith(pyodide.TRIMMED)
    kept = {name: data for name, data in patched(before).items() if not pyodide.NUMPY_UNUSED.search(name)}
    # One file patched: numpy.testing on first use (tools/pyodide_patches.py).
    init = "/lib/python3.8/site-packages/numpy/__init__.py"
    assert [name for name in kept if kept[name] != before[name]] == [init]
    assert b"from .testing import Tester\n" in before[init] and b"def __getattr__(attr):" in kept[init]
    compile(kept[init], "__init__.py", "exec")
    # Its libraries apart, each a file of its own, empty in the package.
    libraries = pyodide.libraries(tmp_path / "site")
    assert len(libraries) > 10 and "numpy.core._multiarray_umath.wasm" in libraries.values()
    for name, data in kept.items():
        if name.endswith(".so"):
            assert after[name] == b"" and (tmp_path / "site" / libraries[name]).read_bytes() == data
    assert after == {name: b"" if name.endswith(".so") else data for name, data in kept.items()}
    assert not any(name.endswith("_umath_tests.so") for name in after)
    assert len(before) - len(after) > 300 and "/lib/python3.8/site-packages/numpy/core/_multiarray_umath.so" in after
    assert not any("/tests/" in name or "/f2py/" in name for name in after)
    # Both packages' blocks stored as they are: nothing to decompress in the browser.
    for name in ("numpy", "pyodide.asm"):
        assert set(pyodide._numbers((tmp_path / "site" / f"{name}.js").read_text(), "successes")) == {0}
    assert pyodide.package_files(tmp_path / "site", "pyodide.asm") == pyodide.package_files(original, "pyodide.asm")
    # A second build keeps the trimmed package as it is.
    data = (tmp_path / "site" / "numpy.data").read_bytes()
    pyodide.vendor(tmp_path / "site")
    assert (tmp_path / "site" / "numpy.data").read_bytes() == data


def test_pyodides_own_files_are_read_out_of_its_packed_data(tmp_path: Path) -> None:
    pyodide.vendor(tmp_path)
    files = pyodide.packaged_files(tmp_path, "/lib/python3.8/")
    assert files["/lib/python3.8/os.py"].startswith(b'r"""OS routines for NT or Posix')
    assert "/lib/python3.8/site-packages/pyodide/__init__.py" in files
    compile(files["/lib/python3.8/asyncio/base_events.py"], "base_events.py", "exec")  # whole, not cut at a block
    assert sum(map(len, files.values())) > 5_000_000


def test_the_runtime_script_is_the_original_with_the_lazy_linking_alone(tmp_path: Path) -> None:
    pyodide.vendor(tmp_path / "site")
    original = tmp_path / "original"
    original.mkdir()
    with tarfile.open(pyodide.tarball()) as archive:
        for name in (RUNTIME, "pyodide.asm.data"):
            (original / name).write_bytes(archive.extractfile(f"package/dist/{name}").read())
    script = (original / RUNTIME).read_text()
    assert all(script.count(old) == 1 for old, _ in RUNTIME_PATCHES)
    (original / RUNTIME).write_text(patched_runtime(script))
    pyodide.repack(original, "pyodide.asm", pyodide.package_files(original, "pyodide.asm"))
    assert (tmp_path / "site" / RUNTIME).read_text() == (original / RUNTIME).read_text()
    with pytest.raises(SystemExit, match="is not the file"):
        patched_runtime(patched_runtime(script))


def _export_names(wasm: bytes) -> List[str]:
    """The names of a WebAssembly module's exports (its export section, id 7)."""

    def leb(position: int) -> Tuple[int, int]:
        value = shift = 0
        while True:
            byte = wasm[position]
            value |= (byte & 0x7F) << shift
            position, shift = position + 1, shift + 7
            if byte < 0x80:
                return value, position

    position = 8  # magic and version
    while position < len(wasm):
        section, size_at = wasm[position], position + 1
        size, position = leb(size_at)
        if section == 7:
            count, at = leb(position)
            names = []
            for _ in range(count):
                length, at = leb(at)
                names.append(wasm[at : at + length].decode())
                _, at = leb(at + length + 1)  # the kind (1 byte), then the index
            return names
        position += size
    return []


TWINS = ("byn$fpcast-emu$", "orig$")


def test_every_twin_export_of_the_main_module_has_its_plain_one() -> None:
    """The lazy linking tells a name the main module lacks by one lookup: every `byn$fpcast-emu$X`
    (fpcast emulation) and `orig$X` (JS legalization) export of Pyodide's main module is a twin
    of an export X (tools/pyodide_patches.py)."""
    with tarfile.open(pyodide.tarball()) as archive:
        names = _export_names(archive.extractfile("package/dist/pyodide.asm.wasm").read())
    exported = set(names)
    twins = {name: name[len(prefix) :] for name in names for prefix in TWINS if name.startswith(prefix)}
    assert len(names) > 20_000 and len(twins) > 10_000
    assert [name for name, plain in twins.items() if plain not in exported] == []
