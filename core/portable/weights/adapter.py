"""LoRA adapters (PEFT's format): W + s * B @ A for each adapted Linear, s = lora_alpha / r
(lora_alpha / sqrt(r) with `use_rslora`), r and lora_alpha per module where the config's
`rank_pattern` / `alpha_pattern` name it. A loaded model keeps each update apart from the weight
it changes (network.quantize.LowRank: the base's product plus a rank-r one), so an adapter copies
no weight, int8 ones stay int8, and several adapters share one base model; an export merges it
(`merged`) before quantizing. Decided by measurement (docs/measurements.md#lora-adapters).

An adapter is a PEFT folder (`adapter_config.json` and `adapter_model.safetensors`) or a single
.safetensors file, whose config is the `adapter_config.json` beside it or its own metadata (the
same keys, as strings). Its keys are `base_model.model.<module>.lora_A.weight` ([r, in]) and
`.lora_B.weight` ([out, r]), the module named in the official FlowLM (`transformer.layers.0.
self_attn.in_proj`) or in the official TTSModel (`flow_lm.transformer...`); either is the
checkpoint's `flow_lm.<module>.weight`.
"""

from __future__ import annotations

import json
import math
import os
import re
from typing import Any, Dict, Mapping, NamedTuple, Optional, Tuple

import numpy as np

from ..errors import WeightsError
from ..network.quantize import LowRank, Weight
from . import safetensors_file

CONFIG = "adapter_config.json"
WEIGHTS = ("adapter_model.safetensors", "adapter.safetensors")
_PREFIX = "base_model.model."
_PAIR = re.compile(r"^(?P<module>.+)\.lora_(?P<side>[AB])(?:\.default)?\.weight$")


class Pair(NamedTuple):
    down: np.ndarray  # lora_A [r, in]
    up: np.ndarray  # lora_B [out, r]
    scale: float


class Adapter(NamedTuple):
    source: str  # the path, for errors
    pairs: Dict[str, Pair]  # checkpoint key of the adapted weight -> its pair


def read(path: str) -> Adapter:
    """The adapter at `path` (a PEFT folder or a .safetensors file), checked in itself: every module
    with both halves, ranks that agree with each other and with its config."""
    weights, config_path = _files(path)
    tensors, metadata = safetensors_file.load(weights)
    config = _config(config_path, metadata, path)
    halves: Dict[str, Dict[str, np.ndarray]] = {}
    for key, tensor in tensors.items():
        match = _PAIR.match(key[len(_PREFIX) :] if key.startswith(_PREFIX) else key)
        if match is None:
            raise WeightsError(f"{path}: {key!r} is not a LoRA weight (<module>.lora_A.weight or .lora_B.weight)")
        module = match.group("module")
        halves.setdefault(module, {})[match.group("side")] = np.asarray(tensor, dtype=np.float32)
    if not halves:
        raise WeightsError(f"{path}: no LoRA weights in {weights}")
    pairs = {}
    for module, sides in halves.items():
        if set(sides) != {"A", "B"}:
            missing = ({"A", "B"} - set(sides)).pop()
            raise WeightsError(f"{path}: {module}.lora_{missing}.weight is missing")
        down, up = sides["A"], sides["B"]
        if down.ndim != 2 or up.ndim != 2 or up.shape[1] != down.shape[0]:
            raise WeightsError(
                f"{path}: {module}: lora_A {list(down.shape)} and lora_B {list(up.shape)} do not make a "
                "low-rank product ([r, in] and [out, r])"
            )
        rank, alpha = _rank_and_alpha(config, module, path)
        if not (np.isfinite(down).all() and np.isfinite(up).all()):
            raise WeightsError(f"{path}: {module} has values that are not finite numbers")
        if down.shape[0] != rank:
            raise WeightsError(f"{path}: {module} has rank {down.shape[0]}, its config says r = {rank}")
        scale = alpha / math.sqrt(rank) if config.get("use_rslora") else alpha / rank
        key = module if module.startswith("flow_lm.") else "flow_lm." + module
        pairs[key + ".weight"] = Pair(down, up, scale)
    return Adapter(path, pairs)


def updates(adapter: Adapter) -> Dict[str, Tuple[np.ndarray, np.ndarray]]:
    """The adapter's updates by weight, keyed under flow_lm ("transformer.layers.0.linear1.weight"):
    (down [r, in], up [out, r] with the scale in it), as network.flow_lm.adapted keeps them apart."""
    return {
        key[len("flow_lm.") :]: (pair.down, pair.up * np.float32(pair.scale)) for key, pair in adapter.pairs.items()
    }


def merged(tensors: Mapping[str, Weight], adapter: Adapter) -> Dict[str, Weight]:
    """`tensors` with the adapter's deltas added (new arrays for the adapted weights, float32; an int8
    weight is dequantized first), checked against them: every adapted module is a Linear of the
    checkpoint, of the shape its pair makes. What an int8 export quantizes."""
    out = dict(tensors)
    for key, (down, up) in updates(adapter).items():
        weight = tensors.get("flow_lm." + key)
        if weight is None:
            raise WeightsError(f"{adapter.source}: flow_lm.{key[: -len('.weight')]} is no layer of this model")
        wanted = (up.shape[0], down.shape[1])
        if tuple(weight.shape) != wanted:
            raise WeightsError(
                f"{adapter.source}: flow_lm.{key} is {list(weight.shape)} in this model, the adapter's pair makes "
                f"{list(wanted)}: it was trained for another architecture"
            )
        out["flow_lm." + key] = LowRank(weight, down, up).dequantize()
    return out


def _files(path: str) -> Tuple[str, Optional[str]]:
    """The adapter's weights file and the config beside it (None where there is none)."""
    if os.path.isdir(path):
        found = [os.path.join(path, name) for name in WEIGHTS if os.path.isfile(os.path.join(path, name))]
        if not found:
            raise WeightsError(f"{path}: no {' or '.join(WEIGHTS)} in this folder")
        weights = found[0]
    elif os.path.isfile(path):
        if not path.endswith(".safetensors"):
            raise WeightsError(f"{path}: an adapter is a PEFT folder or a .safetensors file")
        weights = path
    else:
        raise WeightsError(f"{path}: no such adapter (a PEFT folder or a .safetensors file)")
    beside = os.path.join(os.path.dirname(weights), CONFIG)
    return weights, beside if os.path.isfile(beside) else None


def _config(path: Optional[str], metadata: Dict[str, str], source: str) -> Dict[str, Any]:
    if path is not None:
        try:
            with open(path, encoding="utf-8") as f:
                config = json.load(f)
        except (OSError, ValueError) as error:
            raise WeightsError(f"{path}: not a readable adapter config ({error})") from None
    elif "lora_alpha" in metadata:
        config = {key: _metadata_value(value) for key, value in metadata.items()}
    else:
        raise WeightsError(f"{source}: no {CONFIG} beside it and no lora_alpha in its metadata: its scale is unknown")
    if not isinstance(config, dict) or "r" not in config or "lora_alpha" not in config:
        raise WeightsError(f"{path or source}: an adapter config needs r and lora_alpha")
    if config.get("peft_type", "LORA") != "LORA":
        raise WeightsError(f"{path or source}: peft_type {config['peft_type']!r}: only LoRA adapters merge")
    return config


def _metadata_value(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return value


def _rank_and_alpha(config: Dict[str, Any], module: str, source: str) -> Tuple[int, float]:
    """r and lora_alpha of `module`: its entry in rank_pattern / alpha_pattern where one matches it
    (PEFT's rule: the pattern is the module's name or a dotted tail of it), else the config's."""
    rank = _pattern(config, "rank_pattern", module, config["r"], source)
    alpha = _pattern(config, "alpha_pattern", module, config["lora_alpha"], source)
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise WeightsError(f"{source}: r of {module} must be a positive whole number, got {rank!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha):
        raise WeightsError(f"{source}: lora_alpha of {module} must be a number, got {alpha!r}")
    return rank, float(alpha)


def _pattern(config: Dict[str, Any], name: str, module: str, default: Any, source: str) -> Any:
    patterns = config.get(name) or {}
    if not isinstance(patterns, dict):
        raise WeightsError(f"{source}: {name} must map module names to values")
    for pattern, value in patterns.items():
        try:
            if re.fullmatch(rf"(.*\.)?{pattern}", module):
                return value
        except re.error as error:
            raise WeightsError(f"{source}: {name} has a pattern that is not one ({pattern!r}: {error})") from None
    return default
