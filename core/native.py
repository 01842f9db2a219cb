"""The kernels of core/portable/kernels.c compiled for this machine (core/_kernels, built by pip at
install time where a C compiler exists), as the core.portable.ops backend of every CPython entry:
the command line, the Python API, the batch workers and the server. core/__init__.py installs it on
import; where pip built nothing, NumPy runs everything and `backend()` says why.

On CPython, NumPy's BLAS (OpenBLAS) is the better choice for large products (the decoder's
convolutions, the transformer rows of many streams), but it has no int8 product and packs the whole
weight matrix for a product of a few rows. So this backend takes from the compiled kernels what they
do better, measured on the english flow LM step (README, "Serving many streams"): every int8
product (int8 bundles then stay int8 in memory, a quarter of the bytes read per step), float
products of up to SMALL_BATCH rows (one stream's step, or a step of a few), attention, LayerNorm,
the activations, and the convolutions with few output channels over many steps (the decoder's last
layers); the other convolutions and larger float products stay with NumPy.
"""

from __future__ import annotations

import importlib.util
from typing import Any, Optional

import numpy as np

from .portable import ops
from .portable.kernels import SIGNATURES, CompiledKernels
from .portable.quantize import Int8Matrix, Weight

# Rows up to which a float product is the kernels' (a flow-LM step of up to 16 streams).
SMALL_BATCH = 16
# Convolutions of up to CONV_CHANNELS output channels over CONV_STEPS steps or more are the kernels':
# measured per decoder shape against OpenBLAS at 1, 4 and 8 streams, those ran 1.0-1.7x faster (the
# last one, 1 channel, 4-7x: NumPy makes it a matrix-vector product); the larger ones read their
# weights once for all streams through OpenBLAS and once per stream on the kernels (0.5-0.9x).
CONV_CHANNELS = 128
CONV_STEPS = 480
EXTENSION = "core._kernels"


class NativeKernels(CompiledKernels):
    def linear(self, x: np.ndarray, weight: Weight, bias: Optional[np.ndarray]) -> np.ndarray:
        if not isinstance(weight, Int8Matrix) and x.size // x.shape[-1] > SMALL_BATCH:
            return ops.NUMPY.linear(x, weight, bias)
        return super().linear(x, weight, bias)

    def conv(
        self, x: np.ndarray, weight: np.ndarray, n: int, stride: int, dilation: int, bias: Optional[np.ndarray]
    ) -> np.ndarray:
        if stride == 1 and weight.shape[0] <= CONV_CHANNELS and n >= CONV_STEPS:
            return super().conv(x, weight, n, stride, dilation, bias)
        return ops.NUMPY.conv(x, weight, n, stride, dilation, bias)


def backend() -> Any:
    """The compiled kernels where pip built them, else NumPy's backend (its description says why)."""
    spec = importlib.util.find_spec(EXTENSION)
    if spec is None or spec.origin is None:
        return ops.NUMPY.because("no compiled kernels: pip found no C compiler when it installed the package")
    import ctypes

    types = {"p": ctypes.c_void_p, "i": ctypes.c_int, "f": ctypes.c_float}
    library = ctypes.CDLL(spec.origin)
    functions = {}
    for name, signature in SIGNATURES.items():
        function = getattr(library, name)
        function.argtypes, function.restype = [types[code] for code in signature], None
        functions[name] = function
    filename = spec.origin.rsplit("/", 1)[-1]
    return NativeKernels(functions, "native", f"compiled kernels ({filename}) with NumPy")
