"""The product in a process of its own, as a user starts it."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from typing import Callable, Iterator, Tuple

from tests.support.paths import ROOT, TINY_CONFIG, VOICE_24K


@contextmanager
def tiny_server(*args: str) -> Iterator[str]:
    """`python -m server` on the tiny model with the test voice (and these arguments); yields its URL."""
    from e2e import harness  # here, not above: the Python 3.8 core run has no HTTP client

    with harness.server(["--model", str(TINY_CONFIG), "--voice", str(VOICE_24K), *args]) as url:
        yield url


@contextmanager
def uvicorn_factory(*uvicorn_args: str, timeout: float = 1.0) -> Iterator[Tuple[str, Callable[[], str]]]:
    """`uvicorn --factory server.app:create_app` (and these arguments of uvicorn's) over the tiny
    model, one slot, two connections and a client timeout of `timeout`, its settings from the
    environment as a user gives them; yields its URL and a function reading its log so far."""
    import httpx

    from e2e.harness import free_port
    from tests.support.serving import GUARD

    port = free_port()
    env = dict(
        os.environ,
        POCKET_TTS_MODEL=str(TINY_CONFIG),
        POCKET_TTS_VOICE=str(VOICE_24K),
        POCKET_TTS_MAX_CONCURRENT="1",
        POCKET_TTS_MAX_CONNECTIONS="2",
        POCKET_TTS_CLIENT_TIMEOUT=str(timeout),
    )
    command = [sys.executable, "-m", "uvicorn", "--factory", "server.app:create_app", "--port", str(port)]
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen([*command, *uvicorn_args], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)

        def said() -> str:
            log.seek(0)
            return log.read()

        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + GUARD
            while True:
                assert process.poll() is None, said()
                assert time.monotonic() < deadline, "the factory did not start"
                try:
                    if httpx.get(url + "/health", timeout=GUARD).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.1)
            yield url, said
        finally:
            process.terminate()
            process.wait(GUARD)
