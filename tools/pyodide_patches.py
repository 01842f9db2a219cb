"""The page's NumPy package with numpy.testing left for first use.

NumPy 1.17 imports numpy.testing as it is imported (for `numpy.Tester`, which nothing uses), and
numpy.testing imports unittest, and with it argparse, difflib, pprint, logging...: modules that
each worker ran at every start for nothing. NumPy 1.18 made numpy.testing and Tester come on first
use (PEP 562); PATCHES does the same to the page's NumPy 1.17.5 (Pyodide 0.17's). (unittest also
imports asyncio, which stays: Pyodide's own start imports it.)

Each patch replaces one exact piece of a file of the vendored packages (pinned: tools/pyodide.py),
which must be there once. tools/pyodide.trim_numpy applies them as it repacks NumPy's package, and
the modules compiled ahead of time are compiled from the patched files (tools/compiled.py).
"""

from __future__ import annotations

from typing import Dict, List, Tuple

SITE_PACKAGES = "/lib/python3.8/site-packages/"

PATCHES: Dict[str, List[Tuple[str, str]]] = {
    SITE_PACKAGES + "numpy/__init__.py": [
        (
            "    # We don't actually use this ourselves anymore, but I'm not 100% sure that\n"
            "    # no-one else in the world is using it (though I hope not)\n"
            "    from .testing import Tester\n",
            "    # numpy.testing and Tester come on first use, as in NumPy 1.18: they import unittest\n"
            "    # (patched in by pocket-tts-numpy's tools/pyodide_patches.py).\n"
            "    def __getattr__(attr):\n"
            "        if attr == 'testing':\n"
            "            import numpy.testing as testing\n"
            "            return testing\n"
            "        if attr == 'Tester':\n"
            "            from .testing import Tester\n"
            "            return Tester\n"
            "        raise AttributeError('module {!r} has no attribute {!r}'.format(__name__, attr))\n",
        )
    ],
}


def patched(files: Dict[str, bytes]) -> Dict[str, bytes]:
    """`files` (path -> bytes, of one package) with PATCHES applied to those it holds; each piece
    replaced must be there exactly once."""
    out = dict(files)
    for path, replacements in PATCHES.items():
        if path not in out:
            continue
        text = out[path].decode("utf-8")
        for old, new in replacements:
            if text.count(old) != 1:
                raise SystemExit(f"{path} is not the file tools/pyodide_patches.py patches")
            text = text.replace(old, new)
        out[path] = text.encode("utf-8")
    return out
