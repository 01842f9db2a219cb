"""The page's modules compiled ahead of time (tools/compiled.py): checked-hash .pyc files for
Pyodide's Python 3.8, each at the path of its source in Pyodide's file system and valid for the
very source the site ships (the browser run that shows Python using them is
tests/test_startup.py)."""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path

import pytest

from tools import compiled
from tools.pyodide import packaged_files, vendor
from tools.site import build_dependency_wheels, build_wheel

MAGIC_38 = (3413).to_bytes(2, "little") + b"\r\n"  # Python 3.8's .pyc magic number
# Python 3.8's own hash of each source (a later Python's keyed hash is another function).
HASHES = (
    "import importlib.util, json, sys\n"
    "sources = json.load(sys.stdin)\n"
    "print(json.dumps({k: importlib.util.source_hash(v.encode('latin-1')).hex() for k, v in sources.items()}))"
)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> list:
    if compiled.interpreter() is None:
        pytest.skip("no Python 3.8 with NumPy 1.17.5 (.venv-py38: scripts/test.sh makes it where a Python 3.8 exists)")
    out = tmp_path_factory.mktemp("wheels")
    return build_dependency_wheels(out) + [build_wheel(out)]


def test_each_pyc_is_checked_against_the_source_the_site_ships(wheels, tmp_path: Path) -> None:
    vendor(tmp_path / "pyodide")
    files = compiled.read(compiled.archive(wheels, tmp_path, tmp_path / "pyodide"))
    # Pyodide's own standard library (3.8.2), and our wheels' sources.
    sources = packaged_files(tmp_path / "pyodide", compiled.STDLIB)
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            for name in archive.namelist():
                if name.endswith(".py"):
                    sources[compiled.SITE_PACKAGES + name] = archive.read(name)
    text = json.dumps({path: source.decode("latin-1") for path, source in sources.items()})
    python = compiled.interpreter()
    done = subprocess.run([python, "-c", HASHES], input=text, capture_output=True, text=True, check=True)
    hashes = json.loads(done.stdout)
    for source, pyc, data in files:
        folder, name = source.rsplit("/", 1)
        assert source.startswith(compiled.STDLIB) and pyc == f"{folder}/__pycache__/{name[:-3]}.cpython-38.pyc"
        assert data[:4] == MAGIC_38 and int.from_bytes(data[4:8], "little") == 0b11  # checked hash
        if source in hashes:
            assert data[8:16].hex() == hashes[source], source
        else:  # NumPy's package, the same 1.17.5 as pip's
            assert source.startswith(compiled.SITE_PACKAGES + "numpy/"), source
    shipped = {source for source, _, _ in files}
    assert not [s for s in shipped if s.startswith(compiled.STDLIB + "ctypes/")]  # Pyodide has no ctypes
    # Every module of ours a worker imports, and num2words's, and NumPy's package itself.
    for module in ("core/__init__.py", "core/browser/engine.py", "core/portable/model.py", "num2words/__init__.py"):
        assert compiled.SITE_PACKAGES + module in shipped
    assert compiled.SITE_PACKAGES + "numpy/__init__.py" in shipped and compiled.STDLIB + "json/__init__.py" in shipped
    assert not [s for s in shipped if "/tests/" in s or s.endswith("/cli.py")]  # only what a worker imports


def test_without_a_python_3_8_the_site_has_none(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(compiled, "PYTHON38", tmp_path / "missing" / "python")
    assert compiled.interpreter() is None and compiled.archive([], tmp_path, tmp_path / "pyodide") is None
    assert list(tmp_path.iterdir()) == []
