"""`python -m server --model NAME_OR_PATH --voice NAME_OR_FILE --host 127.0.0.1 --port 8000`.

    python -m server --wyoming tcp://0.0.0.0:10200              # Home Assistant's Wyoming protocol too
    python -m server --wyoming tcp://0.0.0.0:10200 --no-http    # Wyoming alone (an add-on)
    python -m server --config settings.yaml                     # settings from a file (server/settings.py)

The model and the default voice are loaded before the server starts listening: a model or a voice
that cannot be loaded, or an address it cannot listen on, is one line on stderr and exit status 1.
"""

from __future__ import annotations

import asyncio
import sys
from contextlib import AsyncExitStack
from typing import Any, List, Optional

from server.settings import Settings


def main(argv: Optional[List[str]] = None, prog: str = "python -m server") -> int:
    """`argv`: the options (default: the command line's); `prog`: the command's name in usage and
    errors (pip's installed command runs this as its `serve`). The settings: server/settings.py."""
    settings = Settings.from_arguments(argv, prog)

    import logging

    from core import PocketTTSError, backend

    try:
        import uvicorn

        from server import connections, wyoming_server
        from server.app import create_app
        from server.engine import load_engine
        from server.frames import MAX_FRAME
    except ModuleNotFoundError as e:  # installed without the `server` extra
        from core.extras import install_hint

        print(install_hint(e, prog), file=sys.stderr)
        return 1

    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.WARNING)
    print(f"products on: {backend()}", file=sys.stderr)
    site = settings.site
    if site is not None and not (site / "site.json").exists():
        print(f"error: {site} is not a site built by pocket-tts-numpy build-site (no site.json)", file=sys.stderr)
        return 1
    try:
        print(f"loading {settings.model}", file=sys.stderr)
        engine = load_engine(settings)
    except PocketTTSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    wyoming = None
    if settings.wyoming is not None:
        wyoming = (engine, settings.wyoming, settings.client_timeout, settings.zeroconf)
        if engine.access.keyed and engine.generations.slots.guest_capacity == 0:
            print("warning: Wyoming's callers (guests: no API key) have no slot: see --guest-slots", file=sys.stderr)
    where = [] if settings.no_http else [f"http://{settings.host}:{settings.port}"]
    where += [settings.wyoming] if settings.wyoming else []
    print(
        f"serving {engine.hosted.name} with voice {engine.voices.default_name} on {' and '.join(where)}",
        file=sys.stderr,
    )
    try:
        if settings.no_http:
            asyncio.run(wyoming_server.run_alone(*wyoming))
            return 0
        config = uvicorn.Config(
            create_app(engine, settings),
            host=settings.host,
            port=settings.port,
            log_level="warning",
            http=connections.Protocol,
            timeout_keep_alive=5,
            h11_max_incomplete_event_size=16 * 1024,
            # A WebSocket frame past this is cut by uvicorn (close 1009); one past websocket's
            # MAX_FRAME, and under this, gets an error frame first.
            ws_max_size=4 * MAX_FRAME,
        )
        asyncio.run(_serve(uvicorn.Server(config), wyoming))
    except OSError as e:  # a port in use, a socket path that cannot be made
        print(f"error: cannot listen: {e.strerror or e}", file=sys.stderr)
        return 1
    finally:
        engine.close()
    return 0


async def _serve(http: Any, wyoming: Optional[tuple]) -> None:
    """The HTTP server, with the Wyoming server beside it in the same event loop when asked for."""
    from server import wyoming_server

    async with AsyncExitStack() as running:
        if wyoming is not None:
            await running.enter_async_context(wyoming_server.serving(*wyoming))
        await http.serve()


if __name__ == "__main__":
    sys.exit(main())
