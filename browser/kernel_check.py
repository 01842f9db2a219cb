"""The compiled kernels against NumPy where they run: random shapes with odd tails, and the binding's
refusals. The browser tests run it in the worker on the WebAssembly module (worker.js "check"),
tests/core/test_kernels.py on the same source compiled natively.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Dict, List

import numpy as np

from core.portable.network import ops
from core.portable.network.kernels import CompiledKernels, KernelArgumentError, attention_scratch, i8_scratch
from core.portable.network.quantize import Int8Matrix, quantize

# Allowed error: this many float32 epsilons times sqrt(terms), relative to the sum of |terms|.
TOLERANCE = 1e-6


def run(backend: CompiledKernels, seed: int = 7) -> Dict[str, Any]:
    """{"cases", "worst", "failures", "refused"}: `worst` is the largest error as a share of its
    allowed bound (pass: < 1); `refused` counts bad calls the binding refused, out of `refusals`."""
    rng = np.random.default_rng(seed)
    binding = backend.binding
    failures: List[str] = []
    worst = 0.0
    cases = 0

    def randn(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    def compare(what: str, got: np.ndarray, want: np.ndarray, magnitude: Any, terms: int, slack: Any = 0) -> None:
        """Within the rounding bound, plus `slack` where the kernel approximates on purpose."""
        nonlocal worst, cases
        cases += 1
        bound = TOLERANCE * np.sqrt(terms) * magnitude + slack + 1e-30
        share = float(np.max(np.abs(got.astype(np.float64) - want) / bound)) if got.size else 0.0
        worst = max(worst, share)
        if got.shape != want.shape or not share < 1:
            failures.append(f"{what}: error {share:.2f} of the bound, shape {got.shape} vs {want.shape}")

    for m, n, k in itertools.product([1, 2, 3, 5, 17], [1, 4, 5, 13, 64], [1, 3, 4, 16, 17, 33, 100]):
        x, w, b = randn(m, k), randn(n, k), randn(n)
        out = np.empty((m, n), np.float32)
        binding.linear_f32(x, w, b, out)
        compare(f"linear_f32 {m}x{n}x{k}", out, x.astype(np.float64) @ w.T + b, np.abs(x) @ np.abs(w).T + np.abs(b), k)

    # The last spans three of the kernel's panels of rows (128 KB of weights each), the third partial.
    shapes_i8 = [(5, 32, 16), (7, 96, 32), (4, 1024, 64), (3, 40, 40), (6, 100, 100), (9, 66, 33), (301, 1024, 512)]
    for m, (n, k, group) in itertools.product([1, 2, 3, 4, 5, 9, 11, 17, 41], shapes_i8):
        values = rng.integers(-128, 128, (n, k), dtype=np.int8)
        matrix = Int8Matrix(values, rng.random((n, k // group)).astype(np.float32))
        # Rows of different ranges and offsets; one with a zero half, one of one sign.
        x = randn(m, k) * rng.random((m, 1)).astype(np.float32) + randn(m, 1)
        x[0, : k // 2] = 0
        if m > 1:
            x[-1] = np.abs(x[-1])
        b = randn(n)
        sums = np.empty((n, k // group), np.int32)
        binding.i8_sums(values, k // group, sums)
        compare(f"i8_sums {n}x{k}/{group}", sums, values.reshape(n, -1, group).sum(axis=2), np.ones(sums.shape), 1)
        out = np.empty((m, n), np.float32)
        binding.linear_i8(x, values, matrix.scales, sums, b, out, np.empty(i8_scratch(m, k), np.uint8))
        want, magnitude, slack = int8_product(x, matrix, b)
        compare(f"linear_i8 {m}x{n}x{k}/{group}", out, want, magnitude, k, slack)
        # Each row's product is the same whether it comes alone or in a block of rows (4, 8 or 16).
        alone = np.empty((1, n), np.float32)
        for row in range(m):
            binding.linear_i8(
                x[row : row + 1], values, matrix.scales, sums, b, alone, np.empty(i8_scratch(1, k), np.uint8)
            )
            if not np.array_equal(alone[0], out[row]):
                failures.append(f"linear_i8 {m}x{n}x{k}/{group}: row {row} alone differs from it in a block")
    x = np.zeros((2, 64), np.float32)
    x[1, 5] = 1e-35
    matrix = Int8Matrix(rng.integers(-127, 128, (3, 64), dtype=np.int8), np.ones((3, 1), np.float32))
    want, magnitude, slack = int8_product(x, matrix, None)
    compare("linear_i8 of zero rows", backend.linear(x, matrix, None), want, magnitude, 4, slack)
    # Sums past int32's range, where a set adds 16-bit products (AVX2's blocks add int32 runs of 512
    # columns, then doubles): rows of one sign, each value at the top of its range, against rows of
    # 127s and -128s, 1200 columns in one group; 9 rows, a block and one alone.
    x = np.ones((9, 1200), np.float32) * np.arange(1, 10, dtype=np.float32)[:, None]
    values = np.repeat(np.array([[127], [-128], [127], [-128], [127]], np.int8), 1200, axis=1)
    matrix = Int8Matrix(values, np.ones((5, 1), np.float32))
    want, magnitude, slack = int8_product(x, matrix, None)
    compare("linear_i8 past int32", backend.linear(x, matrix, None), want, magnitude, 1200, slack)
    stored = quantize({"w": randn(600, 128)})
    matrix = Int8Matrix(stored["w"], stored["w.int8_scale"])
    x = randn(3, 128)
    want, magnitude, slack = int8_product(x, matrix, None)
    compare("backend int8 linear", backend.linear(x, matrix, None), want, magnitude, 128, slack)

    for (taps, dilation, stride), (m, c, n) in itertools.product(
        [(1, 1, 1), (3, 1, 1), (3, 9, 1), (7, 1, 1), (8, 1, 4), (4, 1, 2)],
        [(1, 1, 1), (5, 2, 9), (9, 7, 33), (16, 32, 16), (13, 5, 500)],
    ):
        x = randn(c, (taps - 1) * dilation + 1 - stride + n * stride)
        w, b = randn(m, c, taps), randn(m)
        want = ops.NUMPY.conv(x.astype(np.float64), w.astype(np.float64), n, stride, dilation, b)
        magnitude = ops.NUMPY.conv(np.abs(x), np.abs(w), n, stride, dilation, np.abs(b))
        compare(
            f"conv {m}x{c}x{taps} d{dilation} s{stride} n{n}",
            backend.conv(x, w, n, stride, dilation, b),
            want,
            magnitude,
            c * taps,
        )

    for taps, dilation, stride in [(3, 1, 1), (8, 1, 4)]:  # several streams at once: [B, C, L]
        x, w, b = randn(3, 5, (taps - 1) * dilation + 1 - stride + 9 * stride), randn(4, 5, taps), randn(4)
        compare(
            f"conv of 3 streams, 4x5x{taps} s{stride}",
            backend.conv(x, w, 9, stride, dilation, b),
            ops.NUMPY.conv(x.astype(np.float64), w.astype(np.float64), 9, stride, dilation, b),
            ops.NUMPY.conv(np.abs(x), np.abs(w), 9, stride, dilation, np.abs(b)),
            5 * taps,
        )

    for rows, cols in [(1, 1), (1, 7), (3, 64), (16, 512), (2, 1027)]:
        x, w, b = randn(rows, cols) * 3 + 1, randn(cols), randn(cols)
        out = np.empty_like(x)
        binding.layer_norm(x, w, b, 1e-5, out)
        want = ops.NUMPY.layer_norm(x.astype(np.float64), w, b, 1e-5)
        compare(f"layer_norm {rows}x{cols}", out, want, np.abs(want) + np.abs(b) + 0.1, cols)
        compare(
            f"layer_norm {rows}x{cols}, no weight",
            backend.layer_norm(x[0], None, None, 1e-6),
            want[0] * 0 + ops.NUMPY.layer_norm(x[0].astype(np.float64), None, None, 1e-6),
            np.ones(cols),
            cols,
        )

    for t, h, h_kv, d, n_keys, capacity, context in [
        (1, 4, 2, 8, 37, 40, None),  # a flow-LM step with grouped-query attention, in a bigger cache
        (5, 4, 4, 12, 20, 20, None),  # a prompt: the last 5 positions
        (16, 8, 8, 64, 40, 40, 25),  # the decoder's window
        (41, 16, 16, 64, 103, 110, None),  # a prompt after a voice
        (9, 4, 2, 8, 30, 30, 6),  # grouped queries in lanes, a window
        (3, 2, 1, 5, 3, 3, 2),
    ]:
        q = randn(t, h, d) * 0.5
        cache_k, cache_v = randn(h_kv, capacity, d), randn(h_kv, capacity, d)
        keys, values = cache_k[:, :n_keys], cache_v[:, :n_keys]
        lead = n_keys - t
        want = ops.NUMPY.attention(
            q.astype(np.float64), keys.astype(np.float64), values.astype(np.float64), lead, context
        )
        magnitude = ops.NUMPY.attention(
            q.astype(np.float64), keys.astype(np.float64), np.abs(values).astype(np.float64), lead, context
        )
        got = backend.attention(q, keys, values, lead, context)
        compare(
            f"attention T{t} H{h}/{h_kv} D{d} L{n_keys} context {context}", got, want, magnitude + 1e-3, max(n_keys, d)
        )

    x = np.concatenate([randn(1001) * 4, np.array([0, 1e-8, -1e-8, -87, -88, -100, -1e30, 50], np.float32)])
    for name in ("elu", "gelu_tanh"):
        with np.errstate(over="ignore"):
            want = getattr(ops.NUMPY, name)(x).astype(np.float64)
        # Activations: within 2e-6 of NumPy's own result, relative, or 2e-7 absolute (e^x - 1 near 0).
        compare(name, getattr(backend, name)(x), want, np.abs(want) + 0.1, 4)

    refused, refusals = _refusals(binding, randn)
    return {"cases": cases, "worst": worst, "failures": failures, "refused": refused, "refusals": refusals}


def int8_product(x: np.ndarray, matrix: Int8Matrix, bias: Any):
    """The float64 product that pk_linear_i8 approximates, the sum of the magnitudes of its terms,
    and how far the kernel may be from it on purpose: each activation is quantized to within
    1/252 of its row's scale, (max(x, 0) - min(x, 0)) / 125 (kernels.c)."""
    dense = matrix.dequantize().astype(np.float64)
    b = np.zeros(matrix.shape[0]) if bias is None else bias.astype(np.float64)
    scale = (np.maximum(x.max(axis=1), 0) - np.minimum(x.min(axis=1), 0)).astype(np.float64) / 125  # [M]
    weights = np.abs(dense).sum(axis=1)  # [N]
    return x @ dense.T + b, np.abs(x) @ np.abs(dense).T + np.abs(b), scale[:, None] / 250 * weights[None]


def _refusals(binding: Any, randn: Callable[..., np.ndarray]):
    """Bad calls a kernel would misread (each must raise KernelArgumentError before any pointer)."""
    x, w, out = randn(2, 8), randn(3, 8), np.empty((2, 3), np.float32)
    read_only = np.empty((2, 3), np.float32)
    read_only.flags.writeable = False
    q, sums, scales, size = w.astype(np.int8), np.zeros((3, 1), np.int32), np.ones((3, 1), np.float32), i8_scratch(2, 8)
    calls = [
        lambda: binding.linear_f32(x.astype(np.float64), w, None, out),
        lambda: binding.linear_f32(randn(8, 2).T, w, None, out),
        lambda: binding.linear_f32(x, randn(3, 7), None, out),
        lambda: binding.linear_f32(x, w, randn(4), out),
        lambda: binding.linear_f32(x, w, None, np.empty((2, 4), np.float32)),
        lambda: binding.linear_f32(x, w, None, read_only),
        lambda: binding.linear_f32(x, w, None, np.empty((3, 2), np.float32).T),
        lambda: binding.linear_i8(x, w, scales, sums, None, out, np.empty(size, np.uint8)),
        lambda: binding.linear_i8(x, q, scales, sums, None, out, np.empty(size - 1, np.uint8)),
        lambda: binding.linear_i8(x, q, scales, sums, None, out, np.empty(size, np.float32)),
        lambda: binding.linear_i8(x, q, scales, sums[:2], None, out, np.empty(size, np.uint8)),
        lambda: binding.linear_i8(x, q, scales, sums * 1.0, None, out, np.empty(size, np.uint8)),
        lambda: binding.i8_sums(q, 3, np.empty((3, 3), np.int32)),
        lambda: binding.i8_sums(q, 1, np.empty((3, 2), np.int32)),
        lambda: binding.conv_f32(randn(2, 3, 3), randn(3, 9), None, np.empty((2, 8), np.float32), 1),
        lambda: binding.elu(randn(4), np.empty(5, np.float32)),
        lambda: binding.layer_norm(randn(2, 8), randn(8), None, 1e-5, np.empty((2, 8), np.float32)),
        lambda: binding.layer_norm(randn(2, 8), randn(7), randn(7), 1e-5, np.empty((2, 8), np.float32)),
        lambda: binding.attention(
            randn(1, 4, 8),
            randn(3, 5, 8),
            randn(3, 5, 8),
            4,
            0,
            np.empty((1, 4, 8), np.float32),
            np.empty(attention_scratch(5, 8), np.float32),
        ),
        lambda: binding.attention(
            randn(1, 4, 8),
            randn(2, 5, 8),
            randn(2, 6, 8),
            4,
            0,
            np.empty((1, 4, 8), np.float32),
            np.empty(attention_scratch(5, 8), np.float32),
        ),
        lambda: binding.attention(
            randn(1, 4, 8),
            randn(2, 5, 8),
            randn(2, 5, 8),
            4,
            0,
            np.empty((1, 4, 8), np.float32),
            np.empty(attention_scratch(5, 8) - 1, np.float32),
        ),
        lambda: binding.attention(
            randn(1, 4, 8),
            randn(2, 8, 5).transpose(0, 2, 1),
            randn(2, 5, 8),
            4,
            0,
            np.empty((1, 4, 8), np.float32),
            np.empty(attention_scratch(5, 8), np.float32),
        ),
        lambda: binding.attention(
            randn(1, 4, 8),
            randn(2, 5, 8),
            randn(4, 5, 8)[::2],
            4,
            0,
            np.empty((1, 4, 8), np.float32),
            np.empty(attention_scratch(5, 8), np.float32),
        ),
        lambda: binding.attention(
            randn(1, 4, 8),
            randn(2, 5, 8),
            randn(2, 5, 8),
            -1,
            0,
            np.empty((1, 4, 8), np.float32),
            np.empty(attention_scratch(5, 8), np.float32),
        ),
    ]
    refused = 0
    for call in calls:
        try:
            call()
        except KernelArgumentError:
            refused += 1
    return refused, len(calls)
