"""Our packages as the site ships them (tools/site.unpack_wheels): every file of both wheels (this
package's and num2words's) at its path in Pyodide's site-packages, byte for byte, in the listing
the worker reads (core/browser/worker.js: listedFiles, writePackages); the page that imports
and runs them is tests/test_e2e.py."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from tools.pyodide import SITE_PACKAGES
from tools.site import PACKAGES, build_dependency_wheels, build_wheel, unpack_wheels

pytestmark = pytest.mark.slow


def test_the_site_ships_every_file_of_both_wheels_unpacked(tmp_path: Path) -> None:
    wheels = build_dependency_wheels(tmp_path) + [build_wheel(tmp_path)]
    unpack_wheels(wheels, tmp_path / PACKAGES)
    header, newline, body = (tmp_path / PACKAGES).read_bytes().partition(b"\n")
    written, offset = {}, 0
    for path, size in json.loads(header):
        written[path] = body[offset : offset + size]
        offset += size
    assert newline and offset == len(body)
    wheeled = {}
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            names = [name for name in archive.namelist() if not name.endswith("/")]
            wheeled.update({SITE_PACKAGES + name: archive.read(name) for name in names})
    assert written == wheeled
    for module in ("core/browser/engine.py", "core/portable/model.py", "num2words/__init__.py"):
        assert SITE_PACKAGES + module in written
    assert [p for p in written if p.endswith(".dist-info/RECORD")] != []  # the installed packages' metadata too
