"""Pyodide as the site vendors it (browser/site/pyodide.py): NumPy's package repacked without what the page
never imports, every file it keeps byte for byte the original's but the ones it patches,
Pyodide's own standard library read out of its LZ4-packed data, and its runtime script the
original's with the lazy linking of browser/site/patches.py and nothing else (the browser runs
that load and use them: tests/browser/test_e2e.py)."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import List, Tuple

import pytest

from core.browser.site import compile_page, compiled, pyodide
from core.browser.site.patches import (
    BATCHED_WRAPPERS,
    EXPORT_LOOP,
    LAZY_MAIN_GOT,
    PATCHES,
    PYODIDE_PATCHES,
    RUNTIME,
    RUNTIME_PATCHES,
    SITE_PACKAGES,
    WRAPPER,
    export_wrappers,
    patched,
    patched_runtime,
)
from tests.support.paths import PYTHON38

pytestmark = pytest.mark.slow


def test_numpy_is_trimmed_to_what_the_page_imports_and_keeps_the_rest_exact(tmp_path: Path) -> None:
    pyodide.vendor(tmp_path / "site")
    original = tmp_path / "original"
    original.mkdir()
    with tarfile.open(pyodide.tarball()) as archive:
        for name in ("numpy.js", "numpy.data", "pyodide.asm.js", "pyodide.asm.data"):
            (original / name).write_bytes(archive.extractfile(f"package/dist/{name}").read())
    before, after = pyodide.package_files(original, "numpy"), pyodide.package_files(tmp_path / "site", "numpy")
    assert (tmp_path / "site" / "numpy.js").read_text().startswith(pyodide.TRIMMED)
    kept = {name: data for name, data in patched(before).items() if not pyodide.NUMPY_UNUSED.search(name)}
    # Six files patched (browser/site/patches.py): numpy.testing and others on first use, and
    # numpy.random's RandomState and bit generators but PCG64, the two modules that import
    # numpy.linalg's functions importing them when called, the functions' dispatch made without
    # a compile (test_numpy_dispatches_as_before_with_the_patch), and no `platform` for IS_PYPY.
    init, random = SITE_PACKAGES + "numpy/__init__.py", SITE_PACKAGES + "numpy/random/__init__.py"
    on_call = [SITE_PACKAGES + "numpy/lib/polynomial.py", SITE_PACKAGES + "numpy/matrixlib/defmatrix.py"]
    internal = SITE_PACKAGES + "numpy/core/_internal.py"
    changed = sorted(name for name in kept if kept[name] != before[name])
    assert changed == sorted([init, random, OVERRIDES, internal, *on_call])
    assert b"from .testing import Tester\n" in before[init] and b"def __getattr__(attr):" in kept[init]
    assert b"\nimport platform\n" in before[internal] and b"import platform" not in kept[internal]
    for name in [init, random, internal, *on_call]:
        compile(kept[name], name, "exec")
    for name in on_call:
        assert b"\nfrom numpy.linalg import" in before[name] and b"\nfrom numpy.linalg import" not in kept[name]
    assert b"    from . import linalg\n" in before[init] and b"    from . import linalg\n" not in kept[init]
    # Its libraries apart, each a file of its own, empty in the package; those of what comes on first
    # use named as such (the worker downloads them only when Python first reads one).
    libraries = pyodide.libraries(tmp_path / "site")
    assert len(libraries) == 15 and "numpy.core._multiarray_umath.wasm" in libraries.values()
    later = sorted(name[len(SITE_PACKAGES) :] for name in libraries if pyodide.ON_FIRST_USE.search(name))
    assert later == [
        "numpy/fft/_pocketfft_internal.so",
        "numpy/linalg/_umath_linalg.so",
        "numpy/linalg/lapack_lite.so",
        "numpy/random/mt19937.so",
        "numpy/random/mtrand.so",
        "numpy/random/philox.so",
        "numpy/random/sfc64.so",
    ]
    for name, data in kept.items():
        if name.endswith(".so"):
            assert after[name] == b"" and (tmp_path / "site" / libraries[name]).read_bytes() == data
    assert after == {name: b"" if name.endswith(".so") else data for name, data in kept.items()}
    assert not any(name.endswith("_umath_tests.so") for name in after)
    assert len(before) - len(after) > 300 and "/lib/python3.8/site-packages/numpy/core/_multiarray_umath.so" in after
    assert not any("/tests/" in name or "/f2py/" in name for name in after)
    # Both packages' blocks stored as they are: nothing to decompress in the browser.
    for name in ("numpy", "pyodide.asm"):
        assert set(pyodide._numbers((tmp_path / "site" / f"{name}.js").read_text(), "successes")) == {0}
    # Pyodide's own package: six files patched, for asyncio on first use, for the functions
    # namedtuple and dataclasses write run from code compiled ahead, and for regular expressions
    # made from what sre_compile made of them when the site was built (test_e2e.py runs each).
    runtime, own = (
        pyodide.package_files(tmp_path / "site", "pyodide.asm"),
        pyodide.package_files(original, "pyodide.asm"),
    )
    assert runtime == patched(own, PYODIDE_PATCHES)
    changed = sorted(name for name in runtime if runtime[name] != own[name])
    assert changed == [
        "/lib/python3.8/collections/__init__.py",
        "/lib/python3.8/dataclasses.py",
        "/lib/python3.8/site-packages/pyodide/__init__.py",
        "/lib/python3.8/site-packages/pyodide/_base.py",
        "/lib/python3.8/site.py",
        "/lib/python3.8/sre_compile.py",
    ]
    for name in changed:
        compile(runtime[name], name, "exec")
    # None imports asyncio or platform as it is imported any more; Pyodide's own did.
    for files, expected in ((own, {"asyncio", "platform"}), (runtime, set())):
        imported = set()
        for name in changed:
            for node in compile_page._module_level_imports(ast.parse(files[name])):
                imported |= {alias.name for alias in node.names} if isinstance(node, ast.Import) else {node.module}
        assert imported & {"asyncio", "platform"} == expected
    # A second build keeps the trimmed package as it is.
    data = (tmp_path / "site" / "numpy.data").read_bytes()
    pyodide.vendor(tmp_path / "site")
    assert (tmp_path / "site" / "numpy.data").read_bytes() == data


OVERRIDES = "/lib/python3.8/site-packages/numpy/core/overrides.py"
# Every function of NumPy's that dispatches (__array_function__) as NumPy 1.17.5 makes it, with
# numpy.core.overrides's source from stdin in place of its own where argv[1] is "patched": its
# names, where it comes from, and what it does with arrays and with an __array_function__ class.
DISPATCH = """
import importlib.abc, importlib.machinery, json, sys
source = sys.stdin.read()
class Patched(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name == "numpy.core.overrides" and sys.argv[1] == "patched":
            return importlib.machinery.ModuleSpec(name, self, origin=path[0] + "/overrides.py")
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        module.__file__ = module.__spec__.origin
        exec(compile(source, module.__file__, "exec"), module.__dict__)
sys.meta_path.insert(0, Patched())
import numpy
class Duck:
    def __array_function__(self, func, types, args, kwargs):
        return [func.__name__, [t.__name__ for t in types], len(args), sorted(kwargs)]
seen = {}
for name, module in sorted(sys.modules.items()):
    for attr, value in sorted(vars(module).items() if name.startswith("numpy") else []):
        if callable(value) and hasattr(value, "_implementation") and id(value) not in seen:
            code = value.__code__
            seen[id(value)] = [name, attr, value.__name__, value.__qualname__, value.__module__, value.__doc__,
                               value.__wrapped__ is value._implementation, code.co_name, code.co_filename,
                               code.co_varnames, code.co_argcount, code.co_flags & 0x0F]
a = numpy.arange(6.0).reshape(2, 3)
try:
    numpy.concatenate([a], bogus=1)
except TypeError as error:
    refused = str(error)
print(json.dumps({"functions": sorted(seen.values()), "refused": refused,
                  "results": [numpy.concatenate([a, a]).tolist(), float(numpy.mean(a, axis=None)),
                              numpy.moveaxis(a, 0, 1).tolist(), numpy.concatenate([Duck(), a], axis=0),
                              numpy.where(Duck(), a, a), numpy.linalg.norm(Duck()), numpy.sum(Duck())]}))
"""


def test_numpy_dispatches_as_before_with_the_patch() -> None:
    """NumPy made its ~300 dispatching functions by compiling the same source for each at import;
    patched, it makes the same function as a closure (browser/site/patches.py): the same names,
    module, docs and wrapped function, the same results, and __array_function__ classes served alike."""
    python = compiled.interpreter(PYTHON38)
    if python is None:
        pytest.skip("no Python 3.8 with NumPy 1.17.5 (.venv-py38: scripts/test.sh makes it where a Python 3.8 exists)")
    where = "import numpy.core.overrides as overrides; print(overrides.__file__)"
    found = subprocess.run([python, "-c", where], capture_output=True, text=True, check=True)
    source = Path(found.stdout.strip()).read_text()
    patched_source = patched({OVERRIDES: source.encode()})[OVERRIDES].decode()
    assert "compile(" in source and "compile(" not in patched_source
    runs = {}
    for which, text in (("original", source), ("patched", patched_source)):
        done = subprocess.run([python, "-c", DISPATCH, which], input=text, capture_output=True, text=True, check=True)
        runs[which] = json.loads(done.stdout)
    assert len(runs["original"]["functions"]) > 250
    assert runs["patched"] == runs["original"]
    assert runs["patched"]["results"][3] == ["concatenate", ["Duck", "ndarray"], 1, ["axis"]]
    assert "bogus" in runs["patched"]["refused"]


# Run by the Python 3.8 with NumPy 1.17.5, on a copy of that NumPy patched as the site's is.
IMPORTED_AT_START = """import json, sys, numpy
later = ("numpy.linalg", "numpy.fft", "numpy.ma.", "numpy.random.mtrand", "numpy.random.mt19937")
later += ("numpy.random.philox", "numpy.random.sfc64", "numpy.random._pickle")
print(json.dumps(sorted(m for m in sys.modules if m.startswith(later))))"""


def test_numpy_patched_imports_linalg_and_fft_on_first_use_and_passes_its_own_tests(tmp_path: Path) -> None:
    """The site's NumPy patches (browser/site/patches.py) on pip's NumPy 1.17.5, the same release:
    `import numpy` no longer imports numpy.linalg, numpy.fft, numpy.ma, or numpy.random's
    RandomState and bit generators other than PCG64, and NumPy's own tests of the modules that
    import numpy.linalg's functions when called, of numpy.linalg and numpy.fft as `numpy.`
    attributes, and of numpy.random's bit generators and RandomState pass: those of its test files
    that pass on the unpatched NumPy with today's pytest (which no longer calls nose's `setup`), not
    its test of numpy's whole namespace (which lists what numpy.__dict__ holds: `Tester` comes on
    first use, as in NumPy 1.18, which changed that test)."""
    python = compiled.interpreter(PYTHON38)
    if python is None:
        pytest.skip("no Python 3.8 with NumPy 1.17.5 (.venv-py38: scripts/test.sh makes it where a Python 3.8 exists)")
    where = "import os, numpy; print(os.path.dirname(numpy.__file__))"
    found = Path(subprocess.run([python, "-c", where], capture_output=True, text=True, check=True).stdout.strip())
    shutil.copytree(found, tmp_path / "numpy")
    for path in PATCHES:
        copy = tmp_path / path[len(SITE_PACKAGES) :]
        copy.write_bytes(patched({path: copy.read_bytes()})[path])
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}
    started = subprocess.run([python, "-c", IMPORTED_AT_START], capture_output=True, text=True, check=True, env=env)
    assert json.loads(started.stdout) == []
    tests = ["lib/tests/test_polynomial.py", "matrixlib/tests/test_defmatrix.py"]
    tests += ["matrixlib/tests/test_matrix_linalg.py"]
    tests += ["tests/test_public_api.py::test_numpy_linalg", "tests/test_public_api.py::test_numpy_fft"]
    tests += ["linalg/tests/test_regression.py", "fft/tests/test_helper.py"]
    # numpy.random's bit generators (each one's streams, pickling), its legacy RandomState
    tests += [f"random/tests/test_{name}.py" for name in ("direct", "smoke", "seed_sequence", "randomstate_regression")]
    tests += ["random/tests/test_regression.py", "random/tests/test_generator_mt19937_regressions.py"]
    command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *(str(tmp_path / "numpy" / t) for t in tests)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " passed" in done.stdout and " failed" not in done.stdout


def test_pyodides_own_files_are_read_out_of_its_packed_data(tmp_path: Path) -> None:
    pyodide.vendor(tmp_path)
    files = pyodide.packaged_files(tmp_path, "/lib/python3.8/")
    assert files["/lib/python3.8/os.py"].startswith(b'r"""OS routines for NT or Posix')
    assert "/lib/python3.8/site-packages/pyodide/__init__.py" in files
    compile(files["/lib/python3.8/asyncio/base_events.py"], "base_events.py", "exec")  # whole, not cut at a block
    assert sum(map(len, files.values())) > 5_000_000


def test_the_runtime_script_is_the_original_with_the_patches_alone(tmp_path: Path) -> None:
    pyodide.vendor(tmp_path / "site")
    original = tmp_path / "original"
    original.mkdir()
    with tarfile.open(pyodide.tarball()) as archive:
        for name in (RUNTIME, "pyodide.asm.data"):
            (original / name).write_bytes(archive.extractfile(f"package/dist/{name}").read())
    script = (original / RUNTIME).read_text()
    assert all(script.count(old) == 1 for old, _ in RUNTIME_PATCHES)
    (original / RUNTIME).write_text(patched_runtime(script))
    pyodide.repack(original, "pyodide.asm", patched(pyodide.package_files(original, "pyodide.asm"), PYODIDE_PATCHES))
    assert (tmp_path / "site" / RUNTIME).read_text() == (original / RUNTIME).read_text()
    with pytest.raises(SystemExit, match="is not the file"):
        patched_runtime(patched_runtime(script))


def _export_names(wasm: bytes) -> List[str]:
    """The names of a WebAssembly module's exports (its export section, id 7)."""

    def leb(position: int) -> Tuple[int, int]:
        value = shift = 0
        while True:
            byte = wasm[position]
            value |= (byte & 0x7F) << shift
            position, shift = position + 1, shift + 7
            if byte < 0x80:
                return value, position

    position = 8  # magic and version
    while position < len(wasm):
        section, size_at = wasm[position], position + 1
        size, position = leb(size_at)
        if section == 7:
            count, at = leb(position)
            names = []
            for _ in range(count):
                length, at = leb(at)
                names.append(wasm[at : at + length].decode())
                _, at = leb(at + length + 1)  # the kind (1 byte), then the index
            return names
        position += size
    return []


TWINS = ("byn$fpcast-emu$", "orig$")


def test_every_twin_export_of_the_main_module_has_its_plain_one() -> None:
    """The lazy linking tells a name the main module lacks by one lookup: every `byn$fpcast-emu$X`
    (fpcast emulation) and `orig$X` (JS legalization) export of Pyodide's main module is a twin
    of an export X (browser/site/patches.py)."""
    with tarfile.open(pyodide.tarball()) as archive:
        names = _export_names(archive.extractfile("package/dist/pyodide.asm.wasm").read())
    exported = set(names)
    twins = {name: name[len(prefix) :] for name in names for prefix in TWINS if name.startswith(prefix)}
    assert len(names) > 20_000 and len(twins) > 10_000
    assert [name for name, plain in twins.items() if plain not in exported] == []


# The linker as Pyodide wrote it and as the site patches it, run side by side in Node on made-up
# exports (main: plain, fpcast and legalized twins, data; libraries: names of their own, of main's,
# of each other's, twins, `orig$` replacements): the functions of Pyodide's script, their globals
# stubbed (a function table that hands out slots, the GOT, dyncallInvokeMap).
LINKER_WORLDS = r"""
const vm = require("vm");
const [eagerCode, lazyCode] = JSON.parse(require("fs").readFileSync(0, "utf8"));
const fn = (name) => { const f = function () {}; f.label = name; return f; };
const main = {};
for (const name of ["a", "b", "c", "m"]) main[name] = fn("main " + name);
main["byn$fpcast-emu$a"] = fn("main fpcast a");
main["orig$b"] = fn("main orig b");
main["orig$byn$fpcast-emu$c"] = fn("main orig fpcast c");
main["byn$fpcast-emu$c"] = fn("main fpcast c");
main.data = 4096;
const lib1 = { x: fn("lib1 x"), "byn$fpcast-emu$x": fn("lib1 fpcast x"), a: fn("lib1 a"), y: fn("lib1 y"),
  "orig$m": fn("lib1 orig m"), "byn$fpcast-emu$y": fn("lib1 fpcast y"), d1: 512, "__dso_handle": 8 };
const lib2 = { y: fn("lib2 y"), "orig$y": fn("lib2 orig y"), "orig$x": fn("lib2 orig x"), z: fn("lib2 z"),
  "byn$fpcast-emu$z": fn("lib2 fpcast z"), "byn$fpcast-emu$a": fn("lib2 fpcast a"), d1: 1024, d2: 2048 };
const asked = ["a", "b", "c", "m", "x", "y", "z", "d1", "d2", "data", "byn$fpcast-emu$a",
  "$no-fpcast-emu$a", "$no-fpcast-emu$c", "$no-fpcast-emu$x", "$no-fpcast-emu$y", "$no-fpcast-emu$z", "nothing"];

function world(code, lazy) {
  const table = [null];
  const context = { WebAssembly, err: (m) => { throw new Error(m); } };
  context.addFunctionWasm = (f) => { const i = table.indexOf(f); return i > 0 ? i : table.push(f) - 1; };
  vm.createContext(context);
  const globals = "var GOT={};var dyncallInvokeMap={};var mainExports=null,pendingGOT=Object.create(null);";
  vm.runInContext(globals + code, context);
  context.main = main; context.libs = [lib1, lib2];
  vm.runInContext(lazy ? "relocateMainExports(main, 0)" : "updateGOT(main)", context);
  // A library's own GOT import, made before its exports are filed (a name it defines itself).
  vm.runInContext(lazy ? "gotEntry('y') || (GOT.y = new WebAssembly.Global({value: 'i32', mutable: true}))"
    : "GOT.y || (GOT.y = new WebAssembly.Global({value: 'i32', mutable: true}))", context);
  vm.runInContext("for (var lib of libs) updateGOT(lib)", context);
  const made = Object.keys(context.GOT).length;
  const at = (v) => (v > 0 && v < table.length && typeof table[v] === "function" ? table[v].label : v);
  const got = {};
  for (const name of asked) {
    const entry = lazy ? vm.runInContext(`gotEntry(${JSON.stringify(name)})`, context) : context.GOT[name];
    got[name] = entry ? at(entry.value) : null;
  }
  const pairs = Object.entries(vm.runInContext("dyncallInvokeMap", context)).map(([k, v]) => at(+k) + " -> " + at(v));
  return { got, pairs: pairs.sort(), made };
}
process.stdout.write(JSON.stringify([world(eagerCode, false), world(lazyCode, true)]));
"""


# Runs each script's export wrappers on a Module whose asm has a function per export: every key of
# Module they make, called, forwards its arguments to its export and is then the export itself.
EXPORT_WORLDS = r"""
const vm = require("vm");
const { names, sections } = JSON.parse(require("fs").readFileSync(0, "utf8"));
const worlds = sections.map((code) => {
  const asm = {};
  for (const name of names) asm[name] = (...args) => [name, ...args];
  const Module = { asm };
  vm.runInNewContext(code, { Module });
  const made = {};
  for (const key of Object.keys(Module).filter((key) => key !== "asm").sort()) {
    const result = Module[key](key.length, 7);
    made[key] = [...result, Module[key] === asm[result[0]]];
  }
  return made;
});
process.stdout.write(JSON.stringify(worlds));
"""


def test_the_collapsed_export_wrappers_make_every_one_as_before() -> None:
    """browser/site/patches.collapsed_exports: the same key of Module for each of the main module's
    exports, forwarding to the same export and replaced by it at the first call, as Pyodide's own
    wrappers; those the script names elsewhere are still its own (the variable is read)."""
    with tarfile.open(pyodide.tarball()) as archive:
        original = archive.extractfile(f"package/dist/{RUNTIME}").read().decode()
    script = patched_runtime(original)
    wrappers = export_wrappers(original)
    sections = [original[wrappers[0].start() : wrappers[-1].end()]]
    loop = script.index(EXPORT_LOOP)
    after = original[wrappers[-1].end() :][:200]  # the script's text after the wrappers, as it was
    sections.append(script[script.rindex('"', 0, loop - 1) : script.index(after, loop)])
    names = [m.group(2) for m in WRAPPER.finditer(sections[0])]
    kept = export_wrappers(script)
    assert len(names) > 4000 and 0 < len(kept) < 100 and "_malloc" in script.replace(sections[1], "")
    run = subprocess.run(
        ["node", "-e", EXPORT_WORLDS],
        input=json.dumps({"names": names, "sections": sections}),
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0
    before, after = json.loads(run.stdout)
    assert len(before) == len(names) and after == before
    assert all(made[-1] is True for made in after.values())
    assert len(script) < 0.65 * len(original)


def _between(script: str, start: str, end: str) -> str:
    at = script.index(start)
    return script[at : script.index(end, at)]


def test_lazy_linking_files_every_asked_for_entry_as_the_eager_linker_did() -> None:
    """Every GOT entry asked for after the libraries loaded holds the function (or address) the
    eager linker gave it, and dyncallInvokeMap pairs the same functions, though the lazy linker
    makes only the entries asked for (browser/site/patches.py: the main module's, the libraries'
    exports)."""
    with tarfile.open(pyodide.tarball()) as archive:
        original = archive.extractfile(f"package/dist/{RUNTIME}").read().decode()
    patched_script = patched_runtime(original)
    internal = _between(original, "function isInternalSym(", 'Module["isInternalSym"]')

    def update(script: str) -> str:
        return _between(script, "function updateGOT(", 'Module["updateGOT"]')

    assert LAZY_MAIN_GOT in patched_script
    codes = [internal + update(original), internal + update(patched_script) + LAZY_MAIN_GOT]
    run = subprocess.run(["node", "-e", LINKER_WORLDS], input=json.dumps(codes), capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    eager, lazy = json.loads(run.stdout)
    assert lazy["got"] == eager["got"]
    assert lazy["got"]["x"] == "lib2 orig x" and lazy["got"]["y"] == "lib2 orig y"  # `orig$` replaces
    assert lazy["got"]["a"] == "main fpcast a" and lazy["got"]["d1"] == 512 and lazy["got"]["nothing"] is None

    # Each pair: a function's fpcast twin -> the function. The eager pass made one wrong: its
    # updateGOT keeps `newFn` from the export before (a `var` in its loop), so a library's fpcast
    # twin of a name already filed re-pairs the export before it (lib2's z) with that name's function.
    def is_twin(pair: str) -> bool:
        fpcast, plain = pair.split(" -> ")
        return fpcast.replace(" orig", "").replace(" fpcast", "") == plain

    assert all(map(is_twin, lazy["pairs"])) and len(lazy["pairs"]) == 5
    assert sorted(set(eager["pairs"]) - set(lazy["pairs"])) == ["lib2 fpcast z -> main a"]
    assert sorted(set(lazy["pairs"]) - set(eager["pairs"])) == ["lib2 fpcast z -> lib2 z"]
    assert lazy["made"] < eager["made"]


# Pyodide's start filling the function table (reportUndefinedSymbols and the functions of its script from
# convertJsFunctionToWasm to addFunctionWasm), as Pyodide wrote it and as the site patches it
# (browser/site/patches.BATCHED_WRAPPERS), run side by side in Node on a real WebAssembly.Table: a GOT
# of made-up JS functions with signatures (one under two names, one of i64), an address, an entry
# already filled and a function of a real WebAssembly module. Each world reports what every entry's
# slot does when called, and how many modules it compiled.
TABLE_WORLDS = r"""
const vm = require("vm");
const codes = JSON.parse(require("fs").readFileSync(0, "utf8"));
const adderBytes = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 7, 1, 96, 2, 127, 127, 1, 127, 3, 2, 1, 0,
  7, 5, 1, 1, 119, 0, 0, 10, 9, 1, 7, 0, 32, 0, 32, 1, 106, 11]);  // exports w(x, y) = x + y
const adder = new WebAssembly.Instance(new WebAssembly.Module(adderBytes)).exports.w;
function world(code) {
  const calls = [];
  const js = (sig, body) => Object.assign(function (...args) {
    calls.push([sig, ...args.map(String)]);
    return body(...args);
  }, { sig });
  const triple = js("ii", (x) => 3 * x);
  const library = { a: triple, c: triple, b: js("vii", () => undefined), d: js("jj", (x) => x * 2n),
    e: js("dd", (x) => x / 2), f: js("iiii", (x, y, z) => x + y * z), n: 4096, w: adder, filled: js("i", () => 1) };
  let modules = 0;
  const context = { Uint8Array, WeakMap, Map, String, Object, TypeError, RangeError, calls };
  context.WebAssembly = { Module: function (bytes) { modules++; return new WebAssembly.Module(bytes); },
    Instance: WebAssembly.Instance, Global: WebAssembly.Global, Table: WebAssembly.Table, Function: undefined };
  context.wasmTable = new WebAssembly.Table({ initial: 2, element: "anyfunc" });
  context.wasmTable.set(1, adder);
  context.GOT = {};
  for (const name of Object.keys(library)) {
    context.GOT[name] = new WebAssembly.Global({ value: "i32", mutable: true }, 0);
  }
  context.GOT.filled.value = 1;
  context.resolveGlobalSymbol = (name) => library[name];
  context.assert = (ok, message) => { if (!ok) throw new Error(message); };
  vm.createContext(context);
  vm.runInContext(code + "\nreportUndefinedSymbols();", context);
  const slot = (name) => context.wasmTable.get(context.GOT[name].value);
  const results = {
    got: Object.fromEntries(Object.keys(library).map((name) => [name, context.GOT[name].value])),
    a: slot("a")(5), c: slot("c")(7), b: slot("b")(1, 2), d: String(slot("d")(21n)), e: slot("e")(3),
    f: slot("f")(1, 2, 3), w: slot("w")(2, 3), wasmAsIs: slot("w") === adder, size: context.wasmTable.length,
  };
  return { results, calls, modules };
}
process.stdout.write(JSON.stringify(codes.map(world)));
"""


def test_the_tables_js_functions_are_wrapped_by_one_module_and_do_what_they_did() -> None:
    """The site's reportUndefinedSymbols (browser/site/patches.BATCHED_WRAPPERS) fills every GOT entry
    with the same slot as Pyodide's, each slot calling the same function with the same arguments
    (i64 too), where Pyodide's made a module per JS function and the site's one for them all."""
    with tarfile.open(pyodide.tarball()) as archive:
        original = archive.extractfile(f"package/dist/{RUNTIME}").read().decode()
    script = patched_runtime(original)
    assert BATCHED_WRAPPERS in script
    codes = [
        _between(source, "function convertJsFunctionToWasm(", "function removeFunction(")
        + _between(source, start, 'Module["reportUndefinedSymbols"]')
        for source, start in ((original, "function reportUndefinedSymbols("), (script, "var preparedWrappers"))
    ]
    run = subprocess.run(["node", "-e", TABLE_WORLDS], input=json.dumps(codes), capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    before, after = json.loads(run.stdout)
    assert after["results"] == before["results"] and after["calls"] == before["calls"]
    assert after["results"]["got"]["a"] == after["results"]["got"]["c"] and after["results"]["wasmAsIs"]
    assert after["results"]["d"] == "42" and after["results"]["f"] == 7 and after["results"]["got"]["n"] == 4096
    assert before["modules"] == 5 and after["modules"] == 1  # a, b, d, e, f: one module each, or one
