"""The model's heavy operations behind one seam: NumPy by default, compiled kernels where a host has them.

On CPython NumPy hands matrix products to a BLAS; in Pyodide 0.17 it has none and no SIMD, so the
same products run a scalar loop ten times slower. Whoever loads a model chooses its backend (its
Runtime: core.portable.model): the browser's WebAssembly SIMD module (browser/engine.py), or on
CPython the kernels pip compiled (core/native.py, the host's runtime: core/host.py); both are bound
by core/portable/network/kernels.py. The model's computations run under its backend (`using`, which holds
it for the thread, or the task, that computes); the layers call the functions below and never know
which backend runs them. The NumPy backend is complete: every product runs on it where nothing
else is given.

A backend provides `linear`, `conv`, `attention`, `layer_norm`, `elu`, `gelu_tanh`, a `name`, a
`description` (for people: logs, /health), and `keeps_int8(shape)`: whether its `linear` multiplies
an `Int8Matrix` of that shape itself (then int8 bundles keep such matrices int8 at load; the others
are dequantized).
"""

from __future__ import annotations

import contextvars
import math
from contextlib import contextmanager
from typing import Any, Iterator, Optional, Tuple

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .quantize import Int8Matrix, LowRank, Weight

# Largest im2col block, in float32 elements, so long inputs (voice prompts) stay in bounded memory.
_IM2COL_BLOCK = 1 << 22


class NumpyBackend:
    name = "numpy"

    def __init__(self, description: str = "NumPy"):
        self.description = description  # what runs the products, for people (logs, /health)

    def because(self, reason: str) -> NumpyBackend:
        """This backend, described with the reason nothing faster runs."""
        return NumpyBackend(f"NumPy ({reason})")

    def keeps_int8(self, shape: Tuple[int, ...]) -> bool:
        return False  # NumPy has no int8 product: dequantize at load

    def linear(self, x: np.ndarray, weight: Weight, bias: Optional[np.ndarray]) -> np.ndarray:
        """x [in] or [T, in] -> [out] or [T, out], the weight stored [out, in] as in nn.Linear.

        For a few rows, OpenBLAS is 2x faster computing W @ x^T than x @ W^T (measured on the codec's
        16-step frames); the result is then a transposed view, which the next layer reads as it is.
        """
        if isinstance(weight, Int8Matrix):
            weight = weight.dequantize()
        y = x @ weight.T if x.ndim == 1 else (weight @ x.T).T  # [T, in] -> [T, out]
        return y if bias is None else y + bias

    def conv(
        self, x: np.ndarray, weight: np.ndarray, n: int, stride: int, dilation: int, bias: Optional[np.ndarray]
    ) -> np.ndarray:
        """y[m, t] = sum over c, j of weight[m, c, j] * x[c, t * stride + j * dilation] (+ bias[m]):
        weight [M, C, K], x [C, L] holding the left context -> y [M, n]; x [B, C, L] -> y [B, M, n]
        (B streams in one product). As one product over an im2col view, in blocks of columns."""
        if x.ndim == 3:
            return self._conv_streams(x, weight, n, stride, dilation, bias)
        c_out, c_in, k = weight.shape
        step = x.strides[1]
        windows = as_strided(x, shape=(c_in, k, n), strides=(x.strides[0], dilation * step, stride * step))
        kernel = weight.reshape(c_out, c_in * k)  # [M, C*K]
        block = max(1, _IM2COL_BLOCK // (c_in * k))
        if n <= block:
            y = kernel @ windows.reshape(c_in * k, n)  # [M, n]
        else:
            y = np.empty((c_out, n), dtype=np.float32)
            for start in range(0, n, block):
                stop = min(start + block, n)
                y[:, start:stop] = kernel @ windows[:, :, start:stop].reshape(c_in * k, stop - start)
        return y if bias is None else y + bias[:, None]

    def _conv_streams(
        self, x: np.ndarray, weight: np.ndarray, n: int, stride: int, dilation: int, bias: Optional[np.ndarray]
    ) -> np.ndarray:
        """The B streams' windows side by side as the columns of one product (the weights are read
        once for all of them), in blocks of whole streams."""
        c_out, c_in, k = weight.shape
        streams, step = x.shape[0], x.strides[2]
        windows = as_strided(
            x, shape=(c_in, k, streams, n), strides=(x.strides[1], dilation * step, x.strides[0], stride * step)
        )  # [C, K, B, n], a view
        kernel = weight.reshape(c_out, c_in * k)  # [M, C*K]
        per_block = max(1, _IM2COL_BLOCK // (c_in * k * max(n, 1)))
        y = np.empty((c_out, streams, n), dtype=np.float32)
        for start in range(0, streams, per_block):
            stop = min(start + per_block, streams)
            y[:, start:stop] = (kernel @ windows[:, :, start:stop].reshape(c_in * k, (stop - start) * n)).reshape(
                c_out, stop - start, n
            )
        y = y.transpose(1, 0, 2)  # [B, M, n]
        return y if bias is None else y + bias[:, None]

    def attention(
        self, q: np.ndarray, keys: np.ndarray, values: np.ndarray, lead: int, context: Optional[int]
    ) -> np.ndarray:
        """Causal softmax attention: q [T, H, D] over keys and values [H_kv, L, D] -> [T, H * D].

        Query head h reads key head h // (H / H_kv) (grouped-query attention); query t sees key j
        when 0 <= lead + t - j (< context with a window), `lead` being how far the first query is
        past the first key. Each key head's scores are one matrix product.
        """
        t, h, d = q.shape
        h_kv, n_keys = keys.shape[0], keys.shape[1]
        group = h // h_kv
        queries = q.reshape(t, h_kv, group, d).transpose(1, 2, 0, 3).reshape(h_kv, group * t, d)
        scores = queries @ keys.transpose(0, 2, 1)  # [H_kv, G*T, L]
        scores *= np.float32(1.0 / math.sqrt(d))
        mask = self._mask(lead, t, n_keys, context)
        if mask is not None:
            scores.reshape(h_kv, group, t, -1)[...] += mask  # -inf where a query may not look
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        out = scores @ values  # [H_kv, G*T, D]
        return out.reshape(h_kv, group, t, d).transpose(2, 0, 1, 3).reshape(t, h * d)  # heads in order kv*G + g

    @staticmethod
    def _mask(lead: int, t: int, n_keys: int, context: Optional[int]) -> Optional[np.ndarray]:
        """[T, L] additive mask (0 or -inf) of the keys each query may see; None when it sees all.
        (Keeping the decoder's few masks saved 1-4% of its time on CPython: not worth a cache.)"""
        delta = lead + np.arange(t)[:, None] - np.arange(n_keys)[None, :]  # [T, L] query minus key position
        visible = delta >= 0
        if context is not None:
            visible &= delta < context
        return None if visible.all() else np.where(visible, np.float32(0), np.float32(-np.inf))

    def layer_norm(
        self, x: np.ndarray, weight: Optional[np.ndarray], bias: Optional[np.ndarray], eps: float
    ) -> np.ndarray:
        """LayerNorm over the last axis with the biased variance (nn.LayerNorm)."""
        mean = x.mean(axis=-1, keepdims=True)
        centered = x - mean
        var = np.mean(centered * centered, axis=-1, keepdims=True)
        y = centered / np.sqrt(var + np.float32(eps))
        if weight is not None:
            y = y * weight + bias
        return y

    def elu(self, x: np.ndarray) -> np.ndarray:
        """ELU(x) = max(x, exp(min(x, 0)) - 1), since exp(x) - 1 >= x everywhere.

        exp - 1 instead of expm1: NumPy's float32 exp is vectorised and expm1 is not (4x slower on
        the codec's activations); the absolute error stays below 1e-7.
        """
        out = np.minimum(x, 0)
        np.exp(out, out=out)
        out -= 1
        np.maximum(x, out, out=out)
        return out

    def gelu_tanh(self, x: np.ndarray) -> np.ndarray:
        """GELU with the tanh approximation (F.gelu(approximate="tanh"))."""
        inner = np.float32(0.7978845608028654) * (x + np.float32(0.044715) * x * x * x)
        return np.float32(0.5) * x * (np.float32(1.0) + np.tanh(inner))


NUMPY = NumpyBackend()
# The backend of the computation under way, for this thread (each starts with NumPy) or task.
_backend: contextvars.ContextVar = contextvars.ContextVar("backend", default=NUMPY)


def current() -> Any:
    """The backend the operations below run on here and now."""
    return _backend.get()


@contextmanager
def using(backend: Any) -> Iterator[Any]:
    """Run the operations on `backend` for the duration of a block (in this thread or task only)."""
    token = _backend.set(backend)
    try:
        yield backend
    finally:
        _backend.reset(token)


def linear(x: np.ndarray, weight: Weight, bias: Optional[np.ndarray] = None) -> np.ndarray:
    if isinstance(weight, LowRank):  # an adapter kept apart: the base's product plus its rank-r one
        y = _backend.get().linear(x, weight.base, bias)  # [T, out] or [out]
        return y + (x @ weight.down.T) @ weight.up.T
    return _backend.get().linear(x, weight, bias)


def conv(
    x: np.ndarray, weight: np.ndarray, n: int, stride: int = 1, dilation: int = 1, bias: Optional[np.ndarray] = None
) -> np.ndarray:
    return _backend.get().conv(x, weight, n, stride, dilation, bias)


def attention(q: np.ndarray, keys: np.ndarray, values: np.ndarray, lead: int, context: Optional[int]) -> np.ndarray:
    return _backend.get().attention(q, keys, values, lead, context)


def layer_norm(x: np.ndarray, weight: Optional[np.ndarray], bias: Optional[np.ndarray], eps: float) -> np.ndarray:
    return _backend.get().layer_norm(x, weight, bias, eps)


def elu(x: np.ndarray) -> np.ndarray:
    return _backend.get().elu(x)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    return _backend.get().gelu_tanh(x)
