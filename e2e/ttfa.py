"""Time to first audio of both modes, measured in Chromium: the web UI against `python -m server`
(server mode) and the same UI from a static file server (in-browser mode).

    .venv/bin/python -m e2e.ttfa                        # english and english_2m_2026-10, 20 runs
    .venv/bin/python -m e2e.ttfa --models english_2m_2026-10 --runs 5

Per model (int8 bundle of the fixture weights; the numbers measure speed, not voice quality):
a cold page load and first run, then `--runs` warmed short-prompt runs per mode, a reload with the
model cached, and the download sizes. Writes build/e2e/ttfa.json and ttfa.md, each model's tables
into docs/measurements.md#time-to-first-audio (a run under a CPU quota beside the others), and prints the table.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, List

from e2e import harness, measured

METRICS = [
    ("ttfc_ms", "TTFC (ms)"),
    ("ttfa_ms", "TTFA (ms)"),
    ("total_ms", "total (ms)"),
    ("rtf", "RTF"),
    ("stalls", "stalls"),
]


def summarize(runs: List[Dict[str, Any]]) -> Dict[str, Dict[str, float]]:
    for run in runs:
        run["rtf"] = run["total_ms"] / run["audio_ms"]
        run["stalls"] = run["played"]["stalls"]
    return {key: measured.summary([run[key] for run in runs]) for key, _ in METRICS}


def measure(model: str, runs: int, progress: Any = print) -> Dict[str, Any]:
    site = harness.site(model)
    result: Dict[str, Any] = {
        "model": model,
        "site_bytes": sum(p.stat().st_size for p in site.rglob("*") if p.is_file()),
    }
    with harness.chromium() as browser:
        with harness.model_server(model) as server_url:
            page = harness.Page(browser.new_context(), server_url)
            page.use("server")
            cold = page.run()
            warm = []
            for i in range(runs):
                warm.append(page.run())
                progress(f"  {model} server: run {i + 1}/{runs}")
            voice = page.clone_voice(harness.VOICE_RECORDING)
            result["server"] = {
                "cold": cold,
                "runs": warm,
                "summary": summarize(warm),
                "voice_ms": voice["ms"],
                "errors": page.errors,
            }
        with harness.static_server(site) as site_url:
            context = browser.new_context()
            page = harness.Page(context, site_url)
            load = page.use("browser")
            cold = page.run()
            cold_bytes = page.downloaded
            warm = []
            for i in range(runs):
                warm.append(page.run())
                progress(f"  {model} browser: run {i + 1}/{runs}")
            voice = page.clone_voice(harness.VOICE_RECORDING)  # the first upload: it fetches the cloning part
            load["heap_bytes"] = page.page.evaluate("import('./browser/browser-engine.js').then((e) => e.heapBytes())")
            result["browser"] = {
                "cold": cold,
                "runs": warm,
                "summary": summarize(warm),
                "load": load,
                "voice_ms": voice["ms"] - voice["part_ms"],
                "voice_part_ms": voice["part_ms"],
                "voice_part_bytes": page.downloaded - cold_bytes,
                "errors": page.errors,
            }
            again = harness.Page(context, site_url)  # a reload: the model comes from the Cache API
            result["browser"]["cached_load"] = again.use("browser")
            result["download"] = {"cold_bytes": cold_bytes, "cached_bytes": again.downloaded}
    return result


def markdown(results: List[Dict[str, Any]]) -> str:
    lines = [
        "| model | mode | " + " | ".join(f"{label} median / p90 / min / max" for _, label in METRICS) + " |",
        "|---|---|" + "---|" * len(METRICS),
    ]
    for r in results:
        for mode in ("server", "browser"):
            summary = r[mode]["summary"]
            cells = []
            for key, _ in METRICS:
                if key not in summary:  # a result kept from a run before this metric existed
                    cells.append("n/a")
                    continue
                s = summary[key]
                fmt = "{:.2f}" if key == "rtf" else "{:.0f}"
                cells.append(" / ".join(fmt.format(s[k]) for k in ("median", "p90", "min", "max")))
            lines.append(f"| {r['model']} | {mode} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "| model | cold start: Pyodide / NumPy + core / model download (alongside) / model load (ms) "
        "| reload with cached model (ms) | first run TTFA cold, server / browser (ms) | site size "
        "| downloaded cold / cached | voice cloning of a 5.1 s recording, server / browser (ms; + the cloning "
        "part's download and load on the first upload) "
        "| workers, wasm heap each (MB) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        load, cached = r["browser"]["load"], r["browser"]["cached_load"]
        parts = " / ".join(f"{load[k]:.0f}" for k in ("pyodide_ms", "numpy_ms", "download_ms", "load_ms"))
        first = f"{r['server']['cold']['ttfa_ms']:.0f} / {r['browser']['cold']['ttfa_ms']:.0f}"
        sizes = f"{r['download']['cold_bytes'] / 1e6:.1f} MB / {r['download']['cached_bytes'] / 1e6:.1f} MB"
        voices = f"{r['server']['voice_ms']:.0f} / {r['browser']['voice_ms']:.0f}"
        if r["browser"].get("voice_part_ms"):
            part = r["browser"]
            voices += f" (+ {part['voice_part_ms']:.0f}: {part['voice_part_bytes'] / 1e6:.1f} MB)"
        heaps = ", ".join(f"{b / 1e6:.0f}" for b in load["heap_bytes"])
        lines.append(
            f"| {r['model']} | {parts} (total {load['total_ms']:.0f}) | {cached['total_ms']:.0f} (download "
            f"{cached['download_ms']:.0f}) | {first} | {r['site_bytes'] / 1e6:.1f} MB | {sizes} | {voices} "
            f"| {load['workers']}: {heaps} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["english", "english_2m_2026-10"])
    parser.add_argument("--runs", type=int, default=20, help="warmed runs per mode (default: %(default)s)")
    args = parser.parse_args()
    table = ""
    for model in args.models:
        print(f"{model}: building the site, starting the servers", file=sys.stderr)
        result = measure(model, args.runs, lambda m: print(m, file=sys.stderr))
        table = harness.save("ttfa", result, markdown)
        measured.record("measurements.md", f"ttfa {model}{measured.share()}", markdown([result]))
    print(table)


if __name__ == "__main__":
    main()
