"""The page when things go wrong, in a real Chromium: a server killed mid-stream, a stream that
stalls, a worker that fails, a site built without a voice; and a clean load logs no error."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from typing import Iterator, List, Tuple

import httpx
import pytest

from e2e import harness

from conftest import ROOT, TINY_CONFIG, VOICE_24K, tiny_server
from serving import GUARD, until

pytestmark = pytest.mark.browser

# About a minute of speech (a second or so per sentence on the tiny model): a stream still under
# way when the test strikes.
LONG_TEXT = "This sentence is one of many. " * 120


@pytest.fixture(scope="module")
def browser(chromium):
    return chromium


@contextmanager
def server_process() -> Iterator[Tuple[str, subprocess.Popen]]:
    """`python -m server` on the tiny model, and its process (to stop or kill)."""
    port = harness.free_port()
    command = [sys.executable, "-m", "server", "--model", str(TINY_CONFIG), "--voice", str(VOICE_24K)]
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(command + ["--port", str(port)], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            until(lambda: _answers(url + "/health"), "the server answers")
            yield url, process
        finally:
            if process.poll() is None:
                os.kill(process.pid, signal.SIGCONT)
                process.terminate()
            process.wait(timeout=30)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def opened(page, url: str) -> List[str]:
    """`page` at `url`, ready; the console's errors and the page's uncaught errors, as they come."""
    errors: List[str] = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url + "/")
    page.wait_for_function("window.pocketTTS && window.pocketTTS.ready", timeout=120_000)
    return errors


def under_way(page) -> None:
    """Generate the long text, until its first audio has arrived."""
    page.fill("#text", LONG_TEXT)
    page.click("#generate")
    page.wait_for_function("window.pocketTTS.current && window.pocketTTS.current.samples > 0", timeout=60_000)


def failed_cleanly(page, blank_wave: str) -> str:
    """The error the page shows, once it shows one; what the user can do next is enabled again and
    nothing of the failed run is left (its waveform, segments, download)."""
    page.wait_for_function("document.getElementById('status').classList.contains('error')", timeout=GUARD * 1000)
    assert page.is_enabled("#generate") and page.is_disabled("#stop")
    assert page.is_hidden("#download") and page.evaluate("document.getElementById('segments').children.length") == 0
    assert page.evaluate("document.getElementById('wave').toDataURL()") == blank_wave
    assert page.evaluate("window.pocketTTS.current") is None and page.evaluate("window.pocketTTS.runs.length") == 0
    return page.inner_text("#status")


def blank(page) -> str:
    return page.evaluate("document.getElementById('wave').toDataURL()")


def test_a_server_killed_mid_stream_is_an_error_and_the_next_click_says_the_server_is_gone(browser) -> None:
    page = browser.new_page()
    with server_process() as (url, process):
        errors = opened(page, url)
        assert errors == []  # a clean load: no 404, no console error
        wave = blank(page)
        under_way(page)
        os.kill(process.pid, signal.SIGSTOP)  # frozen with its stream under way, then gone
        process.kill()
        process.wait(timeout=30)
        assert "lost mid-stream" in failed_cleanly(page, wave)
        page.click("#generate")
        page.wait_for_function("document.getElementById('status').textContent.includes('not answering')")
        assert page.is_enabled("#generate")
    page.close()


def test_a_stalled_stream_is_an_error_and_the_server_sees_its_client_go(browser) -> None:
    page = browser.new_page()
    with server_process() as (url, process):
        opened(page, url)
        wave = blank(page)
        under_way(page)
        os.kill(process.pid, signal.SIGSTOP)
        assert "stopped sending audio" in failed_cleanly(page, wave)
        os.kill(process.pid, signal.SIGCONT)
        until(lambda: httpx.get(url + "/health").json()["active_generations"] == 0, "the stalled stream's slot is free")
    page.close()


def test_stop_stays_while_the_audio_plays(browser) -> None:
    page = browser.new_page()
    with tiny_server() as url:
        opened(page, url)
        page.fill("#text", "Hello there. This plays for a few seconds. And a little more. " * 2)
        page.click("#generate")
        page.wait_for_function("window.pocketTTS.runs.length === 1", timeout=60_000)
        # Recorded at its first sound; seconds of it still to play (read together, at one moment).
        playing = "[window.pocketTTS.played.length, document.getElementById('stop').disabled]"
        assert page.evaluate(playing) == [0, False]
        page.wait_for_function("window.pocketTTS.played.length === 1", timeout=60_000)
        assert page.is_disabled("#stop")
    page.close()


def test_a_site_without_a_voice_asks_for_one_and_speaks_the_one_uploaded(browser) -> None:
    site = harness.voiceless_site()
    page = browser.new_page()
    with harness.static_server(site) as url:
        errors = opened(page, url)
        assert page.input_value("#mode") == "browser" and page.locator("#mode option").count() == 1
        assert page.inner_text("#voice option") == "none yet: upload a voice"
        assert "upload a recording" in page.inner_text("#status")
        page.click("#generate")
        assert "upload a recording of a voice first" in page.inner_text("#status")
        page.set_input_files("#voice-file", str(VOICE_24K))
        page.wait_for_function("window.pocketTTS.uploads.length === 1", timeout=120_000)
        page.fill("#text", "Now with a voice.")
        page.click("#generate")
        page.wait_for_function("window.pocketTTS.runs.length === 1", timeout=120_000)
        assert page.evaluate("window.pocketTTS.runs[0].audio_ms") > 0
        assert errors == []
    page.close()


def test_a_worker_that_fails_after_it_started_is_an_error_not_a_hang(browser) -> None:
    page = browser.new_page()
    with harness.static_server(harness.voiceless_site()) as url:
        opened(page, url)
        page.set_input_files("#voice-file", str(VOICE_24K))
        page.wait_for_function("window.pocketTTS.uploads.length === 1", timeout=120_000)
        wave = blank(page)
        for worker in page.workers:  # an uncaught error in the worker's own scope
            worker.evaluate("setTimeout(() => { throw new Error('out of memory'); })")
        page.fill("#text", "Anything.")
        page.click("#generate")
        assert "the in-browser engine stopped (" in failed_cleanly(page, wave)
    page.close()
