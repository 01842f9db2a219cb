"""Shared test setup: the parity models, their references, and the parity report.

Parity models are the tiny architectures committed under tests/fixtures/models and, when
`scripts/make_reference` has written them (see scripts/test.sh), the full-size `english` and
`english_2m_2026-10` fixtures under build/reference. `--require-full-reference` turns a missing
full fixture into a failure instead of fewer tests (CI passes it).
"""

from __future__ import annotations

import math
import os
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from core import TTSModel

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
TINY_DIR = FIXTURES / "models"
VOICE_24K = FIXTURES / "voice" / "voice_24000.wav"
VOICE_22K = FIXTURES / "voice" / "voice_22050.wav"
FULL_MODELS = (
    "english",
    "english_2m_2026-10",
    "english_7m_2026-10",
    "english_18m_2026-10",
    "english_2026-01",
    "english_drifting_26-09",
)
REFERENCE_PYTHON = ROOT / ".venv-ref" / "bin" / "python"
TINY_CONFIG = TINY_DIR / "tiny_lsd" / "config.yaml"
# The model of the browser tests: the small full-size fixture (scripts/test.sh makes it).
SMALL = "english_2m_2026-10"
# The address in-process test clients name (the server answers to localhost's names only).
LOCAL = "http://127.0.0.1"

_report: list = []
_int8_report: list = []


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--reference-dir",
        default=str(ROOT / "build" / "reference"),
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


def pytest_configure(config: pytest.Config) -> None:
    for name, meaning in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {meaning}")


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    """A test that starts Ray or Chromium must say so (its marker), so that the quick loop never
    starts either; every browser, cluster and e2e test is also slow."""
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
        if marks & set(LONG):
            item.add_marker(pytest.mark.slow)


def tiny_models() -> list:
    return sorted(p.name for p in TINY_DIR.iterdir() if (p / "reference.npz").exists())


def model_dir(config: pytest.Config, name: str) -> Path:
    tiny = TINY_DIR / name
    return tiny if tiny.exists() else Path(config.getoption("--reference-dir")) / name


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


class Loaded:
    def __init__(self, name: str, directory: Path):
        self.name = name
        self.dir = directory
        self.model = TTSModel.load(str(directory / "config.yaml"))
        self.ref = dict(np.load(directory / "reference.npz"))
        self.is_tiny = directory.parent == TINY_DIR

    def official_voice(self):
        return self.model.voice_state(str(self.dir / "voice_state.safetensors"))


_loaded: dict = {}


@pytest.fixture(scope="module")
def loaded(request: pytest.FixtureRequest, parity_model: str) -> Loaded:
    if parity_model not in _loaded:
        _loaded.clear()  # one full-size model in memory at a time
        _loaded[parity_model] = Loaded(parity_model, model_dir(request.config, parity_model))
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


def run_reference(python: Path, code: str, *args: str) -> str:
    """Run a snippet with the official package; returns its stdout."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    done = subprocess.run([str(python), "-c", code, *args], capture_output=True, text=True, env=env, cwd=ROOT)
    if done.returncode != 0:
        raise AssertionError(f"reference snippet failed:\n{done.stderr[-3000:]}")
    return done.stdout


def pcm_close(got: bytes, expected: bytes, steps: int = 1) -> bool:
    """16-bit PCM that is the same audio to the rounding of BLAS products: the same length, and no
    sample more than `steps` apart. For audio made in two processes whose BLAS threading may differ
    (a product's rounding depends on its thread count and kernels, so bytes need not match)."""
    a, b = np.frombuffer(got, "<i2").astype(np.int32), np.frombuffer(expected, "<i2").astype(np.int32)
    return a.shape == b.shape and (a.size == 0 or int(np.abs(a - b).max()) <= steps)


def error_of(response) -> dict:
    """The error of a server response, checked to be in OpenAI's shape."""
    body = response.json()
    assert set(body) == {"error"} and {"message", "type", "param", "code"} <= set(body["error"]), body
    return body["error"]


def record(model: str, stage: str, nmse: float, max_abs: float, bar: float) -> None:
    _report.append((model, stage, nmse, max_abs, bar))


def record_int8(model: str, ours_nmse: float, official_nmse: float, int8_bytes: int, float_bytes: int) -> None:
    _int8_report.append((model, ours_nmse, official_nmse, int8_bytes, float_bytes))


def _fmt(value: float) -> str:
    return "-inf" if value == -math.inf else f"{value:.1f}"


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ANN001
    if not _report and not _int8_report:
        return
    lines = ["| model | stage | NMSE (dB) | max abs | bar (dB) |", "|---|---|---|---|---|"]
    for model, stage, nmse, max_abs, bar in _report:
        lines.append(f"| {model} | {stage} | {_fmt(nmse)} | {max_abs:.2e} | {bar:.0f} |")
    if _int8_report:
        lines += [
            "",
            "int8 against the official float32 audio (same weights, text and voice, 60 frames, temperature 0):",
            "",
            "| model | ours: int8 bundle PCM NMSE (dB) | official quantize=True PCM NMSE (dB) "
            "| int8 bundle weights (MB) | float32 weights (MB) |",
            "|---|---|---|---|---|",
        ]
        for model, ours, official, small, big in _int8_report:
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


def require_ray(request: pytest.FixtureRequest) -> None:
    """Skip without Ray (the `cluster` extra), or fail under --require-full-reference (CI)."""
    try:
        import ray  # noqa: F401
    except ImportError:
        if request.config.getoption("--require-full-reference"):
            pytest.fail('Ray is not installed: pip install -e ".[cluster]"')
        pytest.skip("Ray is not installed (the cluster extra)")


@contextmanager
def tiny_server(*args: str) -> Iterator[str]:
    """`python -m server` on the tiny model with the test voice (and these arguments); yields its URL."""
    from e2e import harness  # here, not above: the Python 3.8 core run has no HTTP client

    with harness.server(["--model", str(TINY_CONFIG), "--voice", str(VOICE_24K), *args]) as url:
        yield url


def require_browser(request: pytest.FixtureRequest, model: str = "") -> None:
    """Skip (fail under --require-full-reference) without Chromium, or without the model's fixture."""
    from e2e import harness

    missing = harness.CHROMIUM is None or bool(model) and not (harness.REFERENCE / model / "model.safetensors").exists()
    if missing:
        if request.config.getoption("--require-full-reference"):
            pytest.fail("the browser tests need chromium and the full-size fixtures (scripts/test.sh)")
        pytest.skip("needs chromium and the full-size fixtures")


@pytest.fixture(scope="module")
def chromium(request: pytest.FixtureRequest):
    """Debian's Chromium, driven by Playwright (e2e.harness), for a test module."""
    from e2e import harness

    require_browser(request)
    with harness.chromium() as browser:
        yield browser
