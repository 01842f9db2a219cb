"""The compiled kernels (core/portable/network/kernels.c, bound by kernels.py beside it) against NumPy: every kernel on
random shapes with odd tails, the refusals of the binding, whole models on the kernel backend, and
the build's safety checks. Here the kernels are compiled natively; tests/browser/test_e2e.py runs the same
checks on the WebAssembly module in Chromium."""

from __future__ import annotations

import shutil
import tracemalloc

import numpy as np
import pytest

from core import Runtime, TTSModel
from core.portable.network import ops
from core.portable.network.kernels import SIGNATURES, CompiledKernels, KernelArgumentError, KernelBinding, i8_scratch
from core.portable.network.quantize import Int8Matrix
from tests.support.metrics import nmse_db
from tests.support.paths import TINY_DIR

RNG = np.random.default_rng(7)


def randn(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.fixture(scope="module")
def kernels(native_kernels) -> CompiledKernels:
    return CompiledKernels(native_kernels, "native", "native")


@pytest.fixture(scope="module")
def eager_kernels(native_kernels) -> CompiledKernels:
    """The kernels for every product, however small (the tiny models have only small ones)."""
    backend = CompiledKernels(native_kernels, "native", "native")
    backend.SMALL = 0
    return backend


def test_every_kernel_equals_numpy_and_bad_calls_are_refused(kernels) -> None:
    """browser/kernel_check.py, which the browser tests run on the WebAssembly module (imported
    here: the Python 3.8 run of these tests has the checkout on its path, where browser/ is not
    core.browser, and no compiled kernels to check)."""
    from core.browser import kernel_check

    report = kernel_check.run(kernels)
    assert report["failures"] == [] and report["worst"] < 1 and report["cases"] > 200
    assert report["refused"] == report["refusals"] > 10


def test_small_float_products_stay_with_numpy_and_int8_ones_do_not(kernels) -> None:
    calls = []

    def counted(name, function):
        return lambda *args: (calls.append(name), function(*args))

    functions = {name: counted(name, function) for name, function in kernels.binding._f.items()}
    backend = CompiledKernels(functions, "counted", "counted")
    x = randn(1, 64)
    np.testing.assert_allclose(backend.linear(x, randn(8, 64), None).shape, (1, 8))
    assert calls == []
    backend.linear(x, randn(512, 64), None)
    small = Int8Matrix(np.ones((8, 128), np.int8), np.ones((8, 1), np.float32))  # int8 always takes the kernel
    backend.linear(randn(1, 128), small, None)
    backend.linear(randn(2, 128), small, None)
    # The matrix's group sums (for the activations' zero points) are computed once, on first use.
    assert calls == ["pk_linear_f32", "pk_i8_sums", "pk_linear_i8", "pk_linear_i8"]
    assert backend.keeps_int8((256, 64)) and not backend.keeps_int8((8, 64)) and not ops.NUMPY.keeps_int8((4096, 1024))
    assert backend.linear(randn(64), randn(512, 64), None).shape == (512,)


def test_a_convolution_of_several_streams_allocates_its_output_only(kernels) -> None:
    """Each stream's result is written into the output in place: a per-stream result stacked into
    a copy, layer after layer of the voice encoder, grew the browser's flow worker from 188 to 225 MB."""
    x, w = randn(2, 64, 4006), randn(64, 64, 7)
    tracemalloc.start()
    try:
        out = kernels.conv(x, w, 4000, 1, 1, None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.shape == (2, 64, 4000) and peak < out.nbytes + 64 * 1024, (peak, out.nbytes)
    np.testing.assert_allclose(out[1], kernels.conv(x[1], w, 4000, 1, 1, None), rtol=0, atol=0)


def test_the_binding_refuses_a_module_without_every_kernel(native_kernels) -> None:
    with pytest.raises(KernelArgumentError, match="lacks pk_elu"):
        KernelBinding({k: v for k, v in native_kernels.items() if k != "pk_elu"})
    binding = KernelBinding(native_kernels)
    with pytest.raises(KernelArgumentError, match="not an array|NumPy array"):
        binding.elu([1.0, 2.0], np.empty(2, np.float32))
    with pytest.raises(KernelArgumentError, match="do not divide"):
        binding.linear_i8(
            randn(1, 8),
            np.ones((2, 8), np.int8),
            np.ones((2, 3), np.float32),
            np.zeros((2, 3), np.int32),
            None,
            np.empty((1, 2), np.float32),
            np.empty(i8_scratch(1, 8), np.uint8),
        )


@pytest.mark.parametrize("name", ["tiny_lsd", "tiny_gqa", "tiny_no_resample"])
def test_a_model_on_the_kernels_gives_the_numpy_audio(eager_kernels, name: str) -> None:
    """Voice cloning (strided convolutions), the decoder (transposed ones) and the flow LM, float32."""
    directory = TINY_DIR / name
    text, options = "Hello world, one more time.", {"temperature": 0.0, "max_frames": 12, "eos_threshold": 1e9}
    reference = TTSModel.load(str(directory / "config.yaml"), runtime=Runtime())
    voice_file = str(directory.parent.parent / "voice" / "voice_24000.wav")
    want = reference.generate(text, reference.voice_state(voice_file), **options)
    model = TTSModel.load(str(directory / "config.yaml"), runtime=Runtime(eager_kernels))
    got = model.generate(text, model.voice_state(voice_file), **options)
    assert got.shape == want.shape and nmse_db(got, want) < -100


def test_int8_bundles_stay_int8_on_the_kernels(eager_kernels, tmp_path, monkeypatch) -> None:
    from core.export import export
    from core.portable.network import quantize as quantize_module

    monkeypatch.setattr(quantize_module, "MIN_ELEMENTS", 1024)  # the tiny model's matrices are all small
    export(
        str(TINY_DIR / "tiny_lsd" / "config.yaml"),
        str(tmp_path / "b"),
        [str(TINY_DIR / "tiny_lsd" / "voice_state.safetensors")],
    )
    text, options = "Hello world.", {"temperature": 0.0, "max_frames": 8, "eos_threshold": 1e9}
    on_numpy = TTSModel.load(str(tmp_path / "b"), runtime=Runtime())
    on_kernels = TTSModel.load(str(tmp_path / "b"), runtime=Runtime(eager_kernels))
    layer = on_kernels.params["flow_lm"]["transformer"]["layers"][0]
    assert isinstance(layer["linear1"]["weight"], Int8Matrix)
    assert isinstance(on_numpy.params["flow_lm"]["transformer"]["layers"][0]["linear1"]["weight"], np.ndarray)
    want = on_numpy.generate(text, None, **options)
    got = on_kernels.generate(text, None, **options)
    # The kernels multiply int8 activations (each within 1/252 of its row's scale, kernels.c); NumPy
    # multiplies the float activations by the dequantized weights.
    assert -120 < nmse_db(got, want) < -80


@pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("clang", "clang-19", "wasm-objdump")),
    reason="needs clang, lld, clang-19, lld-19, wabt",
)
@pytest.mark.parametrize("build", ["SIMD", "RELAXED"])
def test_the_wasm_build_refuses_a_module_that_would_use_memory_of_its_own(tmp_path, monkeypatch, build) -> None:
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
            build_kernels.build_wasm(tmp_path / "k.wasm", getattr(build_kernels, build))


def test_the_bindings_signatures_are_the_c_prototypes() -> None:
    from scripts.build_kernels import SOURCE, signatures

    source = SOURCE.read_text()
    assert signatures(source) == SIGNATURES
    changed = source.replace("float *Y, int n) {", "float *Y, float n) {", 1)  # pk_elu's last argument
    assert signatures(changed)["pk_elu"] == "ppf" != SIGNATURES["pk_elu"]
