"""The compiled kernels on 64-bit ARM (aarch64), emulated by qemu on this x86-64 machine
(scripts/aarch64.py prepares the interpreter and builds core/_kernels for it as setup.py would): on
three processor models the library binds the best set each runs (qemu's `max`: i8mm; Cortex-A76:
dotprod; Cortex-A72: the baseline), tests/core/test_native.py and test_kernels.py pass there (every
set against NumPy, tiny models on the kernels against NumPy's audio), and every set gives the same
int8 products, bit for bit. Emulation proves results, not speed."""

from __future__ import annotations

import itertools
import json
import subprocess

import numpy as np
import pytest

from core.browser import kernel_check
from core.portable.network.quantize import Int8Matrix
from scripts import aarch64

pytestmark = pytest.mark.slow  # ~30 s of emulated tests per processor model

# Group sizes whose groups begin or end inside smmla's 8-column chunks, rows ending in a half
# chunk, partial blocks (6 or 7 rows) and tiles (N % 4), and a flow-LM row's size.
INT8_CASES = [
    (m, n, k, group)
    for (k, group), m, n in itertools.product(
        [(24, 12), (12, 4), (100, 20), (64, 8), (1024, 1024)], [1, 7, 9, 40], [3, 9]
    )
]

# Run by each emulated interpreter: the sets it runs, the backend core binds, and each set's int8
# products of the cases in argv[1] (x{i}, q{i}, s{i}, b{i}) into argv[2] (set/{i}).
PROBE = """
import json, sys
import numpy as np
import core
from core import native
from core.portable.network.kernels import i8_scratch
cases = np.load(sys.argv[1])
sets = native.instruction_sets()
out = {}
for name in sets:
    binding = native.backend(name).binding
    for i in range(len(cases.files) // 4):
        x, q, s, b = (cases[f"{a}{i}"] for a in "xqsb")
        sums = np.empty(s.shape, np.int32)
        binding.i8_sums(q, s.shape[1], sums)
        y = np.empty((x.shape[0], q.shape[0]), np.float32)
        binding.linear_i8(x, q, s, sums, b, y, np.empty(i8_scratch(*x.shape), np.uint8))
        out[f"{name}/{i}"] = y
np.savez(sys.argv[2], **out)
print(json.dumps({"sets": sets, "backend": core.backend()}))
"""


@pytest.fixture(scope="module")
def emulated(request):
    """build/aarch64, made or refreshed: the emulated interpreters and this checkout's tree."""
    missing = aarch64.missing_tools()
    problem = f"no aarch64 emulation: missing {', '.join(missing)} (.ci/run installs them)" if missing else ""
    if not problem:
        try:
            aarch64.prepare()
        except (OSError, RuntimeError, subprocess.CalledProcessError) as error:
            problem = f"build/aarch64 could not be prepared: {error}"
    if problem:
        if request.config.getoption("--require-full-reference"):
            pytest.fail(problem)
        pytest.skip(problem)
    return aarch64.TREE


@pytest.mark.parametrize("cpu", list(aarch64.CPUS))
def test_the_kernel_tests_pass_on_emulated_aarch64(emulated, cpu) -> None:
    """The native kernels' tests, emulated, where the sets the processor lacks are skipped and the
    best it runs is bound (the WebAssembly build's tests need the host's clang: left out)."""
    done = subprocess.run(
        [str(aarch64.python(cpu)), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--require-full-reference"]
        + ["tests/core/test_native.py", "tests/core/test_kernels.py", "-k", "not wasm_build and not signatures"],
        cwd=str(emulated),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert " failed" not in done.stdout and " passed" in done.stdout


def test_each_processor_binds_its_best_set_and_every_set_gives_the_same_int8_products(emulated, tmp_path) -> None:
    """i8mm's smmla blocks, dotprod's sdot rows and the baseline's widening products make the same
    integer sums, then the same float32 operations: the same results, bit for bit, on every
    processor, within the kernel checks' bound of the float64 product."""
    rng = np.random.default_rng(11)
    inputs, matrices = {}, []
    for i, (m, n, k, group) in enumerate(INT8_CASES):
        x = rng.standard_normal((m, k)).astype(np.float32) * rng.random((m, 1)).astype(np.float32) * 4
        x += rng.standard_normal((m, 1)).astype(np.float32)
        matrix = Int8Matrix(rng.integers(-128, 128, (n, k), dtype=np.int8), rng.random((n, k // group), np.float32))
        inputs.update({f"x{i}": x, f"q{i}": matrix.values, f"s{i}": matrix.scales, f"b{i}": rng.random(n, np.float32)})
        matrices.append(matrix)
    np.savez(tmp_path / "cases.npz", **inputs)
    results = {}
    for cpu, best in aarch64.CPUS.items():
        done = subprocess.run(
            [str(aarch64.python(cpu)), "-c", PROBE, str(tmp_path / "cases.npz"), str(tmp_path / f"{cpu}.npz")],
            cwd=str(emulated),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        report = json.loads(done.stdout.splitlines()[-1])
        runs = list(aarch64.CPUS.values())
        assert report["sets"] == runs[runs.index(best) :], cpu
        assert report["backend"].startswith(f"compiled kernels ({best}, _kernels.cpython-311-aarch64"), cpu
        with np.load(tmp_path / f"{cpu}.npz") as products:
            results.update({f"{cpu}/{key}": products[key] for key in products.files})
    assert len(results) == (3 + 2 + 1) * len(INT8_CASES)
    for i, matrix in enumerate(matrices):
        same = [value for key, value in results.items() if key.endswith(f"/{i}")]
        assert all(np.array_equal(value, same[0]) for value in same), INT8_CASES[i]
        want, magnitude, slack = kernel_check.int8_product(inputs[f"x{i}"], matrix, inputs[f"b{i}"])
        bound = kernel_check.TOLERANCE * np.sqrt(matrix.shape[1]) * magnitude + slack
        assert np.all(np.abs(same[0] - want) < bound), INT8_CASES[i]
