"""The product in a process of its own, as a user starts it."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from tests.support.paths import TINY_CONFIG, VOICE_24K


@contextmanager
def tiny_server(*args: str) -> Iterator[str]:
    """`python -m server` on the tiny model with the test voice (and these arguments); yields its URL."""
    from e2e import harness  # here, not above: the Python 3.8 core run has no HTTP client

    with harness.server(["--model", str(TINY_CONFIG), "--voice", str(VOICE_24K), *args]) as url:
        yield url
