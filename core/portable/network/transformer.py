"""The streaming transformer shared by the flow LM and Mimi: pre-norm layers, RoPE, a KV cache.

The flow LM attends to everything before it (a growing cache); Mimi's transformers attend to a
window of `context` steps, so their state keeps only the last `context - 1` keys. Keys and values
are stored head-major ([H_kv, T, D]) so each head's scores are one matrix product; with grouped-
query attention, query head h reads key/value head h // (num_heads // num_kv_heads).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from . import nn, ops


@dataclasses.dataclass(frozen=True)
class TransformerSpec:
    num_layers: int
    d_model: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    max_period: float
    context: Optional[int]  # None: attend to all the past (flow LM)
    layer_scale: bool  # Mimi's layers scale each residual update


@dataclasses.dataclass
class TransformerState:
    """KV caches of every layer and the number of positions seen (also the RoPE offset).

    Without a context window, the first `offset` entries of each cache are filled and the rest is
    spare capacity. With one, each cache holds the last min(offset, context - 1) positions from
    entry `start` on, and room after them: a step writes its keys after the kept ones and moves the
    window on, and only when the room runs out are the kept ones moved to the front (Mimi's decoder,
    16 positions a frame: 2 MB moved every 8 frames, where joining the caches to each frame's keys
    copied 2.2 MB every frame).
    """

    keys: List[np.ndarray]  # per layer [H_kv, capacity, D]
    values: List[np.ndarray]
    offset: int = 0
    start: int = 0

    def copy(self) -> TransformerState:
        return TransformerState([k.copy() for k in self.keys], [v.copy() for v in self.values], self.offset, self.start)


class QueryTap:
    """What a step keeps of one stream's attention for word timestamps: the query (after RoPE) of
    its last row at each of `layers`, [H, D] by layer."""

    def __init__(self, layers: Sequence[int]):
        self.layers = frozenset(layers)
        self.queries: Dict[int, np.ndarray] = {}


def init_state(spec: TransformerSpec, capacity: int = 0) -> TransformerState:
    def empty() -> np.ndarray:
        return np.zeros((spec.num_kv_heads, capacity, spec.head_dim), dtype=np.float32)

    return TransformerState([empty() for _ in range(spec.num_layers)], [empty() for _ in range(spec.num_layers)])


def reserve(state: TransformerState, capacity: int) -> None:
    """Grow a full-context cache to hold `capacity` positions (a no-op when it already does)."""
    if state.keys and state.keys[0].shape[1] < capacity:
        grown = with_capacity(state, capacity)
        state.keys, state.values = grown.keys, grown.values


def with_capacity(state: TransformerState, capacity: int) -> TransformerState:
    """A copy of a full-context state whose caches hold `capacity` positions (at least its offset).

    Only the first `offset` entries are copied; the spare room is left unwritten, since attention
    reads the caches up to the positions it has seen and `to_tensors` saves only those (a
    generation's room for its ~40 text tokens and ~200 frames, english: 15 MB, which zeroing, and
    copying the voice's caches whole beside it, would add 3-5 ms to the first chunk)."""
    n = state.offset

    def grown(cache: np.ndarray) -> np.ndarray:
        out = np.empty((cache.shape[0], max(capacity, n), cache.shape[2]), dtype=np.float32)  # [H_kv, capacity, D]
        out[:, :n] = cache[:, :n]
        return out

    return TransformerState([grown(k) for k in state.keys], [grown(v) for v in state.values], n)


def step(spec: TransformerSpec, layers: List[Any], x: np.ndarray, state: TransformerState) -> np.ndarray:
    """Run x [T, d_model] (the next T positions) through all layers; advances state.offset by T."""
    return step_streams(spec, layers, [x], [state])[0]


def step_streams(
    spec: TransformerSpec,
    layers: List[Any],
    xs: Sequence[np.ndarray],
    states: Sequence[TransformerState],
    taps: Optional[Sequence[Optional[QueryTap]]] = None,
) -> List[np.ndarray]:
    """Several streams at once, each with its own state: xs[b] [T_b, d_model] are stream b's next
    T_b positions. The rows of all streams go through each linear layer together (its weights are
    read once for all); attention is per stream, on its own cache. Advances every state; taps[b],
    where given, keeps stream b's queries."""
    sizes = [x.shape[0] for x in xs]
    for state, t in zip(states, sizes):
        if spec.context is None:
            needed = state.offset + t
            if state.keys and state.keys[0].shape[1] < needed:
                reserve(state, max(needed, 2 * state.keys[0].shape[1]))
        else:
            _make_room(state, t, spec.context)
    positions = np.concatenate([np.arange(state.offset, state.offset + t) for state, t in zip(states, sizes)])
    rotation = nn.rope_rotation(positions, spec.head_dim, spec.max_period)  # [sum T, D/2]
    x = xs[0] if len(xs) == 1 else np.concatenate(xs)  # [sum T, d_model]
    for i, p in enumerate(layers):
        x = _layer(spec, p, x, states, sizes, i, rotation, taps)
    for state, t in zip(states, sizes):
        if spec.context is not None:
            state.start += _kept(state.offset, spec.context) + t - _kept(state.offset + t, spec.context)
        state.offset += t
    return np.split(x, np.cumsum(sizes)[:-1]) if len(xs) > 1 else [x]


def _kept(offset: int, context: int) -> int:
    """Positions a windowed cache keeps after `offset` positions."""
    return min(offset, context - 1)


def _make_room(state: TransformerState, t: int, context: int) -> None:
    """Room for t more keys after a windowed cache's kept ones: the kept ones moved to the front of
    each cache where the room has run out, into a larger cache where the front would not leave t
    (with context // 2 spare: a move every context // (2 t) steps of t)."""
    kept = _kept(state.offset, context)
    capacity = state.keys[0].shape[1] if state.keys else 0
    if state.start + kept + t <= capacity:
        return
    size = max(capacity, kept + t + context // 2)
    window = slice(state.start, state.start + kept)

    def moved(cache: np.ndarray) -> np.ndarray:
        out = cache if size == capacity else np.empty((cache.shape[0], size, cache.shape[2]), np.float32)
        out[:, :kept] = cache[:, window]  # NumPy copies through a buffer where the two overlap
        return out

    state.keys, state.values = [moved(k) for k in state.keys], [moved(v) for v in state.values]
    state.start = 0


def forward(spec: TransformerSpec, layers: List[Any], x: np.ndarray, block: int = 256) -> np.ndarray:
    """Batch form from a fresh state: x [T, d_model] -> [T, d_model], causal (within the context).

    Long inputs go through in blocks of `block` positions so memory stays bounded; the result is
    the same as one call.
    """
    state = init_state(spec, x.shape[0] if spec.context is None else 0)
    return np.concatenate([step(spec, layers, x[i : i + block], state) for i in range(0, x.shape[0], block)])


def _layer(
    spec: TransformerSpec,
    p: Dict[str, Any],
    x: np.ndarray,
    states: Sequence[TransformerState],
    sizes: List[int],
    i: int,
    rotation: np.ndarray,
    taps: Optional[Sequence[Optional[QueryTap]]] = None,
) -> np.ndarray:
    h = ops.layer_norm(x, p["norm1"]["weight"], p["norm1"]["bias"], 1e-5)
    update = _attention(spec, p["self_attn"], h, states, sizes, i, rotation, taps)
    x = x + (update * p["layer_scale_1"]["scale"] if spec.layer_scale else update)
    h = ops.layer_norm(x, p["norm2"]["weight"], p["norm2"]["bias"], 1e-5)
    update = nn.linear(p["linear2"], ops.gelu_tanh(nn.linear(p["linear1"], h)))
    return x + (update * p["layer_scale_2"]["scale"] if spec.layer_scale else update)


def _attention(
    spec: TransformerSpec,
    p: Dict[str, Any],
    x: np.ndarray,
    states: Sequence[TransformerState],
    sizes: List[int],
    i: int,
    rotation: np.ndarray,
    taps: Optional[Sequence[Optional[QueryTap]]] = None,
) -> np.ndarray:
    """x [sum T, d_model]: the rows of every stream, in order."""
    h, h_kv, d = spec.num_heads, spec.num_kv_heads, spec.head_dim
    projected = nn.linear(p["in_proj"], x)  # [sum T, (H + 2 H_kv) D]: queries, keys, values
    rotated = nn.apply_rope(projected[:, : (h + h_kv) * d].reshape(x.shape[0], h + h_kv, d), rotation)
    outs = []
    start = 0
    for b, (state, t) in enumerate(zip(states, sizes)):
        rows = slice(start, start + t)
        start += t
        q = rotated[rows, :h]  # [T, H, D]
        tap = taps[b] if taps is not None else None
        if tap is not None and i in tap.layers:
            tap.queries[i] = q[-1].copy()  # [H, D]
        k = rotated[rows, h:].transpose(1, 0, 2)  # [H_kv, T, D]
        v = projected[rows, (h + h_kv) * d :].reshape(t, h_kv, d).transpose(1, 0, 2)  # [H_kv, T, D]
        offset = state.offset
        if spec.context is None:
            state.keys[i][:, offset : offset + t] = k
            state.values[i][:, offset : offset + t] = v
            keys = state.keys[i][:, : offset + t]  # [H_kv, L, D]
            values = state.values[i][:, : offset + t]
            first_key = 0
        else:
            kept = _kept(offset, spec.context)
            end = state.start + kept
            state.keys[i][:, end : end + t] = k
            state.values[i][:, end : end + t] = v
            keys = state.keys[i][:, state.start : end + t]  # [H_kv, L, D]
            values = state.values[i][:, state.start : end + t]
            first_key = offset - kept
        outs.append(ops.attention(q, keys, values, offset - first_key, spec.context))  # [T, H * D]
    return nn.linear(p["out_proj"], outs[0] if len(outs) == 1 else np.concatenate(outs))
