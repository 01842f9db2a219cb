"""A synchronous generator's items for an async caller, each made on a worker thread, so the event
loop never waits on the model: what FastRTC's `stream_tts` and OpenVoiceOS's `stream_tts` ask of a
model that streams on its caller's thread."""

from __future__ import annotations

import asyncio
from typing import AsyncIterator, Iterator, TypeVar

T = TypeVar("T")
_END = object()


async def each_on_a_thread(items: Iterator[T]) -> AsyncIterator[T]:
    """`items`, the next one made on a worker thread while the loop runs; closed (a generator's
    `close`, which ends a generation) when the caller stops early or fails."""
    try:
        while True:
            item = await asyncio.get_running_loop().run_in_executor(None, next, items, _END)
            if item is _END:
                return
            yield item
    finally:
        try:
            getattr(items, "close", lambda: None)()
        except ValueError:  # cancelled while a worker thread makes the next item: that ends it
            pass
