"""The in-browser engine: worker.js boots Pyodide and drives engine.py (see README)."""
