"""The page's Python modules compiled ahead of time, for Pyodide 0.17's Python 3.8: without them, each
worker compiles every module it imports from source on every visit (numpy's alone cost ~0.3 s of
a worker's start-up, Python's and Pyodide's own start ~0.3 s more).

`archive(wheels, out, pyodide)` (run by tools/site.py on the building Python) starts a Python 3.8
with NumPy 1.17.5 (the .venv-py38 that scripts/test.sh makes) on this module; it imports what
Pyodide's start imports (Python's own start, and the module-level imports of Pyodide's `pyodide`
and `_pyodide` packages) and what a worker imports (numpy, and core.browser.engine from the
site's wheels, which brings num2words), and compiles every module that came from the wheels,
NumPy or the standard library, and each of Pyodide's packages. Each one is a checked-hash .pyc
(PEP 552) at the path Pyodide's file system gives its source, so Python uses it only where its
source is byte for byte the one it was compiled from, and compiles the source as before where it
is not. The standard library's modules are compiled from Pyodide's own sources (3.8.2, read out
of pyodide.asm.data: tools/pyodide.py), not from the later 3.8 here, whose files differ in 41 of
them (and those Pyodide leaves out are left out); NumPy's from the page's NumPy package (patched:
tools/pyodide_patches.py), imported here as pip's NumPy with the package's Python files over it.

Those of Pyodide's own files go into its own package (tools/pyodide.add_to_runtime): Pyodide
writes them with its standard library, before Python starts; so does GENERATED
(tools/pyodide_patches.py), the functions namedtuple and dataclasses write as source while those
imports run (recorded in a fresh Python 3.8), compiled, and REGEXES, what sre_compile makes of
each regular expression they and the reading of a first text compile. The others (NumPy's, ours) make the
archive, one gzip file: a line of JSON, [[source path, .pyc path, size], ...], then the files one
after another; the worker writes each whose source its file system has before it imports numpy
and core (core/browser/worker.js).
"""

from __future__ import annotations

import ast
import gzip
import importlib
import importlib.util
import json
import os
import py_compile
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path
from typing import Any, List, Optional, Sequence, Tuple

from tools.pyodide import add_to_runtime, package_files, packaged_files
from tools.pyodide_patches import GENERATED, PYODIDE_PATCHES, REGEXES, SITE_PACKAGES, STDLIB, patched

ROOT = Path(__file__).resolve().parent.parent
PYTHON38 = ROOT / ".venv-py38" / "bin" / "python"
NUMPY = "1.17.5"  # Pyodide 0.17.1's
IMPORTS = ("numpy", "core.browser.engine")  # what a worker imports (core/browser/worker.js)
NAME = "python-3.8.pyc.gz"
PYODIDE_PACKAGES = ("pyodide", "_pyodide")  # Pyodide's own, in its site-packages: its start imports them


def interpreter() -> Optional[str]:
    """A Python 3.8 with NumPy 1.17.5, or None."""
    if not PYTHON38.exists():
        return None
    check = f"import sys, numpy; print(sys.version_info[:2] == (3, 8) and numpy.__version__ == {NUMPY!r})"
    done = subprocess.run([str(PYTHON38), "-c", check], capture_output=True, text=True)
    return str(PYTHON38) if done.returncode == 0 and done.stdout.strip() == "True" else None


def archive(wheels: List[Path], out: Path, pyodide: Path) -> Optional[Path]:
    """Write out/NAME from the site's wheels, and add the .pyc files of Pyodide's own modules (its
    standard library and its `pyodide` packages) to its package in `pyodide` (add_to_runtime);
    None (nothing written, Pyodide's package as it came) without a Python 3.8 with NumPy 1.17.5,
    where the page compiles its modules itself as before."""
    python = interpreter()
    if python is None:
        script = pyodide / "pyodide.asm.js"
        if script.exists() and "/__pycache__/" in script.read_text():  # added by an earlier build
            add_to_runtime(pyodide, {})
        return None
    target = out / NAME
    runtime = packaged_files(pyodide, STDLIB)
    numpy = package_files(pyodide, "numpy")
    with tempfile.TemporaryDirectory() as folder:
        for path, data in {**runtime, **numpy}.items():
            if path.endswith(".py"):
                copy = Path(folder) / path[len(STDLIB) :]
                copy.parent.mkdir(parents=True, exist_ok=True)
                copy.write_bytes(data)
        listed = Path(folder) / "compiled"
        command = [python, "-m", "tools.compiled", str(listed), folder, *map(str, wheels)]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"compiling the page's modules failed: {done.stderr.strip()[-1000:]}")
        files = parse(listed.read_bytes())
    add_to_runtime(pyodide, {pyc: data for source, pyc, data in files if source in runtime})
    target.write_bytes(_archived([(source, pyc, data) for source, pyc, data in files if source not in runtime]))
    return target


def _archived(files: List[Tuple[str, str, bytes]]) -> bytes:
    """The archive's bytes: the listing of `files`, gzipped."""
    return gzip.compress(listing(files), 9, mtime=0)


def listing(files: Sequence[Tuple[Any, ...]]) -> bytes:
    """The files the worker writes into its file system as it reads them (core/browser/worker.js
    listedFiles), each (name, ..., bytes): a line of JSON, [[name, ..., size], ...], then the files
    one after another. Here (source path, .pyc path, .pyc); our packages' files (path, bytes):
    tools/site.py."""
    header = json.dumps([[*names, len(data)] for *names, data in files]).encode()
    return header + b"\n" + b"".join(row[-1] for row in files)


def parse(data: bytes) -> List[Tuple[Any, ...]]:
    """The (name, ..., bytes) of each file of a listing."""
    header, _, body = data.partition(b"\n")
    files, offset = [], 0
    for *names, size in json.loads(header):
        files.append((*names, body[offset : offset + size]))
        offset += size
    return files


def read(path: Path) -> List[Tuple[str, str, bytes]]:
    """The (source path, .pyc path, .pyc bytes) of an archive."""
    return parse(gzip.decompress(path.read_bytes()))


def pyodide_path(source: str, roots: List[Tuple[str, str]]) -> Optional[str]:
    for root, target in roots:
        if source.startswith(root + os.sep):
            return target + os.path.relpath(source, root).replace(os.sep, "/")
    return None


def start_imports(folder: str) -> List[str]:
    """The modules that Pyodide's own packages (under `folder`, its site-packages) import as they are
    imported themselves: their module-level imports (not those inside functions), from each
    package's __init__ through the modules of theirs it imports. With Python's own start, what
    Pyodide's start imports."""
    names, seen = set(), set()
    todo = [(package, "__init__") for package in PYODIDE_PACKAGES]
    while todo:
        package, module = todo.pop()
        path = Path(folder, package, module + ".py")
        if (package, module) in seen or not path.exists():
            continue
        seen.add((package, module))
        for node in _module_level_imports(ast.parse(path.read_bytes())):
            if isinstance(node, ast.Import):
                modules = [(alias.name, []) for alias in node.names]
            elif node.level == 0:
                modules = [(node.module, [alias.name for alias in node.names])]
            else:  # from . import x, from .x import y: modules of this very package
                modules = [(f"{package}.{node.module}" if node.module else package, [a.name for a in node.names])]
            for name, members in modules:
                top, _, rest = name.partition(".")
                if top not in PYODIDE_PACKAGES:
                    names.add(name)
                elif rest:
                    todo.append((top, rest.split(".")[0]))
                else:  # the package's __init__, and those of its members that are modules
                    todo += [(top, "__init__")] + [(top, member) for member in members]
    return sorted(names)


def _numpy_overlay(vendored: str, into: str) -> None:
    """NumPy as pip installed it here (its extension modules), with the Python files of the page's
    NumPy package (`vendored`: Pyodide's, patched by tools/pyodide_patches.py) over it, at `into`:
    imported, it imports what the page's NumPy imports, and its modules are compiled from the very
    files the page has (Pyodide's own __config__.py and _dtype_ctypes.py differ from pip's)."""
    installed = importlib.util.find_spec("numpy").submodule_search_locations[0]
    shutil.copytree(installed, into, copy_function=os.symlink)
    for folder, _, names in os.walk(vendored):
        for name in names:
            source = os.path.join(folder, name)
            copy = os.path.join(into, os.path.relpath(source, vendored))
            os.makedirs(os.path.dirname(copy), exist_ok=True)
            if os.path.lexists(copy):
                os.unlink(copy)
            shutil.copyfile(source, copy)


def _module_level_imports(tree: ast.Module) -> List[ast.AST]:
    """The import statements a module runs as it is imported: not those inside functions."""
    found, todo = [], list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return found


# In a fresh Python 3.8, as the modules named import and the text `FIRST_TEXT` is read in each
# language (a model's load compiles its language's normalization rules, a first text what they
# apply): records the source of every function namedtuple and dataclasses write (and compile with
# exec), written compiled, {source: code}; and the arguments sre_compile hands `_sre.compile` for
# each regular expression compiled from a pattern, {(pattern, flags): (flags, code, groups,
# groupindex, indexgroup)}.
RECORD = """
import _sre, sys, types
# The page's _sre, recording what sre_compile hands it. Its MAXREPEAT, which the code of an
# unbounded repeat holds, is a 32-bit Py_ssize_t's maximum in WebAssembly (2**32 - 1 here).
assert "sre_compile" not in sys.modules
patterns, made = {}, []
sre = types.ModuleType("_sre")
vars(sre).update(vars(_sre))
sre.MAXREPEAT = 2**31 - 1
sre.compile = lambda *arguments: made.append(arguments) or _sre.compile(*arguments)
sys.modules["_sre"] = sre
import sre_compile
compile_pattern = sre_compile.compile
def compile_recording(p, flags=0):
    made.clear()
    compiled = compile_pattern(p, flags)
    if isinstance(p, (str, bytes)):
        _, final, code, groups, groupindex, indexgroup = made[0]
        patterns[(p, int(flags))] = (int(final), [int(c) for c in code], groups, dict(groupindex), indexgroup)
    return compiled
sre_compile.compile = compile_recording
import collections, importlib, marshal
sources = []
def recording(source, *namespaces):
    sources.append(source)
    return exec(source, *namespaces)
collections.exec = recording
import dataclasses
dataclasses.exec = recording
functions, regexes, start, imports, text = sys.argv[1:6]
for name in start.split():
    try:
        importlib.import_module(name)
    except ImportError:  # Pyodide's own (js, its core)
        pass
for name in imports.split():
    importlib.import_module(name)
from core.portable import normalize, planning
for language in normalize.LANGUAGES:
    planning.spoken(text, language)
compiled = {source: compile(source, "<string>", "exec", dont_inherit=True) for source in sorted(set(sources))}
with open(functions, "wb") as f:
    marshal.dump(compiled, f)
with open(regexes, "wb") as f:
    marshal.dump(patterns, f)
"""

# A text whose reading compiles what a first text's does beyond the rules (numbers, a date, a time,
# money, a URL, an e-mail address, initials, a pause).
FIRST_TEXT = (
    "Hello, Dr. Smith! On 12/03/2026 at 10:30 am, the U.S. team paid $4.50 (20%) for 3 items [pause:0.5s] "
    "see https://example.com/a?b=1 or write to a.b@example.org; version 1.2.25 is out."
)
# Python's own: a worker's regular expressions are compiled ahead by those of the Python that builds
# the site, which must be the page's (3.8.2's, Pyodide's standard library, patched) byte for byte.
SRE = ("sre_compile.py", "sre_parse.py", "sre_constants.py")


def _compiled_at_start(start: List[str], path: List[str], stdlib: str) -> Tuple[bytes, bytes]:
    """GENERATED's and REGEXES's bytes (tools/pyodide_patches.py): the functions namedtuple and
    dataclasses write, and the regular expressions compiled, as Pyodide's start (`start`), a
    worker's imports (IMPORTS, from `path`) and the reading of a first text run."""
    here = {STDLIB + name: Path(sysconfig.get_paths()["stdlib"], name).read_bytes() for name in SRE}
    for name, data in patched(here, PYODIDE_PATCHES).items():
        if Path(stdlib, name[len(STDLIB) :]).read_bytes() != data:
            raise RuntimeError(f"{name} differs from the page's (Pyodide's): its patterns would compile differently")
    with tempfile.TemporaryDirectory() as folder:
        functions, regexes = os.path.join(folder, "functions"), os.path.join(folder, "regexes")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
        done = subprocess.run(
            [sys.executable, "-c", RECORD, functions, regexes, " ".join(start), " ".join(IMPORTS), FIRST_TEXT],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"recording what a worker's start compiles failed: {done.stderr.strip()[-1000:]}")
        return Path(functions).read_bytes(), Path(regexes).read_bytes()


def compile_imports(target: Path, stdlib: str, wheels: List[str]) -> None:
    """Under Python 3.8: import what Python's and Pyodide's start import and IMPORTS (from the
    unpacked wheels), and write to `target` (uncompressed) every module that came from the wheels,
    NumPy or the standard library, those compiled from Pyodide's sources in `stdlib` (its
    standard library, those it lacks left out, and its own packages, each of their modules),
    GENERATED and REGEXES."""
    with tempfile.TemporaryDirectory() as unpacked, tempfile.TemporaryDirectory() as overlay:
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as archive_file:
                archive_file.extractall(unpacked)
        _numpy_overlay(os.path.join(stdlib, SITE_PACKAGES[len(STDLIB) :], "numpy"), os.path.join(overlay, "numpy"))
        sys.path[:0] = [unpacked, overlay]
        # What a fresh interpreter has imported before anything runs: Pyodide's Python imports the
        # same standard modules; others (this environment's own) are not the page's.
        fresh = subprocess.run([sys.executable, "-c", "import sys; print(' '.join(sys.modules))"], capture_output=True)
        before = set(fresh.stdout.decode().split())
        pyodide_packages = os.path.join(stdlib, "site-packages")
        start = start_imports(pyodide_packages)
        for name in start:
            try:
                importlib.import_module(name)
            except ImportError:  # Pyodide's own (js, its core): no standard module to compile
                pass
        for name in IMPORTS:
            importlib.import_module(name)
        homes = [(unpacked, SITE_PACKAGES), (overlay, SITE_PACKAGES), (sysconfig.get_paths()["stdlib"], STDLIB)]
        roots = [(os.path.realpath(home), target) for home, target in homes]
        sources = []
        for name in sorted(sys.modules):
            source = getattr(sys.modules[name], "__file__", None) or ""
            path = pyodide_path(os.path.realpath(source), roots) if source.endswith(".py") else None
            if path is None or (name in before and not path.startswith(STDLIB)):
                continue
            if not path.startswith(SITE_PACKAGES):
                source = os.path.join(stdlib, path[len(STDLIB) :])
                if not os.path.exists(source):
                    continue
            sources.append((source, path))
        for package in PYODIDE_PACKAGES:
            for source in sorted(Path(pyodide_packages, package).glob("*.py")):
                sources.append((str(source), f"{SITE_PACKAGES}{package}/{source.name}"))
        functions, regexes = _compiled_at_start(start, [unpacked, overlay], stdlib)
        files = [
            (STDLIB + "collections/__init__.py", GENERATED, functions),
            (STDLIB + "sre_compile.py", REGEXES, regexes),
        ]
        compiled = os.path.join(unpacked, "compiled.pyc")
        for source, path in sources:
            checked = py_compile.PycInvalidationMode.CHECKED_HASH
            py_compile.compile(source, compiled, dfile=path, doraise=True, invalidation_mode=checked)
            with open(compiled, "rb") as f:
                files.append((path, importlib.util.cache_from_source(path), f.read()))
    target.write_bytes(listing(files))


if __name__ == "__main__":
    compile_imports(Path(sys.argv[1]), sys.argv[2], sys.argv[3:])
