"""The server's capacity in requests at once: a slot is taken before any work (text preparation,
decoding an upload, cloning) and given back only when the request is over, its answer's last byte
handed to the server or its client gone; the scheduler also holds a generation's slot while it
steps it. So the memory of the requests in flight, their audio waiting for slow clients included,
is bounded by the slots, not by the connections. When every slot is taken, a request gets `Busy`
at once (a 503 with Retry-After) instead of waiting in an unbounded queue.
"""

from __future__ import annotations

import threading
from typing import Callable, List


class Busy(Exception):
    """Every slot is taken."""

    retry_after = 1


class Slots:
    def __init__(self, capacity: int):
        self.capacity = capacity
        self._lock = threading.Lock()
        self._taken = 0

    @property
    def taken(self) -> int:
        with self._lock:
            return self._taken

    def take(self) -> Slot:
        """A slot for a request; Busy at once when all are taken."""
        with self._lock:
            if self._taken >= self.capacity:
                raise Busy()
            self._taken += 1
        return Slot(self._free)

    def _free(self) -> None:
        with self._lock:
            self._taken -= 1


class Slot:
    """One request's slot: free once every holder has let go of it (the request, and whoever else
    `hold`s it). `release` is the request's own hold; `on_release` adds what ends with it (the
    generation a client left behind stops)."""

    def __init__(self, free: Callable[[], None]):
        self._lock = threading.Lock()
        self._holders = 0
        self._free = free
        self._cleanups: List[Callable[[], None]] = []
        self._release = self.hold()

    def hold(self) -> Callable[[], None]:
        """Hold the slot; returns the function that lets go (once: later calls do nothing)."""
        with self._lock:
            self._holders += 1
        held = [True]

        def let_go() -> None:
            with self._lock:
                if not held[0]:
                    return
                held[0] = False
                self._holders -= 1
                last = self._holders == 0
            if last:
                self._free()

        return let_go

    def on_release(self, cleanup: Callable[[], None]) -> None:
        self._cleanups.append(cleanup)

    def release(self) -> None:
        """The request is over (any number of calls: the first counts)."""
        cleanups, self._cleanups = self._cleanups, []
        for cleanup in cleanups:
            cleanup()
        self._release()
