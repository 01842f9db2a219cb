"""The flow language model: a causal transformer over [voice, text, latents] and a small MLP head
that turns its output into the next latent frame, plus an end-of-speech (EOS) logit.

The head is a flow: from Gaussian noise it reaches a latent in `decode_steps` steps (LSD: two time
conditions; flow matching: one, Euler steps), or in one step without time (drifting: the head's
output is the latent; pointwise: the noise plus the head's output). At temperature 0 the noise is 0.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..config import Config
from ..errors import WeightsError
from . import nn, ops, quantize, transformer


@dataclasses.dataclass(frozen=True)
class FlowLMSpec:
    transformer: transformer.TransformerSpec
    flow_type: str
    latent_dim: int
    insert_bos_before_voice: bool

    @classmethod
    def from_config(cls, cfg: Config) -> FlowLMSpec:
        t = cfg.flow_lm.transformer
        return cls(
            transformer=transformer.TransformerSpec(
                num_layers=t.num_layers,
                d_model=t.d_model,
                num_heads=t.num_heads,
                num_kv_heads=t.kv_heads,
                head_dim=t.head_dim,
                max_period=float(t.max_period),
                context=None,
                layer_scale=False,
            ),
            flow_type=cfg.flow_lm.flow.type,
            latent_dim=cfg.mimi.quantizer.dimension,
            insert_bos_before_voice=cfg.flow_lm.insert_bos_before_voice,
        )


def prepare(p: Dict[str, Any]) -> Dict[str, Any]:
    """The params with the derived layout the flow head reads, made once at load, as a new dict: `p`
    is left as it is. The modulation weights of every head block and of the final layer are stacked
    into one matrix (`flow_net.modulation`), since they all read the same conditioning: one product
    per step instead of depth + 1. The head reads only the stacked matrix, so the blocks' own
    copies are left out of the new dict (no memory is held twice)."""
    net = p["flow_net"]
    layers = [block["adaLN_modulation"][1] for block in net["res_blocks"]] + [net["final_layer"]["adaLN_modulation"][1]]
    weight = quantize.concatenate([layer["weight"] for layer in layers])  # [sum of 3F.. + 2F, F]
    bias = np.concatenate([layer["bias"] for layer in layers])
    blocks = [{k: v for k, v in block.items() if k != "adaLN_modulation"} for block in net["res_blocks"]]
    final = {k: v for k, v in net["final_layer"].items() if k != "adaLN_modulation"}
    modulation = {"weight": weight, "bias": bias}
    return dict(p, flow_net=dict(net, res_blocks=blocks, final_layer=final, modulation=modulation))


# The head's modulation layers, which `prepare` stacks into one matrix (res_blocks first, in order).
_MODULATION = re.compile(r"^flow_net\.(?:res_blocks\.(?P<block>\d+)|final_layer)\.adaLN_modulation\.1\.weight$")


def adapted(p: Dict[str, Any], updates: Mapping[str, Tuple[np.ndarray, np.ndarray]]) -> Dict[str, Any]:
    """The prepared params `p` with a LoRA adapter kept apart: each weight `updates` names (its key
    under flow_lm: "transformer.layers.0.linear1.weight") a quantize.LowRank of it and its update
    (down [r, in], up [out, r], scaled), the modulation layers' updates on their rows of the stacked
    matrix. New dicts and lists along the paths changed, every array shared with `p`. A key that
    names no linear layer, or an update of another shape: a WeightsError naming the key."""
    out = p
    modulation = []
    for key, (down, up) in updates.items():
        found = _MODULATION.match(key)
        if found is not None:
            modulation.append((found.group("block"), key, down, up))
        else:
            out = _replaced(out, key.split("."), key, functools.partial(_low_rank, key, down=down, up=up))
    if modulation:
        net = out["flow_net"]
        stacked = net["modulation"]["weight"]  # [3F per block + 2F, F]
        width, blocks = stacked.shape[1], len(net["res_blocks"])
        if stacked.shape[0] != (3 * blocks + 2) * width:  # each block's shift, scale and gate, the final layer's two
            raise WeightsError(
                f"flow_lm.{modulation[0][1]}: this model's modulation layers are not of the official shapes"
            )
        up_all = np.zeros((stacked.shape[0], sum(down.shape[0] for _, _, down, _ in modulation)), np.float32)
        rank = 0
        for block, key, down, up in modulation:
            start, rows = (3 * width * int(block), 3 * width) if block is not None else (3 * width * blocks, 2 * width)
            if block is not None and int(block) >= blocks:
                raise WeightsError(f"flow_lm.{key[: -len('.weight')]} is no layer of this model")
            if up.shape[0] != rows or down.shape[1] != width:
                raise WeightsError(
                    f"{key} is {[rows, width]} in this model, the update makes {[up.shape[0], down.shape[1]]}"
                )
            up_all[start : start + rows, rank : rank + down.shape[0]] = up
            rank += down.shape[0]
        downs = np.concatenate([down for _, _, down, _ in modulation])  # [r total, F]
        stacked_update = quantize.LowRank(stacked, downs, up_all)
        out = dict(out, flow_net=dict(net, modulation=dict(net["modulation"], weight=stacked_update)))
    return out


def _low_rank(key: str, weight: Any, down: np.ndarray, up: np.ndarray) -> quantize.LowRank:
    if not isinstance(weight, (np.ndarray, quantize.Int8Matrix)) or len(weight.shape) != 2:
        raise WeightsError(f"flow_lm.{key[: -len('.weight')]} is no linear layer of this model")
    if tuple(weight.shape) != (up.shape[0], down.shape[1]):
        raise WeightsError(
            f"flow_lm.{key} is {list(weight.shape)} in this model, the adapter's pair makes "
            f"{[up.shape[0], down.shape[1]]}: it was trained for another architecture"
        )
    return quantize.LowRank(weight, down, up)


def _replaced(node: Any, path: List[str], key: str, make: Any) -> Any:
    """`node` (nested dicts and lists) with the leaf at `path` replaced by make(leaf): new
    containers along the path, the rest shared."""
    part, rest = path[0], path[1:]
    if isinstance(node, list) and part.isdigit() and int(part) < len(node) and node[int(part)] is not None:
        index: Any = int(part)
    elif isinstance(node, dict) and part in node:
        index = part
    else:
        raise WeightsError(f"flow_lm.{key[: -len('.weight')]} is no layer of this model")
    child = make(node[index]) if not rest else _replaced(node[index], rest, key, make)
    copy = list(node) if isinstance(node, list) else dict(node)
    copy[index] = child
    return copy


def text_embeddings(p: Dict[str, Any], tokens: List[int]) -> np.ndarray:
    """Token ids -> [T, d_model] (a low-rank table is projected up)."""
    conditioner = p["conditioner"]
    table, ids = conditioner["embed"]["weight"], np.asarray(tokens, dtype=np.int64)
    x = table.rows(ids) if isinstance(table, quantize.Int8Matrix) else table[ids]  # [T, rank or d_model]
    return nn.linear(conditioner["proj"], x) if "proj" in conditioner else np.array(x, dtype=np.float32)


def voice_conditioning(spec: FlowLMSpec, p: Dict[str, Any], latents: np.ndarray) -> np.ndarray:
    """Mimi encoder latents [T, C] -> the voice prompt [T (+1 for BOS), d_model]."""
    x = ops.linear(latents, p["speaker_proj_weight"])  # [T, C] -> [T, d_model]
    if spec.insert_bos_before_voice:
        x = np.concatenate([p["bos_before_voice"][0], x])
    return x


def prompt(spec: FlowLMSpec, p: Dict[str, Any], state: transformer.TransformerState, x: np.ndarray) -> None:
    """Feed conditioning positions x [T, d_model] (voice or text) into the KV cache."""
    transformer.step(spec.transformer, p["transformer"]["layers"], x, state)


def time_terms(spec: FlowLMSpec, p: Dict[str, Any], decode_steps: int) -> List[np.ndarray]:
    """The head's time conditioning for each decode step (empty for the one-step heads).

    LSD step i goes from s = i/n to t = (i+1)/n and averages the two embeddings; flow matching
    embeds t = i/n alone. They depend only on the weights and n, so they are worked out once.
    """
    embed = p["flow_net"].get("time_embed")
    n = decode_steps
    if spec.flow_type == "lsd":
        return [
            (_timestep_embedding(embed[0], i / n) + _timestep_embedding(embed[1], (i + 1) / n)) / np.float32(2)
            for i in range(n)
        ]
    if spec.flow_type == "flow_matching":
        return [_timestep_embedding(embed[0], i / n) for i in range(n)]
    return []


def _timestep_embedding(p: Dict[str, Any], t: float) -> np.ndarray:
    args = np.float32(t) * p["freqs"]  # [F/2]
    x = np.concatenate([np.cos(args), np.sin(args)])  # [F]
    mlp = p["mlp"]
    x = nn.linear(mlp[2], nn.silu(nn.linear(mlp[0], x)))
    return nn.rms_norm_unbiased(x, mlp[3]["alpha"], 1e-5)


def input_rows(p: Dict[str, Any], latents: Sequence[Optional[np.ndarray]]) -> np.ndarray:
    """What the transformer reads for each stream's previous latent (None: BOS): [B, d_model]."""
    previous = np.stack([p["bos_emb"] if latent is None else latent for latent in latents])  # [B, latent_dim]
    return nn.linear(p["input_linear"], previous)


def backbone(
    spec: FlowLMSpec,
    p: Dict[str, Any],
    states: Sequence[transformer.TransformerState],
    xs: Sequence[np.ndarray],
    taps: Optional[Sequence[Optional[transformer.QueryTap]]] = None,
) -> np.ndarray:
    """B streams' next rows xs[b] [T_b, d_model] through the transformer at once -> the output of
    each stream's last row, [B, z_dim or d_model] (taps[b], where given, keeps stream b's queries)."""
    outs = transformer.step_streams(spec.transformer, p["transformer"]["layers"], xs, states, taps)
    last = np.stack([out[-1] for out in outs])  # [B, d_model]
    z = ops.layer_norm(last, p["out_norm"]["weight"], p["out_norm"]["bias"], 1e-5)
    return nn.linear(p["z_proj"], z) if "z_proj" in p else z


def step(
    spec: FlowLMSpec,
    p: Dict[str, Any],
    states: Sequence[transformer.TransformerState],
    latents: Sequence[Optional[np.ndarray]],
    noise: np.ndarray,
    times: List[np.ndarray],
) -> Tuple[np.ndarray, np.ndarray]:
    """One autoregressive step of B streams together: their previous latents (None: BOS) and noise
    [B, latent_dim] -> (next latents [B, latent_dim], EOS logits [B])."""
    rows = input_rows(p, latents)
    z = backbone(spec, p, states, [rows[b : b + 1] for b in range(rows.shape[0])])
    return outputs(spec, p, z, noise, [times] * len(states))


def outputs(
    spec: FlowLMSpec, p: Dict[str, Any], z: np.ndarray, noise: np.ndarray, times: Sequence[List[np.ndarray]]
) -> Tuple[np.ndarray, np.ndarray]:
    """Each row's next latent [B, latent_dim] and EOS logit [B] from the backbone's outputs z [B, z]
    and its noise [B, latent_dim]; rows with the same `times` (decode steps) share one flow head pass."""
    latents = np.empty_like(noise)
    for shared in {id(t): t for t in times}.values():
        rows = [k for k, t in enumerate(times) if t is shared]
        latents[rows] = flow_head(spec, p["flow_net"], z[rows], noise[rows], shared)
    return latents, nn.linear(p["out_eos"], z)[:, 0]


def flow_head(
    spec: FlowLMSpec, p: Dict[str, Any], cond: np.ndarray, noise: np.ndarray, times: List[np.ndarray]
) -> np.ndarray:
    """From noise [B, latent_dim] to the next latents, conditioned on the backbone outputs [B, ...]."""
    y = nn.linear(p["cond_embed"], cond)  # [B, flow_dim]
    if spec.flow_type == "drifting":
        return _velocity(p, y, noise)
    if spec.flow_type == "pointwise":
        return noise + _velocity(p, y, noise)
    current = noise
    n = np.float32(len(times))
    for term in times:
        current = current + _velocity(p, y + term, current) / n
    return current


def _velocity(p: Dict[str, Any], y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The official SimpleMLPAdaLN: residual MLP blocks modulated (shift, scale, gate) by y [B, F]."""
    x = nn.linear(p["input_proj"], x)
    width = x.shape[-1]
    modulation = nn.linear(p["modulation"], nn.silu(y))  # [B, (3 * depth + 2) * F]: shift, scale, gate per block
    for i, block in enumerate(p["res_blocks"]):
        shift, scale, gate = np.split(modulation[:, 3 * i * width : 3 * (i + 1) * width], 3, axis=1)
        h = ops.layer_norm(x, block["in_ln"]["weight"], block["in_ln"]["bias"], 1e-6) * (1 + scale) + shift
        h = nn.linear(block["mlp"][2], nn.silu(nn.linear(block["mlp"][0], h)))
        x = x + gate * h
    shift, scale = np.split(modulation[:, modulation.shape[1] - 2 * width :], 2, axis=1)
    x = ops.layer_norm(x, None, None, 1e-6) * (1 + scale) + shift
    return nn.linear(p["final_layer"]["linear"], x)
