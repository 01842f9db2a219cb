"""`python -m server --model NAME_OR_PATH --voice NAME_OR_FILE --host 127.0.0.1 --port 8000`.

The model and the default voice are loaded before the server starts listening: a model or a voice
that cannot be loaded is one line on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import sys


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m server", description="Pocket TTS HTTP server")
    parser.add_argument("--model", default="english", help="catalog name, config .yaml/.json, or bundle folder")
    parser.add_argument("--voice", help="default voice: predefined name, audio file or .safetensors state")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--site", help="serve this built site (scripts.build_site: both engines) instead of web/")
    parser.add_argument(
        "--max-concurrent",
        type=int,
        default=4,
        help="generations running at once; more requests get 503 (default: %(default)s)",
    )
    args = parser.parse_args()
    if args.max_concurrent < 1:
        parser.error("--max-concurrent must be at least 1")

    import uvicorn

    from core import PocketTTSError, TTSModel
    from server import native
    from server.app import create_app
    from server.engine import ServerEngine

    kernels = native.install()
    print(f"products on: {kernels}", file=sys.stderr)
    try:
        print(f"loading {args.model}", file=sys.stderr)
        engine = ServerEngine(TTSModel.load(args.model), args.voice, args.max_concurrent, kernels)
    except PocketTTSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(
        f"serving {engine.model.name} with voice {engine.default_voice_name} on http://{args.host}:{args.port}",
        file=sys.stderr,
    )
    from pathlib import Path

    web = Path(args.site) if args.site else None
    if web is not None and not (web / "site.json").exists():
        print(f"error: {web} is not a site built by scripts.build_site (no site.json)", file=sys.stderr)
        return 1
    app = create_app(engine) if web is None else create_app(engine, web=web)
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    finally:
        engine.scheduler.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
