"""The page's text stream in a real browser (Debian's Chromium through Playwright), in both modes:
server mode over the WebSocket /v1/audio/speech/stream (the tiny model), browser mode in the
workers (the small full-size fixture's site). Text arrives in word pieces at an LLM's pace (30 a
second, from the page's own clock); what is checked is what was spoken, never how fast."""

from __future__ import annotations

import numpy as np
import pytest

from core.portable.text.normalize import normalize_text
from e2e import harness
from tests.support.needs import require_browser
from tests.support.paths import SMALL
from tests.support.processes import tiny_server

pytestmark = pytest.mark.browser

TEXT = "Hello there. I paid $5 for this. How are you today? Fine."
SEGMENTS = ["Hello there.", "I paid $5 for this.", "How are you today?", "Fine."]
PIECES = [word + " " for word in TEXT.split()]

# Appends the pieces at `rate` a second, ends the stream; resolves with its record. The audio is kept
# (as plain numbers) when `keep` is set.
FEED = """async ({pieces, rate, options, play, keep}) => {
  const audio = [];
  const stream = window.pocketTTS.textStream({
    options, play, onChunk: keep ? (chunk) => audio.push(...chunk) : undefined,
  });
  for (const piece of pieces) {
    stream.append(piece);
    await new Promise((resolve) => setTimeout(resolve, 1000 / rate));
  }
  stream.end();
  const record = await stream.done;
  return keep ? { ...record, audio } : record;
}"""


@pytest.fixture(scope="module", params=["server", "browser"])
def page(request, chromium):
    """The page in one mode, ready, with a click behind it (the AudioContext may then start)."""
    if request.param == "server":
        with tiny_server("--max-concurrent", "2") as url:
            yield _ready(chromium, url, "server")
    else:
        require_browser(request, SMALL)
        with harness.static_server(harness.site(SMALL)) as url:
            yield _ready(chromium, url, "browser")


def _ready(chromium, url: str, mode: str) -> harness.Page:
    page = harness.Page(chromium.new_context(), url)
    page.use(mode)
    page.page.click("h1")  # a user gesture: the player's AudioContext may start without Generate
    return page


def feed(page: harness.Page, options: dict, play: bool = True, keep: bool = False, pieces=PIECES) -> dict:
    request = {"pieces": pieces, "rate": 30, "options": options, "play": play, "keep": keep}
    return page.page.evaluate(FEED, request)


def test_text_in_pieces_is_spoken_segment_by_segment_and_shown_as_it_sounds(page) -> None:
    request = {"pieces": PIECES, "rate": 30, "options": {}, "play": True, "keep": False}
    page.page.evaluate(f"(request) => {{ window.fed = ({FEED})(request); }}", request)  # not awaited here
    page.page.wait_for_selector("#segments li.sounding", timeout=120_000)  # highlighted while it plays
    record = page.page.evaluate("window.fed")
    segments = record["segments"]
    assert [s["text"] for s in segments] == SEGMENTS
    starts = [s["start_sample"] for s in segments]
    assert starts[0] == 0 and starts == sorted(set(starts)) and record["samples"] > starts[-1]
    assert [piece["text"] for piece in record["appends"]] == PIECES
    # Each segment was heard (the worklet's clock) and highlighted, in order.
    heard = [s["heard_at"] for s in segments]
    assert None not in heard and heard == sorted(heard)
    assert all(s["shown_at"] is not None for s in segments)
    assert record["first_audio_at"] >= record["opened_at"]
    played = record["played"]
    assert played["samples"] == record["samples"] and played["audible"] > 0.5 * played["samples"]
    items = page.page.eval_on_selector_all("#segments li", "(items) => items.map((li) => li.firstChild.textContent)")
    assert items == SEGMENTS
    assert page.page.eval_on_selector_all("#segments li.said", "(items) => items.length") == len(SEGMENTS)
    assert int(page.page.get_attribute("#wave", "data-samples")) == record["samples"]  # drawn as it came
    assert page.page.evaluate("window.pocketTTS.streams.length") >= 1 and page.errors == []


def test_speed_two_gives_half_the_audio_of_speed_one(page) -> None:
    """The same seed makes the same frames; the page's speed control stretches their audio."""
    page.page.fill("#speed", "1")
    normal = feed(page, {"seed": 7}, play=False)
    page.page.fill("#speed", "2")
    fast = feed(page, {"seed": 7}, play=False)
    page.page.fill("#speed", "1")
    assert [s["text"] for s in fast["segments"]] == SEGMENTS
    assert fast["samples"] == pytest.approx(normal["samples"] / 2, rel=0.02)
    # A whole text (Generate's request) at speed 2 too.
    mode = page.page.input_value("#mode")
    whole = [len(page.collect(mode, TEXT, {"seed": 7, "speed": speed})) for speed in (1.0, 2.0)]
    assert whole[1] == pytest.approx(whole[0] / 2, rel=0.02)


# Starts a stream, says its first sentence, cancels it once its audio has begun; then a stream
# with an option out of range. Resolves with what each `done` rejected with.
CANCEL_AND_FAIL = """async () => {
  const outcome = (promise) => promise.then(() => "resolved", (error) => `${error.name}: ${error.message}`);
  let started;
  const audio = new Promise((resolve) => { started = resolve; });
  const stream = window.pocketTTS.textStream({ play: false, onChunk: () => started() });
  stream.append("This sentence will be cut short by a cancel. And this one is never said. ");
  await audio;
  stream.cancel();
  const cancelled = await outcome(stream.done);
  const bad = window.pocketTTS.textStream({ play: false, options: { speed: 5 } });
  bad.append("Too fast. ");
  bad.end();
  return { cancelled, failed: await outcome(bad.done) };
}"""


def test_cancel_stops_a_stream_and_errors_reach_the_page(page) -> None:
    outcome = page.page.evaluate(CANCEL_AND_FAIL)
    assert outcome["cancelled"].startswith("AbortError")
    assert outcome["failed"].startswith("Error: ") and "speed" in outcome["failed"]  # the engine's own message
    assert feed(page, {}, play=False)["segments"][0]["text"] == SEGMENTS[0]  # the engine takes text again


def test_normalization_reads_numbers_as_words(page) -> None:
    """ "$5" is read as words: the same audio as the words written out with normalization off."""
    text = "I paid $5."
    spoken = normalize_text(text, "english")
    assert "five dollars" in spoken
    options = {"temperature": 0.0, "max_frames": 12}
    normalized = feed(page, {**options, "normalize": True}, play=False, keep=True, pieces=[text])
    written = feed(page, {**options, "normalize": False}, play=False, keep=True, pieces=[spoken])
    plain = feed(page, {**options, "normalize": False}, play=False, keep=True, pieces=[text])
    assert len(normalized["audio"]) > 0
    assert np.array_equal(normalized["audio"], written["audio"])
    assert not np.array_equal(normalized["audio"], plain["audio"])
    # The engine says what it reads, in each segment's event; the worker also when asked.
    assert normalized["segments"][0]["spoken"] == spoken
    if page.page.input_value("#mode") == "browser":
        assert page.page.evaluate("window.pocketTTS.normalize('$5')") == "five dollars"


def test_speak_as_i_type(page) -> None:
    """Each sentence is spoken once it is typed; Finish says the rest and ends the stream."""
    before = page.page.evaluate("window.pocketTTS.streams.length")
    page.page.check("#live")
    page.page.fill("#text", "")
    page.page.type("#text", "Good morning. How are", delay=20)
    page.page.wait_for_function(
        "document.querySelectorAll('#segments li').length >= 1", timeout=120_000
    )  # the first sentence, spoken while the second is being typed
    page.page.type("#text", " you", delay=20)
    page.page.click("#finish")
    page.page.wait_for_function(f"window.pocketTTS.streams.length > {before}", timeout=120_000)
    record = page.page.evaluate(f"window.pocketTTS.streams[{before}]")
    texts = [s["text"] for s in record["segments"]]
    # A slow machine may pause long enough in the typing for "How are" to be said on its own.
    assert texts[0] == "Good morning." and " ".join(texts) == "Good morning. How are you"
    assert record["played"]["audible"] > 0 and not page.page.is_checked("#live")
    assert page.errors == []
