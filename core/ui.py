"""Where the web UI's files are: `web/` of a checkout, or `core/web/` where pip installed the
package (package data: pyproject.toml maps web/ there). The UI has no Python of its own; the
server serves these files and the site builder (core.browser.site) copies them."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent


def web_folder() -> Path:
    """The folder of the UI's files (index.html, app.js, ...)."""
    installed = HERE / "web"
    return installed if installed.is_dir() else HERE.parent / "web"
