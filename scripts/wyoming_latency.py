"""Latency of Home Assistant's Wyoming protocol (`python -m server --wyoming`), beside the HTTP
server's own entries on the same process: a whole text, and a reply streamed at an LLM's pace.

    python -m scripts.wyoming_latency                          # english and english_2m, 30 pieces/s, 5 runs each
    python -m scripts.wyoming_latency --model english_2m_2026-10 --runs 3

For each fixture model (build/reference: scripts/test.sh makes them) it starts `python -m server`
with a Wyoming listener, warms both up, then measures, `--runs` times each:

- a whole text: from sending `synthesize` to the first audio-chunk (Wyoming), and from sending
  POST /stream to its first audio byte (HTTP), the same text;
- a reply at an LLM's pace (scripts.text_stream_latency's REPLY, in pieces of --chars characters at
  --rate pieces a second): from sending the piece that completes the first sentence to the first
  audio-chunk of Wyoming's `synthesize-start/chunk/stop`, and to the first audio byte of the
  WebSocket's stream, the same reply and pace.

Prints a Markdown table of medians and 90th percentiles (ms).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from typing import Dict, List

import httpx
from wyoming.client import AsyncTcpClient
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop

from e2e import harness, measured
from scripts.text_stream_latency import REPLY, analyse, completing_piece, pieces, speak

MODELS = ("english", "english_2m_2026-10")
TEXT = "The first chunk plays after one frame, and the rest follows as it is made."


async def whole_text(port: int) -> float:
    """ms from sending `synthesize` to the first audio-chunk (the rest is read to its end)."""
    async with AsyncTcpClient("127.0.0.1", port) as client:
        start = time.perf_counter()
        await client.write_event(Synthesize(text=TEXT).event())
        first = None
        while True:
            event = await client.read_event()
            if event.type == "audio-chunk" and first is None:
                first = time.perf_counter()
            if event.type in ("audio-stop", "error"):
                return 1000 * (first - start)


def http_whole_text(url: str) -> float:
    """ms from sending POST /stream to its first audio byte."""
    start = time.perf_counter()
    with httpx.stream("POST", url + "/stream", json={"text": TEXT}, timeout=120) as response:
        first = None
        for piece in response.iter_bytes():
            if piece and first is None:
                first = time.perf_counter()
    return 1000 * (first - start)


async def streamed(port: int, size: int, rate: float) -> float:
    """ms from sending the piece that completes the first sentence to its first audio-chunk."""
    parts = pieces(REPLY, size)
    completing = completing_piece(parts, re.search(r"[.!?]\s", REPLY).end() - 1)
    sent: List[float] = []
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(SynthesizeStart().event())

        async def send_text() -> None:
            start = time.perf_counter()
            for index, part in enumerate(parts):
                await asyncio.sleep(max(0.0, start + index / rate - time.perf_counter()))
                sent.append(time.perf_counter())
                await client.write_event(SynthesizeChunk(text=part).event())
            await client.write_event(SynthesizeStop().event())

        sender = asyncio.create_task(send_text())
        first = None
        while True:
            event = await client.read_event()
            if event.type == "audio-chunk" and first is None:
                first = time.perf_counter()
            if event.type in ("synthesize-stopped", "error"):
                break
        await sender
    return 1000 * (first - sent[completing])


def summary(values: List[float]) -> str:
    figures = measured.summary(values)
    return f"{figures['median']:.0f} / {figures['p90']:.0f}"


def measure(model: str, runs: int, size: int, rate: float) -> Dict[str, List[float]]:
    port = harness.free_port()
    results: Dict[str, List[float]] = {"wyoming": [], "http": [], "wyoming_stream": [], "websocket": []}
    with harness.model_server(model, extra=["--wyoming", f"tcp://127.0.0.1:{port}"]) as url:
        print(f"{model}: server at {url}, Wyoming on {port}; warming up", file=sys.stderr, flush=True)
        asyncio.run(whole_text(port))
        http_whole_text(url)
        for run in range(runs):
            print(f"{model}: run {run + 1} of {runs}", file=sys.stderr, flush=True)
            results["wyoming"].append(asyncio.run(whole_text(port)))
            results["http"].append(http_whole_text(url))
            results["wyoming_stream"].append(asyncio.run(streamed(port, size, rate)))
            websocket = analyse(asyncio.run(speak(url, REPLY, size, rate, {})))
            results["websocket"].append(websocket["first_audio_ms"])
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", nargs="+", default=list(MODELS), help="fixture models (default: %(default)s)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rate", type=float, default=30.0, help="pieces (tokens) a second (default: %(default)s)")
    parser.add_argument("--chars", type=int, default=4, help="characters a piece (default: %(default)s)")
    args = parser.parse_args()
    rows = [
        "| model | whole text -> first audio: Wyoming `synthesize` | HTTP `POST /stream` "
        f"| first sentence complete -> its first audio at {args.rate:g} pieces/s: Wyoming stream | WebSocket |",
        "|---|---|---|---|---|",
    ]
    for model in args.model:
        r = measure(model, args.runs, args.chars, args.rate)
        cells = [summary(r[k]) for k in ("wyoming", "http", "wyoming_stream", "websocket")]
        rows.append(f"| {model} | " + " | ".join(cells) + " |")
    markdown = f"Median / p90 (ms), {args.runs} runs each:\n\n" + "\n".join(rows)
    measured.record("measurements.md", "wyoming", markdown)
    print(markdown, flush=True)


if __name__ == "__main__":
    main()
