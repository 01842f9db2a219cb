"""The kernels pip compiles for this machine (server/_kernels, loaded by server/native.py): every
kernel against NumPy, whole models on the server's backend, and the server reporting what it runs."""

from __future__ import annotations

import numpy as np
import pytest

from browser import kernel_check
from core import TTSModel, ops
from core.metrics import nmse_db
from core.quantize import Int8Matrix
from server import native

from conftest import TINY_DIR


@pytest.fixture(scope="module")
def backend(request):
    backend, description = native.load()
    if not isinstance(backend, native.ServerKernels):
        if request.config.getoption("--require-full-reference"):
            pytest.fail(f"the native kernels were not built: {description}")
        pytest.skip(description)
    return backend


def test_the_native_kernels_equal_numpy_and_refuse_bad_calls(backend) -> None:
    report = kernel_check.run(backend)
    assert report["failures"] == [] and report["worst"] < 1 and report["refused"] == report["refusals"]


def test_int8_bundles_run_int8_on_the_server_backend(backend, tmp_path, monkeypatch) -> None:
    from core import quantize
    from core.bundle import export

    monkeypatch.setattr(quantize, "MIN_ELEMENTS", 1024)  # the tiny model's matrices are all small
    monkeypatch.setattr(backend, "SMALL", 0)
    export(
        str(TINY_DIR / "tiny_lsd" / "config.yaml"),
        str(tmp_path / "b"),
        [str(TINY_DIR / "tiny_lsd" / "voice_state.safetensors")],
    )
    options = {"temperature": 0.0, "max_frames": 8, "eos_threshold": 1e9}
    want = TTSModel.load(str(tmp_path / "b")).generate("Hello there.", None, **options)
    with ops.using(backend):
        model = TTSModel.load(str(tmp_path / "b"))
        assert isinstance(model.params["flow_lm"]["transformer"]["layers"][0]["linear1"]["weight"], Int8Matrix)
        got = model.generate("Hello there.", None, **options)
    assert got.shape == want.shape and nmse_db(got, want) < -90


def test_large_float_products_and_convolutions_stay_with_numpy(backend, monkeypatch) -> None:
    calls = []
    for name in ("linear", "conv"):
        original = getattr(ops.NUMPY, name)
        monkeypatch.setattr(ops.NUMPY, name, lambda *a, n=name, f=original: (calls.append(n), f(*a))[1])
    x, w = np.ones((native.SMALL_BATCH + 1, 64), np.float32), np.ones((256, 64), np.float32)
    backend.linear(x, w, None)
    backend.linear(x[: native.SMALL_BATCH], w, None)
    backend.conv(np.ones((4, 3, 2), np.float32), np.ones((3, 9), np.float32), 8, 1, 1, None)
    assert calls == ["linear", "conv"]
