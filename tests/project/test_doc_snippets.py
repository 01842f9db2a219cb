"""Every Python snippet of the README and the docs runs as written: in a folder holding the files
the snippets name (voice.wav), with any model name loading a bundle of the tiny test model (random
weights, with timestamp heads and a predefined voice "alba"), and the snippets that talk to a
server talking to a live `python -m server` of that bundle. The snippets of a page run in order in
one namespace, which starts with what the README's snippet defines (model, voice, pcm, chunks): a
snippet that uses a name nothing defines fails here."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Dict, List

import pytest

from core import TTSModel
from tests.support.models import timed_tiny
from tests.support.paths import ROOT, VOICE_24K
from tests.support.processes import tiny_server

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SNIPPET = re.compile(r"```python\n(.*?)```", re.S)
DEFAULT_URL = "127.0.0.1:8000"


def snippets(page: Path) -> List[str]:
    return SNIPPET.findall(page.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    """The tiny model with timestamp heads as a bundle with the voice "alba" (the test voice)."""
    from core.export import export

    folder = tmp_path_factory.mktemp("timed")
    timed_tiny(folder)
    shutil.copy(VOICE_24K, folder / "alba.wav")
    export(str(folder / "config.yaml"), str(folder / "bundle"), [str(folder / "alba.wav")], int8=False)
    return folder / "bundle"


@pytest.fixture(scope="module")
def server(bundle):
    with tiny_server("--model", str(bundle), "--voice", "alba") as url:
        yield url


def test_the_pages_have_snippets_to_run() -> None:
    counted = {page.name: len(snippets(page)) for page in PAGES}
    assert counted["README.md"] >= 1 and counted["python-api.md"] >= 1 and counted["text-streaming.md"] >= 2


@pytest.mark.parametrize("page", [page for page in PAGES if snippets(page)], ids=lambda page: page.name)
def test_every_snippet_of_the_page_runs(page, bundle, server, tmp_path, monkeypatch) -> None:
    shutil.copy(VOICE_24K, tmp_path / "voice.wav")
    monkeypatch.chdir(tmp_path)
    tiny = TTSModel.load(str(bundle))
    monkeypatch.setattr(TTSModel, "load", classmethod(lambda cls, name, *args, **kwargs: tiny))
    model = TTSModel.load("english")
    voice = model.voice_state("alba")
    namespace: Dict[str, object] = {
        "model": model,
        "voice": voice,
        "pcm": model.generate("Hello.", voice),
        "chunks": list(model.stream("Hello.", voice)),
    }
    host = server.split("//", 1)[1]
    for number, code in enumerate(snippets(page), 1):
        try:
            exec(compile(code.replace(DEFAULT_URL, host), f"{page.name} snippet {number}", "exec"), namespace)
        except Exception as error:  # noqa: BLE001 -- which snippet, and why
            raise AssertionError(f"{page.name}, snippet {number}: {type(error).__name__}: {error}") from error
