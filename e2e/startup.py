"""The page's start-up in the browser, measured in Chromium on a plain static host: a first visit (an
empty browser profile) and a returning visit (the same profile after the browser was closed and
opened again: everything cached, as a visitor coming back the next day), each several times.

    .venv/bin/python -m e2e.startup                        # english and english_2m_2026-10, 5 visits of each kind
    .venv/bin/python -m e2e.startup --models english_2m_2026-10 --visits 3
    .venv/bin/python -m e2e.startup --models english --visits 6 --against OLD_SITE   # back to back

Per visit: page opened -> model ready, -> first audio (ready, then the first click's time to first
audio), the bytes that came over the network, each worker's start-up phase by phase
(browser/worker.js), and how many of the modules compiled ahead of time it ran
(browser/site/compiled.py). Reports medians (min-max) of the visits; writes build/e2e/startup.json
and startup.md, and each model's tables into docs/measurements.md#the-pages-start-up (a run under a CPU quota
beside the full machine's), with the site's bytes by part.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List

from core.browser.site import compiled
from core.browser.site.build import PACKAGES, download_bytes
from e2e import harness, measured

KINDS = ("first", "returning")
# Each worker's start-up, in the order it runs (browser/worker.js). The model's download runs
# alongside from the start (download_ms: until its last byte).
PHASES = [
    ("pyodide_js_ms", "pyodide.js"),
    ("python_init_ms", "Pyodide's start (its files, wasm compile, stdlib)"),
    ("wasm_compile_ms", "of which fetching and compiling pyodide.asm.wasm"),
    ("packages_ms", "NumPy's package"),
    ("wheels_ms", "our packages written (core, num2words)"),
    ("compiled_ms", "compiled modules written"),
    ("numpy_import_ms", "import numpy"),
    ("core_import_ms", "import core"),
    ("kernels_ms", "kernels linked"),
    ("download_wait_ms", "waiting for the model's download"),
    ("model_copy_ms", "the weights copied into Python's memory"),
    ("load_ms", "model load"),
    ("download_ms", "model download, alongside (until its last byte)"),
]


def visit(profile: Path, url: str) -> Dict[str, Any]:
    """One visit: the browser opened on `profile`, the page until its model is ready, one run."""
    with harness.chromium_profile(profile) as context:
        page = harness.Page(context, url)
        ready_ms = page.page.evaluate("window.pocketTTS.load.ready_at_ms")
        run = page.run()  # at once: the decoder worker may still be starting
        load = page.all_workers()
        # Sites built before the engine moved under browser/ (measure_against an older commit's) too.
        engine = "import('./browser/browser-engine.js').catch(() => import('./browser-engine.js'))"
        modules = page.page.evaluate(engine + ".then((e) => e.compiledModules())")
        return {
            "ready_ms": ready_ms,
            "first_audio_ms": ready_ms + run["ttfa_ms"],
            "all_ready_ms": load["all_ready_at_ms"],
            "decoder_started_ms": load["decoder_started_at_ms"],
            "run_ms": [run["started_at_ms"], run["started_at_ms"] + run["total_ms"]],
            "ttfa_ms": run["ttfa_ms"],
            "bytes": page.downloaded,
            "phases": load["phases"],
            "compiled": dict(zip(load["phases"], modules)),
            "errors": page.errors,
        }


def site_parts(site: Path) -> Dict[str, int]:
    """What a first visit's service worker downloads of the site, by part: Pyodide's runtime and
    packages, the model's files, our packages (browser/site/build.PACKAGES), the modules compiled ahead of time
    (browser/site/compiled.py), the rest; each file as its gzip twin where it has one (browser/site/build.py)."""
    parts: Dict[str, int] = {}
    for name, size in download_bytes(site).items():
        relative = Path(name).parts
        part = {"pyodide": "Pyodide", "model": "model"}.get(relative[0])
        if part is None:
            part = {PACKAGES: "our packages", compiled.NAME: "compiled modules"}.get(name, "page, kernels and the rest")
        parts[part] = parts.get(part, 0) + size
    return parts


def measure(model: str, visits: int, progress: Any = print) -> Dict[str, Any]:
    site = harness.site(model)
    result: Dict[str, Any] = {"model": model, "site": site_parts(site), "first": [], "returning": []}
    with harness.static_server(site) as url, tempfile.TemporaryDirectory() as tmp:
        for i in range(visits):
            profile = Path(tmp) / f"profile-{i}"
            for kind in KINDS:
                result[kind].append(visit(profile, url))
                progress(f"  {model}: {kind} visit {i + 1}/{visits}")
    return result


def measure_against(model: str, against: Path, visits: int, progress: Any = print) -> Dict[str, Dict[str, Any]]:
    """This build of `model`'s site and another (`against`: a site built from another commit, say)
    back to back: `visits` rounds, each a first and a returning visit of each site on a profile of
    its own, the site that goes first alternating from round to round, so that a slower minute of
    the machine weighs on both alike (the same site moves by a few hundred ms from one run to the
    next: only runs made side by side tell changes of ~100 ms apart) -> {"against", "this"}."""
    sites = {"this": harness.site(model), "against": against}
    results = {
        name: {"model": model, "site": site_parts(site), "first": [], "returning": []} for name, site in sites.items()
    }
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(visits):
            for name in sorted(sites, reverse=i % 2 == 1):
                with harness.static_server(sites[name]) as url:
                    profile = Path(tmp) / f"{name}-{i}"
                    for kind in KINDS:
                        results[name][kind].append(visit(profile, url))
                        progress(f"  {model} ({name}): {kind} visit {i + 1}/{visits}")
    return results


def comparison(results: Dict[str, Dict[str, Any]]) -> str:
    """The medians of measure_against's two sites side by side: to first audio, then the first
    worker's phases (n/a where a site's worker does not time that phase)."""
    against, this = results["against"], results["this"]
    rows = [("ready_ms", "page opened -> model ready"), ("first_audio_ms", "-> first audio")] + PHASES
    lines = [f"| {this['model']}, medians (ms) | visit | against | this | change |", "|---|---|---|---|---|"]
    for kind in KINDS:
        for key, label in rows:
            medians = []
            for result in (against, this):
                values = [v[key] if key in v else v["phases"]["both"].get(key) for v in result[kind]]
                values = [value for value in values if value is not None]
                medians.append(statistics.median(values) if values else None)
            if medians == [None, None]:
                continue
            cells = ["n/a" if median is None else f"{median:.0f}" for median in medians]
            change = "" if None in medians else f"{medians[1] - medians[0]:+.0f}"
            lines.append(f"| {label} | {kind} ({len(this[kind])}) | {cells[0]} | {cells[1]} | {change} |")
    return "\n".join(lines)


def spread(values: List[float], unit: str = "", scale: float = 1.0, digits: int = 0) -> str:
    cells = [f"{value / scale:.{digits}f}" for value in (statistics.median(values), min(values), max(values))]
    return f"{cells[0]}{unit} ({cells[1]}-{cells[2]})"


def markdown(results: List[Dict[str, Any]]) -> str:
    lines = [
        "| model | visit | page opened -> model ready (ms) | -> first audio (ms) | -> every worker up (ms) "
        "| downloaded |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        for kind in KINDS:
            visits = r[kind]
            lines.append(
                f"| {r['model']} | {kind} ({len(visits)}) | {spread([v['ready_ms'] for v in visits])} "
                f"| {spread([v['first_audio_ms'] for v in visits])} "
                f"| {spread([v['all_ready_ms'] for v in visits])} "
                f"| {spread([v['bytes'] for v in visits], ' MB', 1e6, 1)} |"
            )
    for r in results:
        workers = list(r["first"][0]["phases"])
        columns = [(kind, worker) for kind in KINDS for worker in workers]
        heads = " | ".join(f"{kind}: {worker}" for kind, worker in columns)
        lines += ["", f"| {r['model']}: phase, median (ms) | {heads} |", "|---|" + "---|" * len(columns)]
        for key, label in PHASES:
            cells = []
            for kind, worker in columns:
                values = [v["phases"][worker][key] for v in r[kind] if key in v["phases"][worker]]
                cells.append(f"{statistics.median(values):.0f}" if values else "n/a")
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        counts = [r[kind][-1]["compiled"][worker] for kind, worker in columns]
        lines.append(
            "| modules run from a shipped .pyc / .pyc written by the worker / compiled from source (stale .pyc) | "
            + " | ".join(f"{c['used']} / {c['shipped']} / {c['source'] + c['stale']} ({c['stale']})" for c in counts)
            + " |"
        )
        head = f"| {r['model']}: the site's files, as downloaded (gzip twins where they pay) | MB |"
        lines += ["", head, "|---|---|"]
        for name, size in sorted(r["site"].items(), key=lambda part: -part[1]):
            lines.append(f"| {name} | {size / 1e6:.1f} |")
        lines.append(f"| total | {sum(r['site'].values()) / 1e6:.1f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["english", "english_2m_2026-10"])
    parser.add_argument("--visits", type=int, default=5, help="visits of each kind (default: %(default)s)")
    parser.add_argument(
        "--against",
        type=Path,
        help="another build of the model's site (of another commit, say): both measured back to back, "
        "the table printed (one model)",
    )
    args = parser.parse_args()
    if args.against is not None:
        if len(args.models) != 1 or not (args.against / "site.json").exists():
            raise SystemExit("--against takes one model (--models NAME) and a built site folder")
        print(f"{args.models[0]}: building the site", file=sys.stderr)
        results = measure_against(args.models[0], args.against, args.visits, lambda m: print(m, file=sys.stderr))
        print(comparison(results))
        return
    table = ""
    for model in args.models:
        print(f"{model}: building the site", file=sys.stderr)
        result = measure(model, args.visits, lambda m: print(m, file=sys.stderr))
        errors = [error for kind in KINDS for v in result[kind] for error in v["errors"]]
        if errors:
            raise SystemExit(f"{model}: the page reported errors: {errors}")
        table = harness.save("startup", result, markdown)
        measured.record("measurements.md", f"startup {model}{measured.share()}", markdown([result]))
    print(table)


if __name__ == "__main__":
    main()
