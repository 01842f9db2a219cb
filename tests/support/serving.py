"""Running the app in this process for tests that hold its work where they like: uvicorn with the
server's connection limits, and helpers to wait for a condition, hold a function in the middle, run
a call in a thread, and send a request nobody reads. Nothing here asserts a duration: GUARD only
turns a hang into a failure."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from contextlib import contextmanager
from typing import Any, Awaitable, Callable, Dict, Iterator, List, Optional

import uvicorn

from core import threads
from e2e.harness import free_port
from server import connections
from server.app import create_app
from server.engine import ServerEngine
from server.settings import Settings

# A hang shows as a failure after this long, never as a slow pass.
GUARD = 60.0
NEVER_ENDS = {"eos_threshold": 100.0, "temperature": 0.0}


# `with as_served():` computes as a server does, on one BLAS thread (core/threads.py): for audio a
# test makes to compare with a server's, since the rounding of a BLAS product depends on its thread
# count on some processors (OpenBLAS's Zen kernels: a voice encoded from its file differed).
as_served = threads.one_blas_thread


@contextmanager
def serving(engine: ServerEngine, client_timeout: float = 30.0, **settings) -> Iterator[str]:
    """The app over `engine` with these settings (server/settings.py) on uvicorn with the server's
    connection limits (the engine's pool of connections), in this process (so a test can hold the
    engine's work where it likes); yields its URL."""
    port = free_port()
    config = uvicorn.Config(
        create_app(engine, Settings(client_timeout=client_timeout, **settings)),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        http=connections.Protocol,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + GUARD
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(GUARD)


def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + GUARD
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.01)


class Held:
    """Replaces a function with one that waits, once entered, until released: the work it stands
    for is "in the middle" for as long as a test needs."""

    def __init__(self, function: Callable):
        self.function = function
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        self.entered.set()
        assert self.release.wait(GUARD), "never released"
        return self.function(*args, **kwargs)


def in_thread(call: Callable) -> List:
    """Run `call` in a thread; the list gets its result (or exception) when it is done."""
    result: List = []

    def run() -> None:
        try:
            result.append(call())
        except BaseException as error:  # noqa: BLE001 - handed to the test
            result.append(error)

    threading.Thread(target=run, daemon=True).start()
    return result


def unread_request(url: str, path: str, body: dict, headers: Optional[Dict[str, str]] = None) -> socket.socket:
    """A client that sends a request (with `headers`) and never reads the answer (a small receive
    buffer, so the server's writes back up soon)."""
    port = int(url.rsplit(":", 1)[1])
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    client.connect(("127.0.0.1", port))
    payload = json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    client.sendall(head.encode() + f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
    return client


def wyoming_serving(
    engine: ServerEngine, body: Callable[[int], Awaitable[Any]], options: Any = None, timeout: float = 30.0
) -> Any:
    """Run `body(port)` against a Wyoming server of `engine` (with these generation `options` and
    client `timeout`) in an event loop of this thread's own."""
    from server.wyoming_server import WyomingServer
    from server.wyoming_voices import Voices

    async def main() -> Any:
        port = free_port()
        server = WyomingServer(engine, f"tcp://127.0.0.1:{port}", Voices(engine), timeout, options)
        await server.start()
        try:
            return await asyncio.wait_for(body(port), GUARD)
        finally:
            await server.stop()

    return asyncio.run(main())
