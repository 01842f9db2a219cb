"""Each stage of the model against this machine's limits (a roofline), measured in one run.

    .venv/bin/python -m scripts.roofline                       # english (int8 bundle and float32), english_2m
    .venv/bin/python -m scripts.roofline --models english --kinds int8

The machine's limits, measured here on one thread and on two: the memory bandwidth (a streaming
read: OpenBLAS's matrix-vector product over a 512 MB matrix, two flops per four bytes read) and
the float32 FMA peak (OpenBLAS's matrix product of 2048^3, which reaches it); the int8 peak of the
kernels' instruction set is derived from it (INT8_PER_FMA), and the kernels' own int8 product on
64 rows is measured beside it.

Each stage (the text prompt of ~40 tokens, one flow-LM step, one Mimi decoder frame, the encoding of
a 5 s voice) on the fixtures of scripts/test.sh (random weights of the real architectures): its
bytes and operations, counted by a backend that wraps the runtime's (each weight's bytes once a
stage, however often its products read it, and the keys and values attention reads; 2 operations
per multiply-add), and its time (median of several, on the runtime itself, uncounted). A stage's
roof is the longer of its operations' time at their peaks (int8 and float32 apart) and its bytes'
time at the bandwidth, on as many threads as it runs on; "of its roof" is that time over the
stage's. A stream's step and frame run on one thread each (the server and the pipeline run the flow
LM and the decoder on a thread each, with one BLAS thread), and are timed so; the text prompt and the
voice encoding run on both (the kernels split a product of many rows, OpenBLAS its own). The last
row of a model is a stream's frame as the model's runner makes it: where the pipeline pays
(core/pipeline.py), the step and the decoder side by side on two threads, whose roof is the longer
of the two stages' roofs (what the frame loses against it is what the two threads cost each
other); elsewhere one after the other on one thread, whose roof is their sum. Writes
build/bench/roofline.json and the tables into docs/measurements.md#against-the-machines-limits.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from e2e import measured
from scripts.bundles import OUT, REFERENCE, int8_bundle

VOICE_WAV = REFERENCE.parent.parent / "tests" / "fixtures" / "voice" / "voice_24000.wav"
TEXT = (
    "Streaming speech synthesis starts playing the first words while the rest of the "
    "sentence is still being generated on a small CPU."
)
STEPS = 16  # flow-LM steps and decoder frames timed, each
REPEATS = 5  # the limits' and the prompt's measurements, each


def _median_ms(run: Callable[[], Any], repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


# The machine's limits


# int8 operations per float32 FMA operation of the same width, by the kernels' instruction set: AVX-512
# VNNI's vpdpbusd multiplies and adds 4 int8 pairs per 32-bit lane where vfmadd231ps does 1 float32
# pair, on the same ports; AVX2's vpmaddubsw and vpmaddwd take two instructions for 2 pairs a lane
# (2 per FMA); elsewhere the int8 products run no faster than float32 ones.
INT8_PER_FMA = {"avx512": 4.0, "avx2": 2.0}


def limits(progress: Callable[[str], None]) -> Dict[str, Dict[int, float]]:
    """{"bandwidth" (GB/s), "float32" (GFLOP/s), "int8" (GOP/s), "kernels_int8" (GOP/s)} by thread
    count (1, 2). The int8 peak is derived from the float32 one (INT8_PER_FMA); the kernels' own
    int8 product on 64 rows is measured beside it."""
    from threadpoolctl import threadpool_limits

    from core import host, native
    from core.portable.network.quantize import Int8Matrix

    found: Dict[str, Dict[int, float]] = {"bandwidth": {}, "float32": {}, "int8": {}, "kernels_int8": {}}
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((131072, 1024), dtype=np.float32)  # 512 MB: far past the caches
    vector = rng.standard_normal(1024, dtype=np.float32)
    a = rng.standard_normal((2048, 2048), dtype=np.float32)
    sets = native.instruction_sets()
    per_fma = INT8_PER_FMA.get(sets[0] if sets else "", 1.0)
    for threads in (1, 2):
        with threadpool_limits(limits=threads, user_api="blas"):
            matrix @ vector  # warm: pages touched, threads up
            found["bandwidth"][threads] = matrix.nbytes / _median_ms(lambda: matrix @ vector) / 1e6
            a @ a
            found["float32"][threads] = 2 * 2048**3 / _median_ms(lambda: a @ a) / 1e6
        found["int8"][threads] = per_fma * found["float32"][threads]
        bandwidth, peak = found["bandwidth"][threads], found["float32"][threads]
        progress(f"  {threads} thread(s): {bandwidth:.1f} GB/s, {peak:.0f} GFLOP/s")
    # The kernels' int8 product: one thread below their split of the rows, two above (core/native.py).
    backend = host.runtime().backend
    weights = Int8Matrix(rng.integers(-127, 128, (4096, 2048), dtype=np.int8), np.ones((4096, 1), np.float32))
    rows = rng.standard_normal((64, 2048), dtype=np.float32)
    for threads, rows_in in ((1, rows[: native.SPLIT_ROWS - 1]), (2, rows)):
        backend.linear(rows_in, weights, None)
        ms = _median_ms(lambda rows_in=rows_in: backend.linear(rows_in, weights, None))
        found["kernels_int8"][threads] = 2 * rows_in.shape[0] * weights.shape[0] * weights.shape[1] / ms / 1e6
    progress(f"  the kernels' int8 product: {found['kernels_int8'][1]:.0f} / {found['kernels_int8'][2]:.0f} GOP/s")
    return found


# Counting a stage's bytes and operations


class Counted:
    """A backend that counts what the one it wraps does: the bytes a stage must read from memory
    (each weight once, however often its products read it: the model's weights are far larger than
    the caches, so a stage reads each from memory at least once, and the caches serve the rest; and
    attention's keys and values) and its operations (2 per multiply-add), the int8 ones apart."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.name, self.description = inner.name, inner.description
        self.reset()

    def reset(self) -> None:
        self.bytes = 0
        self.float_ops = 0
        self.int8_ops = 0
        self.seen: set = set()

    def _read(self, *arrays: Any) -> None:
        for array in arrays:
            if id(array) not in self.seen:
                self.seen.add(id(array))
                self.bytes += array.nbytes

    def keeps_int8(self, shape: Any) -> bool:
        return self.inner.keeps_int8(shape)

    def linear(self, x: np.ndarray, weight: Any, bias: Optional[np.ndarray]) -> np.ndarray:
        from core.portable.network.quantize import Int8Matrix

        rows = 1 if x.ndim == 1 else x.shape[0]
        ops = 2 * rows * weight.shape[0] * weight.shape[1]
        if isinstance(weight, Int8Matrix):
            self._read(weight.values, weight.scales)
            self.int8_ops += ops
        else:
            self._read(weight)
            self.float_ops += ops
        return self.inner.linear(x, weight, bias)

    def conv(self, x: np.ndarray, weight: np.ndarray, n: int, stride: int, dilation: int, bias: Any) -> np.ndarray:
        streams = x.shape[0] if x.ndim == 3 else 1
        self._read(weight)
        self.float_ops += 2 * streams * weight.size * n
        return self.inner.conv(x, weight, n, stride, dilation, bias)

    def attention(self, q: np.ndarray, keys: np.ndarray, values: np.ndarray, lead: int, context: Any) -> np.ndarray:
        t, h, d = q.shape
        self._read(keys, values)
        self.float_ops += 2 * 2 * t * h * keys.shape[1] * d
        return self.inner.attention(q, keys, values, lead, context)

    def layer_norm(self, x: np.ndarray, weight: Any, bias: Any, eps: float) -> np.ndarray:
        self.float_ops += 8 * x.size
        return self.inner.layer_norm(x, weight, bias, eps)

    def elu(self, x: np.ndarray) -> np.ndarray:
        self.float_ops += 4 * x.size
        return self.inner.elu(x)

    def gelu_tanh(self, x: np.ndarray) -> np.ndarray:
        self.float_ops += 8 * x.size
        return self.inner.gelu_tanh(x)


# The stages

PROMPT, STEP, FRAME, VOICE, PIPELINE = (
    "text prompt (~40 tokens)",
    "one flow-LM step",
    "one Mimi decoder frame",
    "voice encoding (5 s)",
    "a stream's frame (the runner's)",
)
# The threads each stage runs on, so the limits that are its roof.
THREADS = {PROMPT: 2, STEP: 1, FRAME: 1, VOICE: 2, PIPELINE: 2}
PIPELINE_FRAMES = 40  # frames of the stream timed


class Stages:
    """The four stages of one model, on its voice (a voice state of the fixture)."""

    def __init__(self, model: Any, voice: str):
        self.model = model
        self.voice = model.voice_state(voice)
        self.tokens = model.tokenizer.encode(TEXT)
        self.spec, self.p = model.flow_spec, model.params["flow_lm"]

    def prompt(self) -> Any:
        """A fresh state after the voice, with the text prompted (the prompt is the work)."""
        from core.portable.network import flow_lm, transformer

        state = self.voice.transformer.copy()
        transformer.reserve(state, state.offset + len(self.tokens) + 2 * STEPS + 2)
        flow_lm.prompt(self.spec, self.p, state, flow_lm.text_embeddings(self.p, self.tokens))
        return state

    def step(self, state: Any, previous: Any) -> np.ndarray:
        """One flow-LM step after `previous` (None: the first): its latent."""
        from core.portable.network import flow_lm

        noise, times = np.zeros((1, self.spec.latent_dim), np.float32), self.model.time_terms(1)
        return flow_lm.step(self.spec, self.p, [state], [previous], noise, times)[0][0]

    def frame(self, latent: np.ndarray) -> np.ndarray:
        """A latent as the decoder reads it."""
        return (latent * self.p["emb_std"] + self.p["emb_mean"])[None]

    def decoder(self) -> Any:
        from core.portable.network import mimi

        return mimi.init_decoder_state(self.model.mimi_spec, self.model.params["mimi"])

    def decode(self, frame: np.ndarray, state: Any) -> None:
        from core.portable.network import mimi

        mimi.decode_step(self.model.mimi_spec, self.model.params["mimi"], frame, state)

    def encode_voice(self) -> None:
        self.model.voice_state(str(VOICE_WAV))

    def stream_frame(self) -> float:
        """A frame's time (ms) in a stream of PIPELINE_FRAMES as the model's runner makes it (the
        pipeline: the flow LM on a thread of its own beside the decoder), after the first."""
        options = {"seed": 0, "eos_threshold": float("inf"), "max_frames": PIPELINE_FRAMES}
        arrivals = [time.perf_counter() for _ in self.model.stream(TEXT, self.voice, **options)]
        return 1000 * (arrivals[-1] - arrivals[0]) / (len(arrivals) - 1)


def counts(stages: Stages, counted: Counted) -> Dict[str, tuple]:
    """Each stage's (bytes read, float operations, int8 operations), counted once."""
    found = {}

    def count(stage: str, run: Callable[[], Any]) -> Any:
        counted.reset()
        result = run()
        found[stage] = (counted.bytes, counted.float_ops, counted.int8_ops)
        return result

    state = count(PROMPT, stages.prompt)
    latent = count(STEP, lambda: stages.step(state, None))
    decoder = stages.decoder()
    stages.decode(stages.frame(latent), decoder)  # a decoder's first frame fills its state
    frame = stages.frame(stages.step(state, latent))
    count(FRAME, lambda: stages.decode(frame, decoder))
    count(VOICE, stages.encode_voice)
    found[PIPELINE] = tuple(a + b for a, b in zip(found[STEP], found[FRAME]))
    return found


def times(stages: Stages) -> Dict[str, float]:
    """Each stage's time (ms): the prompt's and the voice's medians, the steps' and frames' of STEPS
    (one BLAS thread, as a stream runs them), a streamed frame's median of three streams."""
    from core import threads

    state = stages.prompt()
    latents, steps, frames = [None], [], []
    with threads.one_blas_thread():
        for _ in range(STEPS):
            start = time.perf_counter()
            latents.append(stages.step(state, latents[-1]))
            steps.append(time.perf_counter() - start)
        decoder = stages.decoder()
        for latent in latents[1:]:
            start = time.perf_counter()
            stages.decode(stages.frame(latent), decoder)
            frames.append(time.perf_counter() - start)
    return {
        PROMPT: _median_ms(stages.prompt),
        STEP: 1000 * statistics.median(steps),
        FRAME: 1000 * statistics.median(frames[1:]),
        VOICE: _median_ms(stages.encode_voice, 3),
        PIPELINE: statistics.median(stages.stream_frame() for _ in range(3)),
    }


def measure(
    source: str, voice: str, label: str, limit: Dict[str, Dict[int, float]], progress: Callable[[str], None]
) -> List[Dict[str, Any]]:
    """The rows of one model (a config or a bundle): each stage's bytes, operations, time and
    fractions of its roof."""
    from core import TTSModel, host, pipeline
    from core.portable.network import ops

    runtime = host.runtime()
    counted = Counted(runtime.backend)
    with ops.using(counted):
        counting = Stages(TTSModel.load(source, runtime=dataclasses.replace(runtime, backend=counted)), voice)
        counted_stages = counts(counting, counted)
    del counting
    model = TTSModel.load(source, runtime=runtime)
    side_by_side = pipeline.pays(model)
    with ops.using(runtime.backend):
        timed = times(Stages(model, voice))
    rows = []
    threads_of = dict(THREADS, **{PIPELINE: 2 if side_by_side else 1})

    def roofs(stage: str) -> tuple:
        """The stage's (compute, memory) times at its threads' limits (ms)."""
        read, float_ops, int8_ops = counted_stages[stage]
        threads = threads_of[stage]
        compute = float_ops / limit["float32"][threads] / 1e6 + int8_ops / limit["int8"][threads] / 1e6
        return compute, read / limit["bandwidth"][threads] / 1e6

    for stage, (read, float_ops, int8_ops) in counted_stages.items():
        ms = timed[stage]
        # The roof: the operations at their peaks (int8 and float32 apart), or the bytes at the
        # bandwidth, whichever takes longer; a stream's frame, the longer of the step's and the
        # frame's roofs side by side, their sum one after the other.
        compute_ms, memory_ms = roofs(stage)
        if stage == PIPELINE:
            step, frame = roofs(STEP), roofs(FRAME)
            if side_by_side:
                compute_ms, memory_ms = max(step, frame, key=max)
            else:
                compute_ms, memory_ms = step[0] + frame[0], step[1] + frame[1]
        roof_ms = max(compute_ms, memory_ms)
        rows.append(
            {
                "model": label,
                "stage": stage,
                "threads": threads_of[stage],
                "mb": read / 1e6,
                "gflop": (float_ops + int8_ops) / 1e9,
                "int8_share": int8_ops / max(1, float_ops + int8_ops),
                "ms": ms,
                "gb_per_s": read / ms / 1e6,
                "gop_per_s": (float_ops + int8_ops) / ms / 1e6,
                "bound": "memory" if memory_ms >= compute_ms else "compute",
                "of_bandwidth": memory_ms / ms,
                "of_compute": compute_ms / ms,
                "of_roof": roof_ms / ms,
            }
        )
        progress(f"  {label}, {stage}: {ms:.1f} ms, {roof_ms / ms:.0%} of its roof ({rows[-1]['bound']})")
    return rows


def _limit(label: str, values: Dict[int, float], digits: str = ".0f") -> str:
    return f"| {label} | {values[1]:{digits}} | {values[2]:{digits}} |"


def table(limit: Dict[str, Dict[int, float]], rows: List[Dict[str, Any]]) -> str:
    per_fma = limit["int8"][1] / limit["float32"][1]
    lines = [
        "| limit | one thread | two threads |",
        "|---|---|---|",
        _limit("memory bandwidth, streaming read (GB/s)", limit["bandwidth"], ".1f"),
        _limit("float32 FMA peak, OpenBLAS (GFLOP/s)", limit["float32"]),
        _limit(f"int8 peak, derived: {per_fma:g} x the float32 peak (GOP/s)", limit["int8"]),
        _limit("the kernels' int8 product, 64 rows (GOP/s)", limit["kernels_int8"]),
        "",
        "| model | stage | threads | MB read | GOP (int8 share) | ms | GB/s | GOP/s | bound by | of the bandwidth "
        "| of the peak | of its roof |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['stage']} | {r['threads']} | {r['mb']:.1f} "
            f"| {r['gflop']:.3f} ({r['int8_share']:.0%}) | {r['ms']:.1f} "
            f"| {r['gb_per_s']:.1f} | {r['gop_per_s']:.1f} | {r['bound']} | {r['of_bandwidth']:.0%} "
            f"| {r['of_compute']:.0%} | {r['of_roof']:.0%} |"
        )
    return "\n".join(lines)


MODELS = ("english", "english_2m_2026-10")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--kinds", nargs="+", choices=("int8", "float32"), default=["int8", "float32"])
    args = parser.parse_args()
    say = lambda message: print(message, file=sys.stderr)  # noqa: E731
    say("the machine's limits")
    limit = limits(say)
    rows = []
    for model in args.models:
        fixture = REFERENCE / model
        if not (fixture / "model.safetensors").exists():
            raise SystemExit(f"{fixture} is missing: run scripts/test.sh (or scripts.make_reference) first")
        for kind in args.kinds:
            source = str(int8_bundle(model)) if kind == "int8" else str(fixture / "config.yaml")
            say(f"{model} ({kind})")
            rows += measure(source, str(fixture / "voice_state.safetensors"), f"{model} ({kind})", limit, say)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "roofline.json").write_text(json.dumps({"limits": limit, "stages": rows}, indent=1))
    markdown = table(limit, rows)
    measured.record("measurements.md", measured.per_processor("roofline"), markdown)
    print(markdown)


if __name__ == "__main__":
    main()
