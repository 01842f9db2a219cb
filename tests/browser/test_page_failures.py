"""The page when things go wrong, in a real Chromium: a server killed mid-stream, a stream that
stalls, a worker that fails, a site built without a voice; and a clean load logs no error.

The page reaches the server through `Network`, a TCP relay in the test that passes the server's
bytes on at about the rate of the audio (so that a stream is still under way when the test
strikes, however fast the tiny model is), and can stall or drop its connections as a network
does when a server freezes or dies."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager
from typing import Iterator, List, Tuple

import httpx
import pytest

from e2e import harness
from tests.support.checks import downloaded_bytes
from tests.support.paths import ROOT, TINY_CONFIG, VOICE_24K
from tests.support.processes import tiny_server
from tests.support.serving import GUARD, until

pytestmark = pytest.mark.browser

# A minute of audio whatever the random model says (its pauses are exact silence), which the
# Network passes on at about the audio's rate: a stream still under way when the test strikes.
LONG_TEXT = "This sentence is one of many. [pause:10s] " * 6


@pytest.fixture(scope="module")
def browser(chromium):
    return chromium


class Network:
    """A relay from a local port to `port`: the server's bytes passed on at `rate` bytes a second;
    `stall()` holds them (the connections stay open), `cut()` drops every connection at once."""

    def __init__(self, port: int, rate: int = 64_000):
        self.port, self.rate = port, rate
        self.stalled = False
        self.links: List[Tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = []
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.ready.wait(GUARD)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._link, "127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        self.ready.set()
        self.loop.run_forever()

    async def _link(self, page_in: asyncio.StreamReader, page_out: asyncio.StreamWriter) -> None:
        try:
            server_in, server_out = await asyncio.open_connection("127.0.0.1", self.port)
        except OSError:
            page_out.transport.abort()  # nothing listens there: the page's connection is refused
            return
        self.links.append((page_out, server_out))

        async def to_server() -> None:
            while data := await page_in.read(65536):
                server_out.write(data)
                await server_out.drain()

        async def to_page() -> None:
            while data := await server_in.read(4096):
                while self.stalled:
                    await asyncio.sleep(0.05)
                page_out.write(data)
                await page_out.drain()
                await asyncio.sleep(len(data) / self.rate)

        # Either side gone (the page closing a stalled stream too) ends the link for both.
        directions = [asyncio.ensure_future(to_server()), asyncio.ensure_future(to_page())]
        await asyncio.wait(directions, return_when=asyncio.FIRST_COMPLETED)
        for direction in directions:
            if direction.done():
                direction.exception()  # a connection reset is how a link ends: retrieved, not raised
            direction.cancel()
        page_out.transport.abort()
        server_out.transport.abort()

    def stall(self) -> None:
        self.stalled = True

    def cut(self) -> None:
        def drop() -> None:
            for page_out, server_out in self.links:
                page_out.transport.abort()
                server_out.transport.abort()

        self.loop.call_soon_threadsafe(drop)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(GUARD)


@contextmanager
def server_process() -> Iterator[Tuple[Network, subprocess.Popen]]:
    """`python -m server` on the tiny model behind a Network (the page's way to it: its `url`),
    and the server's process (to kill)."""
    port = harness.free_port()
    command = [sys.executable, "-m", "server", "--model", str(TINY_CONFIG), "--voice", str(VOICE_24K)]
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(command + ["--port", str(port)], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        network = None
        try:
            until(lambda: _answers(url + "/health"), "the server answers")
            network = Network(port)
            yield network, process
        finally:
            if network is not None:
                network.close()
            if process.poll() is None:
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
    """Generate the long text, until its first audio has arrived and its player is up (a first
    click's player loads its worklet from the server: struck before, the run fails there)."""
    page.fill("#text", LONG_TEXT)
    page.click("#generate")
    page.wait_for_function(
        "window.pocketTTS.current && window.pocketTTS.current.samples > 0 && window.pocketTTS.current.playing",
        timeout=60_000,
    )


def failed_cleanly(page, blank_wave: str) -> str:
    """The error the page shows, once it shows one; what the user can do next is enabled again and
    nothing of the failed run is left (its waveform, segments, download)."""
    page.wait_for_function("document.getElementById('status').classList.contains('error')", timeout=GUARD * 1000)
    assert page.is_enabled("#generate") and page.is_disabled("#stop")
    assert page.is_hidden("#download") and page.evaluate("document.getElementById('segments').children.length") == 0
    assert page.evaluate("document.getElementById('wave').toDataURL()") == blank_wave
    assert page.evaluate("window.pocketTTS.current") is None and page.evaluate("window.pocketTTS.runs.length") == 0
    return page.inner_text("#status")


def failed_keeping_audio(page, blank_wave: str) -> str:
    """The error the page shows, once it shows one, beside what had arrived: drawn, playing out and
    downloadable (a WAV of at least a frame); Generate is enabled again and no run is recorded as
    done."""
    page.wait_for_function("document.getElementById('status').classList.contains('error')", timeout=GUARD * 1000)
    assert page.is_enabled("#generate") and page.is_visible("#download")
    assert page.evaluate("document.getElementById('wave').toDataURL()") != blank_wave
    assert downloaded_bytes(page) >= 44 + 2 * 1920
    assert page.evaluate("window.pocketTTS.current") is None and page.evaluate("window.pocketTTS.runs.length") == 0
    return page.inner_text("#status")


def blank(page) -> str:
    return page.evaluate("document.getElementById('wave').toDataURL()")


def test_a_server_killed_mid_stream_is_an_error_and_the_next_click_says_the_server_is_gone(browser) -> None:
    page = browser.new_page()
    with server_process() as (network, process):
        errors = opened(page, network.url)
        assert errors == []  # a clean load: no 404, no console error
        wave = blank(page)
        under_way(page)
        process.kill()  # gone with its stream under way: its connections drop
        process.wait(timeout=30)
        network.cut()
        shown = failed_keeping_audio(page, wave)
        assert "lost mid-stream" in shown and "that arrived play out and can be downloaded" in shown
        page.click("#generate")
        page.wait_for_function("document.getElementById('status').textContent.includes('not answering')")
        assert page.is_enabled("#generate")
    page.close()


def test_a_player_that_cannot_start_is_an_error_not_a_run_left_generating(browser) -> None:
    """A first click's player loads its worklet from the server: where that load fails (as when the
    server is gone at that moment: the browser rejects it as an AbortError, the name a Stop gives
    too), the player stops the engine and the run ends with the player's error, never left
    "Generating..." for good."""
    page = browser.new_page()
    page.add_init_script(UNLOADABLE_WORKLET)
    with server_process() as (network, _):
        opened(page, network.url)
        wave = blank(page)
        page.fill("#text", LONG_TEXT)
        page.click("#generate")
        assert "worklet" in failed_cleanly(page, wave)
    page.close()


# The worklet's module failing to load, as Chromium fails it when its server is gone.
UNLOADABLE_WORKLET = """
AudioWorklet.prototype.addModule = () =>
  Promise.reject(new DOMException("Unable to load a worklet's module.", "AbortError"));
"""


def test_a_stalled_stream_is_an_error_and_the_server_sees_its_client_go(browser) -> None:
    page = browser.new_page()
    with server_process() as (network, process):
        url = f"http://127.0.0.1:{network.port}"
        opened(page, network.url)
        wave = blank(page)
        under_way(page)
        network.stall()  # the connection open, nothing more on it
        assert "stopped sending audio" in failed_keeping_audio(page, wave)
        until(lambda: httpx.get(url + "/health").json()["active_generations"] == 0, "the stalled stream's slot is free")
    page.close()


def test_stop_stays_while_the_audio_plays(browser) -> None:
    page = browser.new_page()
    with tiny_server() as url:
        opened(page, url)
        page.fill("#text", "Hello there. [pause:3s] And a little more.")  # at least 3 s to play, whatever is said
        page.click("#generate")
        page.wait_for_function("window.pocketTTS.runs.length === 1", timeout=60_000)
        # Recorded at its first sound; seconds of it still to play (read together, at one moment).
        playing = "[window.pocketTTS.played.length, document.getElementById('stop').disabled]"
        assert page.evaluate(playing) == [0, False]
        page.wait_for_function("window.pocketTTS.played.length === 1", timeout=60_000)
        assert page.is_disabled("#stop")
    page.close()


def test_a_stopped_run_keeps_what_arrived_downloadable(browser) -> None:
    page = browser.new_page()
    with tiny_server() as url:
        opened(page, url)
        under_way(page)
        page.click("#stop")
        assert page.inner_text("#status") == "Stopped." and page.is_visible("#download")
        assert downloaded_bytes(page) >= 44 + 2 * 1920
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
