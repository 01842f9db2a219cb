"""The audio a session may make: one budget for a request, a text stream, a batch line and the page.

A budget is counted in frames, from seconds of audio: the audio given out (after the speed change)
and the frames generated (the work) may each last at most `seconds`. At speed 0.5 the output is
the bound (600 s of audio are 300 s generated); at speed 2 the work is (600 s generated are 300 s
of audio). Every generation of a session draws on its budget frame by frame as it makes them, so a
generation that is stopped gives back what it did not make just by not making it, and the
generations of a text stream share the whole of it, however its text is cut into segments.
"""

from __future__ import annotations

import math

from ..errors import LimitError


class Budget:
    def __init__(self, seconds: float, frame_rate: float, speed: float = 1.0):
        self.seconds = seconds
        self.speed = speed
        self.frame_rate = frame_rate
        # The slower of the two clocks: the audio's own (frames / speed) and the generation's.
        self.total = math.floor(seconds * frame_rate * min(speed, 1.0) + 1e-9)
        self.left = self.total

    @property
    def exhausted(self) -> bool:
        return self.left <= 0

    def spend(self) -> None:
        self.left -= 1

    def refuse_frames(self, frames: int, what: str, verb: str = "is") -> None:
        """A LimitError when `frames` (max_frames, or a text's pauses) could not fit in the whole budget."""
        if frames > self.total:
            raise LimitError(f"{what} ({self.describe(frames)}) {verb} more than {self._allowed()}")

    def refuse_more(self, what: str = "this text stream") -> None:
        """A LimitError once the budget is spent (a text stream asked to say more)."""
        if self.exhausted:
            raise LimitError(f"{what} has made {self._allowed(made=True)}")

    def describe(self, frames: int) -> str:
        generated = frames / self.frame_rate
        if self.speed == 1.0:
            return f"{generated:g} s of audio"
        return f"{generated / self.speed:g} s of audio at speed {self.speed:g}, {generated:g} s generated"

    def _allowed(self, made: bool = False) -> str:
        verb = "it may make" if made else "a request may make"
        if self.speed == 1.0:
            return f"the {self.seconds:g} s of audio {verb}"
        return f"the {self.seconds:g} s of audio {verb} (counted after the speed change, and generated)"
