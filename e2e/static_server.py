"""A plain static file server for the built site, with the caching headers a real host sends
(the standard library's sends none, so a reload would fetch Pyodide again).

    .venv/bin/python -m e2e.static_server --directory build/site --port 8080
"""

from __future__ import annotations

import argparse
import functools
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer


class CachingHandler(SimpleHTTPRequestHandler):
    def end_headers(self) -> None:
        # site.json names the current version of everything else, so it is always revalidated.
        cache = "no-cache" if self.path.split("?")[0].endswith("site.json") else "public, max-age=3600"
        self.send_header("Cache-Control", cache)
        super().end_headers()

    def log_message(self, *args) -> None:  # noqa: ANN002
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--directory", required=True)
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--bind", default="127.0.0.1")
    args = parser.parse_args()
    handler = functools.partial(CachingHandler, directory=args.directory)
    ThreadingHTTPServer((args.bind, args.port), handler).serve_forever()


if __name__ == "__main__":
    main()
