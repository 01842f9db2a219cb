"""What each optional part of the package needs (pyproject.toml's extras), to say which extra to
install when an import fails, rather than a traceback."""

from __future__ import annotations

# A module an extra installs -> that extra.
EXTRAS = {
    "yaml": "cli",
    "soundfile": "cli",
    "huggingface_hub": "cli",
    "tqdm": "cli",
    "threadpoolctl": "cli",
    "soxr": "cli",
    "litestar": "server",
    "msgspec": "server",
    "uvicorn": "server",
    "websockets": "server",
    "wyoming": "server",
    "zeroconf": "server",
    "anyio": "server",
    "lz4": "site",
    "ray": "cluster",
    "mcp": "mcp",
    "sounddevice": "play",
    "ovos_plugin_manager": "ovos",
}


def install_hint(error: ModuleNotFoundError, what: str) -> str:
    """The one line for `what` (a command) failing to import a module of an extra; the error itself,
    raised again, for any other module (a bug, not a missing extra)."""
    module = (error.name or "").split(".")[0]
    if module not in EXTRAS:
        raise error
    extra = EXTRAS[module]
    return f"error: {what} needs {module}, from the {extra!r} extra: pip install 'pocket-tts-numpy[{extra}]'"
