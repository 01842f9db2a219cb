"""The in-browser engine, installed as core.browser: the model's host in the browser, the way core's
CPython modules host it on a machine (docs/page.md).

Its files, copied into a site (under browser/) by the site builder (core.browser.site):
- the page's half (PAGE): browser-engine.js, which boots the workers and speaks through them, and
  protocol.js, the messages between the page and the workers, named once;
- the workers (WORKER): worker.js and the files of each of its jobs, which boot Pyodide and drive
  the Python half inside it (PYTHON: engine.py, and kernel_check.py);
- the service worker (SERVICE_WORKER), written as the site's sw.js: the site offline.
"""

from __future__ import annotations

PAGE = ("browser-engine.js", "protocol.js")
# worker.js, then the files of its jobs in the order it loads them.
WORKER = ("worker.js", "worker-store.js", "worker-link.js", "worker-boot.js", "worker-requests.js")
SERVICE_WORKER = "service-worker.js"
PYTHON = ("core.browser.engine", "core.browser.kernel_check")
