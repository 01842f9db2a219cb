"""The model's host in the browser: worker.js boots Pyodide in a Web Worker and drives engine.py
(its Python half), the way core's CPython modules host the model on a machine (docs/page.md)."""

from __future__ import annotations
