"""The process's open connections, every front's in one count (HTTP, WebSockets, Wyoming): a
connection takes a place when it is accepted and gives it back when it closes, so that the
process never holds more than `capacity + reserve` connections however many clients connect
(each one beyond is refused at once, its socket closed).

The last `reserve` places are for what must still get an answer when the server is full: a
front that can tell who asks (HTTP) serves `/health` and key holders there, and refuses anything
else; a front that cannot (Wyoming) never takes them.
"""

from __future__ import annotations

import threading
from typing import Optional

RESERVE = 4  # places beyond the cap for /health and key holders


class Place:
    """One connection's place in the pool: `leave` once it is closed (any number of calls)."""

    def __init__(self, pool: ConnectionPool, in_reserve: bool):
        self._pool = pool
        self.in_reserve = in_reserve
        self._left = False

    def leave(self) -> None:
        if not self._left:
            self._left = True
            self._pool._leave()


class ConnectionPool:
    def __init__(self, capacity: int, reserve: int = RESERVE):
        self.capacity = capacity
        self.reserve = reserve
        self._lock = threading.Lock()
        self._open = 0

    @property
    def open(self) -> int:
        """Connections holding a place now."""
        with self._lock:
            return self._open

    def enter(self, may_use_reserve: bool) -> Optional[Place]:
        """A place for a connection just accepted, or None when there is none for it (the pool is
        full, or only the reserve is left and `may_use_reserve` is false)."""
        with self._lock:
            limit = self.capacity + (self.reserve if may_use_reserve else 0)
            if self._open >= limit:
                return None
            self._open += 1
            in_reserve = self._open > self.capacity
        return Place(self, in_reserve)

    def _leave(self) -> None:
        with self._lock:
            self._open -= 1
