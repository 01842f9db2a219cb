"""The page's modules compiled ahead of time (browser/site/compiled.py): checked-hash .pyc files for
Pyodide's Python 3.8, each at the path of its source in Pyodide's file system and valid for the
very source the site ships (the browser run that shows Python using them is
tests/browser/test_startup.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from core.browser.site import compiled
from core.browser.site.build import dependency_wheels, page_modules, site_packages
from core.browser.site.patches import GENERATED, REGEXES
from core.browser.site.pyodide import add_to_runtime, package_files, packaged_files, vendor
from tests.support.paths import PYTHON38

pytestmark = pytest.mark.slow  # Pyodide vendored, the page's modules compiled by a Python 3.8

MAGIC_38 = (3413).to_bytes(2, "little") + b"\r\n"  # Python 3.8's .pyc magic number
# Python 3.8's own hash of each source (a later Python's keyed hash is another function).
HASHES = (
    "import importlib.util, json, sys\n"
    "sources = json.load(sys.stdin)\n"
    "print(json.dumps({k: importlib.util.source_hash(v.encode('latin-1')).hex() for k, v in sources.items()}))"
)


@pytest.fixture(scope="module")
def packages(tmp_path_factory) -> dict:
    """The site's site-packages files: path in Pyodide's file system -> bytes."""
    if compiled.interpreter(PYTHON38) is None:
        pytest.skip("no Python 3.8 with NumPy 1.17.5 (.venv-py38: scripts/test.sh makes it where a Python 3.8 exists)")
    return dict(site_packages(page_modules(), dependency_wheels(tmp_path_factory.mktemp("wheels"))))


def test_each_pyc_is_checked_against_the_source_the_site_ships(packages: dict, tmp_path: Path) -> None:
    vendor(tmp_path / "pyodide")
    archived = compiled.read(compiled.archive(packages, tmp_path, tmp_path / "pyodide", PYTHON38))
    # Pyodide's own modules' .pyc files went into its own package, beside their sources.
    runtime = packaged_files(tmp_path / "pyodide", compiled.STDLIB)
    added = {path: data for path, data in runtime.items() if "/__pycache__/" in path}
    sources = {path: data for path, data in runtime.items() if path.endswith(".py")}
    numpy = {path: data for path, data in package_files(tmp_path / "pyodide", "numpy").items() if path.endswith(".py")}
    sources.update({path: data for path, data in packages.items() if path.endswith(".py")})
    text = json.dumps({path: source.decode("latin-1") for path, source in {**sources, **numpy}.items()})
    python = compiled.interpreter(PYTHON38)
    done = subprocess.run([python, "-c", HASHES], input=text, capture_output=True, text=True, check=True)
    hashes = json.loads(done.stdout)
    _check_generated_functions(added.pop(GENERATED))
    _check_regexes(added.pop(REGEXES))
    in_runtime = [(source, pyc, added.pop(pyc)) for source, pyc in _sources_of(added, sources)]
    assert added == {}  # each beside a source of Pyodide's
    for source, pyc, data in archived + in_runtime:
        folder, name = source.rsplit("/", 1)
        assert source.startswith(compiled.STDLIB) and pyc == f"{folder}/__pycache__/{name[:-3]}.cpython-38.pyc"
        assert data[:4] == MAGIC_38 and int.from_bytes(data[4:8], "little") == 0b11  # checked hash
        # Each from the very file the page has: NumPy's from the page's package (patched, and
        # Pyodide's own __config__.py and _dtype_ctypes.py differ from pip's), not pip's.
        assert data[8:16].hex() == hashes[source], source
    shipped, started = {source for source, _, _ in archived}, {source for source, _, _ in in_runtime}
    # The worker writes NumPy's and ours; Pyodide's package holds those of its standard library
    # and its own packages: what Python's start (os, encodings) and Pyodide's (its pyodide
    # package) import, and the rest of the standard library a worker imports (json).
    assert all(source.startswith(compiled.SITE_PACKAGES) for source in shipped)
    for module in ("os.py", "encodings/utf_8.py", "json/__init__.py", "ast.py"):
        assert compiled.STDLIB + module in started
    for module in ("pyodide/webloop.py", "_pyodide/_core.py"):
        assert compiled.SITE_PACKAGES + module in started
    # numpy.testing, asyncio and platform come on first use (browser/site/patches/): unittest,
    # asyncio's modules and platform are nobody's at start.
    unused = ("/unittest/", "/numpy/testing/", "/asyncio/", "/concurrent/", "/logging/", "/platform.py", "/socket.py")
    assert not [s for s in shipped | started if any(name in s for name in unused)]
    assert not [s for s in started if s.startswith(compiled.STDLIB + "ctypes/")]  # Pyodide has no ctypes
    # Every module of ours a worker imports, and num2words's, and NumPy's package itself.
    for module in ("core/__init__.py", "core/browser/engine.py", "core/portable/model.py", "num2words/__init__.py"):
        assert compiled.SITE_PACKAGES + module in shipped
    assert compiled.SITE_PACKAGES + "numpy/__init__.py" in shipped
    assert not [s for s in shipped | started if "/tests/" in s or s.endswith("/cli.py")]  # only what a worker imports
    # Pyodide's own files are kept as they were; a site built again holds each .pyc once.
    assert {path: data for path, data in runtime.items() if "/__pycache__/" not in path} == packaged_files(
        _original(tmp_path), compiled.STDLIB
    )
    compiled.archive(packages, tmp_path, tmp_path / "pyodide", PYTHON38)
    assert list(packaged_files(tmp_path / "pyodide", compiled.STDLIB)) == list(runtime)


# In Python 3.8: the generated functions' file (GENERATED) from stdin -> how many, each one's code as
# exec of its source compiles it, and the sources of two of them.
GENERATED_CHECK = """
import json, marshal, sys
generated = marshal.loads(sys.stdin.buffer.read())
alike = all(code == compile(source, "<string>", "exec") for source, code in generated.items())
init = [s for s in generated if " def __init__(self,dim:_type_dim,depth:_type_depth,type:_type_type=_dflt_type)" in s]
new = [s for s in generated if s.startswith("def __new__(_cls, latent, silence, first, end, words, scores)")]
print(json.dumps([len(generated), alike, init, new]))
"""


def _check_generated_functions(data: bytes) -> None:
    """The functions namedtuple and dataclasses write as the page's Python starts and imports numpy
    and core (browser/site/patches.GENERATED), compiled as exec compiles each: core's
    (`FlowConfig`'s __init__, the `Frame` namedtuple's __new__) among them."""
    python = compiled.interpreter(PYTHON38)
    done = subprocess.run([python, "-c", GENERATED_CHECK], input=data, capture_output=True, check=True)
    count, alike, init, new = json.loads(done.stdout)
    assert count > 100 and alike and len(init) == 1 and len(new) == 1


# In Python 3.8, its _sre given the page's MAXREPEAT: the regular expressions' file (REGEXES) from
# stdin -> how many, whether each holds what sre_compile hands _sre.compile for its pattern and
# flags, and whether English's rule for e-mail addresses is among them.
REGEXES_CHECK = """
import _sre, marshal, sys, types
assert "sre_compile" not in sys.modules
page = types.ModuleType("_sre")
vars(page).update(vars(_sre))
page.MAXREPEAT = 2**31 - 1
made = []
page.compile = lambda *arguments: made.append(arguments[1:])
sys.modules["_sre"] = page
import sre_compile
recorded = marshal.loads(sys.stdin.buffer.read())
alike = True
for (pattern, flags), arguments in recorded.items():
    sre_compile.compile(pattern, flags)
    final, code, groups, groupindex, indexgroup = made.pop()
    alike = alike and arguments == (final, list(code), groups, dict(groupindex), indexgroup)
mail = [p for p, _ in recorded if isinstance(p, str) and "(?P<local>[A-Za-z0-9][A-Za-z0-9._%+-]*)@" in p]
print(len(recorded), int(alike), len(mail))
"""


def _check_regexes(data: bytes) -> None:
    """The regular expressions the page's Python compiles as it starts, imports numpy and core and
    reads a first text in each language (browser/site/patches.REGEXES): each one's arguments are
    what the page's sre_compile (Python 3.8's, with WebAssembly's MAXREPEAT) makes of its pattern."""
    python = compiled.interpreter(PYTHON38)
    done = subprocess.run([python, "-c", REGEXES_CHECK], input=data, capture_output=True, check=True)
    count, alike, mail = map(int, done.stdout.split())
    assert count > 100 and alike and mail >= 1, (count, alike, mail)


def _sources_of(pycs: dict, sources: dict) -> list:
    """(source, .pyc) for each .pyc path: the source beside its __pycache__ folder."""
    found = []
    for pyc in pycs:
        folder, name = pyc.split("/__pycache__/")
        source = f"{folder}/{name.split('.')[0]}.py"
        assert source in sources, pyc
        found.append((source, pyc))
    return found


def _original(tmp_path: Path) -> Path:
    """Pyodide's package as it came (no .pyc added), vendored apart."""
    vendor(tmp_path / "original")
    return tmp_path / "original"


def test_without_a_python_3_8_the_site_has_none(tmp_path: Path) -> None:
    vendor(tmp_path / "pyodide")
    original = packaged_files(tmp_path / "pyodide", compiled.STDLIB)
    # As an earlier build with a Python 3.8 left it, then a build without one: no archive, and
    # Pyodide's package back as it came.
    add_to_runtime(tmp_path / "pyodide", {compiled.STDLIB + "__pycache__/os.cpython-38.pyc": b"compiled"})
    assert len(packaged_files(tmp_path / "pyodide", compiled.STDLIB)) == len(original) + 1
    missing = tmp_path / "missing" / "python"
    assert (
        compiled.interpreter(missing) is None and compiled.archive({}, tmp_path, tmp_path / "pyodide", missing) is None
    )
    assert not (tmp_path / compiled.NAME).exists()
    assert packaged_files(tmp_path / "pyodide", compiled.STDLIB) == original
