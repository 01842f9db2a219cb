"""`python -m server --model NAME_OR_PATH --voice NAME_OR_FILE --host 127.0.0.1 --port 8000`.

    python -m server --wyoming tcp://0.0.0.0:10200              # Home Assistant's Wyoming protocol too
    python -m server --wyoming tcp://0.0.0.0:10200 --no-http    # Wyoming alone (an add-on)

The model and the default voice are loaded before the server starts listening: a model or a voice
that cannot be loaded, or an address it cannot listen on, is one line on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from contextlib import AsyncExitStack
from typing import Any, List, Optional
from urllib.parse import urlsplit

from server.engine import CLIENT_TIMEOUT, DEFAULT_MODEL, MAX_CONCURRENT, MAX_CONNECTIONS


def main(argv: Optional[List[str]] = None, prog: str = "python -m server") -> int:
    """`argv`: the options (default: the command line's); `prog`: the command's name in usage and
    errors (pip's installed command runs this as its `serve`)."""
    parser = argparse.ArgumentParser(prog=prog, description="Pocket TTS HTTP server")
    parser.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help="catalog name, config .yaml/.json, or bundle folder (default: %(default)s)",
    )
    parser.add_argument("--voice", help="default voice: predefined name, audio file or .safetensors state")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--site", help="serve this built site (scripts.build_site: both engines) instead of the UI's own files"
    )
    parser.add_argument(
        "--max-concurrent",
        type=int,
        default=MAX_CONCURRENT,
        help="requests served at once (each a generation, or an upload); more get 503 (default: %(default)s)",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=MAX_CONNECTIONS,
        help="open connections at once, every front's (HTTP, WebSockets, Wyoming); one more is refused when it "
        "is accepted (a JSON 503 over HTTP), beyond a few kept for /health and key holders (default: %(default)s)",
    )
    parser.add_argument(
        "--client-timeout",
        type=float,
        default=CLIENT_TIMEOUT,
        help="seconds a client may take to send a request's headers, between pieces of its body, and to "
        "take each piece of an answer, and a WebSocket client may stay silent while nothing is spoken, "
        "before its connection is closed (default: %(default)s)",
    )
    parser.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a web page origin (https://app.example) allowed to use the API beside this server's own page "
        "(repeatable; * for any)",
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name clients reach the server under, beside localhost and --host (a reverse proxy's, the "
        "machine's own name on a network; repeatable): requests naming any other Host get 421",
    )
    parser.add_argument(
        "--api-key",
        default=os.environ.get("POCKET_TTS_API_KEY"),
        help="require Authorization: Bearer KEY on every API route and the WebSocket (default: the "
        "POCKET_TTS_API_KEY environment variable; none: no key); Wyoming's callers, who carry none, are "
        "then guests: no uploaded voice, at most --guest-slots slots",
    )
    parser.add_argument(
        "--guest-slots",
        type=int,
        metavar="N",
        help="with --api-key, the slots callers without the key (Wyoming's) may hold at once (default: half "
        "of --max-concurrent, rounded down)",
    )
    parser.add_argument(
        "--wyoming",
        metavar="URI",
        help="also answer Home Assistant's Wyoming protocol at tcp://HOST:PORT (or unix://PATH), from the same "
        "engine: every front's generations step together",
    )
    parser.add_argument("--no-http", action="store_true", help="the Wyoming server alone (needs --wyoming)")
    parser.add_argument(
        "--voices-dir",
        metavar="DIR",
        help="recordings (wav, flac, ogg, mp3) offered as voices by file name on every front, each cloned once",
    )
    parser.add_argument(
        "--zeroconf",
        nargs="?",
        const="",
        metavar="NAME",
        help="announce the Wyoming server by multicast DNS, as Home Assistant discovers them (NAME: the "
        "service's; default: the machine's MAC address); off by default",
    )
    args = parser.parse_args(argv)
    for name in ("max_concurrent", "max_connections"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.guest_slots is not None and not 0 <= args.guest_slots <= args.max_concurrent:
        parser.error("--guest-slots must be between 0 and --max-concurrent")
    if not args.client_timeout > 0:
        parser.error("--client-timeout must be positive")
    if args.wyoming is None and (args.no_http or args.zeroconf is not None):
        parser.error("--no-http and --zeroconf go with --wyoming URI")
    if args.wyoming is not None and urlsplit(args.wyoming).scheme not in ("tcp", "unix"):
        parser.error(f"--wyoming takes tcp://HOST:PORT or unix://PATH, not {args.wyoming!r}")
    if args.zeroconf is not None and (urlsplit(args.wyoming).scheme != "tcp" or urlsplit(args.wyoming).port is None):
        parser.error("--zeroconf announces a tcp://HOST:PORT Wyoming server")

    import logging

    from core import PocketTTSError, backend

    try:
        import uvicorn

        from server import connections, voice_folder, wyoming_tts
        from server.access import Access
        from server.app import create_app
        from server.engine import load_engine
        from server.frames import MAX_FRAME
    except ModuleNotFoundError as e:  # installed without the `server` extra
        from core.extras import install_hint

        print(install_hint(e, prog), file=sys.stderr)
        return 1

    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.WARNING)
    print(f"products on: {backend()}", file=sys.stderr)
    try:
        voices_dir = voice_folder.checked(args.voices_dir)
        print(f"loading {args.model}", file=sys.stderr)
        access = Access(args.api_key or None, args.guest_slots)
        engine = load_engine(
            args.model,
            args.voice,
            args.max_concurrent,
            access=access,
            max_connections=args.max_connections,
            voices_dir=voices_dir,
        )
    except PocketTTSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    from pathlib import Path

    web = Path(args.site) if args.site else None
    if web is not None and not (web / "site.json").exists():
        print(f"error: {web} is not a site built by scripts.build_site (no site.json)", file=sys.stderr)
        return 1
    wyoming = None
    if args.wyoming is not None:
        wyoming = (engine, args.wyoming, args.client_timeout, args.zeroconf)
        if access.keyed and engine.slots.guest_capacity == 0:
            print("warning: Wyoming's callers (guests: no API key) have no slot: see --guest-slots", file=sys.stderr)
    where = [] if args.no_http else [f"http://{args.host}:{args.port}"]
    where += [args.wyoming] if args.wyoming else []
    print(f"serving {engine.name} with voice {engine.default_voice_name} on {' and '.join(where)}", file=sys.stderr)
    try:
        if args.no_http:
            asyncio.run(wyoming_tts.run_alone(*wyoming))
            return 0
        app = create_app(
            engine,
            allowed_origins=args.allow_origin,
            client_timeout=args.client_timeout,
            hosts=[args.host, *args.allow_host],
            **({} if web is None else {"web": web}),
        )
        config = uvicorn.Config(
            app,
            host=args.host,
            port=args.port,
            log_level="warning",
            http=connections.protocol(args.client_timeout, engine),
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
    from server import wyoming_tts

    async with AsyncExitStack() as running:
        if wyoming is not None:
            await running.enter_async_context(wyoming_tts.serving(*wyoming))
        await http.serve()


if __name__ == "__main__":
    sys.exit(main())
