"""num2words's wheel as the site ships it (browser/site/num2words_wheel.py): trimmed to core's languages,
core's normalization reads the whole table of tests/fixtures/normalize_cases.tsv the same with it
as with num2words as pip installs it, and the page's Python imports a few of its modules, not 62."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from core.browser.site.build import dependency_wheels
from core.browser.site.num2words_wheel import INIT
from core.portable.text.normalize import LANGUAGE_CODES, normalize_text
from tests.support.normalize_cases import cases
from tests.support.paths import ROOT

pytestmark = pytest.mark.slow

# Reads each case with the num2words found first on sys.path; says which modules of it were imported.
READ = (
    "import json, sys\n"
    "from core.portable.text.normalize import normalize_text\n"
    "spoken = [normalize_text(written, language) for language, written in json.load(sys.stdin)]\n"
    "import num2words\n"
    "print(json.dumps({'file': num2words.__file__, 'spoken': spoken,\n"
    "                  'modules': sorted(m for m in sys.modules if m.startswith('num2words.'))}))\n"
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    (built,) = dependency_wheels(tmp_path_factory.mktemp("wheels"))
    return built


def test_core_reads_every_case_the_same_with_the_trimmed_wheel(wheel: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        assert archive.testzip() is None
        archive.extractall(tmp_path)
    rows = [(language, written) for language, written, _ in cases()]
    done = subprocess.run(
        [sys.executable, "-c", READ],
        input=json.dumps(rows),
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": f"{tmp_path}:{ROOT}"},
    )
    result = json.loads(done.stdout)
    assert result["file"] == str(tmp_path / INIT)
    assert result["spoken"] == [normalize_text(written, language) for language, written in rows]
    languages = {module for module in result["modules"] if module.startswith("num2words.lang_")}
    assert languages == {f"num2words.lang_{code.upper()}" for code in LANGUAGE_CODES.values()} | {"num2words.lang_EU"}


def test_the_wheel_lists_what_it_holds(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        record = next(name for name in names if name.endswith("/RECORD"))
        listed = {}
        for line in archive.read(record).decode().splitlines():
            name, digest, size = line.split(",")
            listed[name] = (digest, size)
        for name in names - {record}:
            data = archive.read(name)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert listed[name] == (f"sha256={digest}", str(len(data))), name
    assert set(listed) == names
    assert sum(name.startswith("num2words/lang_") for name in names) == len(LANGUAGE_CODES) + 1
