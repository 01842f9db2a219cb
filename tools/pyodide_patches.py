"""What the site changes in the Pyodide it vendors (tools/pyodide.py), each one exact piece of a
pinned file, which must be there once (the build stops otherwise).

NumPy's package (PATCHES, applied by tools/pyodide.trim_numpy, and compiled ahead of time from the
patched files: tools/compiled.py): NumPy 1.17 imports numpy.testing as it is imported (for
`numpy.Tester`, which nothing uses), and numpy.testing imports unittest, and with it argparse,
difflib, pprint, logging...: modules that each worker ran at every start for nothing. NumPy 1.18
made numpy.testing and Tester come on first use (PEP 562); the page's NumPy 1.17.5 does the same,
and with numpy.ma and numpy.polynomial too, which nothing the page runs uses (a quarter of
`import numpy`'s modules). numpy.linalg and numpy.fft likewise, which nothing the page runs uses either: with
them their three libraries (4 of NumPy's 9 MB of WebAssembly) are downloaded and linked on first
use (tools/pyodide.ON_FIRST_USE), and numpy.lib.polynomial and numpy.matrixlib, which import a few of
numpy.linalg's functions, import them when first called. And numpy.random's legacy RandomState
(whose methods numpy.random.seed, rand, ... are) and its bit generators other than PCG64, with
their four libraries: core draws from default_rng's Generator on PCG64 alone.
And numpy.core._internal asks sys.implementation, not `platform`, whether it runs on PyPy.

Pyodide's own package (PYODIDE_PATCHES, applied by tools/pyodide.vendor): asyncio on first use
(ASYNCIO_STAND_IN, below), the functions namedtuple and dataclasses write as source run from
code compiled when the site is built (COMPILED_AHEAD, GENERATED), and so do the regular expressions
a worker's start compiles (SRE_COMPILED_AHEAD, REGEXES).

Pyodide's runtime script (RUNTIME_PATCHES, applied by tools/pyodide.vendor): its dynamic linker
gave every one of the main module's 27,916 exported functions a slot of the function table and a
global offset table (GOT) entry as Python started (`relocateExports` -> `updateGOT`), ~0.1 s of each
worker's start, though NumPy's libraries ask for ~2,300 of them. The main module's entries are made
when first asked for instead (`gotEntry`): with the same value, and the same pair in
`dyncallInvokeMap` for the functions that have a `byn$fpcast-emu$` twin, as `updateGOT` would have
given them. NumPy's libraries' own exports likewise (14,152 of them, ~70 ms of each worker's start
in `updateGOT`, each a GOT entry, most a table slot): filed at once under a GOT name whose entry
exists, else kept (`deferGOT`) and filed by `updateGOT` itself when the name is first asked for
(none is: the libraries link only to the main module). Every other path of the linker is Pyodide's own.
The runtime script's forwarding functions for the main module's exports are made by one loop
(collapsed_exports): the script is 1.1 MB instead of 1.9, ~40 ms less of each worker's start.
"""

from __future__ import annotations

import re
from typing import Dict, List, Tuple

STDLIB = "/lib/python3.8/"  # where Pyodide's file system keeps the standard library
SITE_PACKAGES = STDLIB + "site-packages/"

PATCHES: Dict[str, List[Tuple[str, str]]] = {
    SITE_PACKAGES + "numpy/__init__.py": [
        (
            "    # We don't actually use this ourselves anymore, but I'm not 100% sure that\n"
            "    # no-one else in the world is using it (though I hope not)\n"
            "    from .testing import Tester\n",
            "    # numpy.testing and Tester come on first use, as in NumPy 1.18 (they import unittest), and\n"
            "    # numpy.ma, numpy.polynomial, numpy.linalg and numpy.fft too (patched in by pocket-tts-numpy's\n"
            "    # tools/pyodide_patches.py).\n"
            "    def __getattr__(attr):\n"
            "        if attr in ('testing', 'ma', 'polynomial', 'linalg', 'fft'):\n"
            "            import importlib\n"
            "            return importlib.import_module('numpy.' + attr)\n"
            "        if attr == 'Tester':\n"
            "            from .testing import Tester\n"
            "            return Tester\n"
            "        raise AttributeError('module {!r} has no attribute {!r}'.format(__name__, attr))\n",
        ),
        ("    from . import polynomial\n", ""),
        ("    from . import ma\n", ""),
        ("    from . import linalg\n    from . import fft\n", ""),
    ],
    # numpy.random's legacy RandomState (the functions numpy.random.seed, rand, ... are its methods)
    # and the bit generators other than PCG64 (default_rng's), with their libraries, on first use.
    SITE_PACKAGES + "numpy/random/__init__.py": [
        (
            "# add these for module-freeze analysis (like PyInstaller)\n"
            "from . import _pickle\n"
            "from . import common\n"
            "from . import bounded_integers\n"
            "\n"
            "from .mtrand import *\n"
            "from .generator import Generator, default_rng\n"
            "from .bit_generator import SeedSequence\n"
            "from .mt19937 import MT19937\n"
            "from .pcg64 import PCG64\n"
            "from .philox import Philox\n"
            "from .sfc64 import SFC64\n"
            "from .mtrand import RandomState\n",
            "from . import common\n"
            "from . import bounded_integers\n"
            "\n"
            "from .generator import Generator, default_rng\n"
            "from .bit_generator import SeedSequence\n"
            "from .pcg64 import PCG64\n"
            "\n"
            "\n"
            "# RandomState (whose methods the legacy functions are: seed, rand, ...), MT19937, Philox, SFC64\n"
            "# and _pickle on first use (patched in by pocket-tts-numpy's tools/pyodide_patches.py).\n"
            "def __getattr__(attr):\n"
            "    import importlib\n"
            "    if attr in ('MT19937', 'Philox', 'SFC64'):\n"
            "        return getattr(importlib.import_module('numpy.random.' + attr.lower()), attr)\n"
            "    if attr == '_pickle':\n"
            "        return importlib.import_module('numpy.random._pickle')\n"
            "    if attr in __all__:\n"
            "        return getattr(importlib.import_module('numpy.random.mtrand'), attr)\n"
            "    raise AttributeError('module {!r} has no attribute {!r}'.format(__name__, attr))\n",
        ),
        ("    return RandomState(seed=0)\n", "    from .mtrand import RandomState\n    return RandomState(seed=0)\n"),
    ],
    # The two modules that import numpy.linalg as NumPy is imported, for a few functions each: those
    # import it when first called.
    SITE_PACKAGES + "numpy/lib/polynomial.py": [
        (
            "from numpy.linalg import eigvals, lstsq, inv\n",
            "\n\n# numpy.linalg on first use (patched in by pocket-tts-numpy's tools/pyodide_patches.py).\n"
            "def eigvals(*args, **kwargs):\n"
            "    from numpy.linalg import eigvals\n"
            "    return eigvals(*args, **kwargs)\n"
            "\n\n"
            "def lstsq(*args, **kwargs):\n"
            "    from numpy.linalg import lstsq\n"
            "    return lstsq(*args, **kwargs)\n"
            "\n\n"
            "def inv(*args, **kwargs):\n"
            "    from numpy.linalg import inv\n"
            "    return inv(*args, **kwargs)\n",
        ),
    ],
    SITE_PACKAGES + "numpy/matrixlib/defmatrix.py": [
        (
            "from numpy.linalg import matrix_power\n",
            "# numpy.linalg on first use (patched in by pocket-tts-numpy's tools/pyodide_patches.py).\n"
            "def matrix_power(*args, **kwargs):\n"
            "    from numpy.linalg import matrix_power\n"
            "    return matrix_power(*args, **kwargs)\n",
        ),
    ],
    # NumPy asks `platform` whether it runs on PyPy: that module's import (and its regexes) for one
    # comparison, which sys.implementation answers.
    SITE_PACKAGES + "numpy/core/_internal.py": [
        ("import sys\nimport platform\n", "import sys\n"),
        (
            "IS_PYPY = platform.python_implementation() == 'PyPy'\n",
            "# sys.implementation, not platform (patched in by pocket-tts-numpy's tools/pyodide_patches.py).\n"
            "IS_PYPY = sys.implementation.name == 'pypy'\n",
        ),
    ],
    SITE_PACKAGES + "numpy/core/overrides.py": [
        (
            "        if verify:\n"
            "            verify_matching_signatures(implementation, dispatcher)\n"
            "\n"
            "        if docs_from_dispatcher:\n"
            "            add_docstring(implementation, dispatcher.__doc__)\n"
            "\n"
            "        # Equivalently, we could define this function directly instead of using\n"
            "        # exec. This version has the advantage of giving the helper function a\n"
            "        # more interpettable name. Otherwise, the original function does not\n"
            "        # show up at all in many cases, e.g., if it's written in C or if the\n"
            "        # dispatcher gets an invalid keyword argument.\n"
            '        source = textwrap.dedent("""\n'
            "        @functools.wraps(implementation)\n"
            "        def {name}(*args, **kwargs):\n"
            "            relevant_args = dispatcher(*args, **kwargs)\n"
            "            return implement_array_function(\n"
            "                implementation, {name}, relevant_args, args, kwargs)\n"
            '        """).format(name=implementation.__name__)\n'
            "\n"
            "        source_object = compile(\n"
            "            source, filename='<__array_function__ internals>', mode='exec')\n"
            "        scope = {\n"
            "            'implementation': implementation,\n"
            "            'dispatcher': dispatcher,\n"
            "            'functools': functools,\n"
            "            'implement_array_function': implement_array_function,\n"
            "        }\n"
            "        exec(source_object, scope)\n"
            "\n"
            "        public_api = scope[implementation.__name__]\n",
            "        # Patched in by pocket-tts-numpy's tools/pyodide_patches.py: NumPy compiled the source of\n"
            "        # this function for each of its ~300 functions at import, and checked each dispatcher's\n"
            "        # signature (`verify`, which NumPy's own tests check); the same function is made as a\n"
            "        # closure and given the name and file name the compiled one had.\n"
            "        if docs_from_dispatcher:\n"
            "            add_docstring(implementation, dispatcher.__doc__)\n"
            "\n"
            "        @functools.wraps(implementation)\n"
            "        def public_api(*args, **kwargs):\n"
            "            relevant_args = dispatcher(*args, **kwargs)\n"
            "            return implement_array_function(\n"
            "                implementation, public_api, relevant_args, args, kwargs)\n"
            "\n"
            "        public_api.__code__ = public_api.__code__.replace(\n"
            "            co_name=implementation.__name__, co_filename='<__array_function__ internals>')\n",
        ),
    ],
}

# Pyodide's own package (pyodide.asm.data): asyncio on first use. Pyodide's C core imports asyncio as
# it starts (its JsProxy keeps `get_event_loop`, its PyProxy the module, for `ensure_future`), and
# its `pyodide` package imports it to set the web loop's policy: ~30 modules (asyncio's, socket,
# subprocess, selectors, signal) that nothing else a worker runs imports, and `platform` (its
# regexes) to ask whether it runs in Emscripten. site.py, which Python's start runs before the C
# core's, puts a stand-in for asyncio in sys.modules: its get_event_loop, and any other attribute,
# import the real asyncio at first use. The `pyodide` package takes the stand-in out, and gives
# asyncio the web loop's policy as asyncio is first imported, by whoever imports it.
ASYNCIO_STAND_IN = (
    "\n\n"
    "# asyncio on first use (patched in by pocket-tts-numpy's tools/pyodide_patches.py): Pyodide's C core\n"
    "# takes asyncio's get_event_loop and keeps the module as it starts; until Pyodide's `pyodide` package\n"
    "# takes this stand-in out of sys.modules, it is asyncio, and imports the real one at first use.\n"
    "def _asyncio_stand_in():\n"
    "    stand_in = type(sys)('asyncio', 'Stands in for asyncio until its first use.')\n"
    "\n"
    "    def real():\n"
    "        if sys.modules.get('asyncio') is stand_in:\n"
    "            del sys.modules['asyncio']\n"
    "        import asyncio\n"
    "        return asyncio\n"
    "\n"
    "    stand_in.get_event_loop = lambda: real().get_event_loop()\n"
    "    stand_in.__getattr__ = lambda name: getattr(real(), name)\n"
    "    stand_in.stands_in = True\n"
    "    sys.modules['asyncio'] = stand_in\n"
    "\n"
    "\n"
    "_asyncio_stand_in()\n"
)

# namedtuple and dataclasses write functions as source and compile them at import: ~110 compiles of
# Python's compiler as a worker imports NumPy and core (9 of core's configuration dataclasses alone,
# ~20 ms of a worker's start). tools/compiled.py compiles those the page's imports write when the
# site is built, into GENERATED (a marshal'ed {source: code}, in Pyodide's own package); a source
# found there runs from its code (what exec of the source compiles: the same text, file name and
# flags), any other is compiled as before.
GENERATED = STDLIB + "__pycache__/generated-functions.cpython-38.marshal"


def _compiled_ahead(what: str, path: str, parameters: str, found: str) -> str:
    """The source of `_compiled_ahead(parameters)`, patched into a module of Pyodide's: `found`, an
    expression of the dict marshal'ed at `path` (in Pyodide's own package), which it reads at its
    first call (an empty one where the site has none). `what`: the comment's two lines."""
    return (
        f"# Patched in by pocket-tts-numpy's tools/pyodide_patches.py: {what}\n"
        "_ahead = None\n"
        "\n"
        "\n"
        f"def _compiled_ahead({parameters}):\n"
        "    global _ahead\n"
        "    if _ahead is None:\n"
        "        import marshal\n"
        "        try:\n"
        f"            with open({path!r}, 'rb') as f:\n"
        "                _ahead = marshal.load(f)\n"
        "        except OSError:\n"
        "            _ahead = {}\n"
        f"    return {found}\n"
        "\n"
        "\n"
    )


COMPILED_AHEAD = _compiled_ahead(
    "the source of a function namedtuple or\n"
    "# dataclasses writes, as compiled when the site was built where it was one of those.",
    GENERATED,
    "source",
    "_ahead.get(source, source)",
)

# The regular expressions Python's start, a worker's imports and its model's load compile: ~95, each
# parsed and compiled by the pure-Python sre_parse and sre_compile (the normalization rules of one
# language alone, 16-36 ms of a worker's model load). tools/compiled.py records what sre_compile hands
# `_sre.compile` for each (pattern, flags) those and a first text compile when the site is built,
# into REGEXES (a marshal'ed {(pattern, flags): the rest of its arguments}, in Pyodide's own
# package); a pattern found there is made from them, any other is compiled as before.
REGEXES = STDLIB + "__pycache__/regular-expressions.cpython-38.marshal"
SRE_COMPILED_AHEAD = _compiled_ahead(
    "the arguments of _sre.compile for a\n"
    "# (pattern, flags), as recorded when the site was built where it was one of those.",
    REGEXES,
    "pattern, flags",
    "_ahead.get((pattern, flags))",
)

PYODIDE_PATCHES: Dict[str, List[Tuple[str, str]]] = {
    STDLIB + "sre_compile.py": [
        ("def compile(p, flags=0):\n", SRE_COMPILED_AHEAD + "def compile(p, flags=0):\n"),
        (
            "    if isstring(p):\n        pattern = p\n",
            "    if isstring(p):\n"
            "        ahead = _compiled_ahead(p, flags)\n"
            "        if ahead is not None:\n"
            "            return _sre.compile(p, *ahead)\n"
            "        pattern = p\n",
        ),
    ],
    STDLIB + "collections/__init__.py": [
        (
            "def namedtuple(typename, field_names, *, rename=False, defaults=None, module=None):\n",
            COMPILED_AHEAD + "def namedtuple(typename, field_names, *, rename=False, defaults=None, module=None):\n",
        ),
        ("    exec(s, namespace)\n", "    exec(_compiled_ahead(s), namespace)\n"),
    ],
    STDLIB + "dataclasses.py": [
        (
            "import _thread\n",
            "import _thread\nfrom collections import _compiled_ahead  # patched in: see collections\n",
        ),
        ("    exec(txt, globals, ns)\n", "    exec(_compiled_ahead(txt), globals, ns)\n"),
    ],
    STDLIB + "site.py": [
        ("if not sys.flags.no_site:\n    main()\n", "if not sys.flags.no_site:\n    main()\n" + ASYNCIO_STAND_IN)
    ],
    SITE_PACKAGES + "pyodide/__init__.py": [
        (
            "from .webloop import WebLoopPolicy\n"
            "from . import _state  # type: ignore # noqa\n"
            "import asyncio\n"
            "import sys\n"
            "import platform\n",
            "from . import _state  # type: ignore # noqa\nimport sys\n",
        ),
        (
            'if platform.system() == "Emscripten":\n    asyncio.set_event_loop_policy(WebLoopPolicy())\n',
            "\n"
            "# asyncio on first use (patched in by pocket-tts-numpy's tools/pyodide_patches.py): site.py's\n"
            "# stand-in leaves sys.modules, and asyncio gets the web loop's policy as it is first imported.\n"
            "def _use_web_loop(asyncio):\n"
            "    from .webloop import WebLoopPolicy\n"
            "\n"
            "    asyncio.set_event_loop_policy(WebLoopPolicy())\n"
            "\n"
            "\n"
            "class _WebLoopOnFirstImport:\n"
            "    @classmethod\n"
            "    def find_spec(cls, fullname, path=None, target=None):\n"
            '        if fullname != "asyncio":\n'
            "            return None\n"
            "        sys.meta_path.remove(cls)\n"
            "        from importlib.machinery import PathFinder\n"
            "\n"
            "        spec = PathFinder.find_spec(fullname)\n"
            "        run = spec.loader.exec_module\n"
            "\n"
            "        def exec_module(module):\n"
            "            run(module)\n"
            "            _use_web_loop(module)\n"
            "\n"
            "        spec.loader.exec_module = exec_module\n"
            "        return spec\n"
            "\n"
            "\n"
            'if sys.platform == "emscripten":\n'
            '    if getattr(sys.modules.get("asyncio"), "stands_in", False):\n'
            '        del sys.modules["asyncio"]\n'
            '    if "asyncio" in sys.modules:\n'
            '        _use_web_loop(sys.modules["asyncio"])\n'
            "    else:\n"
            "        sys.meta_path.insert(0, _WebLoopOnFirstImport)\n"
            "\n"
            "\n"
            "def __getattr__(name):\n"
            '    if name in ("WebLoopPolicy", "webloop"):\n'
            "        from . import webloop\n"
            "\n"
            '        return webloop if name == "webloop" else webloop.WebLoopPolicy\n'
            '    raise AttributeError("module {!r} has no attribute {!r}".format(__name__, name))\n',
        ),
    ],
    SITE_PACKAGES + "pyodide/_base.py": [
        (
            "from asyncio import iscoroutine\n",
            "\n\n"
            "# asyncio on first use (patched in by pocket-tts-numpy's tools/pyodide_patches.py).\n"
            "def iscoroutine(obj):\n"
            "    from asyncio import iscoroutine\n"
            "\n"
            "    return iscoroutine(obj)\n"
            "\n\n",
        ),
    ],
}

RUNTIME = "pyodide.asm.js"

# The main module's GOT entries on first use. `mainSymbol` is what `updateGOT(main's exports)` gave
# a name: an `orig$` export (the function before JS legalization) over the plain one, and a
# function with a `byn$fpcast-emu$` twin under its twin, the function itself under
# `$no-fpcast-emu$` + name. A name the main module does not export has neither an `orig$` nor a
# `byn$fpcast-emu$` export (each is a twin of an export: tests/test_vendor.py checks it), so one
# lookup tells most of the libraries' names apart.
LAZY_MAIN_GOT = r"""
var FPCAST = "byn$fpcast-emu$", NO_FPCAST = "$no-fpcast-emu$";
function relocateMainExports(exports, memoryBase) {
  var relocated = {};
  for (var e in exports) {
    var value = exports[e];
    if (typeof value === "object") value = value.value;
    if (typeof value === "number") value += memoryBase;
    relocated[e] = value;
  }
  mainExports = relocated;
  for (var symName in GOT) if (GOT[symName].value == 0) linkFromMain(symName);
  return relocated;
}
function gotEntry(name) {
  if (!GOT[name] && mainExports !== null) linkFromMain(name);
  var pending = pendingGOT[name];
  if (pending !== undefined) {
    delete pendingGOT[name];
    for (var i = 0; i < pending.length; i += 2) {
      var only = {};
      only[pending[i + 1]] = true;
      updateGOT(pending[i], only);
    }
  }
  return GOT[name];
}
function deferGOT(name, exports, symName) {
  (pendingGOT[name] || (pendingGOT[name] = [])).push(exports, symName);
}
function mainSymbol(name) {
  var exports = mainExports, FP = FPCAST, NO = NO_FPCAST, value;
  if (name.startsWith(NO)) {
    var base = name.substring(NO.length);
    if (base.startsWith(FP) || !(FP + base in exports)) return undefined;
    value = exports["orig$" + base];
    if (typeof value === "function") return value;
    value = exports[base];
    return typeof value === "function" && !isInternalSym(base) ? value : undefined;
  }
  var plain = !name.startsWith(FP) && !(FP + name in exports);
  value = exports["orig$" + FP + name];
  if (typeof value === "function") return value;
  value = exports["orig$" + name];
  if (value !== undefined && (plain || typeof value !== "function")) return value;
  value = exports[FP + name];
  if (typeof value === "function") return value;
  value = exports[name];
  if (value !== undefined && (plain || typeof value !== "function") && !isInternalSym(name)) return value;
  return undefined;
}
function defineFromMain(name) {
  if (GOT[name] && GOT[name].value != 0) return;
  var value = mainSymbol(name);
  if (typeof value !== "function" && typeof value !== "number") return;
  if (!GOT[name]) GOT[name] = new WebAssembly.Global({ value: "i32", mutable: true });
  GOT[name].value = typeof value === "function" ? addFunctionWasm(value) : value;
}
function linkFromMain(name) {
  var FP = FPCAST, NO = NO_FPCAST, fpcast = name, plain = null;
  if (name.startsWith(NO)) {
    fpcast = name.substring(NO.length);
    plain = name;
  } else if (!(name in mainExports)) {
    return;
  } else if (typeof mainExports[FP + name] === "function") {
    plain = NO + name;
  }
  defineFromMain(fpcast);
  if (plain === null) return;
  defineFromMain(plain);
  if (GOT[fpcast] && GOT[plain] && GOT[fpcast].value && GOT[plain].value) {
    dyncallInvokeMap[GOT[fpcast].value] = GOT[plain].value;
  }
}
"""

# Pyodide's start puts ~260 JS functions in the function table (its OpenAL and GL bindings, whose
# addresses the main module takes: reportUndefinedSymbols), and convertJsFunctionToWasm compiles and
# instantiates a module of its own to wrap each (~40 ms a worker). The JS functions reportUndefinedSymbols
# adds are wrapped by one module made for them all first (prepareWrappers); convertJsFunctionToWasm
# hands back a function's prepared wrapper where its signature is the one asked for. Slots, the
# functions in them and the GOT's values are the same as before (tests/test_vendor.py).
BATCHED_WRAPPERS = r"""
var preparedWrappers = new WeakMap();
function prepareWrappers(functions) {
  if (typeof WebAssembly.Function === "function") return;
  var codes = { i: 127, j: 126, f: 125, d: 124 }, typeIndex = {}, types = [], wrapped = [];
  for (var i = 0; i < functions.length; i++) {
    var func = functions[i], sig = func.sig;
    if (typeof sig !== "string" || !/^[vijfd][ijfd]*$/.test(sig) || preparedWrappers.has(func)) continue;
    if (wrapped.indexOf(func) >= 0) continue;
    if (!(sig in typeIndex)) typeIndex[sig] = types.push(sig) - 1;
    wrapped.push(func);
  }
  if (wrapped.length < 2) return;
  function leb(n, out) {
    do {
      var low = n & 127;
      n >>>= 7;
      out.push(n ? low | 128 : low);
    } while (n);
  }
  function name(text, out) {
    leb(text.length, out);
    for (var k = 0; k < text.length; k++) out.push(text.charCodeAt(k));
  }
  function section(id, body, out) {
    out.push(id);
    leb(body.length, out);
    for (var k = 0; k < body.length; k++) out.push(body[k]);
  }
  var typeBody = [], importBody = [], exportBody = [];
  leb(types.length, typeBody);
  types.forEach(function (sig) {
    typeBody.push(96);
    leb(sig.length - 1, typeBody);
    for (var k = 1; k < sig.length; k++) typeBody.push(codes[sig[k]]);
    if (sig[0] === "v") typeBody.push(0);
    else typeBody.push(1, codes[sig[0]]);
  });
  leb(wrapped.length, importBody);
  leb(wrapped.length, exportBody);
  wrapped.forEach(function (func, k) {
    name("e", importBody);
    name(String(k), importBody);
    importBody.push(0);
    leb(typeIndex[func.sig], importBody);
    name(String(k), exportBody);
    exportBody.push(0);
    leb(k, exportBody);
  });
  var bytes = [0, 97, 115, 109, 1, 0, 0, 0];
  section(1, typeBody, bytes);
  section(2, importBody, bytes);
  section(7, exportBody, bytes);
  var module = new WebAssembly.Module(new Uint8Array(bytes));
  var instance = new WebAssembly.Instance(module, { e: Object.assign({}, wrapped) });
  wrapped.forEach(function (func, k) {
    preparedWrappers.set(func, { sig: func.sig, wrapper: instance.exports[String(k)] });
  });
}
function reportUndefinedSymbols() {
  var functions = [], names = [];
  for (var symName in GOT) {
    if (GOT[symName].value == 0) {
      var value = resolveGlobalSymbol(symName, true);
      if (typeof value === "function") {
        names.push(symName);
        functions.push(value);
      } else if (typeof value === "number") {
        GOT[symName].value = value;
      } else {
        assert(false, "bad export type for `" + symName + "`: " + typeof value);
      }
    }
  }
  prepareWrappers(functions);
  for (var i = 0; i < names.length; i++) GOT[names[i]].value = addFunctionWasm(functions[i], functions[i].sig);
}
"""
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
        raise SystemExit(f"{RUNTIME} is not the file tools/pyodide_patches.py patches")
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
            raise SystemExit(f"{name} is not the file tools/pyodide_patches.py patches")
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
    """Whether a package's data (its blocks stored: tools/pyodide.repack) holds what each of today's
    `patches` puts in (an older build's is made again)."""
    return all(new.encode("utf-8") in data for replacements in patches.values() for _, new in replacements if new)


def patched_runtime(script: str) -> str:
    """Pyodide's runtime script (RUNTIME) with RUNTIME_PATCHES applied, its exports' wrappers collapsed."""
    return collapsed_exports(_replaced(script, RUNTIME_PATCHES, RUNTIME))


def is_patched_runtime(script: str) -> bool:
    """Whether `script` is a runtime script with every one of today's RUNTIME_PATCHES in it (an older
    build's is made again)."""
    return all(new in script for _, new in RUNTIME_PATCHES) and EXPORT_LOOP in script
