"""`pocket-tts-numpy`, the command pip installs: `pocket-tts-numpy serve ...` is `python -m server ...`,
`pocket-tts-numpy mcp ...` the MCP server (server/mcp_server.py); every other command (generate,
export-voice, export, batch, models, voices) is `python -m core.cli`'s. It sits above both, so that
neither imports the other."""

from __future__ import annotations

import sys
from typing import Callable, List, Optional

PROG = "pocket-tts-numpy"


def serve(argv: List[str]) -> int:
    from server.__main__ import main

    return main(argv, prog=f"{PROG} serve")


def mcp(argv: List[str]) -> int:
    from server.mcp_server import main

    return main(argv, prog=f"{PROG} mcp")


def _hinting(name: str, run: Callable[[List[str]], int]) -> Callable[[List[str]], int]:
    """`run`, and one line naming the extra to install where a wheel was installed without it."""

    def hinted(argv: List[str]) -> int:
        try:
            return run(argv)
        except ModuleNotFoundError as e:
            from core.extras import install_hint

            print(install_hint(e, name), file=sys.stderr)
            return 1

    return hinted


HANDED = {
    "serve": ("run the HTTP server (python -m server)", _hinting("serve", serve)),
    "mcp": ("run an MCP server over stdio", _hinting("mcp", mcp)),
}


def main(argv: Optional[List[str]] = None) -> int:
    from core.cli import main as cli_main

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and argv[0] in HANDED:  # before argparse, which would take their options for its own
        return HANDED[argv[0]][1](argv[1:])
    return cli_main(argv, prog=PROG, handed=HANDED)


if __name__ == "__main__":
    sys.exit(main())
