"""Word timestamps in the page (Debian's Chromium through Playwright), both modes, on a site of the
small fixture with timestamp heads (its config_words.yaml): the words are lit as they are heard
(a screenshot taken mid-sentence shows one lit, some said, some not yet), the automation API
reports them, and both engines give the words CPython gives for the same request on the same
int8 bundle."""

from __future__ import annotations

from pathlib import Path

import pytest

from core import TTSModel
from e2e import harness
from tests.support.needs import require_browser
from tests.support.paths import ROOT, SMALL

pytestmark = pytest.mark.browser

TEXT = "Hello there, my good friend. This is a test of the words, and it goes on for a while."
# The same words everywhere: no noise, EOS off, the text as written, long enough to be mid-sentence.
EXACT = {"temperature": 0.0, "eos_threshold": 100.0, "normalize": False, "max_frames": 60}
SHOTS = ROOT / "build" / "screenshots"
# The keys of the two word events every wire sends.
WORD_STARTS = ("index", "start_sample", "type", "word")
WORD_ENDS = ("end_sample", "index", "start_sample", "type", "word")


@pytest.fixture(scope="module")
def words_site(request):
    require_browser(request, SMALL)
    if not (harness.REFERENCE / SMALL / "config_words.yaml").exists():
        pytest.fail("needs build/reference/english_2m_2026-10/config_words.yaml (scripts/make_word_reference.py)")
    return harness.site(SMALL, "config_words.yaml")


@pytest.fixture(scope="module")
def one_page(words_site, chromium):
    """One page with both engines on the site's bundle (the server serves the site)."""
    with harness.model_server(SMALL, words_site) as url:
        context = chromium.new_context()
        yield harness.Page(context, url)
        context.close()


LIT_MID_SENTENCE = """() => {
  const spans = [...document.querySelectorAll('#words span')];
  const sounding = spans.filter((s) => s.classList.contains('sounding'));
  const said = spans.filter((s) => s.classList.contains('said'));
  return sounding.length === 1 && said.length >= 1 && said.length + 1 < spans.length;
}"""

# Said as a text stream that plays (the page's words, as Generate shows them), with EXACT options:
# seconds of audio, whatever the random weights' EOS would do.
SPEAK = """([text, options]) => {
  const stream = window.pocketTTS.textStream({ options });
  stream.append(text);
  stream.end();
  window.spoken = stream.done;
}"""


@pytest.mark.parametrize("mode", ["server", "browser"])
def test_the_words_are_lit_as_they_are_heard(one_page, mode) -> None:
    page = one_page
    page.use(mode)
    page.page.click("#text")  # a user gesture: the page may play audio
    page.page.evaluate(SPEAK, [TEXT, EXACT])
    page.page.wait_for_function(LIT_MID_SENTENCE, timeout=600_000)
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / f"words-{mode}.png"
    page.page.locator("main").screenshot(path=str(shot))
    lit = page.page.evaluate(
        "(() => { const s = document.querySelector('#words span.sounding');"
        " return {word: s.textContent, background: getComputedStyle(s).backgroundColor}; })()"
    )
    assert lit["background"] == "rgb(255, 233, 168)" and shot.stat().st_size > 0
    record = page.page.evaluate("window.spoken")
    words = record["words"]
    assert len(words) >= 3 and [w["index"] for w in words] == sorted(w["index"] for w in words)
    assert all(w["start_sample"] < w["end_sample"] for w in words)
    heard = [w["heard_at"] for w in words]
    assert all(h is not None for h in heard) and heard == sorted(heard)
    assert page.page.evaluate("document.querySelectorAll('#words span.said').length") == len(words)
    assert page.errors == []


def test_both_engines_give_the_words_cpython_gives(one_page, words_site) -> None:
    page = one_page
    model = TTSModel.load(str(Path(words_site) / "model"))
    voice = model.voice_state(model.default_voice)
    expected = [
        (e.word, e.index, e.start, e.end)
        for e in model.stream(TEXT, voice, words=True, **EXACT)
        if type(e).__name__ == "WordEnd"
    ]
    assert len(expected) >= 3
    for mode in ("browser", "server"):
        page.use(mode)
        got = page.collect_words(mode, TEXT, EXACT)
        # The one shape of every wire (docs/word-timestamps.md), in samples at the output rate.
        assert {tuple(sorted(e)) for e in got["words"]} == {WORD_STARTS, WORD_ENDS}, mode
        ends = [
            (e["word"], e["index"], e["start_sample"], e["end_sample"]) for e in got["words"] if e["type"] == "word_end"
        ]
        assert ends == expected, mode
        starts = [(e["word"], e["index"], e["start_sample"]) for e in got["words"] if e["type"] == "word"]
        assert starts == [(w, i, s) for w, i, s, _ in expected]


def test_the_words_control_turns_them_off(one_page) -> None:
    """On a model with heads the control is on, with nothing to explain; unticked, a run asks for
    no words and shows none."""
    page = one_page.page
    one_page.use("server")
    assert page.is_enabled("#show-words") and page.is_checked("#show-words") and page.is_hidden("#words-why")
    page.uncheck("#show-words")
    try:
        page.click("#text")
        page.evaluate(SPEAK, ["Hello there.", dict(EXACT, max_frames=12)])
        assert page.evaluate("window.spoken")["words"] == []
        assert page.evaluate("document.querySelectorAll('#words span').length") == 0
    finally:
        page.check("#show-words")
