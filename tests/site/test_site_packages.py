"""Our packages as the site ships them (browser/site/build.py: page_modules, site_packages): the
modules the page's Python imports and nothing else of ours (no server, no site builder, no command
line), each byte for byte its source, with every file of num2words's wheel, at its path in
Pyodide's site-packages, in the listing the worker reads (browser/worker-boot.js: listedFiles,
writePackages); the page that imports and runs them is tests/browser/test_e2e.py."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import core.browser
from core.browser.site import compiled
from core.browser.site.build import PACKAGES, dependency_wheels, page_modules, site_packages
from core.browser.site.pyodide import SITE_PACKAGES
from tests.support.paths import ROOT

pytestmark = pytest.mark.slow

# Imports the page's Python from the folder on PYTHONPATH alone; says where each module of ours came from.
IMPORT = (
    "import importlib, json, sys\n"
    "for name in sys.argv[1:]:\n"
    "    importlib.import_module(name)\n"
    "print(json.dumps({n: m.__file__ for n, m in sys.modules.items() if n == 'core' or n.startswith('core.')}))\n"
)


def unpacked(listing: bytes) -> dict:
    """The files of the listing, read as the worker reads it: a line of JSON, then the files."""
    header, newline, body = listing.partition(b"\n")
    written, offset = {}, 0
    for path, size in json.loads(header):
        written[path] = body[offset : offset + size]
        offset += size
    assert newline and offset == len(body)
    return written


def test_the_site_ships_the_pages_modules_and_every_file_of_num2words(tmp_path: Path) -> None:
    ours = page_modules()
    wheels = dependency_wheels(tmp_path)
    (tmp_path / PACKAGES).write_bytes(compiled.listing(site_packages(ours, wheels)))
    written = unpacked((tmp_path / PACKAGES).read_bytes())
    wheeled = {}
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            names = [name for name in archive.namelist() if not name.endswith("/")]
            wheeled.update({SITE_PACKAGES + name: archive.read(name) for name in names})
    assert written == {**ours, **wheeled}
    assert [p for p in written if p.endswith(".dist-info/RECORD")] != []  # num2words's metadata too
    # Each module of ours is its source, byte for byte: core's, and the in-browser engine's (browser/).
    for path, data in ours.items():
        relative = path[len(SITE_PACKAGES) :]
        browser = relative.startswith("core/browser/")  # browser/ is installed as core.browser
        source = ROOT / ("browser/" + relative[len("core/browser/") :] if browser else relative)
        assert data == source.read_bytes(), path
    # Nothing of the server, of the site's builder, of the UI or of the command line.
    shipped = {path[len(SITE_PACKAGES) :] for path in ours}
    assert {"core/browser/engine.py", "core/browser/kernel_check.py", "core/portable/model.py"} <= shipped
    assert not [p for p in shipped if p.startswith(("server/", "core/browser/site/", "core/web/"))], shipped
    assert not {"core/cli.py", "core/batch.py", "core/export.py"} & shipped


def test_the_pages_python_imports_from_what_the_site_ships_alone(tmp_path: Path) -> None:
    """In a Python whose only `core` is the site's files, the page's modules import: nothing they
    need is missing."""
    for path, data in page_modules().items():
        target = tmp_path / path[len(SITE_PACKAGES) :]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    first = f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"  # -I: no PYTHONPATH, no current folder
    done = subprocess.run(
        [sys.executable, "-I", "-c", first + IMPORT, *core.browser.PYTHON], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = json.loads(done.stdout)
    assert set(core.browser.PYTHON) <= set(loaded)
    assert all(Path(file).is_relative_to(tmp_path) for file in loaded.values()), loaded
