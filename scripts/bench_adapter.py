"""What a LoRA adapter costs, merged into the weights at load against kept apart (its rank-r
product added at run time: core.portable.network.quantize.LowRank), on this machine: load time,
load and first chunk, the real-time factor of a stream, and the memory the weights hold.

    .venv/bin/python -m scripts.bench_adapter              # english, float and int8, 5 rounds
    .venv/bin/python -m scripts.bench_adapter --repeats 9

Needs build/reference (scripts/test.sh). The adapter is made here as voice fine-tuning tools make
them (PEFT's layout): rank 8, alpha 16, on every Linear of the flow LM's transformer and flow net,
its halves random (lora_B not zero). Each variant is measured in turn every round, the order
rotating, medians reported with the processor. Written into docs/measurements.md#lora-adapters.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

import numpy as np

from e2e import measured
from scripts.bench import TEXTS
from scripts.bundles import OUT, REFERENCE, int8_bundle
from server.served_models import held_bytes

RANK, ALPHA = 8, 16.0
LINEARS = ("transformer.layers.", "flow_net.", "input_linear", "out_eos")


def make_adapter(model: str) -> Path:
    """build/bench/MODEL-lora: a PEFT adapter on every Linear of the flow LM (made once)."""
    from core.files import save_tensors, write_atomically
    from core.portable.weights import safetensors_file

    folder = OUT / f"{model}-lora"
    if (folder / "adapter_model.safetensors").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    tensors, _ = safetensors_file.load(str(REFERENCE / model / "model.safetensors"))
    rng = np.random.default_rng(0)
    pairs = {}
    for key, weight in tensors.items():
        module = key[len("flow_lm.") : -len(".weight")] if key.startswith("flow_lm.") else ""
        if not module.startswith(LINEARS) or not key.endswith(".weight") or weight.ndim != 2:
            continue
        out, inner = weight.shape
        pairs[f"base_model.model.{module}.lora_A.weight"] = (rng.standard_normal((RANK, inner)) / inner**0.5).astype(
            np.float32
        )
        pairs[f"base_model.model.{module}.lora_B.weight"] = (0.02 * rng.standard_normal((out, RANK))).astype(np.float32)
    save_tensors(str(folder / "adapter_model.safetensors"), pairs)
    config = {"peft_type": "LORA", "r": RANK, "lora_alpha": ALPHA, "target_modules": "all-linear"}
    write_atomically(str(folder / "adapter_config.json"), json.dumps(config).encode())
    print(f"  made {folder}: {len(pairs) // 2} modules", file=sys.stderr)
    return folder


def loaders(source: str, adapter: str) -> Dict[str, Callable[[], object]]:
    from core import TTSModel, host
    from core.portable.model import load_weights
    from core.portable.weights import adapter as lora
    from core.portable.weights import sources

    def merged() -> object:
        runtime = host.runtime()
        files = sources.resolve(source)
        tensors = lora.merged(load_weights(files.weights, runtime.backend.keeps_int8), lora.read(adapter))
        return TTSModel.from_files(files, tensors=tensors, runtime=runtime)

    return {
        "no adapter": lambda: TTSModel.load(source),
        "merged": merged,
        "kept apart": lambda: TTSModel.load(source, adapter=adapter),
    }


def measure(source: str, adapter: str, voice: str, text: str, repeats: int) -> Dict[str, Dict[str, List[float]]]:
    made = loaders(source, adapter)
    results: Dict[str, Dict[str, List[float]]] = {name: {"load": [], "first": [], "rtf": []} for name in made}
    audio: Dict[str, np.ndarray] = {}
    names = list(made)
    for round_ in range(repeats):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for name in order:
            start = time.perf_counter()
            model = made[name]()
            loaded = time.perf_counter() - start
            state = model.voice_state(voice)
            start = time.perf_counter()
            chunks = []
            first: Optional[float] = None
            for chunk in model.stream(text, state, temperature=0.0, seed=0):
                first = first if first is not None else time.perf_counter() - start
                chunks.append(chunk)
            whole = time.perf_counter() - start
            pcm = np.concatenate(chunks)
            results[name]["load"].append(loaded)
            results[name]["first"].append(loaded + first)
            results[name]["rtf"].append(whole / (pcm.shape[0] / model.sample_rate))
            results[name]["held"] = [held_bytes([model]) / 1e6]
            audio[name] = pcm
        print(f"  round {round_ + 1}/{repeats}", file=sys.stderr)
    merged, apart = audio["merged"], audio["kept apart"]
    n = min(merged.shape[0], apart.shape[0])
    error = float(np.sum((merged[:n] - apart[:n]) ** 2) / max(np.sum(merged[:n] ** 2), 1e-30))
    results["kept apart"]["db_from_merged"] = [10 * np.log10(max(error, 1e-30))]
    return results


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="english")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"on {measured.machine()}", file=sys.stderr)
    adapter = str(make_adapter(args.model))
    voice = str(REFERENCE / args.model / "voice_state.safetensors")
    lines = [
        f"{args.model}, a rank-{RANK} adapter on every Linear of the flow LM; text: medium; medians of "
        f"{args.repeats} rounds.",
        "",
        "| weights | adapter | load (ms) | load and first chunk (ms) | RTF | weights held (MB) |",
        "|---|---|---|---|---|---|",
    ]
    for label, source in (
        ("float", str(REFERENCE / args.model / "config.yaml")),
        ("int8", str(int8_bundle(args.model))),
    ):
        print(f"{label}:", file=sys.stderr)
        results = measure(source, adapter, voice, TEXTS["medium"], args.repeats)
        for name, values in results.items():
            lines.append(
                f"| {label} | {name} | {1000 * statistics.median(values['load']):.0f} | "
                f"{1000 * statistics.median(values['first']):.0f} | {statistics.median(values['rtf']):.3f} | "
                f"{values['held'][0]:.0f} |"
            )
        lines.append(
            f"| {label} | kept apart against merged: {results['kept apart']['db_from_merged'][0]:.1f} dB | | | | |"
        )
    table = "\n".join(lines)
    print(table)
    measured.record("measurements.md", "lora adapters", table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
