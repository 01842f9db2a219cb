"""What the browser compiles of the page's WebAssembly at each visit, and what its code cache serves:
a first visit and returning ones on one profile, each traced by Chromium from its start (`v8.wasm`
and the code cache's events), each clicking Generate once and then staying a while (the browser
caches a module's optimized code a few seconds after its last tier-up).

    .venv/bin/python -m e2e.wasm_compiles                       # english_2m_2026-10, 3 visits
    .venv/bin/python -m e2e.wasm_compiles --models english --visits 4 --stay 15

Per visit, over both workers: the functions compiled by the optimizing compiler (TurboFan, in
the background, as they get hot) and their CPU time, those compiled by the baseline compiler
(Liftoff) at their first call, its background jobs (a module's functions the code cache says
ran, compiled once it is read), the modules compiled synchronously, and each module's code cache
read or written (by URL). Under a CPU quota every background compile competes with the workers.
Writes each model's table into docs/measurements.md#what-the-browser-compiles-at-each-visit.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List

from e2e import harness, measured

# Chromium's trace categories: V8's WebAssembly compiles, and the code cache's events (Blink's).
CATEGORIES = "v8.wasm,disabled-by-default-devtools.timeline"
# Each compile's name in the trace -> what the report calls it.
COMPILES = {
    "wasm.TopTierCompilation": "optimized (TurboFan)",
    "wasm.CompileLazy": "baseline at first call (Liftoff)",
    "wasm.BaselineCompilation": "baseline in the background (Liftoff)",
    "wasm.SyncCompile": "modules compiled synchronously",
}
CACHE_READ, CACHE_WRITTEN, CACHE_COMPILED = "v8.wasm.moduleCacheHit", "v8.wasm.cachedModule", "v8.wasm.compiledModule"


def trace_args(path: Path, seconds: int) -> List[str]:
    """Chromium's flags to trace its first `seconds` into `path` (JSON)."""
    return [
        f"--trace-startup={CATEGORIES}",
        f"--trace-startup-file={path}",
        f"--trace-startup-duration={seconds}",
        "--trace-startup-format=json",
    ]


def summary(events: List[Dict[str, Any]]) -> Dict[str, Any]:
    """A visit's compiles ({name: [count, CPU ms]}) and code cache events from its trace events.
    A module cached is named by the compile that asked for it (Blink traces the URL there, the
    size where it writes)."""
    compiles = {label: [0, 0.0] for label in COMPILES.values()}
    read: Counter = Counter()
    written: List[str] = []
    pending = ""
    for event in sorted(events, key=lambda event: event.get("ts", 0)):
        name, args = event.get("name", ""), event.get("args") or {}
        if name in COMPILES and event.get("ph") == "X":
            compiles[COMPILES[name]][0] += 1
            compiles[COMPILES[name]][1] += event.get("dur", 0) / 1000
        elif name == CACHE_READ:
            read[_file(args.get("url", ""))] += 1
        elif name == CACHE_COMPILED:
            pending = _file(args.get("url", ""))
        elif name == CACHE_WRITTEN:
            written.append(f"{pending or '?'} ({args.get('producedCacheSize', 0) / 1e6:.1f} MB)")
    return {"compiles": compiles, "cache_read": dict(read), "cache_written": written}


def _file(url: str) -> str:
    return url.rsplit("/", 1)[-1]


def visits(site: Path, count: int, stay_s: float, progress: Any = print) -> List[Dict[str, Any]]:
    """`count` visits of the site on one profile (the first on an empty one), each traced."""
    results = []
    with harness.static_server(site) as url, tempfile.TemporaryDirectory() as folder:
        profile = Path(folder) / "profile"
        for n in range(count):
            trace = Path(folder) / f"trace-{n}.json"
            seconds = int(stay_s) + 30  # the tracing outlasts the visit: Chromium writes it at exit
            with harness.chromium_profile(profile, trace_args(trace, seconds)) as context:
                page = harness.Page(context, url)
                ready_ms = page.page.evaluate("window.pocketTTS.load.ready_at_ms")
                run = page.run()
                page.page.wait_for_timeout(stay_s * 1000)
            if not trace.exists():
                raise SystemExit("Chromium wrote no trace (is --trace-startup supported by this build?)")
            data = json.loads(trace.read_text())
            events = data["traceEvents"] if isinstance(data, dict) else data
            results.append(dict(summary(events), ready_ms=ready_ms, ttfa_ms=run["ttfa_ms"]))
            progress(f"  visit {n + 1}/{count}")
    return results


def markdown(model: str, results: List[Dict[str, Any]]) -> str:
    labels = list(COMPILES.values())
    rows = [
        f"| {model}: visit | ready (ms) | first click TTFA (ms) | "
        + " | ".join(f"{label}: count, CPU ms" for label in labels)
        + " | code cache read | code cache written |",
        "|---" * (5 + len(labels)) + "|",
    ]
    for n, result in enumerate(results):
        compiles = " | ".join(f"{result['compiles'][label][0]}, {result['compiles'][label][1]:.0f}" for label in labels)
        read = ", ".join(f"{name} x{times}" for name, times in result["cache_read"].items()) or "none"
        rows.append(
            f"| {'first' if n == 0 else f'returning {n}'} | {result['ready_ms']:.0f} | {result['ttfa_ms']:.0f} | "
            f"{compiles} | {read} | {', '.join(result['cache_written']) or 'none'} |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["english_2m_2026-10"])
    parser.add_argument("--visits", type=int, default=3, help="visits on one profile (default: %(default)s)")
    parser.add_argument("--stay", type=float, default=10, help="seconds each visit stays after its click")
    args = parser.parse_args()
    if args.visits < 1 or args.stay < 0:
        raise SystemExit("--visits must be at least 1 and --stay not negative")
    for model in args.models:
        print(f"{model}: building the site", file=sys.stderr)
        site = harness.site(model)
        results = visits(site, args.visits, args.stay, lambda m: print(m, file=sys.stderr))
        table = markdown(model, results)
        measured.record("measurements.md", f"wasm compiles {model}{measured.share()}", table)
        print(table)


if __name__ == "__main__":
    main()
