"""The kernels pip compiles for this machine (core/_kernels, loaded by core/native.py): every kernel
against NumPy, whole models on them, core choosing them on import (NumPy where none were built), and
every entry reporting what runs its products."""

from __future__ import annotations

import functools
import struct
import subprocess
import sys
import threading

import numpy as np
import pytest

import core
from core import Runtime, TTSModel, native
from core.browser import kernel_check
from core.portable.network import ops
from core.portable.network.quantize import Int8Matrix
from tests.support.metrics import nmse_db
from tests.support.paths import ROOT, TINY_DIR


@pytest.fixture(scope="module")
def backend(request):
    backend = native.backend()
    if not isinstance(backend, native.NativeKernels):
        if request.config.getoption("--require-full-reference"):
            pytest.fail(f"the native kernels were not built: {backend.description}")
        pytest.skip(backend.description)
    return backend


def test_core_runs_on_the_compiled_kernels_where_they_were_built(backend) -> None:
    """core.TTSModel.load gives its models this host's runtime: the compiled kernels; importing core
    chose nothing (the portable model's backend is still NumPy's)."""
    model = core.TTSModel.load(str(TINY_DIR / "tiny_lsd" / "config.yaml"))
    assert isinstance(model.runtime.backend, native.NativeKernels) and ops.current() is ops.NUMPY
    best = native.instruction_sets()[0]
    assert core.backend().startswith(f"compiled kernels ({best}, _kernels")


def test_one_build_holds_every_instruction_set_of_its_architecture_and_binds_the_best(backend) -> None:
    """The library is built once for every machine of its architecture: it holds each instruction
    set's kernels, says which this processor runs, and the best of those is bound."""
    import platform

    library = native._library()
    compiled = library.pk_sets().decode().split(",")
    machine = platform.machine().lower()
    x86, arm = machine in ("x86_64", "amd64"), machine in ("aarch64", "arm64")
    assert compiled == (
        ["avx512", "avxvnni", "avx2", "baseline"] if x86 else ["i8mm", "dotprod", "baseline"] if arm else ["baseline"]
    )
    runs = native.instruction_sets()
    assert runs[-1] == "baseline" and runs == [name for name in compiled if name in runs]
    assert not library.pk_supports(b"sse9")
    if arm and sys.platform == "linux":
        # The kernel's AT_HWCAP and AT_HWCAP2 bits, read from /proc/self/auxv as qemu's user mode
        # emulates it too (its /proc/cpuinfo is the host's): HWCAP_ASIMDDP, HWCAP2_I8MM.
        with open("/proc/self/auxv", "rb") as auxv:
            vector = dict(struct.iter_unpack("<QQ", auxv.read()))
        dotprod = bool(vector.get(16, 0) & 1 << 20)
        assert ("dotprod" in runs) == dotprod
        assert ("i8mm" in runs) == (dotprod and bool(vector.get(26, 0) & 1 << 13))
    if x86:
        with open("/proc/cpuinfo") as cpuinfo:
            flags = set(cpuinfo.read().split())
        assert ("avx2" in runs) == ({"avx2", "fma"} <= flags)
        assert ("avxvnni" in runs) == ({"avx_vnni", "avx2", "fma"} <= flags)
        avx512 = {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512_vnni", "avx2", "fma"}
        assert ("avx512" in runs) == (avx512 <= flags)
    missing = [name for name in compiled if name not in runs]
    for name in missing:
        with pytest.raises(ValueError, match="does not run"):
            native.backend(name)


@pytest.mark.parametrize("instruction_set", ["avx512", "avxvnni", "avx2", "i8mm", "dotprod", "baseline"])
def test_every_instruction_set_this_machine_runs_equals_numpy(backend, instruction_set) -> None:
    """Each path, forced: the same results within the kernel checks' bounds."""
    if instruction_set not in native.instruction_sets():
        pytest.skip(f"this processor does not run {instruction_set}")
    forced = native.backend(instruction_set)
    assert instruction_set in forced.description
    report = kernel_check.run(forced)
    assert report["failures"] == [] and report["worst"] < 1 and report["refused"] == report["refusals"]


def test_the_binding_takes_a_checked_arrays_pointer_from_the_extension(backend, monkeypatch) -> None:
    """The extension's `address` is NumPy's data pointer (a view's offset included, read-only arrays
    too) and refuses what is not contiguous; the backend's binding hands the kernels its pointers."""
    from core import _kernels

    base = np.arange(64, dtype=np.float32).reshape(8, 8)
    frozen = np.ones(5, np.int8)
    frozen.flags.writeable = False
    for array in (base, base[3:5], base[2], frozen, np.empty(0, np.float32)):
        assert _kernels.address(array) == array.__array_interface__["data"][0]
    with pytest.raises(ValueError):
        _kernels.address(base[:, 1])
    binding = backend.binding
    assert binding._arg.keywords["address"] is _kernels.address
    calls = []
    spying = lambda array: calls.append(array.shape) or _kernels.address(array)  # noqa: E731
    monkeypatch.setattr(binding, "_arg", functools.partial(binding._arg.func, address=spying))
    out = np.empty((2, 8), np.float32)
    binding.linear_f32(base[3:5], base, None, out)
    assert calls == [(2, 8), (8, 8), (2, 8)]
    np.testing.assert_allclose(out, base[3:5] @ base.T, rtol=1e-6)


def test_without_the_extension_core_runs_on_numpy_and_says_why(monkeypatch) -> None:
    monkeypatch.setattr(native, "EXTENSION", "core._not_built")
    fallback = native.backend()
    assert fallback.name == "numpy" and "no compiled kernels" in fallback.description


def test_the_command_line_says_what_runs_its_products(backend, tmp_path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "core.cli", "generate", "--model", str(TINY_DIR / "tiny_lsd" / "config.yaml")]
        + ["--voice", str(TINY_DIR / "tiny_lsd" / "voice_state.safetensors"), "--text", "Hi.", "--max-frames", "2"]
        + ["-o", str(tmp_path / "out.wav")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert f"(on {native.plainly(core.host.runtime().backend)})" in done.stderr.splitlines()[0]


def test_the_native_kernels_equal_numpy_and_refuse_bad_calls(backend) -> None:
    report = kernel_check.run(backend)
    assert report["failures"] == [] and report["worst"] < 1 and report["refused"] == report["refusals"]


def test_int8_bundles_run_int8_on_the_server_backend(backend, tmp_path, monkeypatch) -> None:
    from core.export import export
    from core.portable.network import quantize

    monkeypatch.setattr(quantize, "MIN_ELEMENTS", 1024)  # the tiny model's matrices are all small
    monkeypatch.setattr(backend, "SMALL", 0)
    export(
        str(TINY_DIR / "tiny_lsd" / "config.yaml"),
        str(tmp_path / "b"),
        [str(TINY_DIR / "tiny_lsd" / "voice_state.safetensors")],
    )
    options = {"temperature": 0.0, "max_frames": 8, "eos_threshold": 1e9}
    want = TTSModel.load(str(tmp_path / "b"), runtime=Runtime()).generate("Hello there.", None, **options)
    model = TTSModel.load(str(tmp_path / "b"), runtime=Runtime(backend))
    assert isinstance(model.params["flow_lm"]["transformer"]["layers"][0]["linear1"]["weight"], Int8Matrix)
    got = model.generate("Hello there.", None, **options)
    # int8 activations here (kernels.c: within 1/252 of a row's scale), float ones on NumPy.
    assert got.shape == want.shape and -120 < nmse_db(got, want) < -70


def test_large_float_products_and_convolutions_stay_with_numpy(backend, monkeypatch) -> None:
    monkeypatch.setattr(native, "SPLIT_ROWS", 10**9)  # the routing alone (many rows: two threads, below)
    calls = []
    for name in ("linear", "conv"):
        original = getattr(ops.NUMPY, name)
        monkeypatch.setattr(ops.NUMPY, name, lambda *a, n=name, f=original: (calls.append(n), f(*a))[1])
    x, w = np.ones((native.SMALL_BATCH + 1, 64), np.float32), np.ones((256, 64), np.float32)
    backend.linear(x, w, None)
    backend.linear(x[: native.SMALL_BATCH - 1], w, None)
    backend.conv(np.ones((2, 3, 9), np.float32), np.ones((4, 3, 2), np.float32), 8, 1, 1, None)  # two streams
    assert calls == ["linear", "conv"]
    # One stream over few steps (the decoder's first layers) runs on the kernels.
    x1, w1 = np.ones((3, 9), np.float32), np.ones((4, 3, 2), np.float32)
    np.testing.assert_array_equal(backend.conv(x1, w1, 8, 1, 1, None), np.full((4, 8), 6))
    assert calls == ["linear", "conv"]
    # Few output channels over many steps (the decoder's last layers) run on the kernels.
    x, w = np.ones((2, 3, native.CONV_STEPS + 2), np.float32), np.ones((4, 3, 3), np.float32)
    np.testing.assert_array_equal(
        backend.conv(x, w, native.CONV_STEPS, 1, 1, None), np.full((2, 4, native.CONV_STEPS), 9)
    )
    assert calls == ["linear", "conv"]


def test_one_streams_convolution_over_many_steps_is_the_kernels_on_the_sets_where_that_pays(
    backend, monkeypatch
) -> None:
    """Every set this processor runs: one stream over more than FEW_STEPS steps, with many output
    channels, is NumPy's, but on ONE_STREAM_ANY_STEPS's sets the kernels'; the same sums either way."""
    calls = []
    original = ops.NUMPY.conv
    monkeypatch.setattr(ops.NUMPY, "conv", lambda *a: (calls.append(a[2]), original(*a))[1])
    steps = native.FEW_STEPS + 1
    x, w = np.ones((3, steps + 1), np.float32), np.ones((native.CONV_CHANNELS + 1, 3, 2), np.float32)
    for name in native.instruction_sets():
        calls.clear()
        got = native.backend(name).conv(x, w, steps, 1, 1, None)
        np.testing.assert_array_equal(got, np.full((native.CONV_CHANNELS + 1, steps), 6))
        assert calls == ([] if name in native.ONE_STREAM_ANY_STEPS else [steps]), name


@pytest.mark.parametrize("rows", native.TRANSPOSED_ROWS)
def test_float_products_of_a_frames_rows_run_as_the_kernels_convolution(backend, monkeypatch, rows) -> None:
    """The decoder transformer's products (16 rows a frame) are the kernels' convolution of one tap
    over the rows, never NumPy's product: equal to it within float32 rounding, bias included, for
    rows given in any leading shape."""
    monkeypatch.setattr(ops.NUMPY, "linear", lambda *a: pytest.fail("NumPy ran a product of a frame's rows"))
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, rows // 2, 96)).astype(np.float32)
    w, b = rng.standard_normal((40, 96)).astype(np.float32), rng.standard_normal(40).astype(np.float32)
    got = backend.linear(x, w, b)
    want = x.astype(np.float64) @ w.T.astype(np.float64) + b
    assert got.shape == (2, rows // 2, 40) and got.dtype == np.float32 and got.flags.c_contiguous
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_the_backend_is_safe_on_two_threads(backend) -> None:
    """The server's scheduler runs the flow LM and the decoder on two threads, which call the
    kernels at once (ctypes lets go of the GIL): no call may share a buffer with another."""
    rng = np.random.default_rng(3)

    def case(keys: int):
        q = rng.standard_normal((1, 8, 64)).astype(np.float32)
        k = rng.standard_normal((8, keys, 64)).astype(np.float32)
        v = rng.standard_normal((8, keys, 64)).astype(np.float32)
        return q, k, v, ops.NUMPY.attention(q, k, v, keys - 1, None)

    cases = [case(n) for n in (300, 700)]
    values = rng.integers(-127, 128, (512, 384)).astype(np.int8)
    weight = Int8Matrix(values, rng.random((512, 1)).astype(np.float32) / 127)
    rows = [rng.standard_normal((r, 384)).astype(np.float32) for r in (1, 5)]
    expected = [backend.linear(x, weight, None) for x in rows]  # one thread: what two must give too
    failures = []

    def work(i: int) -> None:
        q, k, v, reference = cases[i]
        for _ in range(150):
            if np.abs(backend.attention(q, k, v, k.shape[1] - 1, None) - reference).max() > 1e-4:
                failures.append(f"attention {i}")
            if not np.array_equal(backend.linear(rows[i], weight, None), expected[i]):
                failures.append(f"int8 linear {i}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_a_product_of_many_rows_runs_on_two_threads_with_the_same_result(backend, monkeypatch) -> None:
    """A text prompt's products on two threads (int8: shared by the library's two, panel by panel
    of the weight's rows; float32: halves of the weight's rows, one on a Python thread), each output
    as the whole product computes it (int8: the same integers; float32: OpenBLAS's rounding), the
    bias's halves with them; from ROW_HALVES_FROM rows, int8 halves of x's rows (the library's
    pair)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((native.SPLIT_ROWS + 3, 4096)).astype(np.float32)
    values = rng.integers(-127, 128, (96, 4096), dtype=np.int8)  # 3 panels of 32 rows (kernels.c's I8_PANEL_BYTES)
    matrix = Int8Matrix(values, rng.random((96, 1), dtype=np.float32))
    floats = rng.standard_normal((96, 4096)).astype(np.float32)
    bias = rng.standard_normal(96).astype(np.float32)
    pairs, shares, threads = [], [], []
    pair, share = backend._pair, backend._shared
    monkeypatch.setattr(backend, "_pair", lambda *a: pairs.append(1) or pair(*a))
    monkeypatch.setattr(backend, "_shared", lambda *a: shares.append(1) or share(*a))
    executor = native.second_thread()  # made at its first use, once
    assert native.second_thread() is executor
    submit = executor.submit
    monkeypatch.setattr(executor, "submit", lambda *a: threads.append(1) or submit(*a))
    backend.linear(x, matrix, bias)
    assert pairs == shares == threads == []  # a small matrix stays on the caller's thread
    decoder = Int8Matrix(np.ones((2048, 512), np.int8), np.ones((2048, 1), np.float32))  # the Mimi decoder's largest
    backend.linear(np.ones((48, 512), np.float32), decoder, None)
    assert pairs == shares == threads == []  # a decoder's products stay on its thread, beside the flow LM's
    monkeypatch.setattr(native, "SPLIT_WEIGHTS", values.size)
    monkeypatch.setattr(native, "SPLIT_FLOAT_WEIGHTS", values.size)
    monkeypatch.setattr(native, "SPLIT_SIDE", 96)
    split_int8, split_float = backend.linear(x, matrix, bias), backend.linear(x, floats, bias)
    assert shares == threads == [1] and pairs == []
    many = rng.standard_normal((native.ROW_HALVES_FROM + 21, 4096)).astype(np.float32)  # halves of x's rows
    split_many = backend.linear(many, matrix, bias)
    assert pairs == shares == [1]
    monkeypatch.setattr(native, "SPLIT_ROWS", 10**9)
    assert np.array_equal(split_int8, backend.linear(x, matrix, bias))
    assert np.array_equal(split_many, backend.linear(many, matrix, bias))
    assert np.allclose(split_float, backend.linear(x, floats, bias), rtol=1e-5, atol=1e-5)
    assert np.allclose(split_float, x @ floats.T + bias, rtol=1e-4, atol=1e-4)


def test_callers_of_the_pair_at_once_each_get_their_own_products(backend, monkeypatch) -> None:
    """The library's helper thread serves one caller at a time; another at the same moment runs its
    whole product itself: every product is the whole product, however the calls meet (shared panel
    by panel, or halves of x's rows), and whether or not the helper comes before the caller is done."""
    rng = np.random.default_rng(5)
    values = rng.integers(-127, 128, (160, 2048), dtype=np.int8)  # 3 panels of 64 rows (kernels.c's I8_PANEL_BYTES)
    matrix = Int8Matrix(values, rng.random((160, 1), dtype=np.float32))
    bias = rng.standard_normal(160).astype(np.float32)
    sizes = [native.ROW_HALVES_FROM, native.SPLIT_ROWS + 1, native.ROW_HALVES_FROM + 10]
    xs = [rng.standard_normal((rows, 2048)).astype(np.float32) for rows in sizes]
    split_rows = native.SPLIT_ROWS
    monkeypatch.setattr(native, "SPLIT_ROWS", 10**9)
    wanted = [backend.linear(x, matrix, bias) for x in xs]
    monkeypatch.setattr(native, "SPLIT_ROWS", split_rows)
    monkeypatch.setattr(native, "SPLIT_WEIGHTS", 0)
    monkeypatch.setattr(native, "SPLIT_SIDE", 0)
    failures = []

    def work(i: int) -> None:
        for _ in range(200):
            if not np.array_equal(backend.linear(xs[i], matrix, bias), wanted[i]):
                failures.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_a_forked_child_splits_products_with_a_helper_of_its_own(backend) -> None:
    """A child of fork() has none of its parent's threads: its first split product starts a helper of
    its own (core/_kernels.c), where waiting on the parent's would never end."""
    child = subprocess.Popen([sys.executable, "-c", FORKED_CHILD], cwd=str(ROOT), stdout=subprocess.PIPE, text=True)
    try:
        out, _ = child.communicate(timeout=120)
    finally:
        child.kill()
    assert child.returncode == 0 and out.split() == ["parent", "child"]


# Run in a fresh interpreter (forking the test process itself would copy pytest's threads too).
FORKED_CHILD = """
import os, sys
import numpy as np
from core import native
from core.portable.network.quantize import Int8Matrix
backend = native.backend()
native.SPLIT_WEIGHTS = native.SPLIT_SIDE = 0
rng = np.random.default_rng(5)
matrix = Int8Matrix(rng.integers(-127, 128, (160, 96), dtype=np.int8), rng.random((160, 1), dtype=np.float32))
x = rng.standard_normal((20, 96)).astype(np.float32)
split = backend.linear(x, matrix, None)
print("parent", flush=True)
pid = os.fork()
if pid == 0:
    ok = np.array_equal(backend.linear(x, matrix, None), split)
    print("child" if ok else "differs", flush=True)
    os._exit(0 if ok else 1)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_attention_of_any_number_of_queries_is_the_kernels(backend, monkeypatch) -> None:
    """A step's one query, a decoder frame's 16, a prompt's 40 and a voice encoding's 256 in a
    window: all on the kernels (NumPy's attention is never called), all equal to NumPy's."""
    reference = ops.NUMPY.attention
    calls = []
    monkeypatch.setattr(ops.NUMPY, "attention", lambda *a: (calls.append(a[0].shape[0]), reference(*a))[1])
    rng = np.random.default_rng(4)
    for queries, context in ((1, None), (16, 20), (40, None), (256, 250)):
        q = rng.standard_normal((queries, 4, 32)).astype(np.float32)
        keys, values = (rng.standard_normal((2, queries + 10, 32)).astype(np.float32) for _ in range(2))
        got = backend.attention(q, keys, values, 10, context)
        assert not calls
        np.testing.assert_allclose(got, reference(q, keys, values, 10, context), rtol=1e-5, atol=1e-5)


def test_a_runtime_can_be_held_to_any_set_this_processor_runs(backend) -> None:
    """What scripts/bench.py --kernels uses to measure one machine's sets side by side."""
    from core import host

    for name in native.instruction_sets():
        assert host.runtime(name).backend.description.startswith(f"compiled kernels ({name}, ")
    assert host.runtime(None) is host.runtime()
    with pytest.raises(ValueError, match="does not run the sse9 kernels"):
        host.runtime("sse9")
