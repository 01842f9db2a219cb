"""The static site's builder: `pocket-tts-numpy build-site` (command.py), which writes a folder any
static file server can host, the web UI with the in-browser engine (build.py says what it holds).
It runs on CPython; nothing of it goes into the site."""

from __future__ import annotations
