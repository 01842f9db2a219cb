"""The page's modules compiled, run by browser/site/compiled.py on a Python 3.8 with NumPy 1.17.5 (the
page's versions) as a script of its own: it imports nothing of this project, so that the only
`core` this Python imports is the page's, from the site's files.

    python3.8 compile_page.py TASK.json

TASK names the folders (Pyodide's standard library and its own packages, as the page has them
patched; the page's site-packages files; NumPy's as the page has them) and what to import:
Python's and Pyodide's start (the module-level imports of Pyodide's `pyodide` and `_pyodide`
packages), then the page's imports (numpy, and the page's Python, which brings core and
num2words), then a first text read in each language. It writes TASK's `out`: a pickle of
[(source path, .pyc path, .pyc bytes), ...], every module that came from the site's files, NumPy
or the standard library, compiled (checked-hash .pyc, PEP 552) at the path Pyodide's file system
gives its source; those of Pyodide's standard library from its own sources (3.8.2's, which differ
from this Python's in 41 files); and the two records the patched standard library reads
(`generated` and `regexes`): the functions namedtuple and dataclasses write while those imports
run, compiled, and what sre_compile makes of each regular expression compiled.
"""

import ast
import importlib
import importlib.util
import json
import os
import pickle
import py_compile
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import List, Optional, Tuple

PYODIDE_PACKAGES = ("pyodide", "_pyodide")  # Pyodide's own, in its site-packages: its start imports them


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
    NumPy package (`vendored`: Pyodide's, patched by browser/site/patches.py) over it, at `into`:
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
from core.portable.synthesis import planning
from core.portable.text import normalize
for language in normalize.LANGUAGES:
    planning.spoken(text, language)
compiled = {source: compile(source, "<string>", "exec", dont_inherit=True) for source in sorted(set(sources))}
with open(functions, "wb") as f:
    marshal.dump(compiled, f)
with open(regexes, "wb") as f:
    marshal.dump(patterns, f)
"""


def compiled_at_start(task: dict, start: List[str], path: List[str]) -> Tuple[bytes, bytes]:
    """The records' bytes (`generated`, `regexes`): the functions namedtuple and dataclasses write,
    and the regular expressions compiled, as Pyodide's start (`start`), the page's imports (from
    `path`) and the reading of a first text run, in a fresh interpreter."""
    with tempfile.TemporaryDirectory() as folder:
        functions, regexes = os.path.join(folder, "functions"), os.path.join(folder, "regexes")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
        arguments = [functions, regexes, " ".join(start), " ".join(task["imports"]), task["first_text"]]
        done = subprocess.run(
            [sys.executable, "-c", RECORD, *arguments], cwd=folder, env=env, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise RuntimeError(f"recording what a worker's start compiles failed: {done.stderr.strip()[-1000:]}")
        return Path(functions).read_bytes(), Path(regexes).read_bytes()


def compile_imports(task: dict) -> List[Tuple[str, str, bytes]]:
    """Import what Python's and Pyodide's start import and the page's imports, and compile every
    module that came from the site's files, NumPy or the standard library (see the module's
    docstring)."""
    stdlib, site_packages, stdlib_path = task["stdlib"], task["site_packages_path"], task["stdlib_path"]
    with tempfile.TemporaryDirectory() as overlay:
        _numpy_overlay(os.path.join(stdlib, site_packages[len(stdlib_path) :], "numpy"), os.path.join(overlay, "numpy"))
        sys.path[:0] = [task["packages"], overlay]
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
        for name in task["imports"]:
            importlib.import_module(name)
        homes = [
            (task["packages"], site_packages),
            (overlay, site_packages),
            (sysconfig.get_paths()["stdlib"], stdlib_path),
        ]
        roots = [(os.path.realpath(home), target) for home, target in homes]
        sources = []
        for name in sorted(sys.modules):
            source = getattr(sys.modules[name], "__file__", None) or ""
            path = pyodide_path(os.path.realpath(source), roots) if source.endswith(".py") else None
            if path is None or (name in before and not path.startswith(stdlib_path)):
                continue
            if not path.startswith(site_packages):
                source = os.path.join(stdlib, path[len(stdlib_path) :])
                if not os.path.exists(source):
                    continue
            sources.append((source, path))
        for package in PYODIDE_PACKAGES:
            for source in sorted(Path(pyodide_packages, package).glob("*.py")):
                sources.append((str(source), f"{site_packages}{package}/{source.name}"))
        functions, regexes = compiled_at_start(task, start, [task["packages"], overlay])
        files = [
            (stdlib_path + "collections/__init__.py", task["generated"], functions),
            (stdlib_path + "sre_compile.py", task["regexes"], regexes),
        ]
        compiled = os.path.join(overlay, "compiled.pyc")
        for source, path in sources:
            checked = py_compile.PycInvalidationMode.CHECKED_HASH
            py_compile.compile(source, compiled, dfile=path, doraise=True, invalidation_mode=checked)
            with open(compiled, "rb") as f:
                files.append((path, importlib.util.cache_from_source(path), f.read()))
    return files


if __name__ == "__main__":
    task = json.loads(Path(sys.argv[1]).read_text())
    Path(task["out"]).write_bytes(pickle.dumps(compile_imports(task), protocol=4))
