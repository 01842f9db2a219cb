"""`pocket-tts-numpy`, the command pip installs: `pocket-tts-numpy serve ...` is `python -m server ...`,
`pocket-tts-numpy mcp ...` the MCP server (server/mcp_server.py); every other command (generate,
export-voice, export, batch, models, voices) is `python -m core.cli`'s. It sits above both, so that
neither imports the other."""

from __future__ import annotations

import importlib
import sys
from typing import Callable, List, Optional

PROG = "pocket-tts-numpy"


def _handed_to(module: str, name: str) -> Callable[[List[str]], int]:
    """The command `name`, run by `module`'s main (imported when it runs: a wheel installed without
    its extra says which one, in one line)."""

    def run(argv: List[str]) -> int:
        try:
            main = importlib.import_module(module).main
        except ModuleNotFoundError as e:
            from core.extras import install_hint

            print(install_hint(e, name), file=sys.stderr)
            return 1
        return main(argv, prog=f"{PROG} {name}")

    return run


HANDED = {
    "serve": ("run the HTTP server (python -m server)", _handed_to("server.__main__", "serve")),
    "mcp": ("run an MCP server over stdio", _handed_to("server.mcp_server", "mcp")),
}


def main(argv: Optional[List[str]] = None) -> int:
    from core.cli import main as cli_main

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and argv[0] in HANDED:  # before argparse, which would take their options for its own
        return HANDED[argv[0]][1](argv[1:])
    return cli_main(argv, prog=PROG, handed=HANDED)


if __name__ == "__main__":
    sys.exit(main())
