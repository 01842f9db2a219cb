"""The kernels of core/kernels.c compiled for this machine (server/_kernels, built by pip at install
time where a C compiler exists), as the core.ops backend of the server.

On CPython, NumPy's BLAS (OpenBLAS) is the better choice for large products (the decoder's
convolutions, the transformer rows of many streams), but it has no int8 product and packs the whole
weight matrix for a product of a few rows. So the server's backend takes from the compiled kernels
what they do better, measured on the english flow LM step (README, "Serving many streams"): every
int8 product (int8 bundles then stay int8 in memory, a quarter of the bytes read per step), float
products of up to SMALL_BATCH rows (a step of a few streams), attention, LayerNorm and the
activations; convolutions and larger float products stay with NumPy.
"""

from __future__ import annotations

import ctypes
import importlib.util
from typing import Any, Optional, Tuple

import numpy as np

from core import ops
from core.kernels import SIGNATURES, CompiledKernels
from core.quantize import Int8Matrix, Weight

# Rows up to which a float product is the kernels' (a flow-LM step of up to 16 streams).
SMALL_BATCH = 16
_TYPES = {"p": ctypes.c_void_p, "i": ctypes.c_int, "f": ctypes.c_float}


class ServerKernels(CompiledKernels):
    def linear(self, x: np.ndarray, weight: Weight, bias: Optional[np.ndarray]) -> np.ndarray:
        if not isinstance(weight, Int8Matrix) and x.size // x.shape[-1] > SMALL_BATCH:
            return ops.NUMPY.linear(x, weight, bias)
        return super().linear(x, weight, bias)

    def conv(
        self, weight: np.ndarray, x: np.ndarray, n: int, stride: int, dilation: int, bias: Optional[np.ndarray]
    ) -> np.ndarray:
        return ops.NUMPY.conv(weight, x, n, stride, dilation, bias)


def install() -> str:
    """Run the model's products on the compiled kernels where pip built them (before loading a
    model: int8 bundles then stay int8); returns what runs them, for the log and /health."""
    backend, description = load()
    ops.use(backend)
    return description


def load() -> Tuple[Any, str]:
    """(the backend, what runs the products): the compiled kernels where pip built them, else
    NumPy's (the reason in the description)."""
    spec = importlib.util.find_spec("server._kernels")
    if spec is None or spec.origin is None:
        return ops.NUMPY, "NumPy (no compiled kernels: pip found no C compiler when it installed the package)"
    library = ctypes.CDLL(spec.origin)
    functions = {}
    for name, signature in SIGNATURES.items():
        function = getattr(library, name)
        function.argtypes, function.restype = [_TYPES[code] for code in signature], None
        functions[name] = function
    return ServerKernels(functions, "native"), f"compiled kernels ({spec.origin.rsplit('/', 1)[-1]}) with NumPy"
