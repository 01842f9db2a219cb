"""core/ must run unchanged in Pyodide 0.17 (Python 3.8, NumPy 1.17): NumPy and the standard library
only, with PyYAML, the tokenizer libraries and soundfile confined to CPython-only loaders."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parent.parent / "core"
# Imported inside the functions that need them, never at module level.
CPYTHON_ONLY = {"yaml", "sentencepiece", "tokenizers", "soundfile", "huggingface_hub"}
FORBIDDEN = {"threading", "multiprocessing", "concurrent", "socket", "urllib", "http", "asyncio", "torch", "scipy"}
# The one module that may reach the network (downloads, CPython only); the model code never does.
NETWORK_MODULE = "hub.py"
# The command line's batch runner may run worker processes or Ray tasks, importing them inside the
# functions that do (the model code never does).
RUNNER_MODULE = "batch.py"
RUNNER_ONLY = {"multiprocessing", "concurrent", "ray", "threadpoolctl", "tqdm"}


def imports(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node, alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node, node.module.split(".")[0]


def test_core_imports_numpy_and_the_standard_library_only() -> None:
    stdlib = set(sys.stdlib_module_names)
    for path in sorted(CORE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        top_level = {id(n) for n in tree.body}
        for node, module in imports(tree):
            where = f"{path.relative_to(CORE)}:{node.lineno}"
            if module in RUNNER_ONLY:
                assert path.relative_to(CORE) == Path(RUNNER_MODULE), f"{where} imports {module}"
                assert id(node) not in top_level, f"{where}: {module} must be imported where it is used"
                continue
            if not (path.relative_to(CORE) == Path(NETWORK_MODULE) and module in ("socket", "urllib")):
                assert module not in FORBIDDEN, f"{where} imports {module}"
            if module in CPYTHON_ONLY:
                assert id(node) not in top_level, f"{where}: {module} must be imported where it is used"
            else:
                assert module in stdlib or module in ("numpy", "__future__"), f"{where} imports {module}"


def sibling_imports(tree: ast.AST) -> set:
    """Modules of core/ imported with relative imports (`from . import x`, `from .x import y`)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found |= {node.module} if node.module else {alias.name for alias in node.names}
    return found


def test_model_math_does_not_import_the_network_module() -> None:
    for name in ("nn", "conv", "transformer", "seanet", "mimi", "flow_lm", "audio", "text", "voice", "params"):
        assert "hub" not in sibling_imports(ast.parse((CORE / f"{name}.py").read_text())), name


def test_every_core_module_uses_postponed_annotations() -> None:
    for path in sorted(CORE.rglob("*.py")):
        assert "from __future__ import annotations" in path.read_text(), path.relative_to(CORE)


def test_vermin_says_python_3_8() -> None:
    vermin = Path(sys.executable).parent / "vermin"
    done = subprocess.run(
        [str(vermin), "-t=3.8-", "--no-tips", "--violations", str(CORE)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
