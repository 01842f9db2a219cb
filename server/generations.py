"""The engine's generations: its slots (server/slots.py, with the guests' share) and the scheduler
that steps every running generation together (server/scheduler.py). A session takes a slot here
(`admit`), then opens its speech as a scheduler stream (`open_stream`). Once `close` begins the
engine is shutting down: every slot asked for after is refused `shutting_down`, and the
generations still running end with the same refusal."""

from __future__ import annotations

from typing import Callable

from server import errors
from server.access import Caller
from server.relay import Relay
from server.scheduler import Scheduler, Stream
from server.slots import Busy, Slot, Slots


class Generations:
    def __init__(self, max_concurrent: int, guest_share: int):
        self.max_concurrent = max_concurrent
        self.slots = Slots(max_concurrent, guest_share)
        self.scheduler = Scheduler()
        self.shutting_down = False

    def admit(self, caller: Caller) -> Slot:
        """A slot for `caller`'s request, before any of its work; `busy` at once when all are
        taken, or a guest's when the guests hold their share; `shutting_down` once closing."""
        if self.shutting_down:
            raise errors.shutting_down()
        try:
            return self.slots.take(guest=not caller.trusted)
        except Busy:
            raise errors.busy() from None

    def open_stream(self, relay: Relay, release: Callable[[], None]) -> Stream:
        """A stream of generations said one after another into `relay` (server/scheduler.py)."""
        return self.scheduler.open(relay, release)

    def wake(self) -> None:
        """A consumer of a relay took audio or left (server/relay.py)."""
        self.scheduler.wake()

    @property
    def active(self) -> int:
        """Requests in flight (each holds a slot)."""
        return self.slots.taken

    @property
    def running(self) -> bool:
        """Whether the scheduler's threads still run."""
        return self.scheduler.running

    def close(self) -> None:
        """Refuse every slot from now on, then stop the scheduler's threads."""
        self.shutting_down = True
        self.scheduler.close()
