"""int8 weights: per-row symmetric int8 for matrices and convolution kernels, float32 scales.

A quantized tensor keeps its checkpoint name and gets its scales beside it under `<name>.int8_scale`
(one per row of the stored tensor: per output channel, per token of the text table, per input
channel of a transposed convolution). Norms, biases, LayerScale and other small tensors stay
float32. The file's metadata names the format and version. NumPy has no fast int8 matrix product,
so models dequantize once at load (see README: the memory/speed trade).
"""

from __future__ import annotations

from typing import Dict

import numpy as np

from .errors import WeightsError

FORMAT = "pocket-tts-numpy-int8"
VERSION = "1"
SCALE_SUFFIX = ".int8_scale"
# Tensors smaller than this stay float32: quantizing them saves nothing worth their error.
MIN_ELEMENTS = 1024


def quantizes(value: np.ndarray) -> bool:
    return value.dtype == np.float32 and value.ndim >= 2 and value.size >= MIN_ELEMENTS


def quantize(tensors: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    out: Dict[str, np.ndarray] = {}
    for key, value in tensors.items():
        if not quantizes(value):
            out[key] = np.asarray(value, dtype=value.dtype)
            continue
        rows = value.reshape(value.shape[0], -1)  # [rows, rest]
        peak = np.abs(rows).max(axis=1)  # [rows]
        scale = np.where(peak > 0, peak / np.float32(127), np.float32(1)).astype(np.float32)
        out[key] = np.clip(np.round(rows / scale[:, None]), -127, 127).astype(np.int8).reshape(value.shape)
        out[key + SCALE_SUFFIX] = scale
    return out


def dequantize(tensors: Dict[str, np.ndarray], metadata: Dict[str, str], source: str) -> Dict[str, np.ndarray]:
    """float32 tensors from an int8 file (a float file is returned as it is)."""
    if metadata.get("format") != FORMAT:
        return tensors
    if metadata.get("version") != VERSION:
        raise WeightsError(f"{source}: int8 format version {metadata.get('version')!r}, expected {VERSION}")
    out: Dict[str, np.ndarray] = {}
    for key, value in tensors.items():
        if key.endswith(SCALE_SUFFIX):
            continue
        if value.dtype != np.int8:
            out[key] = value
            continue
        scale = tensors.get(key + SCALE_SUFFIX)
        if scale is None or scale.shape != (value.shape[0],):
            raise WeightsError(f"{source}: int8 tensor {key!r} has no matching {SCALE_SUFFIX}")
        out[key] = value.astype(np.float32) * scale.reshape((-1,) + (1,) * (value.ndim - 1))
    return out
