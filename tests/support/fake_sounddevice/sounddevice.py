"""A stand-in for sounddevice (put first on PYTHONPATH): a default output device that logs what it is
asked to do, one JSON line per call, to the file FAKE_SOUNDDEVICE_LOG; while the file
FAKE_SOUNDDEVICE_GATE (where named) does not exist, each write waits for it, as a device whose buffer
is full waits for its audio to play (tests/core/test_mcp_aloud.py)."""

from __future__ import annotations

import json
import os
import time

LOG = os.environ["FAKE_SOUNDDEVICE_LOG"]
GATE = os.environ.get("FAKE_SOUNDDEVICE_GATE")


def _log(**event: object) -> None:
    with open(LOG, "a") as f:
        f.write(json.dumps(event) + "\n")


def query_devices(kind: object = None) -> dict:
    return {"name": "test speakers", "max_output_channels": 1}


class OutputStream:
    def __init__(self, samplerate: int, channels: int, dtype: str):
        _log(event="open", rate=samplerate, channels=channels, dtype=dtype)

    def __enter__(self) -> OutputStream:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.close()

    def start(self) -> None:
        _log(event="start")

    def write(self, block: object) -> None:
        while GATE and not os.path.exists(GATE):
            time.sleep(0.01)
        _log(event="write", samples=len(block))

    def stop(self) -> None:
        _log(event="stop")

    def abort(self) -> None:
        _log(event="abort")

    def close(self) -> None:
        _log(event="close")
