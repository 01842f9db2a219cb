"""Who asks: the one place where the API key is checked and where what a caller may see and take
is decided, whichever front it came through.

A server started with an API key (`--api-key`) has two kinds of callers. A **key holder** bears
the key (`Authorization: Bearer KEY`, as OpenAI's clients send it: every HTTP route of the API and
the WebSocket require it). A **guest** came through a front that cannot carry a key (Wyoming: Home
Assistant's protocol has no authentication). A guest may use the model's predefined voices and
the recordings of the voices folder, never the key holders' uploads (it neither sees them listed
nor can name them), and holds at most `guest_slots` of the generation slots at once (by default
half of them, rounded down), so that the rest stay free for key holders. A server without a key
has only key holders: every caller may do everything.
"""

from __future__ import annotations

import hmac
from typing import NamedTuple, Optional


class Caller(NamedTuple):
    """A caller's standing: `trusted` for a key holder (or anyone, on a server without a key)."""

    name: str
    trusted: bool


KEY_HOLDER = Caller("key holder", True)
GUEST = Caller("guest", False)


class Access:
    """The server's API key (None: none) and the slots its guests may hold at once (None: half)."""

    def __init__(self, api_key: Optional[str] = None, guest_slots: Optional[int] = None):
        self._key = api_key.encode() if api_key else None
        self.guest_slots = guest_slots

    def guest_share(self, slots: int) -> int:
        """Of `slots` generation slots, how many guests may hold at once."""
        return min(slots, self.guest_slots) if self.guest_slots is not None else slots // 2

    @property
    def keyed(self) -> bool:
        """Whether the server has an API key (and so guests)."""
        return self._key is not None

    def caller(self, authorization: Optional[str]) -> Caller:
        """The caller of a request with this Authorization header (None: a front that carries none)."""
        if self._key is None:
            return KEY_HOLDER
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), self._key):
            return KEY_HOLDER
        return GUEST
