"""A local stand-in for huggingface.co: the real huggingface_hub client downloads from it.

It answers the two requests hf_hub_download makes (HEAD then GET on
/{repo}/resolve/{revision}/{path}) for the files it is given, 404 for others, and 401 with the
"GatedRepo" error code for repositories marked gated, as the Hub does for kyutai/pocket-tts
without access.
"""

from __future__ import annotations

import hashlib
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, List, Set, Tuple


class FakeHub:
    def __init__(self) -> None:
        self.files: Dict[Tuple[str, str, str], Path] = {}
        self.gated: Set[str] = set()
        self.token: str = ""  # a gated repository answers requests that carry this token
        self.requests: List[str] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # noqa: ANN002
                pass

            def do_HEAD(self) -> None:  # noqa: N802
                self._answer(body=False)

            def do_GET(self) -> None:  # noqa: N802
                self._answer(body=True)

            def _answer(self, body: bool) -> None:
                hub.requests.append(f"{self.command} {self.path}")
                path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
                owner, repo, resolve, revision, filename = (path.strip("/").split("/", 4) + [""] * 5)[:5]
                repo_id = f"{owner}/{repo}"
                if resolve != "resolve":
                    return self._error(404, "EntryNotFound")
                authorized = hub.token and self.headers.get("Authorization") == f"Bearer {hub.token}"
                if repo_id in hub.gated and not authorized:
                    return self._error(401, "GatedRepo")
                local = hub.files.get((repo_id, revision, filename))
                if local is None:
                    return self._error(404, "EntryNotFound")
                data = local.read_bytes()
                self.send_response(200)
                self.send_header("X-Repo-Commit", revision)
                self.send_header("ETag", '"' + hashlib.sha256(data).hexdigest() + '"')
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Content-Type", "application/octet-stream")
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def _error(self, status: int, code: str) -> None:
                self.send_response(status)
                self.send_header("X-Error-Code", code)
                self.send_header("X-Error-Message", code)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def add(self, hf_url: str, local: Path) -> None:
        """Serve `local` at an hf://owner/repo/path@revision URL."""
        path, _, revision = hf_url[len("hf://") :].partition("@")
        owner, repo, filename = path.split("/", 2)
        self.files[(f"{owner}/{repo}", revision, filename)] = Path(local)

    def __enter__(self) -> FakeHub:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:  # noqa: ANN002
        self.server.shutdown()
        self.server.server_close()
