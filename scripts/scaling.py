"""Beyond one machine, measured on this one: the server on Ray Serve with one and two replicas, and
batch synthesis on worker processes and on Ray.

    .venv/bin/python -m scripts.scaling                            # english_2m_2026-10
    .venv/bin/python -m scripts.scaling --seconds 60 --clients 8 --lines 400

Serve: on a local two-CPU Ray cluster, `python -m server.cluster` on the fixture model
(build/reference) with one replica (two CPUs) and two replicas (one CPU each), and `python -m server`
alone for reference, each with CLIENTS slots in all. CLIENTS clients each send POST /stream requests
(a sentence, 40 frames = 3.2 s of audio, temperature 0) one after another for SECONDS: requests
completed per second, and the time to first byte, median and p90.

Batch: LINES such sentences by `python -m core.cli batch` on two worker processes, then with `--ray`
on the two-CPU cluster: seconds of audio made per second of wall time (model loading included).
Writes build/bench/scaling.json and scaling.md, the tables into docs/measurements.md#ray-serve-and-batch-throughput, and
prints them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

import httpx

from e2e import harness, measured

OUT = harness.ROOT / "build" / "bench"
FRAMES = 40
TEXT = "A request among many, each asking for a few seconds of speech from a cluster."


async def _load(url: str, clients: int, seconds: float) -> Dict[str, Any]:
    """CLIENTS closed-loop clients for SECONDS: requests completed per second, TTFB median and p90."""
    ttfb: List[float] = []
    failures = 0
    deadline = time.perf_counter() + seconds

    async def client(index: int, http: httpx.AsyncClient) -> None:
        nonlocal failures
        n = 0
        while time.perf_counter() < deadline:
            body = {"text": f"{TEXT} {index}.{n}", "temperature": 0.0, "max_frames": FRAMES, "eos_threshold": 100.0}
            n += 1
            start = time.perf_counter()
            async with http.stream("POST", url + "/stream", json=body) as response:
                if response.status_code != 200:
                    failures += 1
                    await response.aread()
                    continue
                first = None
                async for _ in response.aiter_bytes():
                    first = first or time.perf_counter()
            ttfb.append((first - start) * 1e3)

    begin = time.perf_counter()
    async with httpx.AsyncClient(timeout=600) as http:
        await asyncio.gather(*[client(i, http) for i in range(clients)])
    elapsed = time.perf_counter() - begin
    return {
        "requests": len(ttfb),
        "failures": failures,
        "requests_per_s": len(ttfb) / elapsed,
        "ttfb_median_ms": statistics.median(ttfb),
        "ttfb_p90_ms": measured.p90(ttfb),
    }


def serve_rows(model: str, clients: int, seconds: float, progress: Any = print) -> List[Dict[str, Any]]:
    directory = harness.fixture(model)
    model_args = ["--model", str(directory / "config.yaml"), "--voice", str(directory / "voice_state.safetensors")]
    rows = []
    with harness.server(model_args + ["--max-concurrent", str(clients)]) as url:
        asyncio.run(_load(url, 1, 2.0))  # warm up
        rows.append(dict(setup="python -m server (no Ray)", **asyncio.run(_load(url, clients, seconds))))
        progress(f"  {rows[-1]['setup']}: {rows[-1]['requests_per_s']:.1f} requests/s")
    for replicas in (1, 2):
        per_replica = ["--replicas", str(replicas), "--cpus-per-replica", str(2 / replicas)]
        slots = ["--max-concurrent", str(math.ceil(clients / replicas))]
        with harness.ray_cluster(cpus=2) as address:
            with harness.cluster_server(address, model_args + per_replica + slots) as url:
                asyncio.run(_load(url, 1, 2.0))
                name = f"Ray Serve, {replicas} replica{'s' if replicas > 1 else ''}"
                rows.append(dict(setup=name, **asyncio.run(_load(url, clients, seconds))))
                progress(f"  {name}: {rows[-1]['requests_per_s']:.1f} requests/s")
    return rows


def batch_rows(model: str, lines: int, progress: Any = print) -> List[Dict[str, Any]]:
    directory = harness.fixture(model)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "lines.jsonl"
        items = [
            {
                "id": f"line{i:04d}",
                "text": f"{TEXT} Line {i}.",
                "temperature": 0,
                "max_frames": FRAMES,
                "eos_threshold": 100,
            }
            for i in range(lines)
        ]
        source.write_text("".join(json.dumps(item) + "\n" for item in items))
        command = [sys.executable, "-m", "core.cli", "batch", str(source), "--model", str(directory / "config.yaml")]
        command += ["--voice", str(directory / "voice_state.safetensors"), "-q"]
        runs = [("2 worker processes", ["--workers", "2"]), ("Ray, a two-CPU cluster", ["--ray"])]
        for name, extra in runs:
            out = Path(tmp) / name.split()[0]

            def run(address: str = "", extra: List[str] = extra, out: Path = out) -> float:
                start = time.perf_counter()
                subprocess.run(command + ["--out", str(out)] + extra + ([address] if address else []), check=True)
                return time.perf_counter() - start

            if extra == ["--ray"]:
                with harness.ray_cluster(cpus=2) as address:
                    seconds = run(address)
            else:
                seconds = run()
            entries = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
            audio = sum(e["duration_s"] for e in entries)
            rows.append(
                {"setup": name, "lines": lines, "audio_s": audio, "seconds": seconds, "audio_per_s": audio / seconds}
            )
            progress(f"  batch on {name}: {audio / seconds:.1f} s of audio per second")
    return rows


def markdown(model: str, serve: List[Dict[str, Any]], batch: List[Dict[str, Any]], clients: int) -> str:
    lines = [
        f"{model}, {clients} clients, {FRAMES} frames ({FRAMES * 0.08:.1f} s of audio) per request:",
        "",
        "| setup | requests/s | time to first byte, median / p90 (ms) | refused |",
        "|---|---|---|---|",
    ]
    for row in serve:
        lines.append(
            f"| {row['setup']} | {row['requests_per_s']:.1f} | {row['ttfb_median_ms']:.0f} / {row['ttfb_p90_ms']:.0f} "
            f"| {row['failures']} |"
        )
    lines += [
        "",
        "| batch of lines | lines | audio (s) | wall time (s) | seconds of audio per second |",
        "|---|---|---|---|---|",
    ]
    for row in batch:
        lines.append(
            f"| {row['setup']} | {row['lines']} | {row['audio_s']:.0f} | {row['seconds']:.1f} "
            f"| {row['audio_per_s']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="english_2m_2026-10")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (default: %(default)s)")
    parser.add_argument("--seconds", type=float, default=30.0, help="load per setup (default: %(default)s)")
    parser.add_argument("--lines", type=int, default=200, help="lines of the batch (default: %(default)s)")
    args = parser.parse_args()
    progress = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    progress(f"serving {args.model}")
    serve = serve_rows(args.model, args.clients, args.seconds, progress)
    progress(f"batch of {args.lines} lines")
    batch = batch_rows(args.model, args.lines, progress)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "scaling.json").write_text(json.dumps({"serve": serve, "batch": batch}, indent=1))
    table = markdown(args.model, serve, batch, args.clients)
    (OUT / "scaling.md").write_text(table + "\n")
    measured.record("measurements.md", f"scaling {args.model}", table)
    print(table)


if __name__ == "__main__":
    main()
