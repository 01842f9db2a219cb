"""Model configuration: frozen dataclasses with the fields of the official `pocket_tts/config/*.yaml`.

The schema is the official one field for field (unknown fields are an error, as in the official
pydantic models), so any YAML the official package loads loads here too. `Config.from_dict` takes
the parsed YAML or JSON; `load_yaml` needs PyYAML and is only used on CPython (the browser gets JSON).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, Optional, Tuple, Union, get_type_hints

from .errors import ConfigError

FLOW_TYPES = ("lsd", "flow_matching", "drifting", "pointwise")
# Time conditions of the flow head per flow type (the official SimpleMLPAdaLN.from_pydantic_config).
TIME_CONDITIONS = {"lsd": 2, "flow_matching": 1, "drifting": 0, "pointwise": 0}


@dataclasses.dataclass(frozen=True)
class FlowConfig:
    dim: int
    depth: int
    type: str = "lsd"


@dataclasses.dataclass(frozen=True)
class FlowLMTransformerConfig:
    hidden_scale: int
    max_period: int
    d_model: int
    num_heads: int
    num_layers: int
    attn_dim: Optional[int] = None
    num_kv_heads: Optional[int] = None
    dim_feedforward: Optional[int] = None

    @property
    def query_dim(self) -> int:
        return self.attn_dim or self.d_model

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads or self.num_heads

    @property
    def head_dim(self) -> int:
        return self.query_dim // self.num_heads

    @property
    def ffn_dim(self) -> int:
        return self.dim_feedforward or self.d_model * self.hidden_scale


@dataclasses.dataclass(frozen=True)
class LookupTableConfig:
    dim: int
    n_bins: int
    tokenizer: str
    tokenizer_path: str
    rank: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class FlowLMConfig:
    dtype: str
    flow: FlowConfig
    transformer: FlowLMTransformerConfig
    lookup_table: LookupTableConfig
    z_dim: Optional[int] = None
    weights_path: Optional[str] = None
    insert_bos_before_voice: bool = False


@dataclasses.dataclass(frozen=True)
class SEANetConfig:
    dimension: int
    channels: int
    n_filters: int
    n_residual_layers: int
    ratios: Tuple[int, ...]
    kernel_size: int
    residual_kernel_size: int
    last_kernel_size: int
    dilation_base: int
    pad_mode: str
    compress: int

    @property
    def hop_length(self) -> int:
        hop = 1
        for ratio in self.ratios:
            hop *= ratio
        return hop


@dataclasses.dataclass(frozen=True)
class MimiTransformerConfig:
    d_model: int
    input_dimension: int
    output_dimensions: Tuple[int, ...]
    num_heads: int
    num_layers: int
    layer_scale: float
    context: int
    dim_feedforward: int
    max_period: float = 10000.0


@dataclasses.dataclass(frozen=True)
class QuantizerConfig:
    dimension: int
    output_dimension: int


@dataclasses.dataclass(frozen=True)
class MimiConfig:
    dtype: str
    sample_rate: int
    channels: int
    frame_rate: float
    seanet: SEANetConfig
    transformer: MimiTransformerConfig
    quantizer: QuantizerConfig
    weights_path: Optional[str] = None
    inner_dim: Optional[int] = None
    outer_dim: Optional[int] = None
    decoder_seanet: Optional[SEANetConfig] = None
    decoder_transformer: Optional[MimiTransformerConfig] = None

    @property
    def decoder_seanet_config(self) -> SEANetConfig:
        return self.decoder_seanet or self.seanet

    @property
    def decoder_transformer_config(self) -> MimiTransformerConfig:
        return self.decoder_transformer or self.transformer

    @property
    def frame_size(self) -> int:
        """Audio samples per latent frame (1920 at 24 kHz and 12.5 Hz)."""
        return int(self.sample_rate / self.frame_rate)

    @property
    def resample_stride(self) -> int:
        """Encoder-rate steps per latent frame; 1 when SEANet's hop already gives the frame rate."""
        return self.frame_size // self.seanet.hop_length

    @property
    def encoder_latent_dim(self) -> int:
        """Width of the encoder's latents (the voice prompt), which the speaker projection reads.

        Not always the flow latents' width (quantizer.dimension): english_2026-01 encodes
        voices to 512 channels and generates 32-channel latents.
        """
        if self.resample_stride > 1:
            return self.inner_dim or self.seanet.dimension
        return self.seanet.dimension

    @property
    def upsample_in_dim(self) -> int:
        return self.outer_dim or self.decoder_seanet_config.dimension


@dataclasses.dataclass(frozen=True)
class TimestampHead:
    """A flow-LM attention head whose attention on the text tells which word is being spoken
    (`pocket-tts-timestamped`'s `timestamp_heads`, chosen per checkpoint)."""

    layer: int
    head: int


@dataclasses.dataclass(frozen=True)
class Config:
    flow_lm: FlowLMConfig
    mimi: MimiConfig
    weights_path: Optional[str] = None
    weights_path_without_voice_cloning: Optional[str] = None
    pad_with_spaces_for_short_inputs: bool = False
    remove_semicolons: bool = False
    append_terminal_punctuation: bool = True
    capitalize_first_letter: bool = True
    replace_characters: Dict[str, str] = dataclasses.field(default_factory=dict)
    model_recommended_frames_after_eos: Optional[int] = None
    default_temperature: float = 0.3
    default_eos_threshold: float = -4.0
    # Not in the official schema: `pocket-tts-timestamped`'s key, for word timestamps.
    timestamp_heads: Optional[Tuple[TimestampHead, ...]] = None

    @classmethod
    def from_dict(cls, data: Any, source: str = "config") -> Config:
        """Build and check a config from parsed YAML/JSON; errors name `source` and the field."""
        config = _build(cls, data, source)
        _check(config, source)
        return config

    def to_dict(self) -> Dict[str, Any]:
        """The plain-data form (`Config.from_dict(c.to_dict()) == c`), e.g. to write as JSON."""
        return json.loads(json.dumps(dataclasses.asdict(self)))


def load_yaml(path: str) -> Config:
    """Read an official-schema YAML file (needs PyYAML, so CPython only)."""
    try:
        import yaml
    except ImportError:
        raise ConfigError(f"reading {path} needs PyYAML (pip install pyyaml)") from None
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except OSError as e:
        raise ConfigError(f"cannot read config {path}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path} is not valid YAML: {e}") from None
    return Config.from_dict(data, path)


def load_json(path: str) -> Config:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise ConfigError(f"cannot read config {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise ConfigError(f"{path} is not valid JSON: {e}") from None
    return Config.from_dict(data, path)


def _build(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"{where}: unknown field {unknown[0]!r} (known: {', '.join(fields)})")
    values = {}
    for name, field in fields.items():
        if name in data:
            values[name] = _convert(hints[name], data[name], f"{where}.{name}" if where else name)
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:  # type: ignore[misc]
            raise ConfigError(f"{where}: missing required field {name!r}")
    return cls(**values)


def _convert(hint: Any, value: Any, where: str) -> Any:
    origin = getattr(hint, "__origin__", None)
    args = getattr(hint, "__args__", ())
    if origin is Union:
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _convert(inner, value, where)
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, where)
    if origin in (tuple, Tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        return tuple(_convert(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin in (dict, Dict):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return {_convert(args[0], k, where): _convert(args[1], v, f"{where}[{k!r}]") for k, v in value.items()}
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return int(value)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    raise ConfigError(f"{where}: unsupported field type {hint}")


def _check(config: Config, source: str) -> None:
    """Consistency the official code asserts while building the modules, said up front."""
    flow_lm, mimi = config.flow_lm, config.mimi
    t = flow_lm.transformer

    def need(ok: bool, field: str, message: str) -> None:
        if not ok:
            raise ConfigError(f"{source}: {field}: {message}")

    need(flow_lm.flow.type in FLOW_TYPES, "flow_lm.flow.type", f"{flow_lm.flow.type!r} is not one of {FLOW_TYPES}")
    need(t.query_dim % t.num_heads == 0, "flow_lm.transformer", "attn_dim (or d_model) must be a multiple of num_heads")
    need(t.num_heads % t.kv_heads == 0, "flow_lm.transformer.num_kv_heads", "must divide num_heads")
    need(t.head_dim % 2 == 0, "flow_lm.transformer", "the head width must be even for RoPE")
    need(flow_lm.lookup_table.dim == t.d_model, "flow_lm.lookup_table.dim", "must equal transformer.d_model")
    heads = config.timestamp_heads
    if heads is not None:
        need(len(heads) > 0, "timestamp_heads", "must name at least one {layer, head}")
        need(len(set(heads)) == len(heads), "timestamp_heads", "names a head twice")
        for h in heads:
            need(
                0 <= h.layer < t.num_layers,
                "timestamp_heads",
                f"layer {h.layer} is not a flow-LM layer (0-{t.num_layers - 1})",
            )
            need(0 <= h.head < t.num_heads, "timestamp_heads", f"head {h.head} is not a head (0-{t.num_heads - 1})")
    for name, dtype in (("flow_lm.dtype", flow_lm.dtype), ("mimi.dtype", mimi.dtype)):
        need(dtype == "float32", name, f"only float32 is supported, got {dtype!r}")
    need(mimi.channels == 1, "mimi.channels", "only mono models are supported")
    for side in ("seanet", "decoder_seanet"):
        seanet = getattr(mimi, side)
        if seanet is not None:
            need(seanet.pad_mode in ("constant", "replicate"), f"mimi.{side}.pad_mode", "must be constant or replicate")
            need(seanet.channels == 1, f"mimi.{side}.channels", "only mono models are supported")
    for side in ("transformer", "decoder_transformer"):
        tr = getattr(mimi, side)
        if tr is not None:
            need(len(tr.output_dimensions) == 1, f"mimi.{side}.output_dimensions", "exactly one output is used")
            need(
                tr.d_model % tr.num_heads == 0 and (tr.d_model // tr.num_heads) % 2 == 0,
                f"mimi.{side}",
                "d_model / num_heads must be an even integer",
            )
    frame_size = mimi.sample_rate / mimi.frame_rate
    need(frame_size == int(frame_size), "mimi.frame_rate", "sample_rate / frame_rate must be a whole number")
    for side, seanet in (("seanet", mimi.seanet), ("decoder_seanet", mimi.decoder_seanet_config)):
        need(
            int(frame_size) % seanet.hop_length == 0,
            f"mimi.{side}.ratios",
            "their product must divide the samples per frame",
        )
    need(
        mimi.seanet.hop_length == mimi.decoder_seanet_config.hop_length,
        "mimi.decoder_seanet.ratios",
        "must have the encoder's hop length",
    )
    decoder_dim = mimi.decoder_seanet_config.dimension
    if mimi.resample_stride > 1:
        need(
            mimi.upsample_in_dim == mimi.quantizer.output_dimension,
            "mimi.outer_dim",
            "must equal quantizer.output_dimension",
        )
        need(
            mimi.upsample_in_dim % decoder_dim == 0,
            "mimi.outer_dim",
            "must be a multiple of the decoder SEANet dimension (grouped upsampling)",
        )
    else:
        need(
            mimi.quantizer.output_dimension == decoder_dim,
            "mimi.quantizer.output_dimension",
            "must equal the decoder SEANet dimension",
        )
    encoder_tr, decoder_tr = mimi.transformer, mimi.decoder_transformer_config
    need(
        encoder_tr.input_dimension == mimi.seanet.dimension
        and encoder_tr.output_dimensions[0] == mimi.seanet.dimension,
        "mimi.transformer",
        "input and output dimensions must equal seanet.dimension",
    )
    need(
        decoder_tr.input_dimension == decoder_dim and decoder_tr.output_dimensions[0] == decoder_dim,
        "mimi.decoder_transformer",
        "input and output dimensions must equal the decoder SEANet dimension",
    )
