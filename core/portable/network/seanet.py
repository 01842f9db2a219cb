"""SEANet, Mimi's convolutional encoder and decoder, channels first ([C, T]).

A SEANet is a flat list of layers (`model.<index>` in the checkpoint); `plan` lists them for a
config with their hyper-parameters, so the same walk serves shape checking and both the encoder and
the decoder, streaming, with one state array per convolution in plan order.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..config import SEANetConfig
from . import conv, ops


@dataclasses.dataclass(frozen=True)
class Layer:
    kind: str  # "conv", "convtr", "resblock" or "elu"
    index: int  # position in the checkpoint's `model` list
    in_channels: int = 0
    out_channels: int = 0
    kernel_size: int = 0
    stride: int = 1
    dilation: int = 1


def plan(cfg: SEANetConfig, decoder: bool) -> List[Layer]:
    """The layers of the official SEANetEncoder / SEANetDecoder for this config, in order."""
    layers: List[Layer] = []

    def add(kind: str, **kw: int) -> None:
        layers.append(Layer(kind, len(layers), **kw))

    def residual_blocks(channels: int) -> None:
        for j in range(cfg.n_residual_layers):
            add(
                "resblock",
                in_channels=channels,
                out_channels=channels // cfg.compress,
                kernel_size=cfg.residual_kernel_size,
                dilation=cfg.dilation_base**j,
            )

    nf = cfg.n_filters
    if decoder:
        mult = 2 ** len(cfg.ratios)
        add("conv", in_channels=cfg.dimension, out_channels=mult * nf, kernel_size=cfg.kernel_size)
        for ratio in cfg.ratios:
            add("elu")
            add("convtr", in_channels=mult * nf, out_channels=mult * nf // 2, kernel_size=2 * ratio, stride=ratio)
            residual_blocks(mult * nf // 2)
            mult //= 2
        add("elu")
        add("conv", in_channels=nf, out_channels=cfg.channels, kernel_size=cfg.last_kernel_size)
    else:
        mult = 1
        add("conv", in_channels=cfg.channels, out_channels=nf, kernel_size=cfg.kernel_size)
        for ratio in reversed(cfg.ratios):
            residual_blocks(mult * nf)
            add("elu")
            add("conv", in_channels=mult * nf, out_channels=2 * mult * nf, kernel_size=2 * ratio, stride=ratio)
            mult *= 2
        add("elu")
        add("conv", in_channels=mult * nf, out_channels=cfg.dimension, kernel_size=cfg.last_kernel_size)
    return layers


def weight_shapes(layers: List[Layer], prefix: str) -> Dict[str, Tuple[int, ...]]:
    """Checkpoint key -> shape for a planned SEANet under `prefix` (e.g. "mimi.decoder.")."""
    shapes: Dict[str, Tuple[int, ...]] = {}
    for layer in layers:
        at = f"{prefix}model.{layer.index}."
        if layer.kind == "conv":
            shapes[at + "conv.weight"] = (layer.out_channels, layer.in_channels, layer.kernel_size)
            shapes[at + "conv.bias"] = (layer.out_channels,)
        elif layer.kind == "convtr":
            shapes[at + "convtr.weight"] = (layer.in_channels, layer.out_channels, layer.kernel_size)
            shapes[at + "convtr.bias"] = (layer.out_channels,)
        elif layer.kind == "resblock":
            hidden = layer.out_channels
            shapes[at + "block.1.conv.weight"] = (hidden, layer.in_channels, layer.kernel_size)
            shapes[at + "block.1.conv.bias"] = (hidden,)
            shapes[at + "block.3.conv.weight"] = (layer.in_channels, hidden, 1)
            shapes[at + "block.3.conv.bias"] = (layer.in_channels,)
    return shapes


def prepare(layers: List[Layer], params: List[Any]) -> List[Any]:
    """The params with the derived layouts the streaming SEANet reads (see conv.prepare_transposed),
    as a new list: `params` is left as it is."""
    prepared = list(params)
    for layer in layers:
        if layer.kind == "convtr":
            prepared[layer.index] = {"convtr": conv.prepare_transposed(params[layer.index]["convtr"], layer.stride)}
    return prepared


def init_state(layers: List[Layer], params: List[Any]) -> List[np.ndarray]:
    """One state array per convolution ([C, P]), in plan order (resblocks have one): one stream's."""
    states = []
    for layer in layers:
        p = params[layer.index]
        if layer.kind == "conv":
            states.append(conv.conv1d_init_state(p["conv"], layer.stride, layer.dilation))
        elif layer.kind == "convtr":
            states.append(conv.conv_transpose1d_init_state(p["convtr"]))
        elif layer.kind == "resblock":
            states.append(conv.conv1d_init_state(p["block"][1]["conv"], 1, layer.dilation))
    return states


def step(
    layers: List[Layer],
    params: List[Any],
    x: np.ndarray,
    states: List[np.ndarray],
    replicate_first: Optional[np.ndarray] = None,
) -> np.ndarray:
    """The streaming SEANet of B streams, updating `states` ([B, C, P] each) in place: the encoder,
    x [B, channels, T] -> [B, dimension, T / hop] (T a multiple of the hop), or the decoder,
    x [B, dimension, T] -> [B, channels, T * hop]. Run on consecutive pieces of the input, it gives
    what one call on all of it gives.

    `replicate_first` [B] marks the streams on the first call of a `replicate`-padded SEANet: each
    of their convolutions' left context starts as copies of its first input sample, not zeros.
    """
    convs = iter(states)
    fresh = None if replicate_first is None or not replicate_first.any() else replicate_first

    def conv_step(p: Any, x: np.ndarray, layer: Layer) -> np.ndarray:
        previous = next(convs)
        if fresh is not None:
            previous[fresh] = x[fresh, :, :1]
        return conv.conv1d_step(p, x, previous, layer.stride, layer.dilation)

    for layer in layers:
        p = params[layer.index]
        if layer.kind == "elu":
            x = ops.elu(x)
        elif layer.kind == "conv":
            x = conv_step(p["conv"], x, layer)
        elif layer.kind == "convtr":
            x = conv.conv_transpose1d_step(p["convtr"], x, next(convs), layer.stride)
        elif layer.kind == "resblock":
            block = p["block"]
            v = conv_step(block[1]["conv"], ops.elu(x), Layer("conv", 0, dilation=layer.dilation))
            x = x + conv.conv1d(block[3]["conv"], ops.elu(v))
    return x
