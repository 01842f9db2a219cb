"""`python -m server --model NAME_OR_PATH --voice NAME_OR_FILE --host 127.0.0.1 --port 8000`.

The model and the default voice are loaded before the server starts listening: a model or a voice
that cannot be loaded is one line on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from server.engine import CLIENT_TIMEOUT, DEFAULT_MODEL, MAX_CONCURRENT


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
    parser.add_argument("--site", help="serve this built site (scripts.build_site: both engines) instead of web/")
    parser.add_argument(
        "--max-concurrent",
        type=int,
        default=MAX_CONCURRENT,
        help="requests served at once (each a generation, or an upload); more get 503 (default: %(default)s)",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=64,
        help="open connections at once, WebSockets included; more get 503 (default: %(default)s)",
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
        "POCKET_TTS_API_KEY environment variable; none: no key)",
    )
    args = parser.parse_args(argv)
    for name in ("max_concurrent", "max_connections"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if not args.client_timeout > 0:
        parser.error("--client-timeout must be positive")

    import logging

    import uvicorn

    from core import PocketTTSError, backend
    from server import connections
    from server.app import create_app
    from server.engine import load_engine
    from server.websocket import MAX_FRAME

    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.WARNING)
    print(f"products on: {backend()}", file=sys.stderr)
    try:
        print(f"loading {args.model}", file=sys.stderr)
        engine = load_engine(args.model, args.voice, args.max_concurrent)
    except PocketTTSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(
        f"serving {engine.name} with voice {engine.default_voice_name} on http://{args.host}:{args.port}",
        file=sys.stderr,
    )
    from pathlib import Path

    web = Path(args.site) if args.site else None
    if web is not None and not (web / "site.json").exists():
        print(f"error: {web} is not a site built by scripts.build_site (no site.json)", file=sys.stderr)
        return 1
    app = create_app(
        engine,
        allowed_origins=args.allow_origin,
        client_timeout=args.client_timeout,
        hosts=[args.host, *args.allow_host],
        api_key=args.api_key or None,
        **({} if web is None else {"web": web}),
    )
    try:
        uvicorn.run(
            app,
            host=args.host,
            port=args.port,
            log_level="warning",
            http=connections.protocol(args.client_timeout),
            limit_concurrency=args.max_connections,
            timeout_keep_alive=5,
            h11_max_incomplete_event_size=16 * 1024,
            # A WebSocket frame past this is cut by uvicorn (close 1009); one past websocket's
            # MAX_FRAME, and under this, gets an error frame first.
            ws_max_size=4 * MAX_FRAME,
        )
    finally:
        engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
