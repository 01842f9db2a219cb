"""Streaming 1-D convolutions, channels first ([C, T]; [B, C, T] for B streams at once).

Each convolution has a step form that carries its left context in a state array (mutated in
place) and a batch form, which is the step form run once from a fresh state. The step forms take
an optional leading axis of streams, each with its own state row: the streams share one product
per convolution (the server steps many generations together). The official
StreamingConv1d pads on the left only (causal), with zeros or, for `replicate`, copies of the
first sample. The official StreamingConvTranspose1d keeps the overlapping tail of its output for
the next call; here it keeps the last input steps instead, which gives the same sums with one
matrix product per call (see `prepare_transposed`).
"""

from __future__ import annotations

from typing import Any, Dict

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import ops

Params = Dict[str, Any]
# Input steps from which a transposed convolution lays its output out in time a phase at a time, the
# bias added on the way (one pass over contiguous runs of T), not by one strided copy of S-sample
# runs and a second pass for the bias. english's decoder, one thread: 64 channels x 4 phases x 480
# steps 0.10 ms against 0.25, 128 x 5 x 96 0.08 against 0.15; 256 x 6 x 16 0.063 against 0.053 and
# the upsampling's 512 x 16 x 1 0.045 against 0.007, where the loop costs more than it saves.
PHASE_BY_PHASE_FROM = 32


def conv1d_context(kernel_size: int, stride: int, dilation: int) -> int:
    """Left context a streaming convolution keeps between calls."""
    return (kernel_size - 1) * dilation + 1 - stride


def conv1d_init_state(p: Params, stride: int, dilation: int) -> np.ndarray:
    c_out, c_in, k = p["weight"].shape
    return np.zeros((c_in, conv1d_context(k, stride, dilation)), dtype=np.float32)


def conv1d_step(p: Params, x: np.ndarray, previous: np.ndarray, stride: int = 1, dilation: int = 1) -> np.ndarray:
    """x [(B,) C_in, T] (T a multiple of stride) -> [(B,) C_out, T // stride]; `previous` [(B,) C_in, P]
    is updated."""
    context = previous.shape[-1]
    padded = np.concatenate([previous, x], axis=-1) if context else np.ascontiguousarray(x)  # [(B,) C_in, P + T]
    y = ops.conv(padded, p["weight"], x.shape[-1] // stride, stride, dilation, p.get("bias"))  # [(B,) C_out, T / S]
    if context:
        previous[...] = padded[..., padded.shape[-1] - context :]
    return y


def conv1d(p: Params, x: np.ndarray, stride: int = 1, dilation: int = 1, pad_mode: str = "constant") -> np.ndarray:
    """Batch form: left padding with zeros, or with copies of the first sample for `replicate`."""
    previous = conv1d_init_state(p, stride, dilation)
    if pad_mode == "replicate":
        previous[...] = x[:, :1]
    return conv1d_step(p, x, previous, stride, dilation)


def prepare_transposed(p: Params, stride: int, groups: int = 1) -> Params:
    """A new dict of p's bias and `taps`, the transposed convolution's kernel as an ordinary one
    (made once, at load; p itself is left as it is). The step reads only the taps, so the weight
    they are made from is left out (english's decoder held 7.9 MB of float32 twice, and sent it to
    its decoder process twice).

    Output frame t (`stride` samples) of a transposed convolution with K = m * stride taps sums
    the input steps t - m + 1 .. t, so it is a convolution over input steps with C_out * stride
    output channels, whose channels are then laid out in time. taps: [G, C_out/G * S, C_in/G, m].
    """
    weight = p["weight"]  # [C_in, C_out / G, K]
    c_in, c_out_g, k = weight.shape
    m = -(-k // stride)
    if m * stride != k:
        weight = np.concatenate([weight, np.zeros((c_in, c_out_g, m * stride - k), np.float32)], axis=2)
    # Input step t - j meets tap block j; in the window over steps it sits at position m - 1 - j.
    w = weight.reshape(groups, c_in // groups, c_out_g, m, stride)[:, :, :, ::-1, :]
    taps = np.ascontiguousarray(w.transpose(0, 2, 4, 1, 3)).reshape(groups, c_out_g * stride, c_in // groups, m)
    prepared = {key: value for key, value in p.items() if key != "weight"}
    prepared["taps"] = taps
    return prepared


def conv_transpose1d_init_state(p: Params) -> np.ndarray:
    """The last m - 1 input steps (zeros before the first call). Needs `prepare_transposed`."""
    groups, _, c_in_group, m = p["taps"].shape
    return np.zeros((groups * c_in_group, m - 1), dtype=np.float32)


def conv_transpose1d_step(p: Params, x: np.ndarray, previous: np.ndarray, stride: int) -> np.ndarray:
    """x [(B,) C_in, T] -> [(B,) C_out, T * stride]; `previous` [(B,) C_in, m - 1] is updated. Needs
    `prepare_transposed`."""
    kernel = p["taps"]  # [G, C_out/G * S, C_in/G, m]
    groups, rows, _, m = kernel.shape
    lead, (c_in, t) = x.shape[:-2], x.shape[-2:]
    padded = np.concatenate([previous, x], axis=-1) if m > 1 else np.ascontiguousarray(x)  # [(B,) C_in, m - 1 + T]
    if groups == 1:
        out = ops.conv(padded, kernel[0], t)  # [(B,) C_out * S, T]
    else:
        step = padded.strides[-1]
        windows = as_strided(padded, shape=lead + (c_in, m, t), strides=padded.strides[:-1] + (step, step))
        out = np.matmul(
            kernel.reshape(groups, rows, -1), windows.reshape(lead + (groups, c_in // groups * m, t))
        )  # [(B,) G, C_out/G * S, T]
    if m > 1:
        previous[...] = padded[..., padded.shape[-1] - (m - 1) :]
    c_out = groups * rows // stride
    phases = out.reshape(lead + (c_out, stride, t))  # [(B,) C_out, S, T]
    bias = p.get("bias")
    if t < PHASE_BY_PHASE_FROM:
        # Channels laid out in time: [(B,) C_out, S, T] -> [(B,) C_out, T, S].
        y = np.swapaxes(phases, -1, -2).reshape(lead + (c_out, t * stride))
        return y if bias is None else y + bias[:, None]
    y = np.empty(lead + (c_out, t, stride), dtype=np.float32)  # [(B,) C_out, T, S]
    for s in range(stride):
        if bias is None:
            y[..., s] = phases[..., s, :]
        else:
            np.add(phases[..., s, :], bias[:, None], out=y[..., s])
    return y.reshape(lead + (c_out, t * stride))


def pad_for_frames(x: np.ndarray, frame_size: int) -> np.ndarray:
    """Right-pad x [..., T] with zeros to a whole number of frames (the official pad_for_conv1d)."""
    extra = -x.shape[-1] % frame_size
    if extra == 0:
        return x
    pad = [(0, 0)] * (x.ndim - 1) + [(0, extra)]
    return np.pad(x, pad)
