"""Model weights: the key -> shape layout a config implies, checking a checkpoint against it, and
the nested form the layers read (`params["flow_lm"]["transformer"]["layers"][0]["self_attn"]`).

The layout is the official `model.safetensors` one (the state dict of the official TTSModel).
The voice-cloning part (Mimi encoder side and speaker projection) is optional as a whole: a
checkpoint without it can speak with exported voice states but cannot clone a voice.
"""

from __future__ import annotations

from typing import Any, Dict, Sequence, Tuple

import numpy as np

from ..config import TIME_CONDITIONS, Config, MimiTransformerConfig
from ..errors import WeightsError
from ..network import seanet
from ..network.quantize import SCALE_SUFFIX, Int8Matrix, LowRank, Weight

Shapes = Dict[str, Tuple[int, ...]]
# A checkpoint's parts, which can be loaded apart (the browser runs the flow LM and the decoder in two
# workers): the flow LM with the text table, Mimi's decoder side, and the voice-cloning group.
FLOW_LM, DECODER, VOICE_CLONING = "flow_lm", "decoder", "voice_cloning"
PARTS = (FLOW_LM, DECODER, VOICE_CLONING)
# Keys that only serve voice cloning; see `voice_cloning_keys`.
_CLONING_PREFIXES = ("mimi.encoder.", "mimi.encoder_transformer.", "mimi.downsample.")
_SPEAKER_PROJ = "flow_lm.speaker_proj_weight"
_LOOKUP_TABLE = "flow_lm.conditioner.embed.weight"


def expected_shapes(cfg: Config) -> Shapes:
    """Every tensor of the official checkpoint for this config, with its shape."""
    shapes: Shapes = {}
    shapes.update(_flow_lm_shapes(cfg))
    shapes.update(_mimi_shapes(cfg))
    return shapes


def parameter_count(cfg: Config) -> int:
    """How many numbers the official checkpoint for this config holds (every part)."""
    return sum(int(np.prod(shape)) for shape in expected_shapes(cfg).values())


def part_of(key: str) -> str:
    """Which part of the model a checkpoint tensor (or an int8 tensor's scales) belongs to (see PARTS)."""
    if key.endswith(SCALE_SUFFIX):
        key = key[: -len(SCALE_SUFFIX)]
    if is_voice_cloning_key(key):
        return VOICE_CLONING
    return FLOW_LM if key.startswith("flow_lm.") else DECODER


def is_lookup_table(key: str) -> bool:
    """Whether a tensor is the text embedding table, the one 2-D tensor the model indexes rather than
    multiplies as a linear layer: an int8 one stays int8 and only the rows a text uses are
    dequantized (core.portable.network.flow_lm.text_embeddings)."""
    return key == _LOOKUP_TABLE


def is_voice_cloning_key(key: str) -> bool:
    return key == _SPEAKER_PROJ or key.startswith(_CLONING_PREFIXES)


def _flow_lm_shapes(cfg: Config) -> Shapes:
    f = cfg.flow_lm
    t = f.transformer
    d, ldim, fd = t.d_model, cfg.mimi.quantizer.dimension, f.flow.dim
    out_dim = f.z_dim or d
    s: Shapes = {
        "flow_lm.bos_emb": (ldim,),
        "flow_lm.emb_mean": (ldim,),
        "flow_lm.emb_std": (ldim,),
        _LOOKUP_TABLE: (f.lookup_table.n_bins + 1, f.lookup_table.rank or f.lookup_table.dim),
        "flow_lm.input_linear.weight": (d, ldim),
        "flow_lm.out_norm.weight": (d,),
        "flow_lm.out_norm.bias": (d,),
        "flow_lm.out_eos.weight": (1, out_dim),
        "flow_lm.out_eos.bias": (1,),
        _SPEAKER_PROJ: (d, cfg.mimi.encoder_latent_dim),
    }
    if f.insert_bos_before_voice:
        s["flow_lm.bos_before_voice"] = (1, 1, d)
    if f.lookup_table.rank:
        s["flow_lm.conditioner.proj.weight"] = (f.lookup_table.dim, f.lookup_table.rank)
    if f.z_dim:
        s["flow_lm.z_proj.weight"] = (f.z_dim, d)
    qkv = t.query_dim + 2 * t.kv_heads * t.head_dim
    s.update(_layers_shapes("flow_lm.transformer.", t.num_layers, d, qkv, t.query_dim, t.ffn_dim, False))
    net = "flow_lm.flow_net."
    for j in range(TIME_CONDITIONS[f.flow.type]):
        at = f"{net}time_embed.{j}."
        s.update(
            {
                at + "freqs": (128,),
                at + "mlp.0.weight": (fd, 256),
                at + "mlp.0.bias": (fd,),
                at + "mlp.2.weight": (fd, fd),
                at + "mlp.2.bias": (fd,),
                at + "mlp.3.alpha": (fd,),
            }
        )
    s.update(
        {
            net + "cond_embed.weight": (fd, out_dim),
            net + "cond_embed.bias": (fd,),
            net + "input_proj.weight": (fd, ldim),
            net + "input_proj.bias": (fd,),
        }
    )
    for b in range(f.flow.depth):
        at = f"{net}res_blocks.{b}."
        s.update(
            {
                at + "in_ln.weight": (fd,),
                at + "in_ln.bias": (fd,),
                at + "mlp.0.weight": (fd, fd),
                at + "mlp.0.bias": (fd,),
                at + "mlp.2.weight": (fd, fd),
                at + "mlp.2.bias": (fd,),
                at + "adaLN_modulation.1.weight": (3 * fd, fd),
                at + "adaLN_modulation.1.bias": (3 * fd,),
            }
        )
    at = net + "final_layer."
    s.update(
        {
            at + "linear.weight": (ldim, fd),
            at + "linear.bias": (ldim,),
            at + "adaLN_modulation.1.weight": (2 * fd, fd),
            at + "adaLN_modulation.1.bias": (2 * fd,),
        }
    )
    return s


def _layers_shapes(prefix: str, n: int, d: int, qkv: int, attn: int, ffn: int, layer_scale: bool) -> Shapes:
    s: Shapes = {}
    for i in range(n):
        at = f"{prefix}layers.{i}."
        s.update(
            {
                at + "self_attn.in_proj.weight": (qkv, d),
                at + "self_attn.out_proj.weight": (d, attn),
                at + "linear1.weight": (ffn, d),
                at + "linear2.weight": (d, ffn),
                at + "norm1.weight": (d,),
                at + "norm1.bias": (d,),
                at + "norm2.weight": (d,),
                at + "norm2.bias": (d,),
            }
        )
        if layer_scale:
            s.update({at + "layer_scale_1.scale": (d,), at + "layer_scale_2.scale": (d,)})
    return s


def _projected_shapes(prefix: str, t: MimiTransformerConfig) -> Shapes:
    s = _layers_shapes(
        prefix + "transformer.", t.num_layers, t.d_model, 3 * t.d_model, t.d_model, t.dim_feedforward, True
    )
    if t.d_model != t.input_dimension:
        s[prefix + "input_proj.weight"] = (t.d_model, t.input_dimension)
    if t.d_model != t.output_dimensions[0]:
        s[prefix + "output_projs.0.weight"] = (t.output_dimensions[0], t.d_model)
    return s


def _mimi_shapes(cfg: Config) -> Shapes:
    m = cfg.mimi
    s: Shapes = {}
    s.update(seanet.weight_shapes(seanet.plan(m.seanet, decoder=False), "mimi.encoder."))
    s.update(seanet.weight_shapes(seanet.plan(m.decoder_seanet_config, decoder=True), "mimi.decoder."))
    s.update(_projected_shapes("mimi.encoder_transformer.", m.transformer))
    s.update(_projected_shapes("mimi.decoder_transformer.", m.decoder_transformer_config))
    s["mimi.quantizer.output_proj.weight"] = (m.quantizer.output_dimension, m.quantizer.dimension, 1)
    stride = m.resample_stride
    if stride > 1:
        s["mimi.downsample.conv.conv.weight"] = (m.encoder_latent_dim, m.seanet.dimension, 2 * stride)
        s["mimi.upsample.convtr.convtr.weight"] = (m.upsample_in_dim, 1, 2 * stride)
    return s


def check(tensors: Dict[str, Weight], cfg: Config, source: str, parts: Sequence[str] = PARTS) -> bool:
    """Raise WeightsError unless `tensors` are these parts of this config's checkpoint; True if they
    can clone voices."""
    expected = expected_shapes(cfg)
    unexpected = sorted(set(tensors) - set(expected))
    if unexpected:
        raise WeightsError(
            f"{source}: unexpected tensor {unexpected[0]!r} ({len(unexpected)} in all): "
            "the weights do not belong to this config's architecture"
        )
    expected = {key: shape for key, shape in expected.items() if part_of(key) in parts}
    can_clone = any(is_voice_cloning_key(k) and k in tensors for k in expected)
    for key, shape in expected.items():
        if key not in tensors:
            if is_voice_cloning_key(key) and not can_clone:
                continue
            raise WeightsError(f"{source}: missing tensor {key!r} (expected shape {list(shape)})")
        got = tuple(tensors[key].shape)
        if got != shape:
            raise WeightsError(f"{source}: tensor {key!r} has shape {list(got)}, the config implies {list(shape)}")
        if not isinstance(tensors[key], (Int8Matrix, LowRank)) and tensors[key].dtype != np.float32:
            raise WeightsError(f"{source}: tensor {key!r} is {tensors[key].dtype}, expected float32")
    return can_clone


def nest(tensors: Dict[str, Weight]) -> Dict[str, Any]:
    """{"a.b.0.c": x} -> {"a": {"b": [{"c": x}]}}: digit keys become list indices (None for gaps).

    Leaves become plain ndarray views (of memory-mapped files too): np.memmap's subclass hooks
    cost a few microseconds on every slice and transpose of the per-frame loop.
    """
    root: Dict[str, Any] = {}
    for key, value in tensors.items():
        node = root
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value if isinstance(value, (Int8Matrix, LowRank)) else value.view(np.ndarray)
    return _lists(root)


def _lists(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    children = {k: _lists(v) for k, v in node.items()}
    if children and all(k.isdigit() for k in children):
        items = [None] * (max(int(k) for k in children) + 1)
        for k, v in children.items():
            items[int(k)] = v
        return items
    return children
