"""`python pocket_tts_numpy.py ...` in a checkout is `pocket-tts-numpy ...`, the command pip installs
(core.cli.command): the same commands, those of the parts above core (serve, mcp, build-site)
included, as core.cli finds them in the installed package's metadata (`pip install -e .`)."""

from __future__ import annotations

import sys

from core.cli import command

if __name__ == "__main__":
    sys.exit(command())
