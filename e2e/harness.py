"""What the browser runs need: built sites, a model server and a static file server on free ports,
Debian's Chromium driven by Playwright, and the page's hooks (window.pocketTTS)."""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import httpx

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "build" / "reference"
SITES = ROOT / "build" / "e2e"
PYTHON38 = ROOT / ".venv-py38" / "bin" / "python"  # scripts/test.sh makes it: the sites' modules compiled ahead
CHROMIUM = shutil.which("chromium")
# Without the networking flags Chromium floods this machine's closed network with connections.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SHORT_TEXT = "Hello there, this is a short test."
VOICE_RECORDING = ROOT / "tests" / "fixtures" / "voice" / "voice_22050.wav"  # 5.1 s at 22.05 kHz


def fixture(model: str) -> Path:
    directory = REFERENCE / model
    if not (directory / "model.safetensors").exists():
        raise FileNotFoundError(f"{directory} is missing: scripts/test.sh makes it")
    return directory


def site(model: str, config: str = "config.yaml") -> Path:
    """The static site of a fixture model (int8 bundle with its voice; `config`: the fixture's
    config, or another of its folder: config_words.yaml has timestamp heads), built again when the
    code that goes into it has changed."""
    out = SITES / (f"site-{model}" if config == "config.yaml" else f"site-{model}-{Path(config).stem}")
    voice = fixture(model) / "voice_state.safetensors"
    return _built(out, fixture(model) / config, [voice], [fixture(model) / "model.safetensors"])


def voiceless_site() -> Path:
    """The static site of the tiny test model with no voice at all (it can clone one): what a site
    built without --voice is."""
    config = ROOT / "tests" / "fixtures" / "models" / "tiny_lsd" / "config.yaml"
    return _built(SITES / "site-tiny-voiceless", config, [], [config.parent / "model.safetensors"])


def _built(out: Path, config: Path, voices: List[Path], inputs: List[Path]) -> Path:
    sources = [ROOT / "pyproject.toml", config, *inputs, *voices]
    for folder in ("core", "browser", "web"):
        sources += sorted(p for p in (ROOT / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    digest = hashlib.sha256()
    for path in sources:
        digest.update(str(path.relative_to(ROOT)).encode() + path.read_bytes())
    stamp = out / ".sources"
    if not (out / "site.json").exists() or not stamp.exists() or stamp.read_text() != digest.hexdigest():
        from core.browser.site.build import build

        shutil.rmtree(out, ignore_errors=True)
        build(str(config), out, [str(voice) for voice in voices], int8=True, python38=PYTHON38)
        stamp.write_text(digest.hexdigest())
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(url: str, process: subprocess.Popen, log: Any, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.2)
        if process.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"{process.args} exited: {log.read()}")
    raise RuntimeError(f"{url} did not answer")


@contextmanager
def server(args: Sequence[str], cwd: Path = ROOT, env: Optional[Dict[str, str]] = None) -> Iterator[str]:
    """`python -m server` with these arguments (and a free port) until the block ends, from `cwd` and
    with `env` (default: this process's); yields its URL once /health answers."""
    port = free_port()
    command = [sys.executable, "-m", "server", "--port", str(port), *args]
    with _serving(command, port, "/health", cwd, env) as url:
        yield url


@contextmanager
def ray_cluster(cpus: int = 2) -> Iterator[str]:
    """A real local Ray cluster (`ray start --head`, `cpus` CPUs: that many worker processes at once)
    until the block ends; yields its address. Its end stops every Ray process of this machine."""
    ray = str(Path(sys.executable).parent / "ray")
    port = free_port()
    command = [ray, "start", "--head", f"--num-cpus={cpus}", f"--port={port}", "--include-dashboard=false"]
    subprocess.run(command + ["--disable-usage-stats"], check=True, capture_output=True)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([ray, "stop", "--force"], capture_output=True)


@contextmanager
def cluster_server(address: str, args: Sequence[str]) -> Iterator[str]:
    """`python -m server.cluster` (the app on Ray Serve) on the Ray cluster at `address`, its proxy on
    a free port, until the block ends; yields its URL once a replica answers /health."""
    port = free_port()
    command = [sys.executable, "-m", "server.cluster", "--address", address, "--port", str(port), *args]
    with _serving(command, port, "/health") as url:
        yield url


def active_generations(url: str) -> int:
    return httpx.get(url + "/health").json()["active_generations"]


@contextmanager
def model_server(
    model: str,
    site_dir: Optional[Path] = None,
    max_concurrent: int = 2,
    bundle: Optional[Path] = None,
    extra: Sequence[str] = (),
) -> Iterator[str]:
    """`python -m server` on a fixture model: its float weights, or an int8 `bundle` of them, or,
    with a built site, that site's own bundle, serving the site too (one page with both engines on
    the same weights); `extra`: more of its options; yields its URL."""
    args = ["--max-concurrent", str(max_concurrent), *extra]
    if site_dir is not None:
        args += ["--model", str(site_dir / "model"), "--site", str(site_dir)]
    elif bundle is not None:
        args += ["--model", str(bundle)]
    else:
        directory = fixture(model)
        args += ["--model", str(directory / "config.yaml"), "--voice", str(directory / "voice_state.safetensors")]
    with server(args) as url:
        yield url


@contextmanager
def static_server(directory: Path) -> Iterator[str]:
    """The site from a plain static file server (e2e/static_server.py)."""
    port = free_port()
    command = [sys.executable, "-m", "e2e.static_server", "--directory", str(directory), "--port", str(port)]
    with _serving(command, port, "/site.json") as url:
        yield url


@contextmanager
def _serving(
    command: List[str], port: int, probe: str, cwd: Path = ROOT, env: Optional[Dict[str, str]] = None
) -> Iterator[str]:
    """Run a server process until the block ends; yields its URL once `probe` answers. Its output
    goes to a file (a pipe nobody reads would fill up and stall it), shown if it fails to start."""
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
        try:
            _wait(f"http://127.0.0.1:{port}{probe}", process, log)
            yield f"http://127.0.0.1:{port}"
        finally:
            process.terminate()
            process.wait(timeout=30)


@contextmanager
def _playwright() -> Iterator[Any]:
    if CHROMIUM is None:
        raise FileNotFoundError("chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        yield playwright


@contextmanager
def chromium() -> Iterator[Any]:
    with _playwright() as playwright:
        browser = launch(playwright.chromium)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def chromium_profile(profile: Path, args: Sequence[str] = ()) -> Iterator[Any]:
    """A browser context on a profile kept in `profile` (its HTTP cache, Cache API, service workers
    and compiled code): closed and opened again, it is a visitor coming back. `args` go to Chromium
    after the harness's own."""
    with _playwright() as playwright:
        context = launch_profile(playwright.chromium, profile, args)
        try:
            yield context
        finally:
            context.close()


def launch(browser_type: Any, args: Sequence[str] = ()) -> Any:
    """Chromium from Playwright's `browser_type` (a test's browser.browser_type, where Playwright
    already runs), with `args` after the harness's own; the caller closes it."""
    return browser_type.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS + list(args))


def launch_profile(browser_type: Any, profile: Path, args: Sequence[str] = ()) -> Any:
    """A context on the profile in `profile` (see chromium_profile); the caller closes it."""
    return browser_type.launch_persistent_context(
        str(profile), executable_path=CHROMIUM, args=CHROMIUM_ARGS + list(args)
    )


# Lets a test hold the workers' "done" messages (window.pocketTTSHold.done = true), so that a generation
# cannot finish before the test clicks Stop, however fast it runs; release() delivers them.
def save(name: str, result: Dict[str, Any], markdown: Callable[[List[Dict[str, Any]]], str]) -> str:
    """Add one model's result to build/e2e/NAME.json (replacing that model's earlier one) and rewrite
    NAME.md, the table `markdown` makes of them all; returns the table."""
    SITES.mkdir(parents=True, exist_ok=True)
    path = SITES / f"{name}.json"
    results = [r for r in (json.loads(path.read_text()) if path.exists() else []) if r["model"] != result["model"]]
    results.append(result)
    results.sort(key=lambda r: r["model"])
    path.write_text(json.dumps(results, indent=1))
    table = markdown(results)
    (SITES / f"{name}.md").write_text(table + "\n")
    return table


HOLD_DONE = """
window.pocketTTSHold = {
  done: false,
  held: [],
  release() { this.done = false; this.held.splice(0).forEach((deliver) => deliver()); },
};
const NativeWorker = window.Worker;
window.Worker = class extends NativeWorker {
  set onmessage(handler) {
    super.onmessage = (event) => {
      const hold = window.pocketTTSHold;
      if (hold.done && event.data && event.data.type === "done") hold.held.push(() => handler(event));
      else handler(event);
    };
  }
};
"""


class Page:
    """A page of the UI, with the byte count of what it downloads."""

    def __init__(self, context: Any, url: str, query: str = ""):
        self.page = context.new_page()
        self.page.add_init_script(HOLD_DONE)
        self.errors: List[str] = []
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.responses: List[Any] = []
        context.on("requestfinished", lambda request: self.responses.append(request))
        self.page.goto(url + "/" + query)  # query: e.g. "?kernels=simd"
        self.wait("window.pocketTTS && window.pocketTTS.ready", 120_000)

    def wait(self, condition: str, timeout_ms: float) -> None:
        """Wait until `condition` holds in the page, or fail at once where the page or the engine it
        switched to could not start (a worker that failed to boot, say), not at the timeout."""
        failed = "(window.pocketTTS && window.pocketTTS.failed)"
        self.page.wait_for_function(f"({condition}) || {failed}", timeout=timeout_ms)
        reason = self.page.evaluate(f"!({condition}) && {failed}")
        if reason:
            raise RuntimeError(f"the page could not start: {reason}")

    def fetched(self) -> List[Any]:
        """The requests of the site whose bytes came over the network: not from the HTTP cache, the
        Cache API or the service worker (whose own downloads count, once). The page's probe for a
        model server (/health, a 404 on a static host) is not part of the site."""
        return [
            request
            for request in self.responses
            if request.sizes()["responseBodySize"] > 0
            and not (request.response() and request.response().from_service_worker)
            and not request.url.endswith("/health")
        ]

    @property
    def downloaded(self) -> int:
        """Bytes of the site that came over the network (see fetched)."""
        return sum(request.sizes()["responseBodySize"] for request in self.fetched())

    def use(self, mode: str) -> Dict[str, Any]:
        """Switch the engine; for the browser, wait for the model in every worker (the decoder worker
        joins after the first: see all_workers) and return its load timings."""
        if self.page.input_value("#mode") != mode:
            self.page.select_option("#mode", mode)
        if mode == "browser":
            self.all_workers()
        self.page.wait_for_function("!document.getElementById('generate').disabled", timeout=600_000)
        return self.page.evaluate("window.pocketTTS.load")

    def all_workers(self) -> Dict[str, Any]:
        """Wait until every in-browser worker is up (the page is ready with the first) -> the load record."""
        self.wait("window.pocketTTS.load !== null && window.pocketTTS.load.all_ready_at_ms !== null", 600_000)
        return self.page.evaluate("window.pocketTTS.load")

    def run(self, text: str = SHORT_TEXT) -> Dict[str, Any]:
        """Click Generate, wait until the run is recorded and its audio played out."""
        done = self.page.evaluate("window.pocketTTS.runs.length")
        self.page.fill("#text", text)
        self.page.click("#generate")
        self.page.wait_for_function(
            f"window.pocketTTS.runs.length > {done} && window.pocketTTS.played.length > {done}", timeout=600_000
        )
        run = self.page.evaluate(f"window.pocketTTS.runs[{done}]")
        run["played"] = self.page.evaluate(f"window.pocketTTS.played[{done}]")
        return run

    def clone_voice(self, recording: Path) -> Dict[str, Any]:
        """Upload a recording as the voice: {mode, ms, part_ms}, ms until the page had it ready (its
        own clock), of which part_ms fetching and loading the voice-cloning part (a first upload in
        the browser; 0 otherwise)."""
        done = self.page.evaluate("window.pocketTTS.uploads.length")
        self.page.set_input_files("#voice-file", str(recording))
        self.page.wait_for_function(f"window.pocketTTS.uploads.length > {done}", timeout=600_000)
        return self.page.evaluate(f"window.pocketTTS.uploads[{done}]")

    def collect(self, mode: str, text: str, options: Dict[str, Any]) -> List[float]:
        """The audio of one generation (not played), through the page's engine."""
        request = json.dumps({"mode": mode, "text": text, "voice": "", "options": options})
        return self.page.evaluate(f"window.pocketTTS.collect({request})")

    def collect_words(self, mode: str, text: str, options: Dict[str, Any]) -> Dict[str, Any]:
        """The word events of one generation (not played) and its samples, through the page's engine."""
        request = json.dumps({"mode": mode, "text": text, "voice": "", "options": options})
        return self.page.evaluate(f"window.pocketTTS.collectWords({request})")
