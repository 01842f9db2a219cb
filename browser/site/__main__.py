"""`python -m core.browser.site ...`: `pocket-tts-numpy build-site ...` (command.py)."""

from __future__ import annotations

import sys

from core.browser.site.command import build_site

sys.exit(build_site())
