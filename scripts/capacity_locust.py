"""Server capacity as a load tool that is not ours measures it, beside our own run: Locust.

    python -m venv build/locust && build/locust/bin/pip install locust
    .venv/bin/python -m scripts.capacity_locust --locust build/locust/bin/locust --int8

Starts `python -m server` on the fixture model as scripts/capacity.py does, then for each N runs
both, one after the other on the same server: scripts/capacity.py's round (httpx on asyncio, N
concurrent streams of FRAMES frames) and Locust's (e2e/locust_streams.py: N users started at once,
one stream each, read with requests on gevent, in Locust's own environment). A row: N, the worst
stream's real-time factor after its first byte and the median and p90 time to first byte, ours
and Locust's (Locust keeps its values in buckets of 10 ms and 0.01 of the real-time factor; its
worst real-time factor is exact). Written into docs/measurements.md#server-capacity.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

from e2e import measured
from scripts import capacity

ROOT = Path(__file__).resolve().parent.parent
LOCUSTFILE = ROOT / "e2e" / "locust_streams.py"
DEFAULT_COUNTS = [1, 4, 8, 10, 12, 14, 16]


def locust_round(locust: str, url: str, streams: int) -> Dict[str, float]:
    """N streams at once through Locust: its worst real-time factor and its times to first byte."""
    command = [
        locust,
        "-f",
        str(LOCUSTFILE),
        "--headless",
        "--users",
        str(streams),
        "--spawn-rate",
        str(1000 * streams),  # every user at once, as our round starts its streams
        "--host",
        url,
        "--frames",
        str(capacity.FRAMES),
        "--text",
        capacity.TEXT,
        "--json",
        "--only-summary",
        "--loglevel",
        "ERROR",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"Locust failed ({done.returncode}): {done.stderr[-2000:]}")
    entries = {entry["name"]: entry for entry in json.loads(done.stdout[: done.stdout.rindex("]") + 1])}
    rtf, first = entries["real-time factor x1000"], entries["first byte"]
    for entry in entries.values():
        if entry["num_failures"] or entry["num_requests"] != streams:
            counts = f"{entry['num_requests']} of {streams}, {entry['num_failures']} failed"
            raise RuntimeError(f"Locust: {entry['name']}: {counts}")
    ttfb = [float(value) for value, count in first["response_times"].items() for _ in range(count)]
    return capacity.summary(rtf["max_response_time"] / 1000, ttfb)


def ours_round(url: str, streams: int) -> Dict[str, float]:
    results = asyncio.run(capacity._round(url, streams))
    return capacity.summary(max(r["rtf"] for r in results), [r["ttfb_ms"] for r in results])


def measure(model: str, counts: List[int], int8: bool, locust: str) -> List[Dict[str, Any]]:
    from e2e import harness
    from scripts.bundles import int8_bundle

    rows = []
    bundle = int8_bundle(model) if int8 else None
    with harness.model_server(model, max_concurrent=max(counts) + 1, bundle=bundle) as url:
        asyncio.run(capacity._round(url, 1))  # warm up
        for n in counts:
            capacity._idle(url)
            ours = ours_round(url, n)
            capacity._idle(url)
            theirs = locust_round(locust, url, n)
            row = {"model": model + (" (int8 bundle)" if int8 else ""), "streams": n, "ours": ours, "locust": theirs}
            print(
                f"  {n} streams: worst RTF {ours['worst_rtf']:.2f} (ours) / {theirs['worst_rtf']:.2f} (Locust), "
                f"TTFB median {ours['ttfb_median_ms']:.0f} / {theirs['ttfb_median_ms']:.0f} ms",
                file=sys.stderr,
            )
            rows.append(row)
    return rows


def table(rows: List[Dict[str, Any]]) -> str:
    lines = [
        f"| model | concurrent streams ({capacity.FRAMES} frames each) | worst RTF, ours / Locust "
        "| time to first byte, median, ours / Locust (ms) | time to first byte, p90, ours / Locust (ms) |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        ours, theirs = row["ours"], row["locust"]
        lines.append(
            f"| {row['model']} | {row['streams']} | {ours['worst_rtf']:.2f} / {theirs['worst_rtf']:.2f} "
            f"| {ours['ttfb_median_ms']:.0f} / {theirs['ttfb_median_ms']:.0f} "
            f"| {ours['ttfb_p90_ms']:.0f} / {theirs['ttfb_p90_ms']:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="english")
    parser.add_argument("--streams", nargs="+", type=int, default=DEFAULT_COUNTS, help="the N to try")
    parser.add_argument("--int8", action="store_true", help="serve an int8 bundle of the fixture weights")
    parser.add_argument("--locust", default="locust", help="the locust command (in Locust's own environment)")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "bench")
    args = parser.parse_args()
    rows = measure(args.model, args.streams, args.int8, args.locust)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "capacity_locust.json").write_text(json.dumps(rows, indent=1))
    markdown = table(rows)
    measured.record("measurements.md", f"capacity {rows[0]['model']}, ours and Locust", markdown)
    print(markdown)


if __name__ == "__main__":
    main()
