"""Is a change faster? This checkout's stream (B) against another revision's (A), or against itself
for the noise of the machine, their workers alternating round by round.

    .venv/bin/python -m scripts.ab --against HEAD~1 --kernels avx2 --rounds 12
    .venv/bin/python -m scripts.ab --noise --kernels avx2 --rounds 12    # A/A: two workers of this checkout

On a shared machine one build's streams vary by 10-20% from one quarter of an hour to the next, so
a bench table cannot tell a 5% change from chance. Here the two builds run the same jobs back to
back in every round (the API's stream of english's int8 bundle: first chunks of two texts and the
real-time factor of 125 frames), in an order that rotates each round, and each ratio is the median
of the rounds' ratios (B / A: below 1, B is faster), with their middle half and a sign test (in
how many rounds B was faster, and the two-sided chance of as lopsided a count were the two the
same). Run `--noise` first on the same machine: its ratios show how far chance alone goes there
(its table goes into docs/measurements.md#judging-a-change, one per processor and set).

A is the revision's tree (`git archive`, uncommitted changes left out) in build/ab/<commit>, its
kernels built there with setup.py; B is this working tree as it is. Both read the same weights,
voice and texts, and run ours as scripts/bench.py does (its worker, its held libraries).
"""

from __future__ import annotations

import argparse
import functools
import io
import math
import os
import statistics
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from core.files import NewFolder
from e2e import measured
from scripts.bench import HELD, TEXTS, VOICE_WAV, Worker, rounds
from scripts.bundles import OUT, REFERENCE, ROOT, int8_bundle

JOBS = [
    {"what": "ttfc", "text": TEXTS["short"], "key": "ttfc_short"},
    {"what": "ttfc", "text": TEXTS["medium"], "key": "ttfc_medium"},
    {"what": "rtf", "text": TEXTS["medium"], "key": "rtf"},
]
LABELS = {"ttfc_short": "first chunk, short text", "ttfc_medium": "first chunk, medium text", "rtf": "real-time factor"}


def checkout(revision: str, into: Path = OUT.parent / "ab") -> Path:
    """The revision's committed tree with its kernels built, made once as into/<commit> (built
    beside it and put there whole: core.files.NewFolder, so a folder there is a finished one)."""
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", f"{revision}^{{commit}}"], cwd=ROOT, capture_output=True, text=True
    )
    if commit.returncode != 0:
        raise SystemExit(f"scripts.ab: no revision {revision!r} in {ROOT}")
    tree = into / commit.stdout.strip()
    if tree.is_dir():
        return tree
    print(f"  extracting {revision} ({tree.name[:12]}) into {tree}", file=sys.stderr)
    archive = subprocess.run(["git", "archive", tree.name], cwd=ROOT, capture_output=True, check=True).stdout
    with NewFolder(str(tree)) as building:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(building.path, filter="data")
        print("  building its kernels (setup.py build_ext --inplace)", file=sys.stderr)
        built = subprocess.run(
            [sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
            cwd=building.path,
            capture_output=True,
            text=True,
        )
        if built.returncode != 0:
            raise SystemExit(f"scripts.ab: {revision}'s kernels did not build:\n{built.stderr[-2000:]}")
        building.publish()
    return tree


WORKER = ROOT / "scripts" / "bench_worker.py"


def imports_from(tree: Path, env: Dict[str, str]) -> Path:
    """Where `core` comes from for WORKER run as a file in `tree` with `env` (its folder first on
    the path, then PYTHONPATH)."""
    probe = (
        f"import sys; sys.path.insert(0, {str(WORKER.parent)!r}); import core, os; "
        "print(os.path.dirname(os.path.abspath(core.__file__)))"
    )
    found = subprocess.run([sys.executable, "-c", probe], cwd=tree, env=env, capture_output=True, text=True)
    return Path(found.stdout.strip()).parent if found.returncode == 0 else Path()


def launcher(name: str, tree: Path, model: str, kernels: Optional[str]) -> Callable[[], Worker]:
    """What starts scripts.bench's worker of ours (int8 bundle) on `tree`'s code, on the same files
    as bench."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.update(HELD.get(kernels or "", {}).get("ours", {}))
    if imports_from(tree, env).resolve() != tree.resolve():
        raise SystemExit(f"scripts.ab: a worker started in {tree} would not run its code")
    voice = str(REFERENCE / model / "voice_state.safetensors")
    # This checkout's worker (its jobs, its warm-up) on `tree`'s code, found on PYTHONPATH.
    command = [sys.executable, str(WORKER), "ours", str(int8_bundle(model)), voice, str(VOICE_WAV)]
    return functools.partial(Worker, name, command + (["--kernels", kernels] if kernels else []), env, cwd=tree)


def alternate(launch: Dict[str, Callable[[], Worker]], count: int) -> Dict[str, Dict[str, List[float]]]:
    """JOBS on each build's worker in turn for `count` rounds (scripts.bench.rounds: fresh workers
    every round, the order rotating)."""
    samples: Dict[str, Dict[str, List[float]]] = {name: {job["key"]: [] for job in JOBS} for name in launch}

    def take(name: str, job: Dict[str, str], result: Dict[str, float]) -> None:
        samples[name][job["key"]].append(result[job["what"]])

    rounds(launch, JOBS, count, take, "ab")
    return samples


def ratios(b: List[float], a: List[float]) -> Tuple[float, float, float]:
    """The median of the rounds' ratios b / a, and the bounds of their middle half."""
    each = sorted(x / y for x, y in zip(b, a))
    if len(each) == 1:
        return each[0], each[0], each[0]
    low, _, high = statistics.quantiles(each, n=4, method="inclusive")
    return statistics.median(each), low, high


def sign_test(b: List[float], a: List[float]) -> Tuple[int, float]:
    """Rounds in which b was below a, and the two-sided chance of a count at least as far from half
    were each round a coin toss (ties count as neither)."""
    faster = sum(x < y for x, y in zip(b, a))
    slower = sum(x > y for x, y in zip(b, a))
    n, k = faster + slower, min(faster, slower)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n if n else 1.0
    return faster, min(1.0, 2 * tail)


def report(samples: Dict[str, Dict[str, List[float]]], a: str, b: str, rounds: int) -> str:
    lines = [
        f"{b} against {a}, {rounds} rounds alternating, on {measured.cpu_model()}",
        f"| measurement | {a} (median) | {b} (median) | {b} / {a}, median of the rounds | middle half "
        f"| rounds {b} faster | chance |",
        "|---|---|---|---|---|---|---|",
    ]
    for key in (job["key"] for job in JOBS):
        mid, low, high = ratios(samples[b][key], samples[a][key])
        unit, digits = ("", 3) if key == "rtf" else (" ms", 1)
        cells = [f"{statistics.median(samples[name][key]):.{digits}f}{unit}" for name in (a, b)]
        faster, chance = sign_test(samples[b][key], samples[a][key])
        lines.append(
            f"| {LABELS[key]} | {cells[0]} | {cells[1]} | {mid:.3f} | {low:.3f}-{high:.3f} "
            f"| {faster} of {rounds} | {chance:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--against", metavar="REVISION", help="A: this revision's committed code (e.g. HEAD~1)")
    which.add_argument("--noise", action="store_true", help="A: this checkout too (the machine's noise)")
    parser.add_argument("--rounds", type=int, default=12, help="rounds of every measurement (default: 12)")
    parser.add_argument("--model", default="english")
    parser.add_argument("--kernels", choices=sorted([*HELD, "avx512"]), help="the instruction set both run")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if not (REFERENCE / args.model / "model.safetensors").exists():
        raise SystemExit(f"{REFERENCE / args.model} is missing: run scripts/test.sh (or scripts.make_reference)")
    OUT.mkdir(parents=True, exist_ok=True)  # int8 bundles live here
    a = "this checkout (A)" if args.noise else f"{args.against} (A)"
    b = "this checkout" + (" (B)" if args.noise else "")
    launch = {
        a: launcher(a, ROOT if args.noise else checkout(args.against), args.model, args.kernels),
        b: launcher(b, ROOT, args.model, args.kernels),
    }
    samples = alternate(launch, args.rounds)
    table = report(samples, a, b, args.rounds)
    if args.noise:  # the machine's, for every later change measured on it
        key = measured.per_processor(f"noise of a stream of {args.model} on {args.kernels or 'its own set'}")
        measured.record("measurements.md", key, table)
    print(table)


if __name__ == "__main__":
    main()
