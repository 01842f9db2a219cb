"""Discovery of the Wyoming server by multicast DNS (zeroconf), as Home Assistant finds Wyoming
servers: the address a tcp:// URI announces, and its announcement (the `wyoming` package's
zeroconf extra, imported only by a server that announces itself).
"""

from __future__ import annotations

import logging
from typing import Any, Optional, Tuple
from urllib.parse import urlparse

log = logging.getLogger("pocket_tts.server")


def announced_address(uri: str) -> Tuple[Optional[str], int]:
    """The address to announce for a tcp:// URI: its host (None, to find this machine's own, when it
    listens on every interface) and its port."""
    parsed = urlparse(uri)
    if parsed.scheme != "tcp" or parsed.port is None:
        raise ValueError(f"--zeroconf announces a tcp:// server with a port, not {uri}")
    host = parsed.hostname
    return (None if host in ("0.0.0.0", "::", "") else host), parsed.port


async def announce(port: int, name: Optional[str], host: Optional[str]) -> Any:
    """Register the service as the `wyoming` package's zeroconf extra does for Piper (service
    `_wyoming._tcp.local.`, NAME._wyoming._tcp.local., the port); returns the announcer."""
    from wyoming.zeroconf import HomeAssistantZeroconf

    announcer = HomeAssistantZeroconf(port=port, name=name, host=host)
    await announcer.register_server()
    log.warning("announced %s on port %d by multicast DNS", announcer.name, port)
    return announcer
