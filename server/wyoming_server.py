"""The Wyoming listener of an engine (the `wyoming` package's server): a handler for each
connection it accepts (server/wyoming_tts.py), beside the HTTP app in its event loop (`serving`) or
alone until SIGTERM or SIGINT (`run_alone`), announced by multicast DNS when asked
(server/wyoming_discovery.py).
"""

from __future__ import annotations

import asyncio
import signal
from contextlib import asynccontextmanager
from typing import AsyncIterator, Optional

from wyoming.server import AsyncServer

from core import threads
from core.portable.synthesis.options import GenerationOptions
from server.engine import ServerEngine
from server.wyoming_discovery import announce, announced_address
from server.wyoming_tts import Handler
from server.wyoming_voices import Voices


class WyomingServer:
    """The Wyoming listener of an engine: `start` and `stop` inside the event loop that serves it.
    `options`: the generation options of every synthesis (the protocol carries none). Its callers
    are the engine's callers without credentials (guests, on a server with an API key)."""

    def __init__(
        self,
        engine: ServerEngine,
        uri: str,
        voices: Voices,
        timeout: float,
        options: Optional[GenerationOptions] = None,
    ):
        self.engine = engine
        self.uri = uri
        self.voices = voices
        self.timeout = timeout
        self.options = options if options is not None else GenerationOptions()
        self.caller = engine.access.caller(None)
        self._server: Optional[AsyncServer] = None

    async def start(self) -> None:
        self._server = AsyncServer.from_uri(self.uri)
        await self._server.start(lambda reader, writer: Handler(self, reader, writer))

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop()


@asynccontextmanager
async def serving(
    engine: ServerEngine,
    uri: str,
    timeout: float,
    zeroconf: Optional[str] = None,
) -> AsyncIterator[WyomingServer]:
    """The Wyoming server of `engine` at `uri` while the block runs (beside the HTTP app: its
    lifespan enters it), announced by multicast DNS when `zeroconf` is given ("" for the package's
    default name, the machine's MAC address), as Home Assistant discovers Wyoming servers."""
    server = WyomingServer(engine, uri, Voices(engine), timeout)
    await server.start()
    try:
        if zeroconf is not None:
            host, port = announced_address(uri)
            await announce(port, zeroconf or None, host)
        yield server
    finally:
        await server.stop()


async def run_alone(
    engine: ServerEngine,
    uri: str,
    timeout: float,
    zeroconf: Optional[str] = None,
) -> None:
    """The Wyoming server alone (no HTTP listener: a Home Assistant add-on), until SIGTERM or SIGINT."""
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signal_number, stopping.set)
    with threads.serving():
        async with serving(engine, uri, timeout, zeroconf):
            await stopping.wait()
