"""`speak_aloud` and `stop_speaking` of `pocket-tts-numpy mcp` (server/loudspeaker.py) through the MCP
SDK's own client, the server's speakers a stand-in sounddevice (tests/support/fake_sounddevice) that
logs each call: a call answers at once with its place in the queue; what is queued plays in order;
stop_speaking drops the queue and cuts what plays (the device aborted, not drained)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any, List

import pytest

from tests.support.paths import ROOT, TINY_CONFIG, VOICE_24K
from tests.support.serving import GUARD, until

mcp = pytest.importorskip("mcp", reason="the MCP SDK needs Python 3.10")
FAKE = ROOT / "tests" / "support" / "fake_sounddevice"


def _events(log: Path) -> List[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _said(result: Any) -> dict:
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


def test_calls_queue_play_in_order_and_stop_cuts(tmp_path) -> None:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    log, gate = tmp_path / "device.log", tmp_path / "gate"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(FAKE), str(ROOT)]))
    env.update(FAKE_SOUNDDEVICE_LOG=str(log), FAKE_SOUNDDEVICE_GATE=str(gate))
    command = ["-m", "core.cli", "mcp", "--model", str(TINY_CONFIG), "--voice", str(VOICE_24K)]

    async def work() -> None:
        parameters = StdioServerParameters(command=sys.executable, args=command, cwd=str(ROOT), env=env)
        async with stdio_client(parameters) as (read, write):
            async with ClientSession(read, write) as client:
                await client.initialize()
                first = _said(await client.call_tool("speak_aloud", {"text": "The first thing to say."}))
                await asyncio.to_thread(
                    until,
                    lambda: (
                        any(e["event"] == "write" for e in _events(log))
                        or any(e["event"] == "start" for e in _events(log))
                    ),
                    "the first plays",
                )
                second = _said(await client.call_tool("speak_aloud", {"text": "The second.", "language": "en"}))
                assert (first, second) == ({"position": 0}, {"position": 1})
                stopped = _said(await client.call_tool("stop_speaking", {}))
                assert stopped == {"stopped": True, "dropped": 1}
                gate.touch()  # the device's blocked write returns: the cut goes through
                await asyncio.to_thread(until, lambda: any(e["event"] == "abort" for e in _events(log)), "cut")
                cut = len(_events(log))
                third = _said(await client.call_tool("speak_aloud", {"text": "Hello there.", "speed": 1.5}))
                assert third == {"position": 0}
                await asyncio.to_thread(
                    until,
                    lambda: [e["event"] for e in _events(log)][-1:] == ["close"] and len(_events(log)) > cut + 2,
                    "the third plays out",
                )

    asyncio.run(asyncio.wait_for(work(), GUARD * 4))
    events = _events(log)
    opened = [e for e in events if e["event"] == "open"]
    assert len(opened) == 2 and all(
        e == {"event": "open", "rate": 24000, "channels": 1, "dtype": "float32"} for e in opened
    )
    second_open = [i for i, e in enumerate(events) if e["event"] == "open"][1]
    first, third = events[:second_open], events[second_open:]
    assert [e["event"] for e in first][-2:] == ["abort", "close"] and "stop" not in [e["event"] for e in first]
    assert [e["event"] for e in third][-2:] == ["stop", "close"] and "abort" not in [e["event"] for e in third]
    assert sum(e["samples"] for e in third if e["event"] == "write") > 0
