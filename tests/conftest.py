"""The tests' options, markers and fixtures (the helpers they share are tests/support/).

Parity models are the tiny architectures committed under tests/fixtures/models and, when
`scripts/make_reference` has written them (see scripts/test.sh), the full-size fixtures under
build/reference. `--require-full-reference` turns a missing full fixture into a failure instead of
fewer tests (CI passes it). The parity report is printed at the end of the run.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from core import TTSModel
from tests.support.needs import require_browser
from tests.support.parity import Loaded, model_dir, tiny_models
from tests.support.paths import FULL_MODELS, REFERENCE, REFERENCE_PYTHON, ROOT, TINY_DIR
from tests.support.reference import INT8_REPORT, REPORT


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--reference-dir",
        default=str(REFERENCE),
        help="folder with full-size parity fixtures (scripts/make_reference output)",
    )
    parser.addoption(
        "--require-full-reference",
        action="store_true",
        help="fail when the full-size fixtures or the reference environment are missing",
    )


# The markers of the quick loop: `pytest -m "not slow"` leaves out every test marked slow, and a
# test marked browser, cluster or e2e is slow too.
MARKERS = {
    "browser": "drives Debian's Chromium through Playwright",
    "cluster": "starts a local Ray cluster (Ray Serve, batches on Ray)",
    "e2e": "an end-to-end run of the product as the measurements run it",
    "slow": "takes long: left out of the quick loop, pytest -m 'not slow'",
}
LONG = ("browser", "cluster", "e2e")
# The full-size architectures (english, 438 MB of weights, and the short fixtures of its earlier
# weights): their tests are slow too; the quick loop runs every other architecture (the tiny ones,
# english_2m, and the short fixtures of 7m and 18m).
BIG = ("english", "english_2026-01", "english_drifting_26-09")


def pytest_configure(config: pytest.Config) -> None:
    for name, meaning in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {meaning}")


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    """A test that starts Ray or Chromium must say so (its marker), so that the quick loop never
    starts either; every browser, cluster and e2e test is also slow, and so is every test of the
    full-size architectures (BIG)."""
    for item in items:
        marks = {mark.name for mark in item.iter_markers()}
        needs = set()
        params = getattr(item, "callspec", None)
        on_serve = params is not None and any(isinstance(v, str) and v == "serve" for v in params.params.values())
        if {"served", "ray_address"} & set(item.fixturenames) or on_serve:
            needs.add("cluster")
        if "chromium" in item.fixturenames:
            needs.add("browser")
        if needs - marks:
            raise pytest.UsageError(f"{item.nodeid} needs the marker(s) {sorted(needs - marks)}")
        big = params is not None and any(isinstance(v, str) and v in BIG for v in params.params.values())
        if marks & set(LONG) or big:
            item.add_marker(pytest.mark.slow)


def parity_models(config: pytest.Config) -> list:
    names = tiny_models()
    reference_dir = Path(config.getoption("--reference-dir"))
    for name in FULL_MODELS:
        if (reference_dir / name / "reference.npz").exists():
            names.append(name)
        elif config.getoption("--require-full-reference"):
            raise pytest.UsageError(f"--require-full-reference: {reference_dir / name} is missing")
    return names


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "parity_model" in metafunc.fixturenames:
        metafunc.parametrize("parity_model", parity_models(metafunc.config), scope="module")


_loaded: dict = {}


@pytest.fixture(scope="module")
def loaded(request: pytest.FixtureRequest, parity_model: str) -> Loaded:
    if parity_model not in _loaded:
        _loaded.clear()  # one full-size model in memory at a time
        reference_dir = Path(request.config.getoption("--reference-dir"))
        _loaded[parity_model] = Loaded(parity_model, model_dir(reference_dir, parity_model))
    return _loaded[parity_model]


@pytest.fixture(scope="module")
def model() -> TTSModel:
    """The tiny LSD model, for tests of behaviour rather than parity."""
    return TTSModel.load(str(TINY_DIR / "tiny_lsd" / "config.yaml"))


@pytest.fixture(scope="module")
def voice(model: TTSModel):
    return model.voice_state(str(TINY_DIR / "tiny_lsd" / "voice_state.safetensors"))


@pytest.fixture(scope="session")
def reference_python(request: pytest.FixtureRequest) -> Path:
    """The interpreter of the official pocket-tts environment (.venv-ref), for cross-checks."""
    if not REFERENCE_PYTHON.exists():
        if request.config.getoption("--require-full-reference"):
            pytest.fail(f"{REFERENCE_PYTHON} is missing (scripts/test.sh creates it)")
        pytest.skip("the official reference environment .venv-ref is not installed")
    return REFERENCE_PYTHON


def _fmt(value: float) -> str:
    return "-inf" if value == -math.inf else f"{value:.1f}"


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ANN001
    if not REPORT and not INT8_REPORT:
        return
    lines = ["| model | stage | NMSE (dB) | max abs | bar (dB) |", "|---|---|---|---|---|"]
    for model, stage, nmse, max_abs, bar in REPORT:
        lines.append(f"| {model} | {stage} | {_fmt(nmse)} | {max_abs:.2e} | {bar:.0f} |")
    if INT8_REPORT:
        lines += [
            "",
            "int8 against the official float32 audio (same weights, text and voice, 60 frames, temperature 0):",
            "",
            "| model | ours: int8 bundle PCM NMSE (dB) | official quantize=True PCM NMSE (dB) "
            "| int8 bundle weights (MB) | float32 weights (MB) |",
            "|---|---|---|---|---|",
        ]
        for model, ours, official, small, big in INT8_REPORT:
            lines.append(f"| {model} | {ours:.1f} | {official:.1f} | {small / 1e6:.1f} | {big / 1e6:.1f} |")
    text = "\n".join(lines)
    out = ROOT / "build" / "parity-report.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text("# Parity against pocket-tts 4.0.1\n\n" + text + "\n", encoding="utf-8")
    terminalreporter.write_sep("-", f"parity report (also in {out.relative_to(ROOT)})")
    terminalreporter.write_line(text)


@pytest.fixture(scope="session")
def native_kernels(request: pytest.FixtureRequest) -> dict:
    """The kernels pip compiled (core/_kernels), of the best instruction set this processor runs:
    {name: ctypes function}."""
    from core import native

    runs = native.instruction_sets()
    if not runs:
        message = "the native kernels were not built (pip found no C compiler)"
        if request.config.getoption("--require-full-reference"):
            pytest.fail(message)
        pytest.skip(message)
    return native.functions(runs[0])


@pytest.fixture
def relays(monkeypatch: pytest.MonkeyPatch) -> list:
    """Every relay the server's sessions make, as they make them (to watch a speech's backlog)."""
    import server.session

    made: list = []

    class Recorded(server.session.Relay):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(server.session, "Relay", Recorded)
    return made


@pytest.fixture(scope="module")
def chromium(request: pytest.FixtureRequest):
    """Debian's Chromium, driven by Playwright (e2e.harness), for a test module."""
    from e2e import harness

    require_browser(request)
    with harness.chromium() as browser:
        yield browser
