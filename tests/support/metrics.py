"""The one error metric of the project: NMSE in dB and max-abs error of an output against a reference."""

from __future__ import annotations

import math

import numpy as np


def nmse_db(ours: np.ndarray, reference: np.ndarray) -> float:
    """10 log10(sum (ours - ref)^2 / sum ref^2); -inf when equal. Shapes must match."""
    a = np.asarray(ours, dtype=np.float64)
    b = np.asarray(reference, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
    error = float(np.sum((a - b) ** 2))
    if error == 0.0:
        return -math.inf
    return 10.0 * math.log10(error / max(float(np.sum(b * b)), 1e-30))


def max_abs(ours: np.ndarray, reference: np.ndarray) -> float:
    a = np.asarray(ours, dtype=np.float64)
    b = np.asarray(reference, dtype=np.float64)
    return float(np.max(np.abs(a - b))) if a.size else 0.0
