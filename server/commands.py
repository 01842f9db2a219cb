"""The server's commands of `pocket-tts-numpy` (entry points of the group pocket_tts_numpy.commands,
pyproject.toml): core.cli finds them there, so that core imports nothing of the server. Each takes
the command's arguments and its name for usage lines; its docstring's first line is its help."""

from __future__ import annotations

from typing import List


def serve(argv: List[str], prog: str) -> int:
    """run the HTTP server (python -m server)"""
    from server.__main__ import main

    return main(argv, prog=prog)


def mcp(argv: List[str], prog: str) -> int:
    """run an MCP server over stdio"""
    from server.mcp_server import main

    return main(argv, prog=prog)
