"""The server's capacity in requests at once: a slot is taken before any work (text preparation,
decoding an upload, cloning) and given back only when the request is over, its answer's last byte
handed to the server or its client gone; the scheduler also holds a generation's slot while it
steps it. So the memory of the requests in flight, their audio waiting for slow clients included,
is bounded by the slots, not by the connections. When every slot is taken, a request gets `Busy`
at once (a 503 with Retry-After) instead of waiting in an unbounded queue; so does a guest's
(server/access.py) when the guests hold their share already.
"""

from __future__ import annotations

import threading
from typing import Callable, List


class Busy(Exception):
    """Every slot is taken."""

    retry_after = 1


class Slots:
    """`capacity` slots, of which guests may hold `guest_capacity` at once."""

    def __init__(self, capacity: int, guest_capacity: int = 0):
        self.capacity = capacity
        self.guest_capacity = guest_capacity
        self._lock = threading.Lock()
        self._taken = 0
        self._guests = 0

    @property
    def taken(self) -> int:
        with self._lock:
            return self._taken

    @property
    def taken_by_guests(self) -> int:
        with self._lock:
            return self._guests

    def take(self, guest: bool = False) -> Slot:
        """A slot for a request (a guest's: `guest`); Busy at once when there is none for it."""
        with self._lock:
            if self._taken >= self.capacity or (guest and self._guests >= self.guest_capacity):
                raise Busy()
            self._taken += 1
            self._guests += guest
        return Slot(lambda: self._free(guest))

    def _free(self, guest: bool) -> None:
        with self._lock:
            self._taken -= 1
            self._guests -= guest


class Slot:
    """One request's slot: free once every holder has let go of it (the request, and whoever else
    `hold`s it). `release` is the request's own hold; `on_release` adds what ends with it (the
    generation a client left behind stops)."""

    def __init__(self, free: Callable[[], None]):
        self._lock = threading.Lock()
        self._holders = 0
        self._free = free
        self._cleanups: List[Callable[[], None]] = []
        self.freed = threading.Event()  # set once every holder has let go
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
                self.freed.set()

        return let_go

    def on_release(self, cleanup: Callable[[], None]) -> None:
        self._cleanups.append(cleanup)

    def release(self) -> None:
        """The request is over (any number of calls: the first counts)."""
        cleanups, self._cleanups = self._cleanups, []
        for cleanup in cleanups:
            cleanup()
        self._release()
