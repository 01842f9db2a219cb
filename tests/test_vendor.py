"""Pyodide as the site vendors it (tools/pyodide.py): NumPy's package repacked without what the page
never imports, every file it keeps byte for byte the original's but its patched __init__,
Pyodide's own standard library read out of its LZ4-packed data, and its runtime script the
original's with the lazy linking of tools/pyodide_patches.py and nothing else (the browser runs
that load and use them: tests/test_e2e.py)."""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path
from typing import List, Tuple

import pytest

from tools import compiled, pyodide
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
    # Two files patched (tools/pyodide_patches.py): numpy.testing and others on first use, and the
    # functions' dispatch made without a compile (test_numpy_dispatches_as_before_with_the_patch).
    init = "/lib/python3.8/site-packages/numpy/__init__.py"
    assert [name for name in kept if kept[name] != before[name]] == [init, OVERRIDES]
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


OVERRIDES = "/lib/python3.8/site-packages/numpy/core/overrides.py"
# Every function of NumPy's that dispatches (__array_function__) as NumPy 1.17.5 makes it, with
# numpy.core.overrides's source from stdin in place of its own where argv[1] is "patched": its
# names, where it comes from, and what it does with arrays and with an __array_function__ class.
DISPATCH = """
import importlib.abc, importlib.machinery, json, sys
source = sys.stdin.read()
class Patched(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name == "numpy.core.overrides" and sys.argv[1] == "patched":
            return importlib.machinery.ModuleSpec(name, self, origin=path[0] + "/overrides.py")
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        module.__file__ = module.__spec__.origin
        exec(compile(source, module.__file__, "exec"), module.__dict__)
sys.meta_path.insert(0, Patched())
import numpy
class Duck:
    def __array_function__(self, func, types, args, kwargs):
        return [func.__name__, [t.__name__ for t in types], len(args), sorted(kwargs)]
seen = {}
for name, module in sorted(sys.modules.items()):
    for attr, value in sorted(vars(module).items() if name.startswith("numpy") else []):
        if callable(value) and hasattr(value, "_implementation") and id(value) not in seen:
            code = value.__code__
            seen[id(value)] = [name, attr, value.__name__, value.__qualname__, value.__module__, value.__doc__,
                               value.__wrapped__ is value._implementation, code.co_name, code.co_filename,
                               code.co_varnames, code.co_argcount, code.co_flags & 0x0F]
a = numpy.arange(6.0).reshape(2, 3)
try:
    numpy.concatenate([a], bogus=1)
except TypeError as error:
    refused = str(error)
print(json.dumps({"functions": sorted(seen.values()), "refused": refused,
                  "results": [numpy.concatenate([a, a]).tolist(), float(numpy.mean(a, axis=None)),
                              numpy.moveaxis(a, 0, 1).tolist(), numpy.concatenate([Duck(), a], axis=0),
                              numpy.where(Duck(), a, a), numpy.linalg.norm(Duck()), numpy.sum(Duck())]}))
"""


def test_numpy_dispatches_as_before_with_the_patch() -> None:
    """NumPy made its ~300 dispatching functions by compiling the same source for each at import;
    patched, it makes the same function as a closure (tools/pyodide_patches.py): the same names,
    module, docs and wrapped function, the same results, and __array_function__ classes served alike."""
    python = compiled.interpreter()
    if python is None:
        pytest.skip("no Python 3.8 with NumPy 1.17.5 (.venv-py38: scripts/test.sh makes it where a Python 3.8 exists)")
    where = "import numpy.core.overrides as overrides; print(overrides.__file__)"
    found = subprocess.run([python, "-c", where], capture_output=True, text=True, check=True)
    source = Path(found.stdout.strip()).read_text()
    patched_source = patched({OVERRIDES: source.encode()})[OVERRIDES].decode()
    assert "compile(" in source and "compile(" not in patched_source
    runs = {}
    for which, text in (("original", source), ("patched", patched_source)):
        done = subprocess.run([python, "-c", DISPATCH, which], input=text, capture_output=True, text=True, check=True)
        runs[which] = json.loads(done.stdout)
    assert len(runs["original"]["functions"]) > 250
    assert runs["patched"] == runs["original"]
    assert runs["patched"]["results"][3] == ["concatenate", ["Duck", "ndarray"], 1, ["axis"]]
    assert "bogus" in runs["patched"]["refused"]


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
