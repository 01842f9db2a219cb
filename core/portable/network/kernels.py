"""The compiled kernels of core/portable/network/kernels.c as a core.portable.network.ops backend.

The kernels take raw pointers: in the browser they run inside Pyodide's own WebAssembly memory, so
Python hands them NumPy data pointers and nothing is copied; natively they are the same C compiled
for the machine. A kernel trusts its pointers, and inside Pyodide an out-of-bounds write does not
trap, it silently corrupts the heap. So every call goes through `KernelBinding`, which checks each
array's type, dtype, C-contiguity, shape and (for outputs) writability first, and refuses anything
else with a KernelArgumentError naming the argument. `CompiledKernels` is the backend on top: it
makes activations contiguous, allocates outputs and chooses the kernel.

`functions` maps the exported names (pk_linear_f32, ...) to callables that take ints: the module's
exports through Pyodide's JS bridge, or ctypes functions.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping, Optional, Tuple

import numpy as np

from . import ops
from .quantize import Int8Matrix, Weight

# Each kernel's arguments in order: "p" a pointer, "i" an int, "f" a float. The C prototypes are the
# truth (kernels.c): scripts/build_kernels.py reads them and fails the build where this table differs.
SIGNATURES = {
    "pk_linear_f32": "ppppiii",
    "pk_linear_i8": "ppppppiiiip",
    "pk_i8_rows": "piiipi",
    "pk_i8_panel": "pppppiiiipii",
    "pk_i8_sums": "ppiii",
    "pk_conv_f32": "ppppiiiiii",
    "pk_elu": "ppi",
    "pk_gelu_tanh": "ppi",
    "pk_layer_norm": "ppppiif",
    "pk_attention": "pppppiiiiiiiif",
}
NAMES = tuple(SIGNATURES)
_INT_MAX = 2**31 - 1


class KernelArgumentError(ValueError):
    """An array a kernel would misread: refused before any pointer is handed over."""


def _pointer(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def _checked(
    name: str,
    array: Any,
    dtype: Any,
    shape: Tuple[int, ...],
    writable: bool = False,
    optional: bool = False,
    *,
    address: Callable[[np.ndarray], int],
) -> int:
    """The data pointer of `array` (by `address`) after checking it is what the kernel will read (or write)."""
    if array is None and optional:
        return 0
    if not isinstance(array, np.ndarray):
        raise KernelArgumentError(f"{name}: expected a NumPy array, got {type(array).__name__}")
    if array.dtype != dtype:
        raise KernelArgumentError(f"{name}: expected {np.dtype(dtype)}, got {array.dtype}")
    if array.shape != shape:
        raise KernelArgumentError(f"{name}: expected shape {shape}, got {array.shape}")
    if not array.flags.c_contiguous:
        raise KernelArgumentError(f"{name}: expected a C-contiguous array")
    if writable and not array.flags.writeable:
        raise KernelArgumentError(f"{name}: the output must be writable")
    if array.size > _INT_MAX:
        raise KernelArgumentError(f"{name}: {array.size} elements is more than a kernel indexes")
    return address(array)


def _head_rows(name: str, array: np.ndarray, head_stride: int) -> int:
    """The data pointer of a float32 [H, L, D] array whose heads are each L contiguous rows of D,
    `head_stride` bytes apart (a view of a cache that holds more rows than L is fine)."""
    problem = _head_layout_problem(array, head_stride)
    if problem is not None:
        raise KernelArgumentError(f"{name}: {problem}")
    return _pointer(array)


def _head_layout_problem(array: np.ndarray, head_stride: int) -> Optional[str]:
    """What keeps `array` from the layout `_head_rows` accepts; None when it has it."""
    if array.dtype != np.float32:
        return f"expected float32, got {array.dtype}"
    heads, rows, d = array.shape
    if array.strides[2] != 4 or (rows > 1 and array.strides[1] != 4 * d):
        return "each head's rows must be contiguous"
    if array.strides[0] != head_stride or head_stride % 4 or (heads > 1 and head_stride < 4 * rows * d):
        return f"heads must lie {head_stride} bytes apart, after their rows"
    return None


# Each native set's I8_BLOCK and I8_BLOCK_FROM (kernels.c): rows per packed block, and the rows from
# which a product is packed (AVX-512 VNNI; AVX2, AVX-VNNI and aarch64's i8mm).
I8_BLOCKS = ((16, 6), (8, 6))


# Rows of the weight that AVX2's blocks hold widened to int16 (kernels.c's I8_TILE there).
I8_WIDE_ROWS = 8


def i8_scratch(rows: int, columns: int) -> int:
    """The int8 kernel's scratch in bytes for `rows` rows of `columns`: every row's two parts, a zero
    point each, then (4-byte aligned) a float32 scale each, then room for the rows packed again in
    blocks (I8_BLOCKS: the most any set packs), from a 64-byte boundary, and after them for
    I8_WIDE_ROWS rows of the weight as int16 for each of two threads (core/_kernels.c shares a
    product between two)."""
    packed = max(-(-rows // block) * block if rows >= start else 0 for block, start in I8_BLOCKS)
    blocks = 2 * packed * columns + 64 + 2 * 2 * I8_WIDE_ROWS * columns if packed else 0
    return (2 * rows * columns + rows + 3) // 4 * 4 + 4 * rows + blocks


def attention_scratch(keys: int, head_size: int) -> int:
    """pk_attention's scratch in float32 values for `keys` keys of `head_size`: a vector's lanes
    (16 at most, AVX-512's) for each key's scores, each of the query's values and the lanes'
    bounds (kernels.c's attention_lanes)."""
    return (head_size + keys + 2) * 16


def _length(array: np.ndarray, minimum: int) -> int:
    """The length of a 1-D scratch array, if it holds at least `minimum` values."""
    if not (isinstance(array, np.ndarray) and array.ndim == 1 and array.shape[0] >= minimum):
        raise KernelArgumentError(f"scratch: expected a 1-D array of at least {minimum} values")
    return array.shape[0]


def _dims(*values: int) -> None:
    for value in values:
        if not 0 <= value <= _INT_MAX:
            raise KernelArgumentError(f"dimension {value} out of range")


class KernelBinding:
    """One checked call per kernel: arguments are arrays, never pointers. `address` gives a checked
    (C-contiguous) array's data pointer: NumPy's __array_interface__ by default, the native
    extension's buffer lookup on CPython (core/native.py), a twentieth of its time."""

    def __init__(
        self, functions: Mapping[str, Callable[..., Any]], address: Optional[Callable[[np.ndarray], int]] = None
    ):
        missing = [name for name in NAMES if name not in functions]
        if missing:
            raise KernelArgumentError(f"the kernel module lacks {', '.join(missing)}")
        self._f = {name: functions[name] for name in NAMES}
        self._arg = functools.partial(_checked, address=address or _pointer)

    def linear_f32(self, x: np.ndarray, weight: np.ndarray, bias: Optional[np.ndarray], out: np.ndarray) -> None:
        """out[M, N] = x[M, K] @ weight[N, K]^T + bias[N]."""
        if not (isinstance(x, np.ndarray) and x.ndim == 2 and isinstance(weight, np.ndarray) and weight.ndim == 2):
            raise KernelArgumentError("linear_f32: x and weight must be 2-D arrays")
        (m, k), n = x.shape, weight.shape[0]
        _dims(m, n, k)
        self._f["pk_linear_f32"](
            self._arg("x", x, np.float32, (m, k)),
            self._arg("weight", weight, np.float32, (n, k)),
            self._arg("bias", bias, np.float32, (n,), optional=True),
            self._arg("out", out, np.float32, (m, n), writable=True),
            m,
            n,
            k,
        )

    def linear_i8(
        self,
        x: np.ndarray,
        values: np.ndarray,
        scales: np.ndarray,
        sums: np.ndarray,
        bias: Optional[np.ndarray],
        out: np.ndarray,
        scratch: np.ndarray,
    ) -> None:
        """out[M, N] ~ x[M, K] @ (values[N, K] * scales[N, K / G] per group of G columns)^T + bias[N],
        each row of x quantized to two 7-bit parts on the way (kernels.c); sums: int32 [N, K / G], the groups'
        sums of values (`i8_sums`); scratch: uint8 [i8_scratch(M, K)], written by the kernel."""
        self._f["pk_linear_i8"](*self.linear_i8_arguments(x, values, scales, sums, bias, out, scratch))

    def linear_i8_arguments(
        self,
        x: np.ndarray,
        values: np.ndarray,
        scales: np.ndarray,
        sums: np.ndarray,
        bias: Optional[np.ndarray],
        out: np.ndarray,
        scratch: np.ndarray,
    ) -> Tuple[int, ...]:
        """linear_i8's arguments as pk_linear_i8 takes them (pointers and ints), every array checked:
        for a caller that runs the kernel itself (core/native.py runs two at once). The arrays must
        outlive the call."""
        if not (isinstance(x, np.ndarray) and x.ndim == 2 and isinstance(scales, np.ndarray) and scales.ndim == 2):
            raise KernelArgumentError("linear_i8: x and scales must be 2-D arrays")
        (m, k), (n, groups) = x.shape, scales.shape
        if groups == 0 or k % groups:
            raise KernelArgumentError(f"linear_i8: {groups} scale groups do not divide {k} columns")
        _dims(m, n, k)
        return (
            self._arg("x", x, np.float32, (m, k)),
            self._arg("values", values, np.int8, (n, k)),
            self._arg("scales", scales, np.float32, (n, groups)),
            self._arg("sums", sums, np.int32, (n, groups)),
            self._arg("bias", bias, np.float32, (n,), optional=True),
            self._arg("out", out, np.float32, (m, n), writable=True),
            m,
            n,
            k,
            k // groups,
            self._arg("scratch", scratch, np.uint8, (i8_scratch(m, k),), writable=True),
        )

    def i8_sums(self, values: np.ndarray, groups: int, out: np.ndarray) -> None:
        """out[N, groups] = the sum of each group of K / groups consecutive values of each row of values [N, K]."""
        if not (isinstance(values, np.ndarray) and values.ndim == 2):
            raise KernelArgumentError("i8_sums: values must be a 2-D array")
        n, k = values.shape
        if groups <= 0 or k % groups:
            raise KernelArgumentError(f"i8_sums: {groups} groups do not divide {k} columns")
        _dims(n, k)
        self._f["pk_i8_sums"](
            self._arg("values", values, np.int8, (n, k)),
            self._arg("out", out, np.int32, (n, groups), writable=True),
            n,
            k,
            k // groups,
        )

    def conv_f32(
        self, weight: np.ndarray, x: np.ndarray, bias: Optional[np.ndarray], out: np.ndarray, dilation: int
    ) -> None:
        """out[M, N] = sum over c, j of weight[M, C, T][m, c, j] * x[c, n + j * dilation] + bias[m];
        x [C, L] with L >= N + (T - 1) * dilation."""
        if not (isinstance(weight, np.ndarray) and weight.ndim == 3 and isinstance(x, np.ndarray) and x.ndim == 2):
            raise KernelArgumentError("conv_f32: weight must be 3-D and x 2-D")
        if not (isinstance(out, np.ndarray) and out.ndim == 2):
            raise KernelArgumentError("conv_f32: out must be a 2-D array")
        (m, c, taps), length, n = weight.shape, x.shape[1], out.shape[1]
        if dilation < 1 or length < n + (taps - 1) * dilation:
            raise KernelArgumentError(f"conv_f32: x holds {length} steps, {n} outputs need {n + (taps - 1) * dilation}")
        _dims(m, c, taps, n, length, dilation)
        self._f["pk_conv_f32"](
            self._arg("weight", weight, np.float32, (m, c, taps)),
            self._arg("x", x, np.float32, (c, length)),
            self._arg("bias", bias, np.float32, (m,), optional=True),
            self._arg("out", out, np.float32, (m, n), writable=True),
            m,
            c,
            taps,
            n,
            length,
            dilation,
        )

    def layer_norm(
        self, x: np.ndarray, weight: Optional[np.ndarray], bias: Optional[np.ndarray], eps: float, out: np.ndarray
    ) -> None:
        """out = LayerNorm of each row of x [..., C] (weight and bias [C], both or neither)."""
        if not isinstance(x, np.ndarray) or x.ndim == 0:
            raise KernelArgumentError("layer_norm: x must be an array of rows")
        cols = x.shape[-1]
        if (weight is None) != (bias is None):
            raise KernelArgumentError("layer_norm: weight and bias come together")
        _dims(x.size // max(cols, 1), cols)
        self._f["pk_layer_norm"](
            self._arg("x", x, np.float32, x.shape),
            self._arg("weight", weight, np.float32, (cols,), optional=True),
            self._arg("bias", bias, np.float32, (cols,), optional=True),
            self._arg("out", out, np.float32, x.shape, writable=True),
            x.size // max(cols, 1),
            cols,
            float(eps),
        )

    def attention(
        self,
        q: np.ndarray,
        keys: np.ndarray,
        values: np.ndarray,
        lead: int,
        context: int,
        out: np.ndarray,
        scores: np.ndarray,
    ) -> None:
        """out [T, H, D] = causal softmax attention of q [T, H, D] over keys and values [H_kv, L, D]
        (each head's rows contiguous, the same layout for both); scores: the kernel's scratch,
        float32 [>= attention_scratch(L, D)]."""
        if not all(isinstance(a, np.ndarray) and a.ndim == 3 for a in (q, keys, values)):
            raise KernelArgumentError("attention: q, keys and values must be 3-D arrays")
        (t, h, d), (h_kv, n_keys, _) = q.shape, keys.shape
        if h_kv == 0 or h % h_kv or keys.shape != (h_kv, n_keys, d) or values.shape != keys.shape:
            raise KernelArgumentError(
                f"attention: queries {q.shape} do not fit keys {keys.shape} / values {values.shape}"
            )
        if lead < 0 or context < 0:
            raise KernelArgumentError("attention: lead and context must be >= 0")
        _dims(t, h, d, n_keys, lead, context)
        self._f["pk_attention"](
            self._arg("q", q, np.float32, (t, h, d)),
            _head_rows("keys", keys, keys.strides[0]),
            _head_rows("values", values, keys.strides[0]),
            self._arg("out", out, np.float32, (t, h, d), writable=True),
            self._arg("scores", scores, np.float32, (_length(scores, attention_scratch(n_keys, d)),), True),
            t,
            h,
            h_kv,
            d,
            n_keys,
            keys.strides[0] // 4,
            lead,
            context,
            float(1.0 / np.sqrt(d)),
        )

    def elu(self, x: np.ndarray, out: np.ndarray) -> None:
        self._elementwise("pk_elu", x, out)

    def gelu_tanh(self, x: np.ndarray, out: np.ndarray) -> None:
        self._elementwise("pk_gelu_tanh", x, out)

    def _elementwise(self, name: str, x: np.ndarray, out: np.ndarray) -> None:
        if not isinstance(x, np.ndarray):
            raise KernelArgumentError(f"{name}: expected a NumPy array, got {type(x).__name__}")
        self._f[name](self._arg("x", x, np.float32, x.shape), self._arg("out", out, np.float32, x.shape, True), x.size)


class CompiledKernels:
    """A core.portable.network.ops backend on the compiled kernels (int8 linear layers stay int8).

    A call through a JS bridge costs about what NumPy needs for a product of SMALL multiply-adds
    (measured in Pyodide 0.17), so float32 products smaller than that stay with NumPy, and int8
    matrices smaller than that are dequantized at load.
    """

    SMALL = 16384

    def __init__(
        self,
        functions: Mapping[str, Callable[..., Any]],
        name: str,
        description: str,
        address: Optional[Callable[[np.ndarray], int]] = None,
    ):
        self.binding = KernelBinding(functions, address)
        self.name = name
        self.description = description

    def keeps_int8(self, shape: Tuple[int, ...]) -> bool:
        return shape[0] * shape[1] >= self.SMALL

    def linear(self, x: np.ndarray, weight: Weight, bias: Optional[np.ndarray]) -> np.ndarray:
        if not isinstance(weight, Int8Matrix) and x.size * weight.shape[0] < self.SMALL:
            return ops.NUMPY.linear(x, weight, bias)
        rows = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, x.shape[-1])  # [M, K]
        out = np.empty((rows.shape[0], weight.shape[0]), dtype=np.float32)
        if isinstance(weight, Int8Matrix):
            # Scratch of the call's own: a server runs the backend on two threads at once.
            scratch = np.empty(i8_scratch(*rows.shape), np.uint8)
            self.binding.linear_i8(rows, weight.values, weight.scales, self._sums(weight), bias, out, scratch)
        else:
            self.binding.linear_f32(rows, weight, bias, out)
        return out.reshape(x.shape[:-1] + (weight.shape[0],))

    def _sums(self, weight: Int8Matrix) -> np.ndarray:
        """The matrix's group sums, computed on its first product (two threads may both compute them:
        the same values)."""
        if weight.sums is None:
            sums = np.empty(weight.scales.shape, np.int32)
            self.binding.i8_sums(weight.values, weight.scales.shape[1], sums)
            weight.sums = sums
        return weight.sums

    def conv(
        self, x: np.ndarray, weight: np.ndarray, n: int, stride: int, dilation: int, bias: Optional[np.ndarray]
    ) -> np.ndarray:
        if x.ndim == 2:
            return self.conv(x[None], weight, n, stride, dilation, bias)[0]
        out = np.empty((x.shape[0], weight.shape[0], n), dtype=np.float32)  # [B, M, n]
        for stream, y in zip(x, out):  # streams one by one, each written in place
            taps, stream, spacing = weight, np.ascontiguousarray(stream, dtype=np.float32), dilation
            if stride > 1:
                taps, stream = _polyphase(weight, stream, n, stride, dilation)
                spacing = 1
            self.binding.conv_f32(taps, stream, bias, y, spacing)
        return out

    def layer_norm(
        self, x: np.ndarray, weight: Optional[np.ndarray], bias: Optional[np.ndarray], eps: float
    ) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.float32)
        out = np.empty_like(x)
        self.binding.layer_norm(x, weight, bias, eps, out)
        return out

    def attention(
        self, q: np.ndarray, keys: np.ndarray, values: np.ndarray, lead: int, context: Optional[int]
    ) -> np.ndarray:
        t, h, d = q.shape
        out = np.empty((t, h, d), np.float32)
        scores = np.empty(attention_scratch(keys.shape[1], d), np.float32)  # the call's own, as the int8 scratch
        q = np.ascontiguousarray(q, dtype=np.float32)
        stride = keys.strides[0]
        if _head_layout_problem(keys, stride) is not None or _head_layout_problem(values, stride) is not None:
            # The kernel reads a cache's rows in place; other layouts (a transposed view) are copied.
            keys, values = np.ascontiguousarray(keys, np.float32), np.ascontiguousarray(values, np.float32)
        self.binding.attention(q, keys, values, lead, context or 0, out, scores)
        return out.reshape(t, h * d)

    def elu(self, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.float32)
        out = np.empty_like(x)
        self.binding.elu(x, out)
        return out

    def gelu_tanh(self, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.float32)
        out = np.empty_like(x)
        self.binding.gelu_tanh(x, out)
        return out


def _polyphase(weight: np.ndarray, x: np.ndarray, n: int, stride: int, dilation: int):
    """A strided convolution as a stride-1 one over `stride` phases of the input.

    Tap j reads x[c, t * stride + j * dilation]; with j * dilation = q * stride + r, that is phase r
    of x (x[c, r::stride]) at step t + q. So the phases become channels, and the taps are regrouped
    by (phase, step) with zeros where no tap falls.
    """
    c_out, c_in, k = weight.shape
    offsets = np.arange(k) * dilation
    steps = int(offsets[-1]) // stride + 1
    length = n + steps - 1
    needed = length * stride
    if x.shape[1] < needed:
        x = np.concatenate([x, np.zeros((c_in, needed - x.shape[1]), np.float32)], axis=1)
    phases = np.ascontiguousarray(x[:, :needed].reshape(c_in, length, stride).transpose(0, 2, 1))  # [C, S, L']
    regrouped = np.zeros((c_out, c_in, stride, steps), np.float32)
    regrouped[:, :, offsets % stride, offsets // stride] = weight
    return regrouped.reshape(c_out, c_in * stride, steps), phases.reshape(c_in * stride, length)
