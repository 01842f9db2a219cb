"""Side-by-side speed of our NumPy core and the official pocket-tts 4.0.1, on the same machine,
weights, voice and texts.

    .venv/bin/python -m scripts.bench                 # english and english_2m_2026-10, 5 rounds
    .venv/bin/python -m scripts.bench --models english_2m_2026-10 --repeats 3
    .venv/bin/python -m scripts.bench --capacity      # the server's capacity table instead
    .venv/bin/python -m scripts.bench --kernels avx2 --only "ours int8" "official int8"

Needs the fixtures of scripts/test.sh (build/reference) and the official environment (.venv-ref).
Each implementation runs in its own worker process (scripts/bench_worker.py): ours in float32 and
from its int8 bundle, the official in float32 and with `quantize=True`. Every measurement is taken
from each implementation in turn, rotating the order every round, so that machine drift falls on
all of them alike, by fresh workers every round (`rounds`); the tables give medians, and each
ratio is the median of the rounds' ratios.
Writes build/bench/bench.json and bench.md, and each model's table into docs/measurements.md#speed
(with --kernels, into #speed-per-kernel-set, a table per processor and set).

With --kernels SET ours runs another instruction set this processor runs (core/native.py), so one
machine measures the paths of the machines it stands for, and NumPy's OpenBLAS (ours) and torch's
libraries (the official) are held to the same width (HELD).
The workers' first answers say what ran, printed with the processor.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

from e2e import measured
from scripts import capacity
from scripts.bundles import OUT, REFERENCE, ROOT, int8_bundle

VOICE_WAV = ROOT / "tests" / "fixtures" / "voice" / "voice_24000.wav"
TEXTS = {
    "short": "Hello there, this is a short test.",
    "medium": (
        "Streaming speech synthesis starts playing the first words while the rest of the "
        "sentence is still being generated on a small CPU."
    ),
    "long": (
        "The quick brown fox jumps over the lazy dog, then rests in the warm afternoon sun. "
        "Meanwhile, a small robot in the kitchen reads the news aloud, one sentence at a time, "
        "so that nobody has to wait for the whole article before hearing the first words. "
        "When the story ends, it says goodbye and switches itself off until the next morning."
    ),
}
# Between two workers' measurements: OpenBLAS's threads keep spinning on the cores for ~0.1 s after
# their last product, and a measurement started under them ran up to 2x slower (the int8 worker's
# text prompt, which always followed the float worker's: 117-123 ms against 57-62).
SETTLE_S = 0.5
# What each fresh worker runs before it is measured (`rounds`): a stream of each text, one of 125
# frames, then it waits for what they started (our decoder process).
WARM_UP = {"what": "warm", "texts": list(TEXTS.values())}
# The libraries beside ours held to each of our sets: torch's (ATen, oneDNN, MKL, and FBGEMM, which
# runs the official int8 products and has no path narrower than AVX2 nor one for AVX-VNNI: a machine
# with only those runs its AVX2 kernels), and NumPy's OpenBLAS (its kernels for such a processor).
# The machine's own set leaves both to choose.
HELD = {
    "avx2": {
        "official": {
            "ATEN_CPU_CAPABILITY": "avx2",
            "ONEDNN_MAX_CPU_ISA": "AVX2",
            "MKL_ENABLE_INSTRUCTIONS": "AVX2",
            "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2",
        },
        "ours": {"OPENBLAS_CORETYPE": "Haswell"},
    },
    "avxvnni": {
        "official": {
            "ATEN_CPU_CAPABILITY": "avx2",
            "ONEDNN_MAX_CPU_ISA": "AVX2_VNNI",
            "MKL_ENABLE_INSTRUCTIONS": "AVX2",
            "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2",
        },
        "ours": {"OPENBLAS_CORETYPE": "Haswell"},
    },
    "baseline": {
        "official": {
            "ATEN_CPU_CAPABILITY": "default",
            "ONEDNN_MAX_CPU_ISA": "SSE41",
            "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
            "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2",
        },
        "ours": {"OPENBLAS_CORETYPE": "Nehalem"},
    },
}
IMPLEMENTATIONS = (
    "ours fp32",
    "ours int8",
    "ours int8 numpy",
    "ours fp32 server",
    "ours int8 server",
    "official fp32",
    "official int8",
)
METRICS = [  # (key, label, unit)
    ("ttfc_short", "first chunk, short text (~10 tokens)", "ms"),
    ("ttfc_medium", "first chunk, medium text (~40 tokens)", "ms"),
    ("ttfc_long", "first chunk, long paragraph", "ms"),
    ("rtf", "real-time factor, 125 frames", "x"),
    ("text_prompt", "text prompt pass (~40 tokens)", "ms"),
    ("flow_step", "one flow-LM step", "ms"),
    ("mimi_frame", "Mimi decode per frame", "ms"),
    ("voice_encode", "voice encoding, 5 s prompt", "ms"),
    ("peak_rss_mb", "peak memory (RSS)", "MB"),
]


class Worker:
    def __init__(self, name: str, command: List[str], env: Dict[str, str], cwd: Path = ROOT):
        self.name = name
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=cwd, env=env
        )
        self.backend = self.ask_raw(None)["backend"]

    def ask_raw(self, job) -> Dict[str, float]:  # noqa: ANN001
        if job is not None:
            self.process.stdin.write(json.dumps(job) + "\n")
            self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"bench worker {self.name} died (see its error above)")
        return json.loads(line)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)


def launchers(model: str, names: List[str], kernels: Optional[str]) -> Dict[str, Callable[[], Worker]]:
    """For each implementation in `names`, what starts a worker of it."""
    fixture = REFERENCE / model
    if not (fixture / "model.safetensors").exists():
        raise SystemExit(f"{fixture} is missing: run scripts/test.sh (or scripts.make_reference) first")
    voice = str(fixture / "voice_state.safetensors")
    ours = [str(ROOT / ".venv" / "bin" / "python"), "-m", "scripts.bench_worker", "ours"]
    forced = ["--kernels", kernels] if kernels else []
    official = [str(ROOT / ".venv-ref" / "bin" / "python"), "-m", "scripts.bench_worker", "official"]
    commands = {
        "ours fp32": ours + [str(fixture / "config.yaml"), voice, str(VOICE_WAV), *forced],
        "ours int8": ours + [str(int8_bundle(model)), voice, str(VOICE_WAV), *forced],
        "ours int8 numpy": ours + [str(int8_bundle(model)), voice, str(VOICE_WAV), "--numpy"],
        "ours fp32 server": ours + [str(fixture / "config.yaml"), voice, str(VOICE_WAV), "--server", *forced],
        "ours int8 server": ours + [str(int8_bundle(model)), voice, str(VOICE_WAV), "--server", *forced],
        "official fp32": official + [str(fixture / "config.yaml"), voice, str(VOICE_WAV)],
        "official int8": official + [str(fixture / "config.yaml"), voice, str(VOICE_WAV), "--quantize"],
    }
    made = {}
    for name in (name for name in commands if name in names):
        # The server's scheduler runs its two threads on the two cores: one BLAS thread each.
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1") if name.endswith("server") else dict(os.environ)
        env.update(HELD.get(kernels or "", {}).get(name.split()[0], {}))
        made[name] = functools.partial(Worker, name, commands[name], env)
    return made


def rounds(
    launch: Dict[str, Callable[[], Worker]],
    jobs: List[Dict[str, str]],
    count: int,
    take: Callable[[str, Dict[str, str], Dict[str, float]], None],
    label: str,
) -> Dict[str, str]:
    """Every job on each worker in turn, `take(name, job, answer)` of each answer, for `count` rounds
    in an order that rotates every round; returns what runs each worker's products.

    Every round starts fresh workers, each with streams of its own first that are left out
    (WARM_UP: a model's first stream starts our decoder process, a text's first use takes paths
    the next ones do not): one process of a build can run a few percent faster or slower than
    another of the same build for as long as it lives, and two long-lived workers of one build
    differed in 14 of 16 rounds of scripts.ab."""
    order = list(launch)
    backends = {}
    for index in range(count):
        began = time.monotonic()
        workers: Dict[str, Worker] = {}
        try:
            for name in order:
                workers[name] = launch[name]()
                if name not in backends:
                    backends[name] = workers[name].backend
                    print(f"  {name} runs on {backends[name]}", file=sys.stderr)
            for name in order:
                workers[name].ask_raw(WARM_UP)
            for job in jobs:
                for name in order:
                    time.sleep(SETTLE_S)
                    take(name, job, workers[name].ask_raw(job))
        finally:
            for worker in workers.values():
                worker.close()
        order = order[1:] + order[:1]
        print(f"  {label}: round {index + 1}/{count} in {time.monotonic() - began:.0f} s", file=sys.stderr)
    return backends


def run_model(
    model: str, repeats: int, names: List[str], kernels: Optional[str] = None
) -> Dict[str, Dict[str, List[float]]]:
    launch = launchers(model, names, kernels)
    samples: Dict[str, Dict[str, List[float]]] = {name: {} for name in launch}
    jobs = [{"what": "ttfc", "text": TEXTS[k], "key": f"ttfc_{k}"} for k in TEXTS]
    jobs += [{"what": "rtf", "text": TEXTS["medium"]}, {"what": "stages", "text": TEXTS["medium"]}, {"what": "voice"}]
    jobs.append({"what": "memory"})

    def take(name: str, job: Dict[str, str], result: Dict[str, float]) -> None:
        for key, value in result.items():
            if job["what"] == "ttfc" and key == "ttfc":
                key = job["key"]
            elif job["what"] == "ttfc":
                continue
            samples[name].setdefault(key, []).append(value)

    backends = rounds(launch, jobs, repeats, take, model)
    for name, backend in backends.items():
        samples[name]["backend"] = backend
    return samples


def paired(ours: List[float], theirs: List[float]) -> float:
    """The median of each round's ratio: a round measures both implementations back to back, so
    the machine's drift between rounds (10-20% on a shared 2-core machine) falls out of each
    ratio, where the ratio of two medians pairs samples of different rounds."""
    return statistics.median(a / b for a, b in zip(ours, theirs))


def table(results: Dict[str, Dict[str, Dict[str, List[float]]]]) -> str:
    lines = [
        "| model | measurement | "
        + " | ".join(IMPLEMENTATIONS)
        + " | ours/official fp32 | ours server/official fp32 | ours int8/official int8 |",
        "|---|---|" + "---|" * (len(IMPLEMENTATIONS) + 3),
    ]
    for model, samples in results.items():
        for key, label, unit in METRICS:
            med = {
                n: statistics.median(samples[n][key]) if key in samples.get(n, {}) else None for n in IMPLEMENTATIONS
            }
            cells = [
                "-" if med[n] is None else f"{med[n]:.3f}" if unit == "x" else f"{med[n]:.0f}" for n in IMPLEMENTATIONS
            ]
            pairs = [
                ("ours fp32", "official fp32"),
                ("ours fp32 server", "official fp32"),
                ("ours int8", "official int8"),
            ]
            ratio = [
                "-" if None in (med[a], med[b]) else f"{paired(samples[a][key], samples[b][key]):.2f}" for a, b in pairs
            ]
            lines.append(f"| {model} | {label} ({unit}) | " + " | ".join(cells) + " | " + " | ".join(ratio) + " |")
    return "\n".join(lines)


def ran_on(results: Dict[str, Dict[str, Dict[str, object]]]) -> str:
    """What ran each implementation's products, and on which processor."""
    lines = [f"Processor: {measured.cpu_model()}."]
    for model, samples in results.items():
        for name, sample in samples.items():
            lines.append(f"- {model}, {name}: {sample['backend']}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["english", "english_2m_2026-10"])
    parser.add_argument("--repeats", type=int, default=5, help="rounds of every measurement (default: 5)")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=IMPLEMENTATIONS,
        default=list(IMPLEMENTATIONS),
        help="implementations to run (default: all)",
    )
    parser.add_argument("--out", type=Path, default=OUT, help="folder for bench.json and bench.md")
    parser.add_argument(
        "--kernels",
        choices=sorted([*HELD, "avx512"]),
        help="run ours on this instruction set (one this processor runs), torch held to its width",
    )
    parser.add_argument(
        "--capacity",
        action="store_true",
        help="instead: the server's capacity (scripts/capacity.py), float weights and int8 bundles",
    )
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)  # int8 bundles live here
    if args.capacity:
        rows = []
        for model in args.models:
            for int8 in (False, True):
                print(f"capacity of {model}{' (int8 bundle)' if int8 else ''}", file=sys.stderr)
                counts = capacity.DEFAULT_COUNTS.get(model, [1, 2, 4, 8])
                rows += capacity.measure(model, counts, int8, lambda m: print(m, file=sys.stderr))
        print(capacity.save(rows, args.out))
        return
    results = {}
    for model in args.models:
        print(f"benchmarking {model}", file=sys.stderr)
        results[model] = run_model(model, args.repeats, args.only, args.kernels)
    markdown = table(results) + "\n\n" + ran_on(results)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench.json").write_text(json.dumps({"texts": TEXTS, "samples": results}, indent=1))
    (args.out / "bench.md").write_text(markdown + "\n")
    for model in results:
        key = f"speed {model}" if not args.kernels else measured.per_processor(f"speed {model} on {args.kernels}")
        one = {model: results[model]}
        measured.record("measurements.md", key, table(one) + "\n\n" + ran_on(one))
    print(markdown)


if __name__ == "__main__":
    main()
