"""The compiled kernels (core/kernels.c, bound by core/kernels.py) against NumPy: every kernel on
random shapes with odd tails, the refusals of the binding, whole models on the kernel backend, and
the build's safety checks. Here the kernels are compiled natively; tests/test_e2e.py runs the same
checks on the WebAssembly module in Chromium."""

from __future__ import annotations

import itertools
import shutil

import numpy as np
import pytest

from core import TTSModel, ops
from core.kernels import CompiledKernels, KernelArgumentError, KernelBinding
from core.metrics import nmse_db
from core.quantize import Int8Matrix, quantize

from conftest import TINY_DIR

RNG = np.random.default_rng(7)


def randn(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.fixture(scope="module")
def kernels(native_kernels) -> CompiledKernels:
    return CompiledKernels(native_kernels, "native")


@pytest.fixture(scope="module")
def eager_kernels(native_kernels) -> CompiledKernels:
    """The kernels for every product, however small (the tiny models have only small ones)."""
    backend = CompiledKernels(native_kernels, "native")
    backend.SMALL = 0
    return backend


def linear(kernels: CompiledKernels, x: np.ndarray, weight, bias) -> np.ndarray:
    """The kernel's product whatever its size (the backend gives small float ones to NumPy)."""
    out = np.empty((x.shape[0], weight.shape[0]), np.float32)
    if isinstance(weight, Int8Matrix):
        scratch = np.empty(4 * x.shape[1], np.float32)
        kernels.binding.linear_i8(x, weight.values, weight.scales, bias, out, scratch)
    else:
        kernels.binding.linear_f32(x, weight, bias, out)
    return out


def close(got: np.ndarray, want: np.ndarray, magnitude: np.ndarray, k: int) -> None:
    """Equal within float32 rounding of k-term sums whose terms add up to `magnitude` in absolute value."""
    assert got.shape == want.shape
    bound = 1e-6 * np.sqrt(k) * magnitude + 1e-30
    assert np.all(np.abs(got.astype(np.float64) - want) <= bound), np.max(np.abs(got - want) / bound)


@pytest.mark.parametrize("m", [1, 2, 3, 5, 16, 17, 40])
def test_linear_f32_equals_numpy(kernels, m: int) -> None:
    for n, k in itertools.product([1, 3, 4, 5, 8, 13, 64], [1, 3, 4, 7, 8, 16, 17, 33, 100]):
        x, w, b = randn(m, k), randn(n, k), randn(n)
        want = (x.astype(np.float64) @ w.T.astype(np.float64)) + b
        magnitude = np.abs(x) @ np.abs(w).T + np.abs(b)
        close(linear(kernels, x, w, b), want, magnitude, k)
        close(linear(kernels, x, w, None), want - b, magnitude, k)
        close(kernels.linear(x, w, b), want, magnitude, k)  # through the backend (NumPy for the small ones)
    x, w = randn(3, 64), randn(300, 64)
    assert kernels.linear(x[0], w, None).shape == (300,)
    close(kernels.linear(x, w, None), x.astype(np.float64) @ w.T, np.abs(x) @ np.abs(w).T, 64)


@pytest.mark.parametrize("m", [1, 2, 3, 5, 17])
def test_linear_int8_equals_numpy_on_the_dequantized_matrix(kernels, m: int) -> None:
    for n, k, group in [(1, 16, 16), (5, 32, 16), (7, 96, 32), (9, 64, 64), (4, 1024, 64), (3, 40, 40), (6, 24, 8)]:
        weights = quantize({"w": randn(n, k) * 3}, group=group) if n * k >= 1024 else None
        values = weights["w"] if weights else RNG.integers(-127, 128, (n, k), dtype=np.int8)
        scales = weights["w.int8_scale"] if weights else RNG.random((n, k // group)).astype(np.float32)
        matrix = Int8Matrix(values, scales)
        x, b = randn(m, k), randn(n)
        dense = matrix.dequantize()
        want = x.astype(np.float64) @ dense.T.astype(np.float64) + b
        magnitude = np.abs(x) @ np.abs(dense).T + np.abs(b)
        close(linear(kernels, x, matrix, b), want, magnitude, k)
        close(kernels.linear(x, matrix, b), want, magnitude, k)
        np.testing.assert_allclose(ops.NUMPY.linear(x, matrix, b), want, rtol=0, atol=1e-3 * np.abs(want).max())


@pytest.mark.parametrize(
    "taps,dilation,stride", [(1, 1, 1), (3, 1, 1), (3, 2, 1), (7, 1, 1), (3, 9, 1), (8, 1, 4), (4, 1, 2)]
)
def test_conv_equals_numpy(kernels, taps: int, dilation: int, stride: int) -> None:
    for m, c, n in [(1, 1, 1), (4, 3, 8), (5, 2, 9), (9, 7, 33), (16, 32, 16), (2, 5, 3)]:
        context = (taps - 1) * dilation + 1 - stride
        x = randn(c, context + n * stride)
        w, b = randn(m, c, taps), randn(m)
        want = ops.NUMPY.conv(w.astype(np.float64), x.astype(np.float64), n, stride, dilation, b)
        magnitude = ops.NUMPY.conv(np.abs(w), np.abs(x), n, stride, dilation, np.abs(b))
        close(kernels.conv(w, x, n, stride, dilation, b), want, magnitude, c * taps)
        flipped = x[:, ::-1]  # a view with a negative stride
        want = ops.NUMPY.conv(w.astype(np.float64), flipped.astype(np.float64), n, stride, dilation, None)
        close(kernels.conv(w, flipped, n, stride, dilation, None), want, magnitude, c * taps)


def test_activations_equal_numpy(kernels) -> None:
    x = np.concatenate([randn(1001) * 4, np.array([0, -0.0, 1e-8, -1e-8, -87, -88, -100, -1e30, 50, 1e30], np.float32)])
    for name in ("elu", "gelu_tanh"):
        with np.errstate(over="ignore"):  # NumPy's GELU overflows x^3 on the way to the right limit
            want = getattr(ops.NUMPY, name)(x)
        got = getattr(kernels, name)(x)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-7, err_msg=name)
    grid = randn(3, 5, 7)
    np.testing.assert_allclose(kernels.elu(grid), ops.NUMPY.elu(grid), rtol=2e-6, atol=2e-7)
    assert kernels.elu(grid).shape == grid.shape


def test_the_binding_refuses_what_a_kernel_would_misread(native_kernels) -> None:
    binding = KernelBinding(native_kernels)
    x, w, out = randn(2, 8), randn(3, 8), np.empty((2, 3), np.float32)
    binding.linear_f32(x, w, None, out)
    read_only = np.empty((2, 3), np.float32)
    read_only.flags.writeable = False
    refused = [
        lambda: binding.linear_f32(x.astype(np.float64), w, None, out),  # dtype
        lambda: binding.linear_f32(np.asfortranarray(randn(3, 8)).T.T[:2], w, None, out),  # not C-contiguous
        lambda: binding.linear_f32(randn(8, 2).T, w, None, out),  # a transposed view
        lambda: binding.linear_f32(x, randn(3, 7), None, out),  # inner sizes differ
        lambda: binding.linear_f32(x, w, randn(4), out),  # bias length
        lambda: binding.linear_f32(x, w, None, np.empty((2, 4), np.float32)),  # output shape
        lambda: binding.linear_f32(x, w, None, read_only),  # output not writable
        lambda: binding.linear_f32(x, w, None, np.empty((3, 2), np.float32).T),  # output not contiguous
        lambda: binding.linear_f32(x.tolist(), w, None, out),  # not an array
        lambda: binding.linear_f32(x[0], w, None, out),  # 1-D
        lambda: binding.linear_i8(x, w, np.ones((3, 1), np.float32), None, out, np.empty(32, np.float32)),  # not int8
        lambda: binding.linear_i8(
            x, w.astype(np.int8), np.ones((3, 3), np.float32), None, out, np.empty(32, np.float32)
        ),
        lambda: binding.linear_i8(
            x, w.astype(np.int8), np.ones((3, 1), np.float32), None, out, np.empty(31, np.float32)
        ),
        lambda: binding.conv_f32(randn(2, 3, 3), randn(3, 9), None, np.empty((2, 8), np.float32), 1),  # x too short
        lambda: binding.conv_f32(randn(2, 3, 3), randn(3, 10), None, np.empty((2, 8), np.float32), 0),  # dilation 0
        lambda: binding.conv_f32(randn(2, 4, 3), randn(3, 10), None, np.empty((2, 8), np.float32), 1),  # channels
        lambda: binding.elu(randn(4), np.empty(5, np.float32)),
        lambda: binding.elu(randn(4), read_only),
        lambda: binding.gelu_tanh(randn(4, 2).T, np.empty((2, 4), np.float32)),
    ]
    for i, call in enumerate(refused):
        with pytest.raises(KernelArgumentError):
            call()
            pytest.fail(f"call {i} was not refused")
    with pytest.raises(KernelArgumentError, match="lacks pk_elu"):
        KernelBinding({k: v for k, v in native_kernels.items() if k != "pk_elu"})


@pytest.mark.parametrize("name", ["tiny_lsd", "tiny_gqa", "tiny_no_resample"])
def test_a_model_on_the_kernels_gives_the_numpy_audio(eager_kernels, name: str) -> None:
    """Voice cloning (strided convolutions), the decoder (transposed ones) and the flow LM, float32."""
    directory = TINY_DIR / name
    text, options = "Hello world, one more time.", {"temperature": 0.0, "max_frames": 12, "eos_threshold": 1e9}
    reference = TTSModel.load(str(directory / "config.yaml"))
    voice_file = str(directory.parent.parent / "voice" / "voice_24000.wav")
    want = reference.generate(text, reference.voice_state(voice_file), **options)
    with ops.using(eager_kernels):
        model = TTSModel.load(str(directory / "config.yaml"))
        got = model.generate(text, model.voice_state(voice_file), **options)
    assert got.shape == want.shape and nmse_db(got, want) < -100


def test_int8_bundles_stay_int8_on_the_kernels(eager_kernels, tmp_path) -> None:
    from core.bundle import export

    export(
        str(TINY_DIR / "tiny_lsd" / "config.yaml"),
        str(tmp_path / "b"),
        [str(TINY_DIR / "tiny_lsd" / "voice_state.safetensors")],
    )
    text, options = "Hello world.", {"temperature": 0.0, "max_frames": 8, "eos_threshold": 1e9}
    on_numpy = TTSModel.load(str(tmp_path / "b"))
    with ops.using(eager_kernels):
        on_kernels = TTSModel.load(str(tmp_path / "b"))
    layer = on_kernels.params["flow_lm"]["transformer"]["layers"][0]
    assert isinstance(layer["linear1"]["weight"], Int8Matrix)
    assert isinstance(on_numpy.params["flow_lm"]["transformer"]["layers"][0]["linear1"]["weight"], np.ndarray)
    want = on_numpy.generate(text, None, **options)
    with ops.using(eager_kernels):
        got = on_kernels.generate(text, None, **options)
    assert nmse_db(got, want) < -100


@pytest.mark.skipif(
    shutil.which("clang") is None or shutil.which("wasm-objdump") is None, reason="needs clang, lld, wabt"
)
def test_the_wasm_build_refuses_a_module_that_would_use_memory_of_its_own(tmp_path, monkeypatch) -> None:
    from scripts import build_kernels

    source = (build_kernels.SOURCE).read_text()
    stack = source.replace(
        "static float dot(const float *x, const float *w, int K) {\n  vf a = {0};",
        "static float dot(const float *x, const float *w, int K) {\n"
        "  volatile float spill[4] = {0};\n  vf a = {spill[K & 3]};",
    )
    data = source.replace(
        "static inline vf splat(float x) { return (vf){0} + x; }",
        "static const float table[5] = {1, 2, 3, 4, 5};\n"
        "static inline vf splat(float x) { return (vf){0} + x * table[(int)x & 3]; }",
    )
    for broken, reason in ((stack, "uses a global"), (data, "Data section")):
        assert broken != source
        (tmp_path / "k.c").write_text(broken)
        monkeypatch.setattr(build_kernels, "SOURCE", tmp_path / "k.c")
        with pytest.raises(build_kernels.BuildError, match=reason):
            build_kernels.build_wasm(tmp_path / "k.wasm")
