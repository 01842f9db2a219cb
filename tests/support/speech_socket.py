"""One text said over the server's WebSocket (/v1/audio/speech/stream): its audio, as a client gets it."""

from __future__ import annotations

import json
from typing import Any, Dict

from websockets.sync.client import connect

from tests.support.serving import GUARD


def said(url: str, start: Dict[str, Any], text: str) -> bytes:
    """The 16-bit PCM of `text` said after a `start` of these fields, then the end; its `done`
    checked (not an error)."""
    with connect(url.replace("http", "ws", 1) + "/v1/audio/speech/stream", open_timeout=GUARD) as socket:
        socket.send(json.dumps({"type": "start", **start}))
        assert json.loads(socket.recv(GUARD))["type"] == "started"
        socket.send(json.dumps({"type": "text", "text": text}))
        socket.send(json.dumps({"type": "end"}))
        audio = b""
        while True:
            frame = socket.recv(GUARD)
            if isinstance(frame, bytes):
                audio += frame
            elif json.loads(frame)["type"] in ("done", "error"):
                assert json.loads(frame)["type"] == "done", frame
                return audio
