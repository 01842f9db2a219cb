"""int8 weights: symmetric int8 with a float32 scale per row, or per group of consecutive values.

A quantized tensor keeps its checkpoint name and shape, and gets its scales beside it under
`<name>.int8_scale`: [rows, groups], one scale per `group` values of each row of the tensor seen as
[rows, rest] (rest = in_features for a linear layer, C_in * K for a convolution kernel); one group
per row by default. A tensor can be stored float16 instead (half the bytes; version 3), widened
to float32 at load. Version 1 files (one scale per row, [rows]) and version 2 ones (no float16)
still load. Norms, biases, LayerScale and other small tensors stay float32. The file's metadata
names the format and version.

What is quantized was chosen by measurement (docs/cli.md, "int8 bundles"): on the fixture weights, finer
groups measured no better than one scale per row (those weights have no outliers; trained ones may:
`core.cli export --int8-group`), tensors under MIN_ELEMENTS cost much error for little size, and
the Mimi decoder's smaller convolutions are stored float16, the rest of it int8 (core.export).

At load, a runtime with int8 kernels (core.portable.network.ops) keeps the matrices of linear layers as `Int8Matrix`
(a quarter of the memory); everywhere else the weights are dequantized once, to exactly the float32
values the kernels compute with (NumPy has no int8 matrix product).
"""

from __future__ import annotations

from typing import Callable, Dict, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..errors import WeightsError

FORMAT = "pocket-tts-numpy-int8"
VERSION = "3"
READABLE_VERSIONS = ("1", "2", "3")
SCALE_SUFFIX = ".int8_scale"
# Tensors smaller than this stay float32: together a few hundred KB, and quantizing them measured
# worse than their size is worth (Mimi's upsampling and quantizer projection alone: -47 dB of audio).
MIN_ELEMENTS = 65536


class Int8Matrix:
    """A [rows, cols] matrix as int8 values and a float32 scale per group of `cols // groups` columns.

    `sums` (int32 [rows, groups], each group's sum of values) is left to the backend that multiplies
    int8 activations by it (core.portable.network.kernels), which fills it on first use."""

    __slots__ = ("values", "scales", "sums")

    def __init__(self, values: np.ndarray, scales: np.ndarray):
        self.values = values  # int8 [rows, cols]
        self.scales = scales  # float32 [rows, groups]
        self.sums: Optional[np.ndarray] = None

    @property
    def shape(self) -> Tuple[int, int]:
        return self.values.shape

    @property
    def group(self) -> int:
        return self.values.shape[1] // self.scales.shape[1]

    def dequantize(self) -> np.ndarray:
        return _dequantized(self.values, self.scales)

    def rows(self, ids: np.ndarray) -> np.ndarray:
        """The rows `ids` dequantized: float32 [len(ids), cols], equal to dequantize()[ids]."""
        return _dequantized(self.values[ids], self.scales[ids])


class LowRank:
    """A linear layer's weight with a LoRA adapter's update kept apart: `base` as loaded (float32 or
    Int8Matrix, shared with the model it adapts) plus `up @ down`, the adapter's scale in `up`. Its
    product is the base's plus a rank-r one (core.portable.network.ops.linear), so adapting a model
    copies none of its weights."""

    __slots__ = ("base", "down", "up")

    def __init__(self, base: Union[np.ndarray, Int8Matrix], down: np.ndarray, up: np.ndarray):
        self.base = base
        self.down = down  # float32 [r, in]
        self.up = up  # float32 [out, r], scaled

    @property
    def shape(self) -> Tuple[int, int]:
        return self.base.shape

    def dequantize(self) -> np.ndarray:
        """The merged matrix, float32 [out, in]."""
        base = self.base.dequantize() if isinstance(self.base, Int8Matrix) else np.asarray(self.base, np.float32)
        return base + self.up @ self.down


Weight = Union[np.ndarray, Int8Matrix, LowRank]


def concatenate(weights: Sequence[Weight]) -> Weight:
    """Matrices stacked by rows: int8 when all are int8 with the same groups, else float32; with a
    LowRank among them, a LowRank of the bases stacked, its ranks side by side (each part's update
    on its own rows)."""
    adapted = [w for w in weights if isinstance(w, LowRank)]
    if adapted:
        base = concatenate([w.base if isinstance(w, LowRank) else w for w in weights])
        up = np.zeros((base.shape[0], sum(w.down.shape[0] for w in adapted)), np.float32)  # [rows, r total]
        row = rank = 0
        for w in weights:
            if isinstance(w, LowRank):
                up[row : row + w.shape[0], rank : rank + w.down.shape[0]] = w.up
                rank += w.down.shape[0]
            row += w.shape[0]
        return LowRank(base, np.concatenate([w.down for w in adapted]), up)
    if all(isinstance(w, Int8Matrix) and w.scales.shape[1] == weights[0].scales.shape[1] for w in weights):
        return Int8Matrix(np.concatenate([w.values for w in weights]), np.concatenate([w.scales for w in weights]))
    return np.concatenate([w.dequantize() if isinstance(w, Int8Matrix) else w for w in weights])


def group_size(columns: int, group: Optional[int]) -> int:
    """The group for rows of `columns` values: `group` where it divides them, else the whole row."""
    return group if group is not None and columns % group == 0 else columns


def quantizes(value: np.ndarray) -> bool:
    return value.dtype == np.float32 and value.ndim >= 2 and value.size >= MIN_ELEMENTS


def quantize(
    tensors: Mapping[str, np.ndarray], group: Optional[int] = None, half: Callable[[str], bool] = lambda key: False
) -> Dict[str, np.ndarray]:
    """int8 tensors and their scales: a scale per row, or per `group` values of a row where that
    divides it (`half(key)`: store that tensor float16 instead)."""
    out: Dict[str, np.ndarray] = {}
    for key, value in tensors.items():
        if not quantizes(value):
            out[key] = np.asarray(value, dtype=value.dtype)
            continue
        if half(key):
            out[key] = value.astype(np.float16)
            continue
        rows = value.reshape(value.shape[0], -1)  # [rows, rest]
        size = group_size(rows.shape[1], group)
        groups = rows.reshape(rows.shape[0], -1, size)  # [rows, groups, size]
        peak = np.abs(groups).max(axis=2)  # [rows, groups]
        scale = np.where(peak > 0, peak / np.float32(127), np.float32(1)).astype(np.float32)
        out[key] = np.clip(np.round(groups / scale[:, :, None]), -127, 127).astype(np.int8).reshape(value.shape)
        out[key + SCALE_SUFFIX] = scale
    return out


def dequantize(
    tensors: Dict[str, np.ndarray],
    metadata: Dict[str, str],
    source: str,
    keep_int8: Callable[[str, Tuple[int, ...]], bool] = lambda key, shape: False,
) -> Dict[str, Weight]:
    """The tensors of a weights file, int8 ones dequantized to float32, or kept as `Int8Matrix` where
    `keep_int8(key, shape)` (2-D tensors only). A float file is returned as it is."""
    if metadata.get("format") != FORMAT:
        return dict(tensors)
    if metadata.get("version") not in READABLE_VERSIONS:
        raise WeightsError(
            f"{source}: int8 format version {metadata.get('version')!r}, expected one of {READABLE_VERSIONS}"
        )
    out: Dict[str, Weight] = {}
    for key, value in tensors.items():
        if key.endswith(SCALE_SUFFIX):
            continue
        if value.dtype == np.float16:
            out[key] = value.astype(np.float32)
            continue
        if value.dtype != np.int8:
            out[key] = value
            continue
        scale = tensors.get(key + SCALE_SUFFIX)
        rest = value.size // value.shape[0] if value.shape[0] else 0
        if scale is not None and scale.ndim == 1:
            scale = scale.reshape(-1, 1)  # version 1: one scale per row
        if (
            scale is None
            or scale.ndim != 2
            or scale.shape[0] != value.shape[0]
            or scale.shape[1] == 0
            or rest % scale.shape[1]
        ):
            raise WeightsError(f"{source}: int8 tensor {key!r} has no matching {SCALE_SUFFIX}")
        if value.ndim == 2 and keep_int8(key, value.shape):
            out[key] = Int8Matrix(np.asarray(value), np.ascontiguousarray(scale, dtype=np.float32))
        else:
            out[key] = _dequantized(value, scale)
    return out


def _dequantized(values: np.ndarray, scales: np.ndarray) -> np.ndarray:
    rows, groups = scales.shape
    grouped = values.reshape(rows, groups, -1).astype(np.float32)  # [rows, groups, size]
    grouped *= scales[:, :, None]
    return grouped.reshape(values.shape)
