"""`pocket-tts-numpy`, the command pip installs: `pocket-tts-numpy serve ...` is `python -m server ...`,
`pocket-tts-numpy mcp ...` the MCP server (server/mcp_server.py); every other command (generate,
export-voice, export, batch, models, voices) is `python -m core.cli`'s. It sits above both, so that
neither imports the other."""

from __future__ import annotations

import sys
from typing import List, Optional

PROG = "pocket-tts-numpy"


def serve(argv: List[str]) -> int:
    try:
        from server.__main__ import main as server_main

        return server_main(argv, prog=f"{PROG} serve")
    except ModuleNotFoundError as e:  # a wheel installed without its `server` extra
        from core.extras import install_hint

        print(install_hint(e, "serve"), file=sys.stderr)
        return 1


def mcp(argv: List[str]) -> int:
    try:
        from server.mcp_server import main as mcp_main

        return mcp_main(argv, prog=f"{PROG} mcp")
    except ModuleNotFoundError as e:  # a wheel installed without its `server` extra
        from core.extras import install_hint

        print(install_hint(e, "mcp"), file=sys.stderr)
        return 1


HANDED = {"serve": ("run the HTTP server (python -m server)", serve), "mcp": ("run an MCP server over stdio", mcp)}


def main(argv: Optional[List[str]] = None) -> int:
    from core.cli import main as cli_main

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and argv[0] in HANDED:  # before argparse, which would take their options for its own
        return HANDED[argv[0]][1](argv[1:])
    return cli_main(argv, prog=PROG, handed=HANDED)


if __name__ == "__main__":
    sys.exit(main())
