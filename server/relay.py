"""Items made in a worker thread, consumed by a coroutine on the event loop: the one hand-over the
server uses between its generation threads and its sessions.

The producer counts each frame it starts making (`reserve`, on the flow thread), then hands on its
audio (`put`) or says it made none (`skip`, on the decoder thread); `note` hands on an item that
counts for nothing (a generation's end); `fail` an exception the consumer re-raises; `close` the
end (the consumer then sees `closed`). While `limit` frames are made and not yet taken, the relay
is `full`: the producer makes no more for it until the consumer catches up, so a client that reads
slowly (or not at all) holds at most `limit` chunks, not its whole answer. The consumer iterates
`items()`; leaving the iteration early (a client that went away), or `abandon` (from any thread),
sets `abandoned`, which the producer checks to stop its work, and ends the iteration. `wake` is
called whenever the consumer takes an item or leaves, for a producer waiting on either.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, AsyncIterator, Callable, Tuple

_END = object()  # the consumer left, or was left
_CLOSED = object()  # the producer is done: all was handed over
# Items (80 ms chunks) a relay holds ahead of its consumer.
LIMIT = 8


class Relay:
    def __init__(self, loop: asyncio.AbstractEventLoop, wake: Callable[[], None] = lambda: None, limit: int = LIMIT):
        self._loop = loop
        self._queue: asyncio.Queue[Tuple[bool, Any]] = asyncio.Queue()
        self._wake = wake
        self._limit = limit
        # Each counter has one writer: frames reserved (flow thread), frames that gave no audio
        # (decoder thread), chunks taken (event loop).
        self._made = 0
        self._skipped = 0
        self._taken = 0
        self.abandoned = threading.Event()
        self.closed = False  # the consumer saw the producer's close: it has all there was

    @property
    def full(self) -> bool:
        return self.waiting >= self._limit

    @property
    def waiting(self) -> int:
        """Frames made (or being made) whose audio is not yet taken."""
        return self._made - self._skipped - self._taken

    def reserve(self) -> None:
        self._made += 1

    def skip(self) -> None:
        self._skipped += 1

    def put(self, item: Any) -> None:
        self._hand_over(True, item)

    def note(self, item: Any) -> None:
        self._hand_over(False, item)

    def fail(self, error: BaseException) -> None:
        self._hand_over(False, error)

    def close(self) -> None:
        self._hand_over(False, _CLOSED)

    def abandon(self) -> None:
        if not self.abandoned.is_set():
            self.abandoned.set()
            self._hand_over(False, _END)
        self._wake()

    def _hand_over(self, counted: bool, item: Any) -> None:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, (counted, item))
        except RuntimeError:  # the event loop is gone (the server is shutting down)
            self.abandoned.set()
            self._wake()

    async def items(self) -> AsyncIterator[Any]:
        try:
            while True:
                counted, item = await self._queue.get()
                if item is _CLOSED:
                    self.closed = True
                    return
                if item is _END or self.abandoned.is_set():  # nothing more once left, what is queued included
                    return
                if isinstance(item, BaseException):
                    raise item
                if counted:
                    self._taken += 1
                    self._wake()
                yield item
        finally:
            self.abandon()
