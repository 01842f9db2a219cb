"""The TTFA runs of e2e/ttfa.py work: a short run (cold load, then two warmed runs per mode) of the
small model. The measurements themselves are `python -m e2e.ttfa`'s (docs/measurements.md#time-to-first-audio);
the tests check that audio really played and that the fields are sane, never a wall-clock bound.
(Its own module: Playwright's sync API cannot nest inside the browser that test_e2e.py keeps open.)"""

from __future__ import annotations

import json

import pytest

from e2e import harness, ttfa
from tests.support.needs import require_browser
from tests.support.paths import SMALL

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def sane(run: dict) -> None:
    assert 0 < run["ttfc_ms"] <= run["ttfa_ms"] and run["ttfc_ms"] <= run["total_ms"], run
    assert run["audio_ms"] > 0 and run["played"]["samples"] >= run["audio_ms"] * 24 * 0.99, run
    assert run["played"]["audible"] > 0.5 * run["played"]["samples"], run


def test_a_short_ttfa_run_in_both_modes(request) -> None:
    """Cold load then 2 warmed runs per mode (e2e/ttfa.py), of the small model."""
    require_browser(request, SMALL)
    result = ttfa.measure(SMALL, runs=2, progress=lambda _message: None)
    for mode in ("server", "browser"):
        runs = [result[mode]["cold"]] + result[mode]["runs"]
        assert len(runs) == 3 and all(r["mode"] == mode for r in runs)
        for run in runs:
            sane(run)
        assert result[mode]["errors"] == []
    assert result["download"]["cached_bytes"] == 0  # the service worker serves every file
    files = json.loads((harness.site(SMALL) / "site.json").read_text())["model"]
    cloning = files["files"][files["voice_cloning"]]
    # A cold visit downloads the model but its voice-cloning part, which the first upload fetches.
    assert result["download"]["cold_bytes"] >= sum(files["files"].values()) - cloning
    assert result["browser"]["voice_part_bytes"] == cloning and result["browser"]["voice_part_ms"] > 0
    assert ttfa.markdown([result]).count(f"| {SMALL} |") == 3  # two modes, then the cold start


def test_the_table_keeps_results_measured_before_a_metric_existed() -> None:
    """build/e2e/ttfa.json keeps the other model's last result; one written before the stalls
    column existed shows n/a there instead of failing the run that adds the new one."""
    run = {"ttfc_ms": 20.0, "ttfa_ms": 60.0, "total_ms": 100.0, "audio_ms": 720.0, "played": {"stalls": 0}}
    load = {
        "pyodide_ms": 1,
        "numpy_ms": 2,
        "download_ms": 3,
        "load_ms": 4,
        "total_ms": 10,
        "workers": 2,
        "heap_bytes": [90e6, 36e6],
    }

    def result(model: str, with_stalls: bool) -> dict:
        summary = ttfa.summarize([dict(run)])
        if not with_stalls:
            del summary["stalls"]
        modes = {mode: {"cold": run, "summary": summary, "voice_ms": 500} for mode in ("server", "browser")}
        modes["browser"].update(load=load, cached_load={"total_ms": 5, "download_ms": 1})
        return {"model": model, "site_bytes": 1e6, "download": {"cold_bytes": 1e6, "cached_bytes": 0}, **modes}

    rows = ttfa.markdown([result("old", False), result("new", True)]).splitlines()
    assert rows[2].startswith("| old | server |") and rows[2].endswith("| n/a |")
    assert rows[4].startswith("| new | server |") and rows[4].endswith("| 0 / 0 / 0 / 0 |")
