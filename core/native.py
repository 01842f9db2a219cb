"""The kernels of core/portable/network/kernels.c compiled by pip (core/_kernels, built at install time where
a C compiler exists: setup.py), as the core.portable.network.ops backend of every CPython entry: the command
line, the Python API, the batch workers and the server. core/__init__.py installs it on import;
where pip built nothing, NumPy runs everything and `backend()` says why.

The library holds the kernels once per instruction set of its architecture (x86-64: AVX-512 with
VNNI, AVX-VNNI, AVX2 with FMA, the baseline; aarch64: i8mm, dotprod, the baseline; elsewhere the
baseline; setup.py leaves out a set its compiler cannot build), and says which this processor
runs: the best of those is bound, so one build (a wheel) runs on every machine of its architecture.
Their results differ in the last bits only (fused multiply-adds, wider vectors), within the kernel
checks' bounds.

On CPython, NumPy's BLAS (OpenBLAS) is the better choice for large products (the decoder's
convolutions, the transformer rows of many streams), but it has no int8 product and packs the whole
weight matrix for a product of a few rows. So this backend takes from the compiled kernels what they
do better, measured on the english flow LM step (docs/server.md, "Serving many streams") and the
decoder frame against OpenBLAS on one thread (as a stream runs them): every int8 product (int8
bundles then stay int8 in memory, a quarter of the bytes read per step), float products of up to
SMALL_BATCH rows (one stream's step, or a step of a few) and of TRANSPOSED_ROWS (the decoder
transformer's frame), attention of any number of queries, LayerNorm, the activations, the
convolutions with few output channels over many steps (the decoder's last layers) and those of one
stream over few steps (its first layers; on AVX-512, over any); the other convolutions and larger
float products stay with NumPy. A product of many rows (a text prompt) runs on two threads, half of
the weight's rows each (from ROW_HALVES_FROM rows, half of x's).

Attention against NumPy's (OpenBLAS's products of each head's queries by its keys), one thread,
AVX2 and AVX-512 on a Zen 4: alone, a decoder frame's 16 queries in 0.79-0.83 of its time, a text
prompt's 40 in 0.90-1.07, a voice encoding's 256 in a window of 250 in 0.55-0.67; in their places,
alternating in one process, a decoder frame 0.975-0.981x, a 40-token prompt 0.979-0.982x.
"""

from __future__ import annotations

import functools
import importlib.util
import threading
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from .portable.network import ops
from .portable.network.kernels import SIGNATURES, CompiledKernels, i8_scratch
from .portable.network.quantize import Int8Matrix, Weight

# Rows up to which a float product is the kernels' (a flow-LM step of up to 16 streams).
SMALL_BATCH = 16
# Float products of these many rows are the kernels' convolution of one tap over the rows as its
# steps (out^T = weight @ x^T): a weight broadcast against a vector of rows, with no sum across a
# vector's lanes. The Mimi decoder's transformer, 16 rows a frame and stream, one thread, AVX-512:
# 2048x512 0.37 ms (0.73 as a product summed across lanes, 0.78 on OpenBLAS), 512x2048 0.42 (0.79,
# 0.80); at 32 rows 1.1-1.3x OpenBLAS's time, at 48 and 128 slower than it.
TRANSPOSED_ROWS = (16, 32)
# Convolutions of up to CONV_CHANNELS output channels over CONV_STEPS steps or more are the kernels':
# measured per decoder shape against OpenBLAS at 1, 4 and 8 streams, those ran 1.0-1.7x faster (the
# last one, 1 channel, 4-7x: NumPy makes it a matrix-vector product); the larger ones read their
# weights once for all streams through OpenBLAS and once per stream on the kernels (0.5-0.9x).
# So are those of one stream over up to FEW_STEPS steps, whatever their channels: OpenBLAS's packing
# does not pay for so few columns (the decoder's first layers, 16 steps a frame, one thread, AVX-512:
# 512x512x7 0.55 ms against OpenBLAS's 0.90, 1536x512x2 0.59 against 0.75).
# On AVX-512 one stream's are the kernels' at any number of steps (its kernels ran the decoder's
# 96- and 480-step ones at 54-56 billion multiply-adds a second, OpenBLAS at 43-48): a whole decoder
# frame, one thread, alternating with the routing above in one process (scripts.routing_ab: blocks
# of 10 frames, 40 pairs; this Zen 4), 0.968-0.988x in three runs, and back 1.049x; voice encoding
# the same (0.994x). AVX2's kernels (96-step ones at 39-46, OpenBLAS 43-46) keep the rule: 1.025-1.072x
# beside OpenBLAS's AVX-512 kernels, 1.018 and 1.030x (16 and 17 of 40 faster) beside its Haswell ones.
CONV_CHANNELS = 128
CONV_STEPS = 480
FEW_STEPS = 32
ONE_STREAM_ANY_STEPS = ("avx512",)
# Rows from which a product (a text prompt, read before any frame exists) runs on two threads
# (NativeKernels._on_two_threads): the other core (the decoder's, in a stream) waits for it then. From
# a block's worth of rows (a short text's ~11 tokens split too): first chunk of a short text, the
# API's stream, english int8, alternating in one process, medians of 9, 41.5 ms against 47.0 at 16
# rows (AVX2), 36.7 against 38.4 (AVX-512 VNNI); the server's int8 streams at 6, 10 and 14 (worst
# real-time factor, two runs each) 0.68-0.86, 0.83-0.93, 1.03-1.15 against 0.61-0.73, 0.80-0.89,
# 1.02-1.25: within this machine's noise.
SPLIT_ROWS = 6
# ...and from this many weights, with both sides at least SPLIT_SIDE: handing a small matrix to the
# other thread costs more than it saves (first chunk, medium text, int8, this 2-core machine: english
# 72 ms split from 1M weights, 100 unsplit; english_2m 6.9 ms unsplit, 7.5 split from 256K, 12.3
# split at any size). The Mimi decoder's matrices (a side of 512, 1M weights at most) stay whole:
# their products of a frame's rows (16 a stream) run beside the flow LM's thread, where a third
# thread only competes for the two cores (english int8, against splitting them too: the pipeline's
# real-time factor 0.115 against 0.121, the server's worst stream at 12 streams 0.94 against 1.02).
# The flow LM's 1024x1024 products split since its products are shared panel by panel (they stayed
# whole when each thread quantized every row for half of the weight): english int8, AVX2, the API's
# streams alternating (12 rounds, paired medians), first chunk 0.966x (medium text), 0.963x (short),
# the real-time factor the same.
SPLIT_WEIGHTS = 1 << 20
SPLIT_SIDE = 1024
# A float32 product's halves are handed to a Python thread (0.1-0.4 ms a product): from this many.
SPLIT_FLOAT_WEIGHTS = 1 << 21
# Rows of x from which an int8 product's two halves are halves of x's rows rather than of the
# weight's (NativeKernels._on_two_threads): four blocks of the kernels' 16 rows.
ROW_HALVES_FROM = 64
EXTENSION = "core._kernels"
_second_thread: Optional[Any] = None  # the executor, made at the first product that splits
_making_second_thread = threading.Lock()


def second_thread() -> Any:
    """The thread that takes half of a product of many rows (a ThreadPoolExecutor of one), made at
    its first use: the browser imports this module too, and concurrent.futures (and logging with it)
    is then not among the modules its start runs."""
    global _second_thread
    with _making_second_thread:
        if _second_thread is None:
            from concurrent.futures import ThreadPoolExecutor

            _second_thread = ThreadPoolExecutor(1, thread_name_prefix="pocket-tts-int8")
        return _second_thread


class NativeKernels(CompiledKernels):
    """The compiled kernels as CPython runs them, with a thread of the library's own
    (core/_kernels.c): `shared` runs one int8 product on both threads (pk_linear_i8_shared, with
    this set's pk_i8_rows and pk_i8_panel bound), `pair` two at once, one on each
    (pk_linear_i8_two, with this set's pk_linear_i8), each given as pk_linear_i8's checked
    arguments."""

    def __init__(
        self,
        functions: Dict[str, Any],
        name: str,
        description: str,
        address: Callable[[np.ndarray], int],
        pair: Callable[..., None],
        shared: Callable[..., None],
        instruction_set: str,
    ):
        super().__init__(functions, name, description, address)
        self._pair = pair
        self._shared = shared
        self.instruction_set = instruction_set

    def linear(self, x: np.ndarray, weight: Weight, bias: Optional[np.ndarray]) -> np.ndarray:
        rows, (n, k) = x.size // x.shape[-1], weight.shape
        least = SPLIT_WEIGHTS if isinstance(weight, Int8Matrix) else SPLIT_FLOAT_WEIGHTS
        if rows >= SPLIT_ROWS and n * k >= least and min(n, k) >= SPLIT_SIDE:
            return self._on_two_threads(x, weight, bias)
        return self._linear(x, weight, bias)

    def _linear(self, x: np.ndarray, weight: Weight, bias: Optional[np.ndarray]) -> np.ndarray:
        rows = x.size // x.shape[-1]
        if not isinstance(weight, Int8Matrix) and rows in TRANSPOSED_ROWS:
            return self._transposed(x, weight, bias)
        if not isinstance(weight, Int8Matrix) and rows > SMALL_BATCH:
            return ops.NUMPY.linear(x, weight, bias)
        return super().linear(x, weight, bias)

    def _transposed(self, x: np.ndarray, weight: np.ndarray, bias: Optional[np.ndarray]) -> np.ndarray:
        """x @ weight^T + bias as the convolution of one tap whose steps are x's rows."""
        steps = np.ascontiguousarray(x.reshape(-1, x.shape[-1]).T, dtype=np.float32)  # [K, M]
        out = np.empty((weight.shape[0], steps.shape[1]), np.float32)  # [N, M]
        self.binding.conv_f32(np.ascontiguousarray(weight, dtype=np.float32)[:, :, None], steps, bias, out, 1)
        return np.ascontiguousarray(out.T).reshape(x.shape[:-1] + (weight.shape[0],))

    def _on_two_threads(self, x: np.ndarray, weight: Weight, bias: Optional[np.ndarray]) -> np.ndarray:
        """The product of many rows (a text prompt, a server step with newcomers) on two threads,
        each output computed as the whole product computes it (int8: the same integers; float32:
        OpenBLAS's rounding), both letting go of the GIL.

        int8: shared by the library's two threads (`shared`), which take its rows to quantize and
        then its panels of weights in turn, each row quantized once (english's flow-LM matrices,
        40 rows, AVX2: 0.81-0.88x the time of halves of the weight's rows, where each thread
        quantized every row and the product waited for the later one). From ROW_HALVES_FROM rows
        of x, halves of x's rows, in whole blocks (`pair`): a product of many rows re-reads every
        packed row for each panel of weights (13 newcomers' prompts in one server step, 380 rows:
        english's 1024x4096 matrices 20-97 ms a product by the weight's halves, 7.3 by x's halves;
        the step 235 ms against 385; at 120 rows, 4096x1024, shared 7.3 ms, by the weight's
        halves 6.6). float32: halves of the weight's rows, one on a Python thread
        (`second_thread`)."""
        rows = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, x.shape[-1])  # [M, K]
        m = rows.shape[0]
        if isinstance(weight, Int8Matrix) and m >= ROW_HALVES_FROM:
            cut = m // 32 * 16  # [0, cut) and [cut, M): whole blocks of 16 but the last
            out = np.empty((m, weight.shape[0]), np.float32)  # [M, N], each half written in place
            self._int8_pair([(rows[:cut], weight, bias, out[:cut]), (rows[cut:], weight, bias, out[cut:])])
        elif isinstance(weight, Int8Matrix):
            out = np.empty((m, weight.shape[0]), np.float32)  # [M, N]
            scratch = np.empty(i8_scratch(*rows.shape), np.uint8)  # kept until the call returns
            values, scales, sums = weight.values, weight.scales, self._sums(weight)
            self._shared(*self.binding.linear_i8_arguments(rows, values, scales, sums, bias, out, scratch))
        else:
            half = weight.shape[0] // 2
            halves = (slice(0, half), slice(half, None))
            parts = [(weight[kept], None if bias is None else bias[kept]) for kept in halves]
            second = second_thread().submit(self._linear, rows, *parts[1])
            out = np.concatenate([self._linear(rows, *parts[0]), second.result()], axis=1)
        return out.reshape(x.shape[:-1] + (weight.shape[0],))

    def _int8_pair(self, calls: List[Any]) -> None:
        """Two int8 products (x, weight, bias, out) at once through `pair`."""
        scratches = [np.empty(i8_scratch(*x.shape), np.uint8) for x, _, _, _ in calls]  # kept until the call returns
        arguments = [
            self.binding.linear_i8_arguments(x, w.values, w.scales, self._sums(w), b, y, scratch)
            for (x, w, b, y), scratch in zip(calls, scratches)
        ]
        self._pair(*arguments[0], *arguments[1])

    def conv(
        self, x: np.ndarray, weight: np.ndarray, n: int, stride: int, dilation: int, bias: Optional[np.ndarray]
    ) -> np.ndarray:
        one_stream = (x.ndim == 2 or x.shape[0] == 1) and (
            n <= FEW_STEPS or self.instruction_set in ONE_STREAM_ANY_STEPS
        )
        if stride == 1 and (weight.shape[0] <= CONV_CHANNELS and n >= CONV_STEPS or one_stream):
            return super().conv(x, weight, n, stride, dilation, bias)
        return ops.NUMPY.conv(x, weight, n, stride, dilation, bias)


def instruction_sets() -> List[str]:
    """The instruction sets the library was built for that this processor runs, best first (none
    where pip built nothing)."""
    library = _library()
    if library is None:
        return []
    compiled = library.pk_sets().decode().split(",")
    return [name for name in compiled if library.pk_supports(name.encode())]


def plainly(runs: Any) -> str:
    """What runs a model's products (a backend of `backend`), as a line for people says it: "this
    processor's avx2 kernels", or NumPy's description (which says why it runs alone)."""
    if isinstance(runs, NativeKernels):
        return f"this processor's {runs.instruction_set} kernels"
    return str(runs.description)


def backend(instruction_set: Optional[str] = None) -> Any:
    """The compiled kernels of `instruction_set` (default: the best this processor runs) where pip
    built them, else NumPy's backend (its description says why)."""
    library = _library()
    if library is None:
        return ops.NUMPY.because("no compiled kernels: pip found no C compiler when it installed the package")
    chosen = instruction_set if instruction_set is not None else instruction_sets()[0]
    filename = str(library._name).rsplit("/", 1)[-1]
    description = f"compiled kernels ({chosen}, {filename}) with NumPy"
    import ctypes

    bound = functions(chosen)

    def pointer(name: str) -> int:
        return ctypes.cast(bound[name], ctypes.c_void_p).value

    pair = functools.partial(library.pk_linear_i8_two, pointer("pk_linear_i8"))
    shared = functools.partial(library.pk_linear_i8_shared, pointer("pk_i8_rows"), pointer("pk_i8_panel"))
    address = importlib.import_module(EXTENSION).address
    return NativeKernels(bound, "native", description, address, pair, shared, chosen)


def functions(instruction_set: str) -> Dict[str, Any]:
    """The kernels of `instruction_set` by name (ctypes functions); a ValueError where this
    processor does not run it."""
    runs = instruction_sets()
    if instruction_set not in runs:
        raise ValueError(f"this processor does not run the {instruction_set} kernels (it runs: {', '.join(runs)})")
    library = _library()
    bound = {}
    for name, signature in SIGNATURES.items():
        function = getattr(library, f"{name}_{instruction_set}")
        function.argtypes, function.restype = _argtypes(signature), None
        bound[name] = function
    return bound


def _argtypes(signature: str) -> List[Any]:
    """ctypes's types of a kernel's arguments, from its signature in SIGNATURES."""
    import ctypes

    types = {"p": ctypes.c_void_p, "i": ctypes.c_int, "f": ctypes.c_float}
    return [types[code] for code in signature]


def _library() -> Any:
    """The compiled library (ctypes), or None where pip built none."""
    spec = importlib.util.find_spec(EXTENSION)
    if spec is None or spec.origin is None:
        return None
    import ctypes

    library = ctypes.CDLL(spec.origin)
    linear_i8 = _argtypes(SIGNATURES["pk_linear_i8"])
    library.pk_linear_i8_two.argtypes = [ctypes.c_void_p, *linear_i8, *linear_i8]
    library.pk_linear_i8_two.restype = None
    library.pk_linear_i8_shared.argtypes = [ctypes.c_void_p, ctypes.c_void_p, *linear_i8]
    library.pk_linear_i8_shared.restype = None
    library.pk_sets.restype = ctypes.c_char_p
    library.pk_supports.argtypes, library.pk_supports.restype = [ctypes.c_char_p], ctypes.c_int
    return library
