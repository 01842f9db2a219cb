"""The TTFA runs of e2e/ttfa.py for both modes and both model sizes (cold load, then 20 warmed
runs per mode). The report goes to build/e2e/ttfa.md; the tests check that audio really played and
that the fields are sane, never a wall-clock bound. (Its own module: Playwright's sync API cannot
nest inside the browser that test_e2e.py keeps open.)"""

from __future__ import annotations

import json

import pytest

from e2e import harness, ttfa

from conftest import SMALL, require_browser


def sane(run: dict) -> None:
    assert 0 < run["ttfc_ms"] <= run["ttfa_ms"] and run["ttfc_ms"] <= run["total_ms"], run
    assert run["audio_ms"] > 0 and run["played"]["samples"] >= run["audio_ms"] * 24 * 0.99, run
    assert run["played"]["audible"] > 0.5 * run["played"]["samples"], run


@pytest.mark.parametrize("model", [SMALL, "english"])
def test_ttfa_runs_in_both_modes(request, model: str) -> None:
    """Cold load then 20 warmed runs per mode (e2e/ttfa.py); the report goes to build/e2e/ttfa.md."""
    require_browser(request, model)
    result = ttfa.measure(model, runs=20, progress=lambda _message: None)
    for mode in ("server", "browser"):
        runs = [result[mode]["cold"]] + result[mode]["runs"]
        assert len(runs) == 21 and all(r["mode"] == mode for r in runs)
        for run in runs:
            sane(run)
        assert result[mode]["errors"] == []
    assert result["download"]["cached_bytes"] == 0  # the service worker serves every file
    model_bytes = sum(json.loads((harness.site(model) / "site.json").read_text())["model"]["files"].values())
    assert result["download"]["cold_bytes"] - result["download"]["cached_bytes"] >= model_bytes  # model cached
    ttfa.save(result)
