"""What a test needs before it can run (Ray, Chromium, the full-size fixtures): a skip without it,
a failure under --require-full-reference (CI)."""

from __future__ import annotations

import pytest

from tests.support.paths import REFERENCE


def require_ray(request: pytest.FixtureRequest) -> None:
    """Skip without Ray (the `cluster` extra), or fail under --require-full-reference (CI)."""
    try:
        import ray  # noqa: F401
    except ImportError:
        if request.config.getoption("--require-full-reference"):
            pytest.fail('Ray is not installed: pip install -e ".[cluster]"')
        pytest.skip("Ray is not installed (the cluster extra)")


def require_browser(request: pytest.FixtureRequest, model: str = "") -> None:
    """Skip (fail under --require-full-reference) without Chromium, or without the model's fixture."""
    from e2e import harness

    missing = harness.CHROMIUM is None or bool(model) and not (REFERENCE / model / "model.safetensors").exists()
    if missing:
        if request.config.getoption("--require-full-reference"):
            pytest.fail("the browser tests need chromium and the full-size fixtures (scripts/test.sh)")
        pytest.skip("needs chromium and the full-size fixtures")
