"""`pocket-tts-numpy build-site` as a newcomer runs it: its inputs checked before any work, one line
for each mistake, and never a half-built folder (it builds beside the output and swaps it in when
whole)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.browser.site import build as site
from tests.support.paths import ROOT, TINY_CONFIG, VOICE_24K


def build_site(*args: str, env: dict = None, blocked: str = "") -> subprocess.CompletedProcess:
    """The command as the README gives it (`pocket-tts-numpy build-site`); `blocked`: a module made
    impossible to import (an extra not installed)."""
    code = f"import sys; sys.modules[{blocked!r}] = None\n" if blocked else "import sys\n"
    code += "from core.cli import command\nsys.argv[0] = 'pocket-tts-numpy'\nsys.exit(command())"
    return subprocess.run(
        [sys.executable, "-c", code, "build-site", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )


def one_error(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def test_mistakes_are_one_line_before_any_work(tmp_path) -> None:
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    said = one_error(build_site("--model", str(TINY_CONFIG), "--out", str(other)))
    assert "is not a folder this tool made" in said and (other / "notes.txt").read_text() == "keep me"
    said = one_error(build_site("--model", str(TINY_CONFIG), "--voice", "nope.wav", "--out", str(tmp_path / "a")))
    assert said == "error: voice file not found: nope.wav"
    said = one_error(build_site("--model", str(TINY_CONFIG), "--out", str(tmp_path / "b"), blocked="lz4"))
    assert "build-site needs lz4" in said and "pip install 'pocket-tts-numpy[site]'" in said
    offline = dict(os.environ, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))
    said = one_error(build_site("--model", "english_2m_2026-10", "--out", str(tmp_path / "c"), env=offline))
    assert "could not fetch hf://kyutai/" in said and "bundle folder" in said
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "hf") == ["mine"]


def test_a_build_that_fails_leaves_the_last_site_and_one_that_works_replaces_it(tmp_path, monkeypatch) -> None:
    out = tmp_path / "site"

    def working(text: str):
        def build(model: str, folder: Path, voices, int8: bool, python38):
            (folder / "site.json").write_text(text)
            (folder / "pyodide").mkdir(exist_ok=True)
            (folder / "pyodide" / "pyodide.js").write_text("Pyodide")
            return {"bytes": 1}

        return build

    monkeypatch.setattr(site, "_build", working('{"build": 1}'))
    assert site.build(str(TINY_CONFIG), out, [str(VOICE_24K)], True) == {"bytes": 1, "site": str(out.resolve())}

    def failing(model: str, folder: Path, voices, int8: bool, python38):
        assert (folder / "pyodide" / "pyodide.js").read_text() == "Pyodide"  # the last build's, reused
        (folder / "half.txt").write_text("half")
        raise KeyboardInterrupt

    monkeypatch.setattr(site, "_build", failing)
    with pytest.raises(KeyboardInterrupt):
        site.build(str(TINY_CONFIG), out, [str(VOICE_24K)], True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]
    assert (out / "site.json").read_text() == '{"build": 1}' and not (out / "half.txt").exists()

    monkeypatch.setattr(site, "_build", working('{"build": 2}'))
    site.build(str(TINY_CONFIG), out, [str(VOICE_24K)], True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"] and (out / "site.json").read_text() == '{"build": 2}'
    assert (out.stat().st_mode & 0o777) == 0o755


@pytest.mark.parametrize("meddle", ["added", "changed", "removed", "linked", "foreign site.json"])
def test_a_folder_is_replaced_only_while_it_holds_what_the_last_build_wrote(tmp_path, monkeypatch, meddle) -> None:
    """Any site.json is not a site built here: the folder must hold exactly the files the last build
    recorded writing, unchanged; anything else is the user's, and is never removed."""
    out = tmp_path / "site"

    def working(model: str, folder: Path, voices, int8: bool, python38):
        (folder / "site.json").write_text("{}")
        (folder / "model").mkdir()
        (folder / "model" / "flow_lm.safetensors").write_bytes(b"weights")
        return {"bytes": 1}

    monkeypatch.setattr(site, "_build", working)
    if meddle == "foreign site.json":
        out.mkdir()
        (out / "site.json").write_text('{"format": "pocket-tts-numpy-site"}')
        (out / "thesis.tex").write_text("years of work")
    else:
        site.build(str(TINY_CONFIG), out, [], True)
        if meddle == "added":
            (out / "model" / "notes.txt").write_text("mine")
        elif meddle == "changed":
            (out / "site.json").write_text('{"edited": true}')
        elif meddle == "removed":
            (out / "model" / "flow_lm.safetensors").unlink()
        else:
            (out / "model" / "flow_lm.safetensors").unlink()
            (out / "model" / "flow_lm.safetensors").symlink_to(tmp_path / "elsewhere")
    before = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    done = build_site("--model", str(TINY_CONFIG), "--out", str(out))
    said = one_error(done)
    assert "is not a folder this tool made" in said and str(out) in said
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]  # nothing built beside it


def test_the_worker_ships_as_one_script_of_its_jobs_in_the_order_it_loads_them(tmp_path) -> None:
    """browser/worker.js loads a file per job with importScripts; the site's worker.js holds them
    where that call stood (one file for a first visit to fetch), each whole and once, then parses."""
    import shutil

    import core.browser

    script = site.worker_script()
    main, *jobs = core.browser.WORKER
    starts = [script.index((site.BROWSER / name).read_text()) for name in jobs]
    assert starts == sorted(starts) and all(script.count((site.BROWSER / name).read_text()) == 1 for name in jobs)
    assert script.count("importScripts(") == 2 and 'importScripts("protocol.js");' in script  # and pyodide.js's
    source = (site.BROWSER / main).read_text()
    after = source[source.index("\nconst { engine: EngineMessage") :]
    assert script.endswith(after) and starts[0] < script.index(after)
    if shutil.which("node"):
        (tmp_path / "worker.js").write_text(script)
        assert subprocess.run(["node", "--check", str(tmp_path / "worker.js")]).returncode == 0


def test_the_sites_page_preloads_the_browser_engine(tmp_path) -> None:
    import core.browser
    from core.ui import web_folder

    page, ui = site.index_html(), (web_folder() / "index.html").read_text()
    head, _, body = page.partition("</head>")
    assert body == ui.partition("</head>")[2] and head.startswith(ui.partition("</head>")[0])
    assert [f'<link rel="modulepreload" href="browser/{name}">' in head for name in core.browser.PAGE] == [True, True]


def test_the_page_preloads_every_module_it_imports_at_start() -> None:
    """app.js's static imports, and theirs, are named in index.html (modulepreload), so the browser
    fetches them all alongside app.js instead of one import level after another."""
    import re

    from core.ui import web_folder

    imports = re.compile(r'^import\b[^;(]*?"\./([^"]+)";', re.MULTILINE)
    imported, todo = set(), ["app.js"]
    while todo:
        found = set(imports.findall((web_folder() / todo.pop()).read_text())) - imported
        imported |= found
        todo.extend(found)
    head = site.index_html().partition("</head>")[0]
    preloaded = set(re.findall(r'<link rel="modulepreload" href="([^"]+)">', head))
    assert len(imported) > 5 and imported <= preloaded, sorted(imported - preloaded)
