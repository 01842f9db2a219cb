"""Streaming equals batch: every step function, run chunk by chunk, gives its one-call result."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from core import TTSModel
from core.portable.network import conv, mimi, ops, transformer
from tests.support.metrics import nmse_db
from tests.support.parity import tiny_models
from tests.support.paths import TINY_DIR

rng = np.random.default_rng(0)


def random(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def in_chunks(total: int, sizes: list) -> list:
    """Split range(total) into consecutive chunks whose sizes cycle through `sizes`."""
    bounds, start, i = [], 0, 0
    while start < total:
        stop = min(total, start + sizes[i % len(sizes)])
        bounds.append((start, stop))
        start, i = stop, i + 1
    return bounds


@pytest.mark.parametrize("stride, dilation, pad_mode", [(1, 1, "constant"), (1, 4, "constant"), (4, 1, "replicate")])
def test_conv1d_step_equals_batch(stride: int, dilation: int, pad_mode: str) -> None:
    p = {"weight": random(6, 5, 7), "bias": random(6)}
    x = random(5, 96)
    batch = conv.conv1d(p, x, stride, dilation, pad_mode)
    state = conv.conv1d_init_state(p, stride, dilation)
    state[...] = x[:, :1] if pad_mode == "replicate" else 0
    parts = [conv.conv1d_step(p, x[:, a:b], state, stride, dilation) for a, b in in_chunks(96, [stride, 3 * stride, 8])]
    assert np.allclose(np.concatenate(parts, axis=1), batch, atol=1e-5)
    assert batch.shape == (6, 96 // stride)


def test_conv1d_matches_direct_formula() -> None:
    """The im2col convolution against the definition, with left zero padding (causal)."""
    weight, bias = random(3, 2, 4), random(3)
    x = random(2, 20)
    stride, dilation = 2, 3
    y = conv.conv1d({"weight": weight, "bias": bias}, x, stride, dilation)
    pad = (4 - 1) * dilation + 1 - stride
    padded = np.concatenate([np.zeros((2, pad), np.float32), x], axis=1)
    expected = np.array(
        [
            [
                bias[o]
                + sum(weight[o, i, k] * padded[i, t * stride + k * dilation] for i in range(2) for k in range(4))
                for t in range(10)
            ]
            for o in range(3)
        ]
    )
    assert np.allclose(y, expected, atol=1e-5)


def test_conv1d_long_input_in_blocks_equals_one_block(monkeypatch: pytest.MonkeyPatch) -> None:
    p = {"weight": random(4, 3, 5), "bias": random(4)}
    x = random(3, 1000)
    whole = conv.conv1d(p, x)
    monkeypatch.setattr(ops, "_IM2COL_BLOCK", 3 * 5 * 7)
    assert np.allclose(conv.conv1d(p, x), whole, atol=1e-6)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("groups", [1, 4])
@pytest.mark.parametrize("stride, k", [(5, 10), (3, 7), (4, 4)])
def test_conv_transpose1d_step_equals_batch(groups: int, stride: int, k: int, bias: bool) -> None:
    """Calls of fewer steps than conv.PHASE_BY_PHASE_FROM and of more lay their output out in time
    in two ways: both are the definition's."""
    c_in, c_out, steps = 4, 8, 2 * conv.PHASE_BY_PHASE_FROM + 3
    raw = {"weight": random(c_in, c_out // groups, k), **({"bias": random(c_out)} if bias else {})}
    p = conv.prepare_transposed(raw, stride, groups)
    x = random(c_in, steps)
    whole = conv.conv_transpose1d_step(p, x, conv.conv_transpose1d_init_state(p), stride)
    state = conv.conv_transpose1d_init_state(p)
    chunks = in_chunks(steps, [1, 2, 7, conv.PHASE_BY_PHASE_FROM])
    parts = [conv.conv_transpose1d_step(p, x[:, a:b], state, stride) for a, b in chunks]
    assert np.allclose(np.concatenate(parts, axis=1), whole, atol=1e-5)
    # Against the definition: y[o, t*S + k] += w[i, o, k] x[i, t], cut to T*S samples.
    full = np.zeros((c_out, (steps - 1) * stride + k), np.float32)
    per = c_in // groups
    for i in range(c_in):
        g = i // per
        for o in range(c_out // groups):
            for t in range(steps):
                full[g * (c_out // groups) + o, t * stride : t * stride + k] += raw["weight"][i, o] * x[i, t]
    if bias:
        full += raw["bias"][:, None]
    assert np.allclose(whole, full[:, : steps * stride], atol=1e-4)


def tiny_transformer(context):
    """A transformer of two small layers with random weights: its spec and its layers' params."""
    spec = transformer.TransformerSpec(
        num_layers=2,
        d_model=16,
        num_heads=4,
        num_kv_heads=2,
        head_dim=6,
        max_period=10000.0,
        context=context,
        layer_scale=context is not None,
    )
    layers = []
    for _ in range(2):
        layer = {
            "self_attn": {
                "in_proj": {"weight": random(4 * 6 + 2 * 2 * 6, 16) * 0.3},
                "out_proj": {"weight": random(16, 24) * 0.3},
            },
            "norm1": {"weight": 1 + 0.1 * random(16), "bias": 0.1 * random(16)},
            "norm2": {"weight": 1 + 0.1 * random(16), "bias": 0.1 * random(16)},
            "linear1": {"weight": random(32, 16) * 0.3},
            "linear2": {"weight": random(16, 32) * 0.3},
            "layer_scale_1": {"scale": random(16)},
            "layer_scale_2": {"scale": random(16)},
        }
        layers.append(layer)
    return spec, layers


@pytest.mark.parametrize("context", [None, 7])
def test_transformer_step_equals_forward(context) -> None:
    spec, layers = tiny_transformer(context)
    x = random(40, 16)
    whole = transformer.forward(spec, layers, x)
    state = transformer.init_state(spec)
    parts = [transformer.step(spec, layers, x[a:b], state) for a, b in in_chunks(40, [1, 3, 9])]
    assert state.offset == 40
    assert np.allclose(np.concatenate(parts), whole, atol=1e-5)
    blocked = transformer.forward(spec, layers, x, block=5)
    assert np.allclose(blocked, whole, atol=1e-5)


def test_a_windowed_cache_stays_bounded_and_its_copies_go_on_alike() -> None:
    """A windowed cache keeps its last context - 1 positions with room after them, moved to the
    front only when the room runs out: over many steps it gives what one call gives, holds at most
    its window, the largest step and half a context, and a copy taken midway goes on as it does."""
    spec, layers = tiny_transformer(7)
    x = random(300, 16)
    whole = transformer.forward(spec, layers, x)
    state = transformer.init_state(spec)
    parts, copy, capacities = [], None, set()
    for a, b in in_chunks(300, [1, 2, 5, 1, 3]):
        parts.append(transformer.step(spec, layers, x[a:b], state))
        capacities.add(state.keys[0].shape[1])
        if copy is None and a >= 150:
            copy, copied_at = state.copy(), b
    np.testing.assert_allclose(np.concatenate(parts), whole, atol=1e-5)
    assert max(capacities) <= 6 + 5 + 7 // 2 and len(capacities) > 1
    assert state.start + min(state.offset, 6) <= state.keys[0].shape[1]
    again = transformer.step(spec, layers, x[copied_at:], copy)
    np.testing.assert_allclose(again, whole[copied_at:], atol=1e-5)


def test_a_state_with_room_goes_on_as_the_state_it_copies() -> None:
    """A generation's cache (transformer.with_capacity: a voice's positions copied, room left
    unwritten for its own) gives what the voice's state itself gives, whatever the room holds, and
    leaves the voice's state as it was."""
    spec, layers = tiny_transformer(None)
    x = random(30, 16)
    voice = transformer.init_state(spec)
    transformer.step(spec, layers, x[:12], voice)
    kept = voice.copy()
    roomy = transformer.with_capacity(voice, 40)
    for cache in roomy.keys + roomy.values:
        assert cache.shape[1] == 40
        cache[:, voice.offset :] = np.nan  # what unwritten memory may hold: never read
    grown = voice.copy()  # grows as it goes
    for a, b in ((12, 20), (20, 21), (21, 30)):
        np.testing.assert_array_equal(
            transformer.step(spec, layers, x[a:b], roomy), transformer.step(spec, layers, x[a:b], grown)
        )
    assert roomy.offset == 30 and all(
        np.array_equal(a, b) for a, b in zip(voice.keys + voice.values, kept.keys + kept.values)
    )
    assert transformer.with_capacity(voice, 5).keys[0].shape[1] == voice.offset  # never less than its positions


@pytest.mark.parametrize("name", tiny_models())
@pytest.mark.parametrize("frames_per_call", [1, 2, 8])
def test_mimi_decoder_in_chunks_equals_one_call(name: str, frames_per_call: int) -> None:
    model = TTSModel.load(str(TINY_DIR / name / "config.yaml"))
    latents = np.load(TINY_DIR / name / "reference.npz")["latents"]
    whole = mimi.decode(model.mimi_spec, model.params["mimi"], latents)
    state = mimi.init_decoder_state(model.mimi_spec, model.params["mimi"])
    parts = [
        mimi.decode_step(model.mimi_spec, model.params["mimi"], latents[a:b], state)
        for a, b in in_chunks(latents.shape[0], [frames_per_call])
    ]
    streamed = np.concatenate(parts)
    assert streamed.shape == (latents.shape[0] * model.frame_size,)
    assert nmse_db(streamed, whole) < -110


@pytest.mark.parametrize("name", tiny_models())
def test_mimi_encoder_in_pieces_equals_one_call(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The encoder's SEANet streams over pieces of the prompt (bounded memory): any piece length
    gives the latents of the whole prompt at once (replicate padding included)."""
    model = TTSModel.load(str(TINY_DIR / name / "config.yaml"))
    audio = np.random.default_rng(3).standard_normal(5 * model.frame_size + 700).astype(np.float32) * 0.1
    for pad_mode in ("constant", "replicate"):
        spec = dataclasses.replace(model.mimi_spec, encoder_pad_mode=pad_mode)
        monkeypatch.setattr(mimi, "ENCODER_CHUNK_FRAMES", 1000)
        whole = mimi.encode(spec, model.params["mimi"], audio)
        for frames in (1, 2, 5):
            monkeypatch.setattr(mimi, "ENCODER_CHUNK_FRAMES", frames)
            assert nmse_db(mimi.encode(spec, model.params["mimi"], audio), whole) < -110
