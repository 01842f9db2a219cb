"""Text streamed in at an LLM's pace, measured in Chromium in both modes: the page's text stream
against `python -m server` (its WebSocket) and in the browser's workers (the static site).

    .venv/bin/python -m e2e.text_stream                              # english and english_2m_2026-10, 20/30/50 pieces/s
    .venv/bin/python -m e2e.text_stream --models english_2m_2026-10 --rates 30 --runs 3

Per model (the fixture weights, as e2e/ttfa.py: float weights on the server, the int8 bundle in the
browser) and mode, after a warm-up Generate, `--runs` streams per rate: a reply of four sentences
cut into word pieces (long words in two, as a tokenizer cuts them), appended from the page's own
clock at `rate` pieces a second, then `end`, the audio played through the AudioWorklet. Measured:

- first audio: from appending the piece that completes the first sentence (the piece that brings
  the whitespace after it: core's segmenter, run here on the same pieces, says which) to the first
  audible sample leaving the speakers (the worklet's clock, with the output latency);
- stalls: how often playback ran dry before the end, and how long it was silent in all (the
  worklet counts both); "with text" counts only the gaps before a segment whose text had been
  complete before the audio ran out, that is, where generation, not the writer, was late.

Writes build/e2e/text_stream.json and text_stream.md, each model's table into
docs/measurements.md#text-streaming-latency, and prints the table; progress on stderr.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, List

from core.portable.text.prepare import TextOptions
from core.portable.text.segmenter import Segmenter
from core.portable.text.tokenizer import Tokenizer
from core.portable.weights import sources
from e2e import harness, measured

REPLY = (
    "Sure, here is a short summary of the plan. The meeting moved to Thursday morning, in the small room "
    "on the second floor. Please bring the budget numbers and the latest draft of the report. "
    "If anything changes, I will let you know before noon."
)
# Silence between two segments shorter than this is the measurement's own error (a render quantum
# and the worklet's position messages), not a gap.
GAP_MS = 15.0

# Appends the pieces at `rate` a second from the page's clock, ends the stream and waits until it
# has played out; resolves with the stream's record (web/text-stream.js, textStream).
FEED = """async ({pieces, rate}) => {
  const stream = window.pocketTTS.textStream({});
  const start = performance.now();
  for (let i = 0; i < pieces.length; i++) {
    const due = start + (1000 * i) / rate;
    if (due > performance.now()) await new Promise((resolve) => setTimeout(resolve, due - performance.now()));
    stream.append(pieces[i]);
  }
  stream.end();
  return await stream.done;
}"""


def pieces(text: str) -> List[str]:
    """Word pieces as an LLM sends them: each word with the space before it, long words in two."""
    out: List[str] = []
    for i, word in enumerate(text.split()):
        word = word if i == 0 else " " + word
        if len(word) > 7:
            out += [word[: len(word) // 2], word[len(word) // 2 :]]
        else:
            out.append(word)
    return out


def completions(model: str, parts: List[str]) -> List[int]:
    """For each segment core's segmenter makes of `parts`, the index of the piece that completed
    it (len(parts): the end of the text)."""
    files = sources.resolve(str(harness.fixture(model) / "config.yaml"))
    segmenter = Segmenter(Tokenizer.from_file(files.tokenizer), 50, TextOptions.from_config(files.config))
    done: List[int] = []
    for i, piece in enumerate(parts):
        done += [i] * len(segmenter.push(piece))
    return done + [len(parts)] * len(segmenter.flush())


def analyse(record: Dict[str, Any], completed: List[int]) -> Dict[str, Any]:
    """The figures of one stream from its record: times in ms."""
    sample_rate = record["sample_rate"]
    appends = [a["at"] for a in record["appends"]]
    at = [appends[i] if i < len(appends) else record["ended_at"] for i in completed]
    segments = record["segments"]
    if len(segments) != len(completed):
        raise RuntimeError(f"{len(segments)} segments spoken, the segmenter made {len(completed)}")
    with_text = 0
    # Each segment: when its text was complete and when it was heard (from the first completion), and
    # how much later than the previous segment's start plus its length (the silence in between, and
    # any inside the previous segment).
    timeline = [{"text_ms": 0.0, "heard_ms": segments[0]["heard_at"] - at[0], "gap_ms": None}]
    for i in range(1, len(segments)):
        previous, this = segments[i - 1], segments[i]
        ran_out = previous["heard_at"] + 1000 * (this["start_sample"] - previous["start_sample"]) / sample_rate
        if this["heard_at"] - ran_out > GAP_MS and at[i] < ran_out:  # the text was there in time
            with_text += 1
        gap = this["heard_at"] - ran_out
        timeline.append({"text_ms": at[i] - at[0], "heard_ms": this["heard_at"] - at[0], "gap_ms": gap})
    played = record["played"]
    return {
        "timeline": timeline,
        "first_audio_ms": record["first_audio_at"] - at[0],
        "stalls": played["stalls"],
        "stalls_with_text": with_text,
        "stalled_ms": 1000 * played["starved"] / sample_rate,
        "audio_ms": 1000 * record["samples"] / sample_rate,
        "segments": len(segments),
    }


def measure_page(page: harness.Page, model: str, rates: List[int], runs: int, progress: Any) -> Dict[str, Any]:
    parts = pieces(REPLY)
    completed = completions(model, parts)
    page.run()  # warm: the first generation of a page loads what the later ones reuse
    by_rate: Dict[str, Any] = {}
    for rate in rates:
        results = []
        for i in range(runs):
            record = page.page.evaluate(FEED, {"pieces": parts, "rate": rate})
            results.append(analyse(record, completed))
            r = results[-1]
            progress(
                f"  {model} {page.page.input_value('#mode')} {rate}/s run {i + 1}/{runs}: first audio "
                f"{r['first_audio_ms']:.0f} ms, stalls {r['stalls']} ({r['stalled_ms']:.0f} ms)"
            )
        by_rate[str(rate)] = {"runs": results, "summary": summary(results)}
    return {"rates": by_rate, "pieces": len(parts), "errors": page.errors}


def summary(results: List[Dict[str, Any]]) -> Dict[str, Any]:
    keys = ("first_audio_ms", "stalls", "stalls_with_text", "stalled_ms", "audio_ms")
    return {key: measured.summary([r[key] for r in results]) for key in keys}


def measure(model: str, rates: List[int], runs: int, progress: Any = print) -> Dict[str, Any]:
    site = harness.site(model)
    result: Dict[str, Any] = {"model": model}
    with harness.chromium() as browser:
        with harness.model_server(model) as server_url:
            page = harness.Page(browser.new_context(), server_url)
            page.use("server")
            result["server"] = measure_page(page, model, rates, runs, progress)
        with harness.static_server(site) as site_url:
            page = harness.Page(browser.new_context(), site_url)
            page.use("browser")
            result["browser"] = measure_page(page, model, rates, runs, progress)
    return result


def markdown(results: List[Dict[str, Any]]) -> str:
    lines = [
        "| model | mode | pieces/s | first sentence -> first audio (ms) median / p90 / min / max "
        "| stalls median / max (with text ready: max) | stalled (ms) median / max | audio (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        for mode in ("server", "browser"):
            for rate, at_rate in r[mode]["rates"].items():
                s = at_rate["summary"]
                first = " / ".join(f"{s['first_audio_ms'][k]:.0f}" for k in ("median", "p90", "min", "max"))
                stalls = f"{s['stalls']['median']:.0f} / {s['stalls']['max']:.0f} ({s['stalls_with_text']['max']:.0f})"
                stalled = f"{s['stalled_ms']['median']:.0f} / {s['stalled_ms']['max']:.0f}"
                audio = f"{s['audio_ms']['median'] / 1000:.1f}"
                lines.append(f"| {r['model']} | {mode} | {rate} | {first} | {stalls} | {stalled} | {audio} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["english", "english_2m_2026-10"])
    parser.add_argument("--rates", nargs="+", type=int, default=[20, 30, 50], help="pieces a second")
    parser.add_argument("--runs", type=int, default=5, help="streams per mode and rate (default: %(default)s)")
    args = parser.parse_args()
    table = ""
    for model in args.models:
        print(f"{model}: building the site, starting the servers", file=sys.stderr)
        result = measure(model, args.rates, args.runs, lambda m: print(m, file=sys.stderr))
        table = harness.save("text_stream", result, markdown)
        measured.record("measurements.md", f"page {model}", markdown([result]))
    print(table)


if __name__ == "__main__":
    main()
