"""Server capacity: how many concurrent streams stay real time, measured as a user would.

    .venv/bin/python -m scripts.capacity                        # english and english_2m_2026-10
    .venv/bin/python -m scripts.capacity --models english --streams 1 2 4 6

Starts `python -m server` on a fixture model (build/reference, float32 weights, as the server
loads a config; or its int8 bundle) with room for every stream, then for each N sends N concurrent
POST /stream requests of FRAMES frames each (EOS off, temperature 0) and measures, per stream, the
time to its first byte and its real-time factor after that byte (time from first to last byte over
the audio after the first chunk). A row: N, the worst stream's RTF, median and p90 time to first
byte. Then, with N streams running, one more request: its time to first byte (a newcomer's wait on
a busy server). `python -m scripts.bench --capacity` measures the same through `measure`; both
write their tables, one per model and kind of weights, into docs/measurements.md#server-capacity.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import httpx

from e2e import measured

ROOT = Path(__file__).resolve().parent.parent
FRAMES = 75
TEXT = "Many streams at once, each one speaking its own words as fast as the machine allows."


async def _one(client: httpx.AsyncClient, url: str, index: int) -> Dict[str, float]:
    body = {"text": f"{TEXT} Stream {index}.", "temperature": 0.0, "max_frames": FRAMES, "eos_threshold": 100.0}
    start = time.perf_counter()
    first = last = None
    received = 0
    async with client.stream("POST", url + "/stream", json=body) as response:
        if response.status_code != 200:
            raise RuntimeError(f"stream {index}: HTTP {response.status_code} {await response.aread()!r}")
        rate = int(response.headers["x-sample-rate"])
        first_size = 0
        async for piece in response.aiter_bytes():
            now = time.perf_counter()
            if first is None:
                first, first_size = now, len(piece)
            last = now
            received += len(piece)
    after_first = (received - first_size) / 2 / rate  # seconds of audio after the first piece
    return {"ttfb_ms": (first - start) * 1e3, "rtf": (last - first) / after_first if after_first else math.nan}


async def _round(url: str, streams: int) -> List[Dict[str, float]]:
    async with httpx.AsyncClient(timeout=600) as client:
        return await asyncio.gather(*[_one(client, url, i) for i in range(streams)])


async def _newcomer(url: str, streams: int) -> float:
    """With `streams` running (each past its first byte), one more request's time to first byte."""
    async with httpx.AsyncClient(timeout=600) as client:
        started, measured = asyncio.Event(), asyncio.Event()
        going = 0

        async def running(index: int) -> None:
            nonlocal going
            body = {"text": f"{TEXT} Stream {index}.", "temperature": 0.0, "max_frames": 3000, "eos_threshold": 100.0}
            async with client.stream("POST", url + "/stream", json=body) as response:
                pieces = response.aiter_bytes()
                await pieces.__anext__()
                going += 1
                if going == streams:
                    started.set()
                async for _ in pieces:  # keep listening until the newcomer has its first byte
                    if measured.is_set():
                        return  # leaving closes the stream: the server stops it

        tasks = [asyncio.create_task(running(i)) for i in range(streams)]
        await started.wait()
        body = {"text": f"{TEXT} The newcomer.", "temperature": 0.0, "max_frames": 10, "eos_threshold": 100.0}
        start = time.perf_counter()
        async with client.stream("POST", url + "/stream", json=body) as response:
            if response.status_code != 200:
                raise RuntimeError(f"the newcomer: HTTP {response.status_code} {await response.aread()!r}")
            await response.aiter_bytes().__anext__()
            ttfb = (time.perf_counter() - start) * 1e3
        measured.set()
        await asyncio.gather(*tasks)
        return ttfb


def summary(worst_rtf: float, ttfb: List[float]) -> Dict[str, float]:
    """A round's figures: its worst stream's real-time factor, and the median and p90 of its streams'
    times to first byte (ms)."""
    return {"worst_rtf": worst_rtf, "ttfb_median_ms": statistics.median(ttfb), "ttfb_p90_ms": measured.p90(ttfb)}


def _idle(url: str) -> None:
    """Wait until the server has dropped every stream (closed ones are dropped at its next step)."""
    while httpx.get(url + "/health").json()["active_generations"]:
        time.sleep(0.02)


def measure(model: str, counts: List[int], int8: bool, progress: Any = print) -> List[Dict[str, Any]]:
    from e2e import harness
    from scripts.bundles import int8_bundle

    rows = []
    bundle = int8_bundle(model) if int8 else None
    with harness.model_server(model, max_concurrent=max(counts) + 1, bundle=bundle) as url:
        asyncio.run(_round(url, 1))  # warm up
        for n in counts:
            _idle(url)
            results = asyncio.run(_round(url, n))
            newcomers = []
            for _ in range(3):
                _idle(url)
                newcomers.append(asyncio.run(_newcomer(url, n)))
            newcomer = statistics.median(newcomers)
            row = {
                "model": model + (" (int8 bundle)" if int8 else ""),
                "streams": n,
                **summary(max(r["rtf"] for r in results), [r["ttfb_ms"] for r in results]),
                "newcomer_ttfb_ms": newcomer,
                "health": httpx.get(url + "/health").json(),
            }
            progress(
                f"  {model}: {n} streams, worst RTF {row['worst_rtf']:.2f}, TTFB median {row['ttfb_median_ms']:.0f} ms"
            )
            rows.append(row)
    return rows


def table(rows: List[Dict[str, Any]]) -> str:
    lines = [
        f"| model | concurrent streams ({FRAMES} frames each) | worst RTF | time to first byte, median / p90 (ms) "
        "| a newcomer's time to first byte while they run (ms) |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['model']} | {row['streams']} | {row['worst_rtf']:.2f} "
            f"| {row['ttfb_median_ms']:.0f} / {row['ttfb_p90_ms']:.0f} | {row['newcomer_ttfb_ms']:.0f} |"
        )
    return "\n".join(lines)


def save(rows: List[Dict[str, Any]], out: Path) -> str:
    """The rows as out/capacity.json and capacity.md, and their tables in
    docs/measurements.md#server-capacity, one per model and kind of weights; returns the whole table."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "capacity.json").write_text(json.dumps(rows, indent=1))
    markdown = table(rows)
    (out / "capacity.md").write_text(markdown + "\n")
    for label in dict.fromkeys(row["model"] for row in rows):
        kept = [row for row in rows if row["model"] == label]
        measured.record("measurements.md", f"capacity {label}", table(kept))
    return markdown


DEFAULT_COUNTS = {"english": [1, 2, 4, 6, 8, 10, 11, 12], "english_2m_2026-10": [1, 8, 16, 24, 28, 32, 36]}


def main() -> None:
    """One model and one kind of weights at a time (`scripts.bench --capacity` does them all)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(DEFAULT_COUNTS))
    parser.add_argument("--streams", nargs="+", type=int, help="the N to try (default: per model)")
    parser.add_argument("--int8", action="store_true", help="serve an int8 bundle of the fixture weights")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "bench")
    args = parser.parse_args()
    rows = []
    for model in args.models:
        print(f"capacity of {model}", file=sys.stderr)
        counts = args.streams or DEFAULT_COUNTS.get(model, [1, 2, 4, 8])
        rows += measure(model, counts, args.int8, lambda m: print(m, file=sys.stderr))
    print(save(rows, args.out))


if __name__ == "__main__":
    main()
