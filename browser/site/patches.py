"""What the site changes in the Pyodide it vendors (browser/site/pyodide.py): the patches in
patches/, each hunk an exact piece of a pinned file, which must be there once (the build stops
otherwise). This module reads and applies them.

NumPy's package (patches/numpy.patch, PATCHES: applied by pyodide.trim_numpy, and compiled ahead
of time from the patched files: compiled.py): NumPy 1.17 imports numpy.testing as it is imported
(for `numpy.Tester`, which nothing uses), and numpy.testing imports unittest, and with it
argparse, difflib, pprint, logging...: modules that each worker ran at every start for nothing.
NumPy 1.18 made numpy.testing and Tester come on first use (PEP 562); the page's NumPy 1.17.5 does
the same, and with numpy.ma and numpy.polynomial too, which nothing the page runs uses (a quarter
of `import numpy`'s modules). numpy.linalg and numpy.fft likewise, which nothing the page runs uses
either: with them their three libraries (4 of NumPy's 9 MB of WebAssembly) are downloaded and
linked on first use (pyodide.ON_FIRST_USE), and numpy.lib.polynomial and numpy.matrixlib, which
import a few of numpy.linalg's functions, import them when first called. And numpy.random's
legacy RandomState (whose methods numpy.random.seed, rand, ... are) and its bit generators other
than PCG64, with their four libraries: core draws from default_rng's Generator on PCG64 alone.
And numpy.core._internal asks sys.implementation, not `platform`, whether it runs on PyPy.

Pyodide's own package (patches/pyodide.patch, PYODIDE_PATCHES: applied by pyodide.vendor):
asyncio on first use (a stand-in that site.py puts in sys.modules), the functions namedtuple and
dataclasses write as source run from code compiled when the site is built (GENERATED), and so do
the regular expressions a worker's start compiles (REGEXES).

Pyodide's runtime script (RUNTIME_PATCHES, applied by pyodide.vendor, with the functions of
patches/lazy-main-got.js and patches/batched-wrappers.js): its dynamic linker gave every one of
the main module's 27,916 exported functions a slot of the function table and a global offset
table (GOT) entry as Python started (`relocateExports` -> `updateGOT`), ~0.1 s of each worker's
start, though NumPy's libraries ask for ~2,300 of them. The main module's entries are made when
first asked for instead (`gotEntry`): with the same value, and the same pair in
`dyncallInvokeMap` for the functions that have a `byn$fpcast-emu$` twin, as `updateGOT` would have
given them. NumPy's libraries' own exports likewise (14,152 of them, ~70 ms of each worker's start
in `updateGOT`, each a GOT entry, most a table slot): filed at once under a GOT name whose entry
exists, else kept (`deferGOT`) and filed by `updateGOT` itself when the name is first asked for
(none is: the libraries link only to the main module). Every other path of the linker is
Pyodide's own. The runtime script's forwarding functions for the main module's exports are made
by one loop (collapsed_exports): the script is 1.1 MB instead of 1.9, ~40 ms less of each
worker's start.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, Tuple

PATCHES_FOLDER = Path(__file__).resolve().parent / "patches"
STDLIB = "/lib/python3.8/"  # where Pyodide's file system keeps the standard library
SITE_PACKAGES = STDLIB + "site-packages/"
# A patch of one file: (the text it replaces, its new text), hunk by hunk.
Hunks = List[Tuple[str, str]]


def read_patch(path: Path) -> Dict[str, Hunks]:
    """A unified diff (as `diff -u` or git writes it) as {path in Pyodide's file system: its hunks},
    each hunk (its old side, its new side): context and removed lines, context and added lines."""
    patches: Dict[str, Hunks] = {}
    target = None
    old: List[str] = []
    new: List[str] = []

    def close() -> None:
        if target is not None and (old or new):
            patches[target].append(("".join(old), "".join(new)))
        old.clear()
        new.clear()

    for line in path.read_text().splitlines(keepends=True):
        if line.startswith("--- "):
            close()
        elif line.startswith("+++ "):
            target = line[4:].strip()[1:]  # b/lib/python3.8/... -> /lib/python3.8/...
            patches[target] = []
        elif line.startswith("@@"):
            close()
        elif line[:1] in (" ", "-"):
            old.append(line[1:])
            if line[0] == " ":
                new.append(line[1:])
        elif line[:1] == "+":
            new.append(line[1:])
        else:
            raise SystemExit(f"{path.name}: not a line of a unified diff: {line!r}")
    close()
    return patches


PATCHES = read_patch(PATCHES_FOLDER / "numpy.patch")
PYODIDE_PATCHES = read_patch(PATCHES_FOLDER / "pyodide.patch")

# namedtuple and dataclasses write functions as source and compile them at import: ~110 compiles of
# Python's compiler as a worker imports NumPy and core (9 of core's configuration dataclasses alone,
# ~20 ms of a worker's start). browser/site/compiled.py compiles those the page's imports write when the
# site is built, into GENERATED (a marshal'ed {source: code}, in Pyodide's own package); a source
# found there runs from its code (what exec of the source compiles: the same text, file name and
# flags), any other is compiled as before.
GENERATED = STDLIB + "__pycache__/generated-functions.cpython-38.marshal"

# The regular expressions Python's start, a worker's imports and its model's load compile: ~95, each
# parsed and compiled by the pure-Python sre_parse and sre_compile (the normalization rules of one
# language alone, 16-36 ms of a worker's model load). browser/site/compiled.py records what sre_compile hands
# `_sre.compile` for each (pattern, flags) those and a first text compile when the site is built,
# into REGEXES (a marshal'ed {(pattern, flags): the rest of its arguments}, in Pyodide's own
# package); a pattern found there is made from them, any other is compiled as before.
REGEXES = STDLIB + "__pycache__/regular-expressions.cpython-38.marshal"

RUNTIME = "pyodide.asm.js"

# The main module's GOT entries on first use. `mainSymbol` is what `updateGOT(main's exports)` gave
# a name: an `orig$` export (the function before JS legalization) over the plain one, and a
# function with a `byn$fpcast-emu$` twin under its twin, the function itself under
# `$no-fpcast-emu$` + name. A name the main module does not export has neither an `orig$` nor a
# `byn$fpcast-emu$` export (each is a twin of an export: tests/site/test_vendor.py checks it), so one
# lookup tells most of the libraries' names apart.
LAZY_MAIN_GOT = (PATCHES_FOLDER / "lazy-main-got.js").read_text()

# Pyodide's start puts ~260 JS functions in the function table (its OpenAL and GL bindings, whose
# addresses the main module takes: reportUndefinedSymbols), and convertJsFunctionToWasm compiles and
# instantiates a module of its own to wrap each (~40 ms a worker). The JS functions reportUndefinedSymbols
# adds are wrapped by one module made for them all first (prepareWrappers); convertJsFunctionToWasm
# hands back a function's prepared wrapper where its signature is the one asked for. Slots, the
# functions in them and the GOT's values are the same as before (tests/site/test_vendor.py).
BATCHED_WRAPPERS = (PATCHES_FOLDER / "batched-wrappers.js").read_text()
REPORT_UNDEFINED = (
    "function reportUndefinedSymbols(){for(var symName in GOT){if(GOT[symName].value==0){"
    'var value=resolveGlobalSymbol(symName,true);if(typeof value==="function"){'
    "GOT[symName].value=addFunctionWasm(value,value.sig)}"
    'else if(typeof value==="number"){GOT[symName].value=value}'
    'else{assert(false,"bad export type for `"+symName+"`: "+typeof value)}}}}'
)
CONVERT = "function convertJsFunctionToWasm(func,sig){"

RUNTIME_PATCHES: List[Tuple[str, str]] = [
    (
        'var GOT={};Module["GOT"]=GOT;',
        'var GOT={};Module["GOT"]=GOT;var mainExports=null,pendingGOT=Object.create(null);',
    ),
    ("exports=relocateExports(exports,1024);", "exports=relocateMainExports(exports,1024);"),
    ('Module["relocateExports"]=relocateExports;', 'Module["relocateExports"]=relocateExports;' + LAZY_MAIN_GOT),
    # Every lookup of the GOT by name: the side modules' imports, their exports, the heap's end.
    ("get:function(obj,symName){if(!GOT[symName]){", "get:function(obj,symName){if(!gotEntry(symName)){"),
    # A library's exports (updateGOT, from relocateExports): each filed under its GOT name at once
    # where that entry exists, else (deferGOT) when first asked for, as updateGOT would have filed it.
    (
        "function updateGOT(exports){for(var symName in exports){"
        "if(isInternalSym(symName)){continue}var replace=false;",
        "function updateGOT(exports,only){for(var symName in only||exports){if(isInternalSym(symName)){continue}"
        "var rawName=symName;var replace=false;",
    ),
    (
        "if(!GOT[baseName]){GOT[baseName]=new",
        "if(!only&&!GOT[baseName]){deferGOT(baseName,exports,rawName);continue}if(!gotEntry(baseName)){GOT[baseName]=new",
    ),
    ("dyncallGOT=GOT[dyncallName];", "dyncallGOT=gotEntry(dyncallName);"),
    ("fpcGOT=GOT[symName];", "fpcGOT=gotEntry(symName);"),
    ('GOT["__heap_base"].value=end', 'gotEntry("__heap_base").value=end'),
    (REPORT_UNDEFINED, BATCHED_WRAPPERS),
    (
        CONVERT,
        CONVERT + "var prepared=preparedWrappers.get(func);"
        "if(prepared!==undefined&&prepared.sig===sig){return prepared.wrapper}",
    ),
]


# Pyodide's runtime script defines a function forwarding to each of the main module's 4,988 exports,
# `var _X=Module["_X"]=function(){return(_X=Module["_X"]=Module["asm"]["X"]).apply(null,arguments)};`:
# 855 KB of its 1.9 MB, parsed by V8 at each worker's start (a script of importScripts gets no code
# cache). Those the script names nowhere else are made by one loop over their names instead, the
# same function under the same key of Module; the 71 it names stay as they are. WRAPPER matches any
# such function: (its variable, the export it forwards to).
WRAPPER = re.compile(
    r'var (\w+)=Module\["\1"\]=function\(\)\{return\(\1=Module\["\1"\]=Module\["asm"\]\["(\w+)"\]\)'
    r"\.apply\(null,arguments\)\};"
)
EXPORT_LOOP = (
    '.split(" ").forEach(function(name){var key="_"+name;'
    'Module[key]=function(){return(Module[key]=Module["asm"][name]).apply(null,arguments)}});'
)


def export_wrappers(script: str) -> List[re.Match]:
    """The WRAPPER matches of `script` that forward `_X` to export X (the ones collapsed_exports loops)."""
    return [w for w in WRAPPER.finditer(script) if w.group(1) == "_" + w.group(2)]


def collapsed_exports(script: str) -> str:
    """`script` with the export wrappers it names nowhere else made by one loop (EXPORT_LOOP)."""
    wrappers = export_wrappers(script)
    if len(wrappers) < 1000 or EXPORT_LOOP in script:
        raise SystemExit(f"{RUNTIME} is not the file browser/site/patches.py patches")
    start, end = wrappers[0].start(), wrappers[-1].end()
    region = list(WRAPPER.finditer(script, start, end))
    if sum(len(w.group(0)) for w in region) != end - start:
        raise SystemExit(f"{RUNTIME}: something other than export wrappers among them")
    rest = script[:start] + script[end:]
    named = set(re.findall(r'(?<![\w$"])_(\w+)(?![\w$"])', rest))
    looped = [w.group(2) for w in wrappers if w.group(2) not in named]
    # stackSave, stackRestore, stackAlloc (their variable is their export's name) stay too.
    kept = "".join(w.group(0) for w in region if w.group(1) != "_" + w.group(2) or w.group(2) in named)
    return script[:start] + '"' + " ".join(looped) + '"' + EXPORT_LOOP + kept + script[end:]


def _replaced(text: str, replacements: List[Tuple[str, str]], name: str) -> str:
    for old, new in replacements:
        if text.count(old) != 1:
            raise SystemExit(f"{name} is not the file browser/site/patches.py patches")
        text = text.replace(old, new)
    return text


def patched(files: Dict[str, bytes], patches: Dict[str, List[Tuple[str, str]]] = PATCHES) -> Dict[str, bytes]:
    """`files` (path -> bytes, of one package) with `patches` (NumPy's PATCHES, or Pyodide's own
    package's PYODIDE_PATCHES) applied to those it holds."""
    out = dict(files)
    for path, replacements in patches.items():
        if path in out:
            out[path] = _replaced(out[path].decode("utf-8"), replacements, path).encode("utf-8")
    return out


def is_patched_package(data: bytes, patches: Dict[str, List[Tuple[str, str]]]) -> bool:
    """Whether a package's data (its blocks stored: browser/site/pyodide.repack) holds what each of today's
    `patches` puts in (an older build's is made again)."""
    return all(new.encode("utf-8") in data for replacements in patches.values() for _, new in replacements if new)


def patched_runtime(script: str) -> str:
    """Pyodide's runtime script (RUNTIME) with RUNTIME_PATCHES applied, its exports' wrappers collapsed."""
    return collapsed_exports(_replaced(script, RUNTIME_PATCHES, RUNTIME))


def is_patched_runtime(script: str) -> bool:
    """Whether `script` is a runtime script with every one of today's RUNTIME_PATCHES in it (an older
    build's is made again)."""
    return all(new in script for _, new in RUNTIME_PATCHES) and EXPORT_LOOP in script
