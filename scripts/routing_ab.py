"""Does a routing rule of core/native.py pay on this machine? A decoder frame (or a text prompt)
under the module's constants as they are (A) and with some set otherwise (B), alternating in one
process.

    .venv/bin/python -m scripts.routing_ab --kernels avx2 --set FEW_STEPS=1000000000
    .venv/bin/python -m scripts.routing_ab --kernels avx512 --set "ONE_STREAM_ANY_STEPS=()" --stage prompt

A stream (scripts.ab) cannot resolve a change of a few percent on a shared machine; here A and B
each have their own decoder state (or prompt) in one process and run a block of frames in turn, the
order swapped every pair, so both meet the same machine from one second to the next. It prints the
median of the pairs' ratios B / A, in how many pairs B was faster with the sign test's chance
(scripts.ab.sign_test), and how far B's audio is from A's. The rules it judged so far, and what it
measured: core/native.py's comments.
"""

from __future__ import annotations

import argparse
import ast
import os
import statistics
import sys
import time
from typing import Any, Callable, Dict, List

import numpy as np

from e2e import measured
from scripts.ab import ratios, sign_test
from scripts.bench import HELD, REFERENCE, TEXTS
from scripts.bench_worker import blas
from scripts.bundles import OUT, int8_bundle

# The constants of core/native.py that choose where a product runs (not the extension's name).
NOT_ROUTING = ("EXTENSION",)


def settings(assignments: List[str]) -> Dict[str, Any]:
    """NAME=VALUE pairs as {name: value}, each a routing constant of core.native, its value a literal."""
    from core import native

    chosen = {}
    for assignment in assignments:
        name, _, text = assignment.partition("=")
        if not (name.isupper() and hasattr(native, name)) or name in NOT_ROUTING:
            raise SystemExit(f"scripts.routing_ab: {name!r} is not a routing constant of core/native.py")
        try:
            chosen[name] = ast.literal_eval(text)
        except (SyntaxError, ValueError):
            raise SystemExit(f"scripts.routing_ab: {assignment!r}: the value must be a Python literal") from None
    return chosen


def frames(model: Any, blocks: int) -> Callable[[str], Callable[[], np.ndarray]]:
    """Per side, a run of `blocks` frames on that side's own decoder state, returning the last audio."""
    from core.portable.network import mimi

    spec, p = model.mimi_spec, model.params["mimi"]
    dim = p["quantizer"]["output_proj"]["weight"].shape[1]
    latents = np.random.default_rng(0).standard_normal((10_000, 1, dim)).astype(np.float32)
    states = {side: mimi.init_decoder_state(spec, p) for side in "AB"}
    done = {side: 0 for side in "AB"}

    def side(name: str) -> Callable[[], np.ndarray]:
        def run() -> np.ndarray:
            start = done[name] % (len(latents) - blocks)
            done[name] += blocks
            for latent in latents[start : start + blocks]:
                audio = mimi.decode_step(spec, p, latent, states[name])
            return audio

        return run

    return side


def prompts(model: Any, blocks: int, voice_file: str) -> Callable[[str], Callable[[], np.ndarray]]:
    """Per side, `blocks` text prompt passes of the medium text on copies of the voice's state."""
    from core.portable.network import flow_lm, transformer

    spec, p = model.flow_spec, model.params["flow_lm"]
    voice = model.voice_state(voice_file)
    embedded = flow_lm.text_embeddings(p, model.tokenizer.encode(TEXTS["medium"]))

    def side(name: str) -> Callable[[], np.ndarray]:
        def run() -> np.ndarray:
            for _ in range(blocks):
                state = voice.transformer.copy()
                transformer.reserve(state, state.offset + embedded.shape[0])
                flow_lm.prompt(spec, p, state, embedded)
            return state.keys[-1][:, : state.offset]

        return run

    return side


def compare(
    model: Any, changed: Dict[str, Any], stage: str, pairs: int, blocks: int, voice_file: str
) -> Dict[str, Any]:
    """A's and B's times (ms a frame or prompt), a block each in turn, and how far B's last output
    (of the same inputs as A's) is from A's."""
    from core import native
    from core.portable.network import ops
    from core.threads import one_blas_thread

    as_is = {name: getattr(native, name) for name in changed}
    side = frames(model, blocks) if stage == "frame" else prompts(model, blocks, voice_file)
    runs = {"A": side("A"), "B": side("B")}
    times: Dict[str, List[float]] = {"A": [], "B": []}
    outputs = {}
    try:
        with one_blas_thread(), ops.using(model.runtime.backend):
            for index in range(pairs + 1):  # the first pair warms both up and is left out
                for name in "AB" if index % 2 else "BA":
                    for constant, value in (changed if name == "B" else as_is).items():
                        setattr(native, constant, value)
                    began = time.perf_counter()
                    outputs[name] = runs[name]()
                    if index:
                        times[name].append(1000 * (time.perf_counter() - began) / blocks)
    finally:
        for constant, value in as_is.items():
            setattr(native, constant, value)
    return {"times": times, "difference": float(np.abs(outputs["A"] - outputs["B"]).max())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", nargs="+", required=True, metavar="NAME=VALUE", help="B's routing constants")
    parser.add_argument("--kernels", help="the instruction set both run (default: this processor's best)")
    parser.add_argument("--stage", choices=("frame", "prompt"), default="frame")
    parser.add_argument("--model", default="english")
    parser.add_argument("--pairs", type=int, default=40, help="pairs of blocks (default: 40)")
    parser.add_argument("--blocks", type=int, default=10, help="frames or prompts a block (default: 10)")
    args = parser.parse_args()
    if args.pairs < 1 or args.blocks < 1:
        parser.error("--pairs and --blocks must be at least 1")
    changed = settings(args.set)
    held = HELD.get(args.kernels or "", {}).get("ours", {})
    if any(os.environ.get(name) != value for name, value in held.items()):
        # NumPy's OpenBLAS reads its kernels' width at import: run again with it held as the bench holds it.
        os.execve(sys.executable, [sys.executable, "-m", "scripts.routing_ab", *sys.argv[1:]], {**os.environ, **held})
    from core import TTSModel, host

    OUT.mkdir(parents=True, exist_ok=True)  # int8 bundles live here
    try:
        runtime = host.runtime(args.kernels)
    except ValueError as error:
        raise SystemExit(f"scripts.routing_ab: {error}") from None
    model = TTSModel.load(str(int8_bundle(args.model)), runtime=runtime)
    print(f"  {args.model}'s int8 bundle on {runtime.backend.description} ({blas()})", file=sys.stderr)
    voice_file = str(REFERENCE / args.model / "voice_state.safetensors")
    result = compare(model, changed, args.stage, args.pairs, args.blocks, voice_file)
    a, b = result["times"]["A"], result["times"]["B"]
    faster, chance = sign_test(b, a)
    ratio = ratios(b, a)[0]
    what = "decoder frame" if args.stage == "frame" else "text prompt"
    print(
        f"{what} on {measured.cpu_model()}, {' '.join(args.set)} (B) against core/native.py (A): "
        f"A {statistics.median(a):.3f} ms, B {statistics.median(b):.3f} ms, B / A {ratio:.3f} "
        f"(median of {len(a)} pairs of {args.blocks}), B faster in {faster} of {len(a)}, chance {chance:.3f}; "
        f"B's output at most {result['difference']:.1e} from A's"
    )


if __name__ == "__main__":
    main()
