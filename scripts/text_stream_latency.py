"""Latency of speaking text as it arrives (the WebSocket /v1/audio/speech/stream), as a voice agent
meets it: a reply sent a piece at a time at an LLM's pace.

    python -m scripts.text_stream_latency                                  # english and english_2m, 20/30/50 tokens/s
    python -m scripts.text_stream_latency --model english --rates 50
    python -m scripts.text_stream_latency --url http://127.0.0.1:8000      # a server already running

For each model it starts `python -m server` on the fixture (build/reference, scripts/test.sh
makes it; or uses --url), warms it up with one short utterance, then sends REPLY in pieces of
--chars characters (about a token each) at each of --rates pieces a second, `end` after the last,
and reports (the table also into docs/measurements.md#text-streaming-latency):

- first audio: the time from sending the piece that completes the first sentence (the one that
  brings the space after its period: the segment is complete then) to the first audio byte;
- per segment, against a playback clock that starts at the first audio byte and plays in real time:
  how late its audio arrived when it was due (the worst of its chunks; 0: no gap), and the total of
  such gaps (underruns) over the reply; a gap before a segment whose text was not yet complete when
  its audio was due is the writer's (text slower than speech), the others the generation's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List

from e2e import measured

REPLY = (
    "Sure, here is a quick summary of your day. You have three meetings, the first one at ten with "
    "the design team. After lunch, Maria wants to go over the budget, which should not take long. "
    "Finally, remember to call the garage about the car before they close. Anything else I can do?"
)
MODELS = ("english", "english_2m_2026-10")
PATH = "/v1/audio/speech/stream"


def pieces(text: str, size: int) -> List[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def completing_piece(parts: List[str], end: int) -> int:
    """The index of the piece that brings the character at `end` (the whitespace after a segment;
    the last piece for the end of the text, which `end` completes)."""
    position = 0
    for index, part in enumerate(parts):
        position += len(part)
        if position > end:
            return index
    return len(parts) - 1


async def speak(url: str, text: str, size: int, rate: float, options: Dict[str, Any]) -> Dict[str, Any]:
    """One reply over the WebSocket: when each piece was sent, and when each frame arrived."""
    from websockets.asyncio.client import connect

    parts = pieces(text, size)
    sent: List[float] = []
    arrivals: List[Any] = []  # (time, JSON frame) or (time, samples)
    async with connect(url.replace("http", "ws", 1) + PATH, max_size=None) as connection:
        await connection.send(json.dumps({"type": "start", **options}))

        async def send_text() -> None:
            start = time.perf_counter()
            for index, part in enumerate(parts):
                await asyncio.sleep(max(0.0, start + index / rate - time.perf_counter()))
                sent.append(time.perf_counter())
                await connection.send(json.dumps({"type": "text", "text": part}))
            await connection.send(json.dumps({"type": "end"}))

        sender = asyncio.create_task(send_text())
        async for message in connection:
            now = time.perf_counter()
            arrivals.append((now, len(message) // 2 if isinstance(message, bytes) else json.loads(message)))
        await sender
    return {"parts": parts, "sent": sent, "arrivals": arrivals}


def analyse(run: Dict[str, Any]) -> Dict[str, Any]:
    rate = next(m["sample_rate"] for _, m in run["arrivals"] if isinstance(m, dict) and m["type"] == "started")
    text = "".join(run["parts"])
    first_end = re.search(r"[.!?]\s", text).end() - 1  # the whitespace after the first sentence
    completed = run["sent"][completing_piece(run["parts"], first_end)]
    audio = [(t, n) for t, n in run["arrivals"] if isinstance(n, int)]
    first = audio[0][0]
    segments: List[Dict[str, Any]] = []
    samples = 0
    for when, message in run["arrivals"]:
        if isinstance(message, dict):
            if message["type"] == "segment":
                end = text.index(message["text"], segments[-1]["end"] if segments else 0) + len(message["text"])
                ready = run["sent"][completing_piece(run["parts"], end)]
                segments.append({"text": message["text"], "start_sample": message["start_sample"], "late": 0.0})
                segments[-1].update(end=end, ready=ready)
            elif message["type"] == "error":
                raise RuntimeError(message["error"]["message"])
            continue
        due = first + samples / rate  # when this chunk's first sample plays on a real-time clock
        segments[-1]["late"] = max(segments[-1]["late"], when - due)
        samples += message
    # A gap delays everything after it: the clock is the client's, which waits while it has nothing.
    # A gap is the writer's when the segment's text was not complete when its audio was due.
    gaps, writers, shift = [], [], 0.0
    for segment in segments:
        gap = max(0.0, segment["late"] - shift)
        gaps.append(gap)
        writers.append(segment["ready"] > first + segment["start_sample"] / rate + shift)
        shift += gap
    return {
        "first_audio_ms": 1000 * (first - completed),
        "segments": [dict(s, gap_ms=1000 * g, writer=w) for s, g, w in zip(segments, gaps, writers)],
        "underrun_ms": 1000 * sum(gaps),
        "generation_underrun_ms": 1000 * sum(g for g, w in zip(gaps, writers) if not w),
        "audio_s": samples / rate,
        "text_s": run["sent"][-1] - run["sent"][0],
    }


@contextmanager
def served(model: str, url: str) -> Iterator[str]:
    if url:
        yield url
        return
    from e2e import harness

    with harness.model_server(model) as started:
        yield started


def measure(address: str, model: str, size: int, rate: float, seed: int) -> Dict[str, Any]:
    print(f"{model}: sending {len(REPLY)} characters at {rate:g} pieces/s", file=sys.stderr, flush=True)
    return analyse(asyncio.run(speak(address, REPLY, size, rate, {"seed": seed})))


def report(model: str, result: Dict[str, Any], rate: float) -> str:
    lines = [
        f"{model} ({rate:g} tokens/s): first sentence complete -> first audio {result['first_audio_ms']:.0f} ms; "
        f"underruns {result['underrun_ms']:.0f} ms in all over {result['audio_s']:.1f} s of audio "
        f"(text sent over {result['text_s']:.1f} s), {result['generation_underrun_ms']:.0f} ms of them with the "
        "segment's text complete (generation late)"
    ]
    for segment in result["segments"]:
        whose = " (text not yet complete)" if segment["gap_ms"] and segment["writer"] else ""
        lines.append(f"  gap {segment['gap_ms']:6.0f} ms{whose}  {segment['text']}")
    return "\n".join(lines)


def table(rows: List[Dict[str, Any]]) -> str:
    lines = [
        "| model | tokens/s | first sentence -> first audio byte (ms) | underruns: writer's / generation's (ms) "
        "| text sent over / audio (s) |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        r = row["result"]
        writers = r["underrun_ms"] - r["generation_underrun_ms"]
        lines.append(
            f"| {row['model']} | {row['rate']:g} | {r['first_audio_ms']:.0f} | {writers:.0f} / "
            f"{r['generation_underrun_ms']:.0f} | {r['text_s']:.1f} / {r['audio_s']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", nargs="+", default=list(MODELS), help="fixture models (default: %(default)s)")
    parser.add_argument("--url", default="", help="a running server instead (then --model only names it)")
    parser.add_argument("--rates", nargs="+", type=float, default=[20.0, 30.0, 50.0], help="pieces (tokens) a second")
    parser.add_argument("--chars", type=int, default=4, help="characters a piece (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    for model in args.model:
        rows = []
        with served(model, args.url) as address:
            print(f"{model}: server at {address}; warming up", file=sys.stderr, flush=True)
            asyncio.run(speak(address, "Hello there. ", 50, 1000.0, {"seed": args.seed}))
            for rate in args.rates:
                result = measure(address, model, args.chars, rate, args.seed)
                print(report(model, result, rate), file=sys.stderr, flush=True)
                rows.append({"model": model, "rate": rate, "result": result})
        markdown = table(rows)
        if not args.url:  # a server of our own: the fixture weights the page says
            measured.record("measurements.md", f"websocket {model}", markdown)
        print(markdown, flush=True)


if __name__ == "__main__":
    main()
