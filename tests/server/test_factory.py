"""`uvicorn --factory server.app:create_app`, as the README and docs/deployment.md offer it: the
bounds an app can own are the app's, so plain uvicorn gets them (a client that stops reading is
dropped and its slot freed, every request and WebSocket counted in the pool), and it says in its log
what it is served without; with `--http server.connections:Protocol` it is the same server as
`python -m server` (headers that trickle in dropped, silent connections refused at accept).

Nothing is timed: a deadline only turns a hang into a failure."""

from __future__ import annotations

import json
import socket
from contextlib import ExitStack

import httpx
import pytest
from websockets.sync.client import connect

from server.pool import RESERVE
from tests.support.processes import uvicorn_factory
from tests.support.serving import GUARD, NEVER_ENDS, unread_request, until

pytestmark = pytest.mark.slow  # two uvicorn processes, ~5 s each

PROTOCOL = ["--http", "server.connections:Protocol"]
WARNING = "served without server.connections.Protocol"


def active(url: str) -> int:
    return httpx.get(url + "/health", timeout=GUARD).json()["active_generations"]


def slot_is_freed_from_a_client_that_stops_reading(url: str) -> None:
    client = unread_request(url, "/stream", {"text": "Nobody reads this.", "max_frames": 7500, **NEVER_ENDS})
    try:
        until(lambda: active(url) == 1, "the generation started")
        until(lambda: active(url) == 0, "the app drops the client that takes nothing and frees its slot")
        spoken = httpx.post(url + "/generate", json={"text": "Next.", "max_frames": 2}, timeout=GUARD)
        assert spoken.status_code == 200
    finally:
        client.close()


def test_plain_uvicorn_gets_the_apps_own_bounds_and_is_told_what_it_lacks() -> None:
    with uvicorn_factory() as (url, said):
        slot_is_freed_from_a_client_that_stops_reading(url)
        assert said().count(WARNING) == 1 and "Traceback" not in said(), said()
    with uvicorn_factory(timeout=600) as (url, said), ExitStack() as stack:
        ws = url.replace("http", "ws") + "/v1/audio/speech/stream"
        sockets = [stack.enter_context(connect(ws, open_timeout=GUARD)) for _ in range(2)]  # the pool's 2 places
        refused = httpx.get(url + "/voices", timeout=GUARD)
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "too_many_connections"
        assert httpx.get(url + "/health", timeout=GUARD).status_code == 200  # the reserve's
        for socket_ in sockets:
            socket_.close()
        until(lambda: httpx.get(url + "/voices", timeout=GUARD).status_code == 200, "their places are back")


def test_with_the_servers_protocol_the_factory_is_the_same_server() -> None:
    with uvicorn_factory(*PROTOCOL) as (url, said):
        slot_is_freed_from_a_client_that_stops_reading(url)
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as trickling:
            trickling.settimeout(GUARD)
            trickling.sendall(b"POST /generate HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            # Headers that never end: the connection is dropped after the client timeout, with no answer.
            assert trickling.recv(4096) == b""
        assert WARNING not in said() and "Traceback" not in said(), said()
    with uvicorn_factory(*PROTOCOL, timeout=600) as (url, said), ExitStack() as stack:
        port = int(url.rsplit(":", 1)[1])
        for _ in range(2 + RESERVE):  # silent: every place, the reserve's too
            stack.enter_context(socket.create_connection(("127.0.0.1", port)))
        extra = stack.enter_context(socket.create_connection(("127.0.0.1", port)))
        extra.settimeout(GUARD)
        answer = extra.recv(4096)  # refused at accept, though it has sent nothing
        assert answer.startswith(b"HTTP/1.1 503 ")
        assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "too_many_connections"
