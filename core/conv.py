"""Streaming 1-D convolutions, channels first ([C, T]).

Each convolution has a step form that carries its left context in a state array (mutated in
place) and a batch form, which is the step form run once from a fresh state. The official
StreamingConv1d pads on the left only (causal), with zeros or, for `replicate`, copies of the
first sample; StreamingConvTranspose1d keeps the overlapping tail of its output for the next call.
"""

from __future__ import annotations

from typing import Dict

import numpy as np
from numpy.lib.stride_tricks import as_strided

Params = Dict[str, np.ndarray]

# Largest im2col block, in float32 elements, so long inputs (voice prompts) stay in bounded memory.
_IM2COL_BLOCK = 1 << 22


def conv1d_context(kernel_size: int, stride: int, dilation: int) -> int:
    """Left context a streaming convolution keeps between calls."""
    return (kernel_size - 1) * dilation + 1 - stride


def conv1d_init_state(p: Params, stride: int, dilation: int) -> np.ndarray:
    c_out, c_in, k = p["weight"].shape
    return np.zeros((c_in, conv1d_context(k, stride, dilation)), dtype=np.float32)


def conv1d_step(p: Params, x: np.ndarray, previous: np.ndarray, stride: int = 1, dilation: int = 1) -> np.ndarray:
    """x [C_in, T] (T a multiple of stride) -> [C_out, T // stride]; `previous` [C_in, P] is updated."""
    weight = p["weight"]  # [C_out, C_in, K]
    c_out, c_in, k = weight.shape
    context = previous.shape[1]
    padded = np.concatenate([previous, x], axis=1) if context else np.ascontiguousarray(x)  # [C_in, P + T]
    t_out = x.shape[1] // stride
    step = padded.strides[1]
    windows = as_strided(
        padded, shape=(c_in, k, t_out), strides=(padded.strides[0], dilation * step, stride * step)
    )  # [C_in, K, T_out], a view
    kernel = weight.reshape(c_out, c_in * k)  # [C_out, C_in*K]
    block = max(1, _IM2COL_BLOCK // (c_in * k))
    if t_out <= block:
        y = kernel @ windows.reshape(c_in * k, t_out)  # [C_out, T_out]
    else:
        y = np.empty((c_out, t_out), dtype=np.float32)
        for start in range(0, t_out, block):
            stop = min(start + block, t_out)
            y[:, start:stop] = kernel @ windows[:, :, start:stop].reshape(c_in * k, stop - start)
    if context:
        previous[...] = padded[:, padded.shape[1] - context :]
    bias = p.get("bias")
    return y if bias is None else y + bias[:, None]


def conv1d(p: Params, x: np.ndarray, stride: int = 1, dilation: int = 1, pad_mode: str = "constant") -> np.ndarray:
    """Batch form: left padding with zeros, or with copies of the first sample for `replicate`."""
    previous = conv1d_init_state(p, stride, dilation)
    if pad_mode == "replicate":
        previous[...] = x[:, :1]
    return conv1d_step(p, x, previous, stride, dilation)


def conv_transpose1d_init_state(p: Params, stride: int, groups: int = 1) -> np.ndarray:
    c_in, c_out_per_group, k = p["weight"].shape
    return np.zeros((c_out_per_group * groups, k - stride), dtype=np.float32)


def conv_transpose1d_step(p: Params, x: np.ndarray, partial: np.ndarray, stride: int, groups: int = 1) -> np.ndarray:
    """x [C_in, T] -> [C_out, T * stride]; `partial` [C_out, K - stride] carries the overlap."""
    weight = p["weight"]  # [C_in, C_out / groups, K]
    c_in, c_out_g, k = weight.shape
    c_out = c_out_g * groups
    t = x.shape[1]
    # Each input step spreads K output samples: contributions [C_out, K, T].
    if groups == 1:
        spread = (weight.reshape(c_in, c_out * k).T @ x).reshape(c_out, k, t)
    else:
        grouped = weight.reshape(groups, c_in // groups, c_out_g * k)  # [G, C_in/G, C_out/G*K]
        spread = np.matmul(grouped.transpose(0, 2, 1), x.reshape(groups, c_in // groups, t))
        spread = spread.reshape(c_out, k, t)
    blocks = -(-k // stride)
    if blocks * stride != k:
        spread = np.concatenate([spread, np.zeros((c_out, blocks * stride - k, t), np.float32)], axis=1)
    # Overlap-add: tap j*stride + s of input step i lands on output sample (i + j) * stride + s.
    frames = np.zeros((c_out, t + blocks - 1, stride), dtype=np.float32)
    for j in range(blocks):
        frames[:, j : j + t, :] += spread[:, j * stride : (j + 1) * stride, :].transpose(0, 2, 1)
    y = frames.reshape(c_out, (t + blocks - 1) * stride)[:, : (t - 1) * stride + k]  # [C_out, (T-1)*S + K]
    bias = p.get("bias")
    if bias is not None:
        y = y + bias[:, None]
    tail = partial.shape[1]
    if tail == 0:
        return y
    y[:, :tail] += partial
    partial[...] = y[:, y.shape[1] - tail :] if bias is None else y[:, y.shape[1] - tail :] - bias[:, None]
    return y[:, : y.shape[1] - tail]


def pad_for_frames(x: np.ndarray, frame_size: int) -> np.ndarray:
    """Right-pad x [..., T] with zeros to a whole number of frames (the official pad_for_conv1d)."""
    extra = -x.shape[-1] % frame_size
    if extra == 0:
        return x
    pad = [(0, 0)] * (x.ndim - 1) + [(0, extra)]
    return np.pad(x, pad)
