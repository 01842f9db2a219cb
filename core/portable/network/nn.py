"""Layers as functions of (params, input): the building blocks of the flow LM and of Mimi.

Params are the checkpoint's own sub-dicts (`{"weight": ..., "bias": ...}`). Everything computes in
float32, as the official PyTorch code does; activations are [T, C] (time first) in the
transformers and [C, T] (channels first) in the convolutions, like the official modules.
"""

from __future__ import annotations

import math
from typing import Any, Dict

import numpy as np

from . import ops

Params = Dict[str, Any]


def linear(p: Params, x: np.ndarray) -> np.ndarray:
    """x [in] or [T, in] -> [out] or [T, out], with the weight stored [out, in] as in nn.Linear."""
    return ops.linear(x, p["weight"], p.get("bias"))


def rms_norm_unbiased(x: np.ndarray, alpha: np.ndarray, eps: float) -> np.ndarray:
    """The flow head's RMSNorm: it divides by the *unbiased variance*, not the mean square.

    x is scaled, not centred: y = x * alpha / sqrt(eps + var(x, ddof=1)).
    """
    var = np.var(x, axis=-1, keepdims=True, ddof=1)
    return x * (alpha / np.sqrt(np.float32(eps) + var))


def silu(x: np.ndarray) -> np.ndarray:
    # x * sigmoid(x), written with tanh so that large negative inputs do not overflow exp.
    return np.float32(0.5) * x * (np.float32(1.0) + np.tanh(np.float32(0.5) * x))


def rope_rotation(positions: np.ndarray, head_dim: int, max_period: float) -> np.ndarray:
    """cos + i sin [T, head_dim // 2] (complex64) of the rotation angles, computed in float32 as torch."""
    half = np.arange(head_dim // 2, dtype=np.float32)
    freqs = np.exp(half * np.float32(-math.log(max_period) * 2 / head_dim))  # [D/2]
    angles = positions.astype(np.float32)[:, None] * freqs  # [T, D/2]
    rotation = np.empty(angles.shape, dtype=np.complex64)
    rotation.real = np.cos(angles)
    rotation.imag = np.sin(angles)
    return rotation


def apply_rope(x: np.ndarray, rotation: np.ndarray) -> np.ndarray:
    """Rotate x [T, H, D] by position. RoPE here rotates *adjacent pairs* (x[2i], x[2i+1]), not
    halves, so each pair is one complex number: the rotation is one complex product."""
    t, h, d = x.shape
    pairs = np.ascontiguousarray(x).view(np.complex64)  # [T, H, D/2]: x[2i] + i x[2i+1]
    return (pairs * rotation[:, None, :]).view(np.float32).reshape(t, h, d)
