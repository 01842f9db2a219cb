"""The model: everything that runs unchanged in CPython and in the browser's Pyodide (Python 3.8,
NumPy 1.17), as NumPy functions and data. NumPy and the standard library only; no threads, no
network. CPython-only readers (PyYAML, soundfile) are imported inside the functions that need them.
Nothing here imports the CPython host (the modules of core/ above this folder)."""

from __future__ import annotations
