"""The floors of the code, checked on its import statements (all of them: at module level, inside
functions, under TYPE_CHECKING).

core/portable/ must run unchanged in Pyodide 0.17 (Python 3.8, NumPy 1.17): NumPy, num2words (the
words of text normalization) and the standard library only, PyYAML, the tokenizer libraries and
soundfile imported inside the CPython-only loaders that need them, and nothing of the host above it.
The host (core/*.py) imports the portable model and, inside the functions that need them, the
libraries of the command line. Every import runs down a floor or stays on its own (portable model <
CPython host < the browser worker's Python half (core/browser), server < the development libraries
(tools/) and the end-to-end harness < the developers' commands (scripts/) < the installed command),
and no module imports itself round a circle.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "core"
PORTABLE = CORE / "portable"
# Imported inside the functions that need them, never at module level.
CPYTHON_ONLY = {"yaml", "sentencepiece", "tokenizers", "soundfile", "huggingface_hub"}
# The one library besides NumPy the portable model uses: the number words of text normalization
# (pure Python; the site carries its wheel for Pyodide).
NORMALIZATION = ("num2words",)
FORBIDDEN = {"threading", "multiprocessing", "concurrent", "socket", "urllib", "http", "asyncio", "torch", "scipy"}
# The floors: a module imports modules of its own part or of a lower floor only. The development
# libraries (tools/: the site, the measurements) and the end-to-end harness are one part: they use
# each other; the commands of scripts/ stand above them, and nothing below imports a script.
FLOORS = {
    "core.portable": 0,
    "core": 1,
    "core.browser": 2,
    "server": 2,
    "tools": 3,
    "e2e": 3,
    "scripts": 4,
    "pocket_tts_numpy": 5,
}
PARTS = {"tools": "tools", "e2e": "tools"}
PACKAGES = ("core", "server", "tools", "scripts", "e2e", "pocket_tts_numpy.py")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> Dict[str, Path]:
    paths = [p for part in PACKAGES for p in ([ROOT / part] if part.endswith(".py") else (ROOT / part).rglob("*.py"))]
    return {module_name(p): p for p in sorted(paths)}


def imports(tree: ast.AST) -> Iterator[Tuple[ast.AST, str]]:
    """(node, top-level name) of every absolute import."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node, alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node, node.module.split(".")[0]


def first_party_imports(name: str, path: Path, known: Set[str]) -> Iterator[Tuple[int, str]]:
    """(line, module) of every import of a module of this project by `name` (relative ones resolved)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target:
                yield node.lineno, target


def floor(module: str) -> Tuple[int, str]:
    """(floor, part) of a module: core.portable.* (the model), core.browser.* (its Pyodide host),
    core.* (its CPython host), a top-level package, or the tools."""
    home = next((sub for sub in ("core.portable", "core.browser") if module.startswith(sub)), module.split(".")[0])
    return FLOORS[home], PARTS.get(home, home)


def graph() -> Dict[str, List[Tuple[int, str]]]:
    found = modules()
    return {name: list(first_party_imports(name, path, set(found))) for name, path in found.items()}


def test_the_portable_model_imports_numpy_and_the_standard_library_only() -> None:
    stdlib = set(sys.stdlib_module_names)
    for path in sorted(PORTABLE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        top_level = {id(n) for n in tree.body}
        for node, module in imports(tree):
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            assert module not in FORBIDDEN, f"{where} imports {module}"
            if module in CPYTHON_ONLY:
                assert id(node) not in top_level, f"{where}: {module} must be imported where it is used"
            else:
                allowed = module in stdlib or module in ("numpy", "__future__", *NORMALIZATION)
                assert allowed, f"{where} imports {module}"


def test_the_host_imports_its_libraries_where_it_uses_them() -> None:
    """`python -m core.cli` and the Python API start on NumPy alone; each extra library (YAML, downloads,
    batch workers, progress bars) is imported by the function that needs it."""
    stdlib = set(sys.stdlib_module_names)
    for path in sorted(CORE.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for _, module in imports(node):
                    assert module in stdlib or module in ("numpy", "__future__", "core"), f"{path.name}: {module}"


def test_every_import_runs_down_a_floor_or_stays_in_its_package() -> None:
    for name, edges in graph().items():
        level, home = floor(name)
        for line, target in edges:
            target_level, target_home = floor(target)
            assert target_level < level or target_home == home, f"{name}:{line} imports {target}, up or across"


def test_no_module_imports_itself_round_a_circle() -> None:
    edges = {name: {target for _, target in targets if target != name} for name, targets in graph().items()}
    done: Set[str] = set()

    def visit(name: str, path: List[str]) -> None:
        if name in path:
            raise AssertionError("import circle: " + " -> ".join(path[path.index(name) :] + [name]))
        if name in done:
            return
        for target in sorted(edges.get(name, ())):
            visit(target, path + [name])
        done.add(name)

    for name in sorted(edges):
        visit(name, [])


def test_the_checks_see_the_imports() -> None:
    """The graph resolves every import form the code uses, so the tests above cannot pass blind:
    `from . import x` (a module), `from .x import y` (a name), `from .. import`, absolute imports,
    and imports inside functions."""
    targets = {name: {target for _, target in edges} for name, edges in graph().items()}
    assert {"core.portable.voice_state", "core.portable.voices"} <= targets["core.portable.model"]
    assert "core.portable.model" in targets["core.portable.voice_registry"]
    assert "core.portable.errors" in targets["core.portable.tokenizer"]
    assert {"core.hub", "core.native", "core.portable.model"} <= targets["core"]
    assert "core.export" in targets["core.cli"]  # imported inside the function that exports
    assert "server.engine" in targets["server.app"]
    assert {"core.cli", "server.__main__"} <= targets["pocket_tts_numpy"]


# The server's fronts: each drives sessions (server/session.py) and the engine's methods, never the
# scheduler, the model or another front's internals.
FRONTS = (
    "server.routes",
    "server.openai_routes",
    "server.websocket",
    "server.livekit_ws",
    "server.wyoming_tts",
    "server.mcp_server",
)
FRONT_MAY_NOT_IMPORT = {"server.scheduler", "server.relay", "server.slots", "core.portable.model"}


def test_the_fronts_drive_sessions_not_the_engines_parts() -> None:
    known = modules()
    for front in FRONTS:
        imported = {target for _, target in first_party_imports(front, known[front], set(known))}
        assert not imported & FRONT_MAY_NOT_IMPORT, (front, imported & FRONT_MAY_NOT_IMPORT)
        assert not imported & (set(FRONTS) - {front, "server.routes"}), (front, imported)
        tree = ast.parse(known[front].read_text())
        reached = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
        assert not reached & {"scheduler", "model", "slots", "_speech", "_text"}, (front, reached)


def test_every_core_module_uses_postponed_annotations() -> None:
    for path in sorted(CORE.rglob("*.py")):
        assert "from __future__ import annotations" in path.read_text(), path.relative_to(CORE)


def test_vermin_says_python_3_8() -> None:
    vermin = Path(sys.executable).parent / "vermin"
    done = subprocess.run(
        [str(vermin), "-t=3.8-", "--no-tips", "--violations", str(CORE)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
