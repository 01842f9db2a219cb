"""The web UI in a real browser (Debian's Chromium through Playwright): server mode plays the
stream through the AudioWorklet and records the run."""

from __future__ import annotations

import pytest

from tests.support.checks import downloaded_bytes
from tests.support.processes import tiny_server

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser(chromium):
    return chromium


@pytest.fixture(scope="module")
def ui_server():
    with tiny_server("--max-concurrent", "2") as url:
        yield url


def opened(page, url: str) -> None:
    """`page` at the web UI of `url`, ready."""
    page.goto(url + "/")
    page.wait_for_function("window.pocketTTS && window.pocketTTS.ready", timeout=20_000)


def generate(page, text: str) -> None:
    page.fill("#text", text)
    page.click("#generate")


def test_generate_in_server_mode_plays_audio_and_records_the_run(browser, ui_server) -> None:
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    opened(page, ui_server)
    assert page.input_value("#mode") == "server"
    generate(page, "Hello from the browser.")
    page.wait_for_function("window.pocketTTS.played.length >= 1", timeout=60_000)
    run = page.evaluate("window.pocketTTS.runs[0]")
    played = page.evaluate("window.pocketTTS.played[0]")
    assert run["mode"] == "server"
    assert set(run) == {"mode", "started_at_ms", "ttfc_ms", "ttfa_ms", "total_ms", "audio_ms", "rtf", "words"}
    assert run["words"] == []  # the tiny model times no words
    assert 0 < run["ttfc_ms"] <= run["ttfa_ms"] and run["ttfc_ms"] <= run["total_ms"] and run["started_at_ms"] > 0
    assert run["audio_ms"] > 0 and played["samples"] >= run["audio_ms"] * 24 * 0.99
    assert played["audible"] > 0.5 * played["samples"] and played["stalls"] >= 0
    assert page.is_visible("#download") and page.get_attribute("#download", "href").startswith("blob:")
    assert errors == []


# The output timestamp of a device whose clock lags: every audio-clock time maps to two seconds
# earlier than it leaves the speakers (Chromium's can lag by an output buffer).
LAGGING_OUTPUT_CLOCK = """(() => {
  const stamp = AudioContext.prototype.getOutputTimestamp;
  AudioContext.prototype.getOutputTimestamp = function () {
    const { contextTime, performanceTime } = stamp.call(this);
    return { contextTime, performanceTime: performanceTime - 2000 };
  };
})()"""

SPEAK_AS_A_STREAM = """async () => {
  const stream = window.pocketTTS.textStream();
  stream.append("Hello there. How are you today?");
  stream.end();
  return stream.done;
}"""


def test_audio_is_never_heard_before_it_came(browser, ui_server) -> None:
    """Whatever the output timestamp says: a run's first audio, and a segment's, are heard no
    earlier than the chunk that holds them was received."""
    context = browser.new_context()
    context.add_init_script(LAGGING_OUTPUT_CLOCK)
    page = context.new_page()
    opened(page, ui_server)
    generate(page, "Hello from the browser.")
    page.wait_for_function("window.pocketTTS.runs.length >= 1", timeout=60_000)
    run = page.evaluate("window.pocketTTS.runs[0]")
    assert 0 < run["ttfc_ms"] <= run["ttfa_ms"]
    record = page.evaluate(SPEAK_AS_A_STREAM)
    segments = record["segments"]
    assert len(segments) == 2 and record["first_audio_at"] >= segments[0]["received_at"]
    assert all(s["heard_at"] >= s["received_at"] for s in segments)
    context.close()


# The player's worklet loads only once the test calls window.releaseWorklet() (a first click's
# AudioContext and worklet take a while to start).
HOLD_THE_WORKLET = """(() => {
  const load = AudioWorklet.prototype.addModule;
  let release;
  const held = new Promise((resolve) => (release = resolve));
  window.releaseWorklet = release;
  AudioWorklet.prototype.addModule = function (...args) {
    return held.then(() => load.apply(this, args));
  };
})()"""


def streamed_while_held(browser, url: str, *scripts: str):
    """A page whose player's worklet is held (HOLD_THE_WORKLET, and `scripts`), after Generate's
    whole stream has come: (its context, the page)."""
    context = browser.new_context()
    for script in (HOLD_THE_WORKLET, *scripts):
        context.add_init_script(script)
    page = context.new_page()
    opened(page, url)
    with page.expect_response("**/stream") as response:
        generate(page, "Hello from the browser.")
    assert response.value.finished() is None and response.value.ok
    return context, page


# What the page does first of asking the server and making its AudioContext (window.calls).
RECORD_THE_ORDER = """(() => {
  window.calls = [];
  const NativeContext = window.AudioContext;
  window.AudioContext = class extends NativeContext {
    constructor(...args) {
      window.calls.push("AudioContext");
      super(...args);
    }
  };
  const nativeFetch = window.fetch;
  window.fetch = (input, init) => {
    window.calls.push("fetch " + new URL(String(input), location.href).pathname);
    return nativeFetch(input, init);
  };
})()"""


def test_the_engine_starts_while_the_player_does(browser, ui_server) -> None:
    """Generate asks the engine first (a first click's AudioContext holds the page's thread a while),
    not after the player is up: the whole stream arrives while the worklet is still held, and then
    plays out in full, in order."""
    context, page = streamed_while_held(browser, ui_server, RECORD_THE_ORDER)
    calls = page.evaluate("window.calls")
    assert calls.index("fetch /stream") < calls.index("AudioContext")
    assert page.evaluate("window.pocketTTS.runs.length") == 0 and not page.is_disabled("#stop")
    page.evaluate("window.releaseWorklet()")
    page.wait_for_function("window.pocketTTS.played.length >= 1", timeout=60_000)
    run = page.evaluate("window.pocketTTS.runs[0]")
    played = page.evaluate("window.pocketTTS.played[0]")
    assert 0 < run["ttfc_ms"] <= run["ttfa_ms"] and run["audio_ms"] > 0
    assert played["samples"] == round(run["audio_ms"] * 24) and played["audible"] > 0.5 * played["samples"]
    context.close()


def test_a_click_while_the_player_still_starts_waits_for_it(browser, ui_server) -> None:
    """Generate, Stop and Generate again while the first click's worklet still loads: the second run
    waits for that start (it found the AudioContext made and its worklet node not yet there), then
    plays out in full."""
    context = browser.new_context()
    context.add_init_script(HOLD_THE_WORKLET)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    opened(page, ui_server)
    with page.expect_response("**/stream"):
        generate(page, "Hello from the browser.")
    page.click("#stop")
    with page.expect_response("**/stream"):
        generate(page, "Hello again.")
    page.evaluate("window.releaseWorklet()")
    page.wait_for_function("window.pocketTTS.played.length >= 1", timeout=60_000)
    runs, played = page.evaluate("[window.pocketTTS.runs, window.pocketTTS.played]")
    assert len(runs) == 1 and played[0]["samples"] == round(runs[0]["audio_ms"] * 24) > 0
    assert not page.evaluate("document.getElementById('status').classList.contains('error')") and errors == []
    context.close()


# window.resumed counts the AudioContext resumes that have resolved (the player's start ends with one).
COUNT_THE_RESUMES = """(() => {
  const resume = AudioContext.prototype.resume;
  AudioContext.prototype.resume = function () {
    return resume.call(this).then((result) => {
      window.resumed = (window.resumed || 0) + 1;
      return result;
    });
  };
})()"""


def test_stop_while_the_player_still_starts_leaves_no_run(browser, ui_server) -> None:
    """The whole stream came while the worklet loads, then Stop: once the player is up, nothing is
    recorded as a run, and what arrived is offered as a download (nothing made is lost)."""
    context, page = streamed_while_held(browser, ui_server, COUNT_THE_RESUMES)
    page.click("#stop")
    page.evaluate("window.releaseWorklet()")
    page.wait_for_function("window.resumed >= 1", timeout=20_000)  # the player's start, and what awaited it, done
    assert page.is_visible("#download") and page.inner_text("#status") == "Stopped."
    assert downloaded_bytes(page) > 44
    assert page.evaluate("window.pocketTTS.runs.length") == 0
    context.close()


def test_a_player_that_cannot_start_says_why(browser, ui_server) -> None:
    """Where the audio output cannot start, the page says so, stops the engine's run and can be
    clicked again."""
    context = browser.new_context()
    context.add_init_script("AudioWorklet.prototype.addModule = () => Promise.reject(new Error('no audio output'))")
    page = context.new_page()
    opened(page, ui_server)
    generate(page, "Hello from the browser.")
    page.wait_for_function("document.getElementById('status').classList.contains('error')", timeout=20_000)
    assert page.inner_text("#status") == "no audio output"
    assert not page.is_disabled("#generate") and page.is_disabled("#stop")
    assert page.evaluate("window.pocketTTS.runs.length") == 0
    context.close()


def test_stop_cancels_and_errors_show_in_the_page(browser, ui_server) -> None:
    page = browser.new_page()
    opened(page, ui_server)
    generate(page, "Hello [pause:forever] there")
    page.wait_for_function("document.getElementById('status').classList.contains('error')", timeout=20_000)
    assert "malformed pause" in page.inner_text("#status")
    # The stream is held until Stop has been clicked, so the generation cannot finish first.
    held = []
    page.route("**/stream", lambda route: held.append(route))
    page.fill("#text", "A long text that goes on and on.")
    with page.expect_request("**/stream"):
        page.click("#generate")
    assert not page.is_disabled("#stop")
    page.click("#stop")
    assert page.inner_text("#status") == "Stopped." and not page.is_disabled("#generate")
    for route in held:
        route.abort()
    page.unroute("**/stream")
    assert page.evaluate("window.pocketTTS.runs.length") == 0


PLAY_WITH_A_GAP = """async ([kind, gap]) => {
  const player = new (await import("./player.js"))[kind]();
  await player.start(24000);
  const first = new Promise((resolve) => player.on("first-audio", resolve));
  const drained = new Promise((resolve) => player.on("drained", resolve));
  player.push(new Float32Array(gap ? 1920 : 24000).fill(0.25));
  if (gap) {
    // On the audio clock: the 80 ms chunk has played out and the queue has been dry a while.
    const { time } = await first;
    while (player.context.currentTime < time + 0.3) await new Promise((resolve) => setTimeout(resolve, 10));
    player.push(new Float32Array(1920).fill(0.25));
  }
  player.end();
  return drained;
}"""


@pytest.mark.parametrize("kind", ["WorkletPlayer", "ScheduledPlayer"])
def test_the_player_counts_the_gaps_a_listener_hears(browser, ui_server, kind) -> None:
    """Both players: the worklet, and the chunks scheduled back to back where a page has no
    AudioWorklet (not a secure context)."""
    page = browser.new_page()
    opened(page, ui_server)
    late = page.evaluate(PLAY_WITH_A_GAP, [kind, True])
    assert (late["stalls"], late["rendered"], late["audible"]) == (1, 3840, 3840)
    assert late["starved"] > 0
    on_time = page.evaluate(PLAY_WITH_A_GAP, [kind, False])
    assert (on_time["stalls"], on_time["rendered"], on_time["audible"]) == (0, 24000, 24000)
