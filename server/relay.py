"""Items made in a worker thread, consumed by a coroutine on the event loop: the one hand-over the
server uses between its generation threads and its responses.

The producer calls `put` (an item), `fail` (an exception the consumer re-raises) and `close` (the
end), from any thread. The consumer iterates `items()`; leaving the iteration early (a client that
went away) sets `abandoned`, which the producer checks to stop its work.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, AsyncIterator

_END = object()


class Relay:
    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop = loop
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self.abandoned = threading.Event()

    def put(self, item: Any) -> None:
        self._hand_over(item)

    def fail(self, error: BaseException) -> None:
        self._hand_over(error)

    def close(self) -> None:
        self._hand_over(_END)

    def _hand_over(self, item: Any) -> None:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:  # the event loop is gone (the server is shutting down)
            self.abandoned.set()

    async def items(self) -> AsyncIterator[Any]:
        try:
            while True:
                item = await self._queue.get()
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            self.abandoned.set()
