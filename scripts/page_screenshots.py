"""The page's screenshots in the docs (docs/page.md): server mode on the tiny model after a short run,
at a phone's width (390 px) and a laptop's (1280 px), light and dark.

    .venv/bin/python -m scripts.page_screenshots

Needs Debian's Chromium (scripts/test.sh installs it). Writes docs/images/page-{390,1280}-{light,dark}.png.
"""

from __future__ import annotations

import sys

from e2e import harness
from e2e.harness import ROOT

OUT = ROOT / "docs" / "images"
# The tests' tiny model and voice (tests/fixtures): a page in a second, the same every time.
TINY = ["--model", str(ROOT / "tests/fixtures/models/tiny_lsd/config.yaml")]
VOICE = ["--voice", str(ROOT / "tests/fixtures/voice/voice_24000.wav")]
SHOTS = [(390, "light"), (1280, "light"), (390, "dark"), (1280, "dark")]


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with harness.server(TINY + VOICE) as url, harness.chromium() as browser:
        for width, scheme in SHOTS:
            page = browser.new_page(viewport={"width": width, "height": 800}, color_scheme=scheme)
            page.goto(url + "/")
            page.wait_for_function("window.pocketTTS && window.pocketTTS.ready", timeout=20_000)
            page.click("#generate")
            page.wait_for_selector("#download:not([hidden])", timeout=60_000)
            path = OUT / f"page-{width}-{scheme}.png"
            page.screenshot(path=str(path), full_page=True)
            print(f"wrote {path.relative_to(ROOT)}", file=sys.stderr)
            page.close()


if __name__ == "__main__":
    main()
