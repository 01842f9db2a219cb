"""Items made in a worker thread, consumed by a coroutine on the event loop: the one hand-over the
server uses between its generation threads and its responses.

The producer counts each item it starts making (`reserve`), then calls `put` (the item), `fail`
(an exception the consumer re-raises) and `close` (the end), from any thread. While `limit` items
are made and not yet taken, the relay is `full`: the producer makes no more for it until the
consumer catches up, so a client that reads slowly (or not at all) holds at most `limit` items,
not its whole answer. The consumer iterates `items()`; leaving the iteration early (a client that
went away), or `abandon`, sets `abandoned`, which the producer checks to stop its work. `wake` is
called whenever the consumer takes an item or leaves, for a producer waiting on either.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, AsyncIterator, Callable

_END = object()
# Items (80 ms chunks) a relay holds ahead of its consumer.
LIMIT = 8


class Relay:
    def __init__(self, loop: asyncio.AbstractEventLoop, wake: Callable[[], None] = lambda: None, limit: int = LIMIT):
        self._loop = loop
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._wake = wake
        self._limit = limit
        self._made = 0  # counted by the producer's thread
        self._taken = 0  # counted by the consumer's
        self.abandoned = threading.Event()

    @property
    def full(self) -> bool:
        return self._made - self._taken >= self._limit

    @property
    def waiting(self) -> int:
        """Items made and not yet taken."""
        return self._made - self._taken

    def reserve(self) -> None:
        self._made += 1

    def put(self, item: Any) -> None:
        self._hand_over(item)

    def fail(self, error: BaseException) -> None:
        self._hand_over(error)

    def close(self) -> None:
        self._hand_over(_END)

    def abandon(self) -> None:
        self.abandoned.set()
        self._wake()

    def _hand_over(self, item: Any) -> None:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:  # the event loop is gone (the server is shutting down)
            self.abandon()

    async def items(self) -> AsyncIterator[Any]:
        try:
            while True:
                item = await self._queue.get()
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise item
                self._taken += 1
                self._wake()
                yield item
        finally:
            self.abandon()
