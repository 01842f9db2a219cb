"""Mimi, the audio codec: the encoder turns a voice prompt into latents, the decoder turns generated
latents into 24 kHz audio, one 80 ms frame at a time.

Encoder: SEANet (24 kHz -> 200 Hz) -> windowed transformer -> strided convolution with replicate
padding (200 Hz -> 12.5 Hz). Decoder: 1x1 quantizer projection -> depthwise transposed
convolution (12.5 Hz -> 200 Hz) -> windowed transformer -> SEANet decoder (200 Hz -> 24 kHz).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List

import numpy as np

from ..config import MimiConfig, MimiTransformerConfig
from . import conv, nn, seanet, transformer

# Frames of audio the encoder's SEANet takes at a time (about one second).
ENCODER_CHUNK_FRAMES = 12


def _transformer_spec(cfg: MimiTransformerConfig) -> transformer.TransformerSpec:
    return transformer.TransformerSpec(
        num_layers=cfg.num_layers,
        d_model=cfg.d_model,
        num_heads=cfg.num_heads,
        num_kv_heads=cfg.num_heads,
        head_dim=cfg.d_model // cfg.num_heads,
        max_period=cfg.max_period,
        context=cfg.context,
        layer_scale=True,
    )


@dataclasses.dataclass(frozen=True)
class MimiSpec:
    """What the computation needs to know of a MimiConfig, worked out once."""

    encoder: List[seanet.Layer]
    decoder: List[seanet.Layer]
    encoder_transformer: transformer.TransformerSpec
    decoder_transformer: transformer.TransformerSpec
    encoder_pad_mode: str
    decoder_pad_mode: str
    resample_stride: int
    frame_size: int
    decoder_dim: int

    @classmethod
    def from_config(cls, cfg: MimiConfig) -> MimiSpec:
        return cls(
            encoder=seanet.plan(cfg.seanet, decoder=False),
            decoder=seanet.plan(cfg.decoder_seanet_config, decoder=True),
            encoder_transformer=_transformer_spec(cfg.transformer),
            decoder_transformer=_transformer_spec(cfg.decoder_transformer_config),
            encoder_pad_mode=cfg.seanet.pad_mode,
            decoder_pad_mode=cfg.decoder_seanet_config.pad_mode,
            resample_stride=cfg.resample_stride,
            frame_size=cfg.frame_size,
            decoder_dim=cfg.decoder_seanet_config.dimension,
        )


@dataclasses.dataclass
class DecoderState:
    """Streaming state of the decoder: convolution tails, the transformer's window, the offset."""

    upsample: np.ndarray  # [C, 1] last input step of the upsampling transposed convolution
    transformer: transformer.TransformerState
    seanet: List[np.ndarray]  # one tail per SEANet convolution, in plan order
    first: bool = True  # nothing decoded yet (replicate padding starts from the first sample)

    def copy(self) -> DecoderState:
        return DecoderState(self.upsample.copy(), self.transformer.copy(), [s.copy() for s in self.seanet], self.first)


def prepare(spec: MimiSpec, p: Dict[str, Any]) -> Dict[str, Any]:
    """The params with the derived layouts the decoder reads, made once at load, as a new dict: `p`
    is left as it is."""
    prepared = dict(p, decoder={"model": seanet.prepare(spec.decoder, p["decoder"]["model"])})
    if spec.resample_stride > 1:
        upsample = conv.prepare_transposed(p["upsample"]["convtr"]["convtr"], spec.resample_stride, spec.decoder_dim)
        prepared["upsample"] = {"convtr": {"convtr": upsample}}
    return prepared


def init_decoder_state(spec: MimiSpec, p: Dict[str, Any]) -> DecoderState:
    if spec.resample_stride > 1:
        upsample = conv.conv_transpose1d_init_state(p["upsample"]["convtr"]["convtr"])
    else:
        upsample = np.zeros((spec.decoder_dim, 0), np.float32)
    return DecoderState(
        upsample=upsample,
        transformer=transformer.init_state(spec.decoder_transformer),
        seanet=seanet.init_state(spec.decoder, p["decoder"]["model"]),
    )


def _projected(p: Dict[str, Any], x: np.ndarray, run: Any) -> np.ndarray:
    """The official ProjectedTransformer: optional input/output projections around a transformer."""
    if "input_proj" in p:
        x = nn.linear(p["input_proj"], x)
    x = run(p["transformer"]["layers"], x)
    if "output_projs" in p:
        x = nn.linear(p["output_projs"][0], x)
    return x


def decode_step(spec: MimiSpec, p: Dict[str, Any], latents: np.ndarray, state: DecoderState) -> np.ndarray:
    """latents [N, latent_dim] (denormalised) -> audio [N * frame_size]; advances `state`."""
    return decode_streams(spec, p, latents[None], [state])[0]


def decode_streams(spec: MimiSpec, p: Dict[str, Any], latents: np.ndarray, states: List[DecoderState]) -> np.ndarray:
    """B streams' next frames at once, each stream with its own state: latents [B, N, latent_dim]
    (denormalised) -> audio [B, N * frame_size]. Every layer is one product for all the streams;
    the transformer attends per stream, on its own window."""
    streams, n = latents.shape[:2]
    x = latents @ p["quantizer"]["output_proj"]["weight"][:, :, 0].T  # [B, N, C_q] -> [B, N, C]
    x = np.ascontiguousarray(x.transpose(0, 2, 1))  # [B, C, N]
    if spec.resample_stride > 1:
        upsample = np.stack([state.upsample for state in states])  # [B, C, 1]
        x = conv.conv_transpose1d_step(p["upsample"]["convtr"]["convtr"], x, upsample, spec.resample_stride)
        for state, tail in zip(states, upsample):
            state.upsample = tail
    steps = x.shape[2]

    def run(layers: List[Any], h: np.ndarray) -> np.ndarray:  # h: [B * T, C], the streams' rows in order
        outs = transformer.step_streams(
            spec.decoder_transformer, layers, np.split(h, streams), [state.transformer for state in states]
        )
        return np.concatenate(outs) if streams > 1 else outs[0]

    h = _projected(p["decoder_transformer"], x.transpose(0, 2, 1).reshape(streams * steps, -1), run)  # [B*T, C]
    x = np.ascontiguousarray(h.reshape(streams, steps, -1).transpose(0, 2, 1))  # [B, C, T]
    tails = [np.stack([state.seanet[i] for state in states]) for i in range(len(states[0].seanet))]  # [B, C, P]
    replicate = np.array([state.first for state in states]) if spec.decoder_pad_mode == "replicate" else None
    audio = seanet.step(spec.decoder, p["decoder"]["model"], x, tails, replicate)  # [B, 1, N * frame_size]
    for b, state in enumerate(states):
        state.seanet = [tail[b] for tail in tails]
        state.first = False
    return audio[:, 0]


def decode(spec: MimiSpec, p: Dict[str, Any], latents: np.ndarray) -> np.ndarray:
    """Batch form: all frames in one call from a fresh state."""
    return decode_step(spec, p, latents, init_decoder_state(spec, p))


def encode(spec: MimiSpec, p: Dict[str, Any], audio: np.ndarray) -> np.ndarray:
    """audio [T] at the model's sample rate -> latents [ceil(T / frame_size), encoder_latent_dim]."""
    x = conv.pad_for_frames(audio.astype(np.float32)[None, None, :], spec.frame_size)  # [1, 1, T']
    # The SEANet streams over pieces of ENCODER_CHUNK_FRAMES frames: the same result as one call,
    # in a fraction of the memory (a 5 s prompt as one piece held ~150 MB of activations).
    layers, params, states = spec.encoder, p["encoder"]["model"], seanet.init_state(spec.encoder, p["encoder"]["model"])
    chunk = spec.frame_size * ENCODER_CHUNK_FRAMES
    states = [state[None] for state in states]  # one stream: [1, C, P]
    replicate = np.array([spec.encoder_pad_mode == "replicate"])
    x = np.concatenate(
        [
            seanet.step(layers, params, x[:, :, i : i + chunk], states, replicate if i == 0 else None)
            for i in range(0, x.shape[2], chunk)
        ],
        axis=2,
    )[0]  # [C, T' / hop]
    x = _projected(
        p["encoder_transformer"],
        np.ascontiguousarray(x.T),
        lambda layers, h: transformer.forward(spec.encoder_transformer, layers, h),
    )  # [T' / hop, C]
    x = np.ascontiguousarray(x.T)
    if spec.resample_stride > 1:
        x = conv.conv1d(p["downsample"]["conv"]["conv"], x, spec.resample_stride, 1, "replicate")
    return np.ascontiguousarray(x.T)  # [frames, encoder_latent_dim]
