"""The floors of the code, checked on its import statements (all of them: at module level, inside
functions, under TYPE_CHECKING).

core/portable/ must run unchanged in Pyodide 0.17 (Python 3.8, NumPy 1.17): NumPy, num2words (the
words of text normalization) and the standard library only, PyYAML, the tokenizer libraries and
soundfile imported inside the CPython-only loaders that need them, and nothing of the host above it.
The host (core/*.py) imports the portable model and, inside the functions that need them, the
libraries of the command line. Every import runs down a floor or stays in its own part, and no
module imports itself round a circle:

    core.portable (the model) < core (its CPython host) < browser (the in-browser engine and its
    site builder), server < e2e (the end-to-end harness and the measured tables) < scripts (the
    developers' commands) < tests

Each part has its own floor or shares one with a part it never imports: no two parts are merged
to let one import the other. The commands of `pocket-tts-numpy` that live above core are entry
points (pyproject.toml), which core.cli finds in the installed package's metadata: core imports
none of them. A test module imports tests.support and the product, never another test module.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

import tomllib

ROOT = Path(__file__).resolve().parent.parent.parent
CORE = ROOT / "core"
PORTABLE = CORE / "portable"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# Imported inside the functions that need them, never at module level.
CPYTHON_ONLY = {"yaml", "sentencepiece", "tokenizers", "soundfile", "huggingface_hub"}
# The one library besides NumPy the portable model uses: the number words of text normalization
# (pure Python; the site carries its wheel for Pyodide).
NORMALIZATION = ("num2words",)
FORBIDDEN = {"threading", "multiprocessing", "concurrent", "socket", "urllib", "http", "asyncio", "torch", "scipy"}
# The floors, by the modules' names (browser/ is installed as core.browser: pyproject.toml's
# package-dir): a module imports modules of its own part or of a lower floor only.
FLOORS = {
    "core.portable": 0,
    "core": 1,
    "core.browser": 2,
    "server": 2,
    "e2e": 3,
    "scripts": 4,
    "tests": 5,
}
# The folders of the tree and the package each one is: the top-level packages, and those
# pyproject.toml maps elsewhere.
FOLDERS = {"core": "core", "server": "server", "e2e": "e2e", "scripts": "scripts", "tests": "tests"}
FOLDERS.update({folder: package for package, folder in PYPROJECT["tool"]["setuptools"]["package-dir"].items()})


def module_name(path: Path) -> str:
    folder, *rest = path.relative_to(ROOT).with_suffix("").parts
    parts = FOLDERS[folder].split(".") + rest
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> Dict[str, Path]:
    paths = [p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py") if "fixtures" not in p.parts]
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
    """(floor, part) of a module: its longest prefix among FLOORS."""
    home = max((part for part in FLOORS if module == part or module.startswith(part + ".")), key=len)
    return FLOORS[home], home


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


def test_every_import_runs_down_a_floor_or_stays_in_its_part() -> None:
    for name, edges in graph().items():
        level, home = floor(name)
        for line, target in edges:
            target_level, target_home = floor(target)
            assert target_level < level or target_home == home, f"{name}:{line} imports {target}, up or across"


# The rooms of the portable model, from the bottom: a module imports its own room or a lower
# floor, never one beside it (audio, network and text know nothing of each other), so text and
# voices never reach the model that reads them.
ROOMS = {
    "core.portable.errors": 0,
    "core.portable.config": 1,
    "core.portable.audio": 2,
    "core.portable.network": 2,
    "core.portable.text": 2,
    "core.portable.weights": 3,
    "core.portable.voices": 4,
    "core.portable.synthesis": 5,
    "core.portable.model": 6,
    "core.portable.voice_registry": 7,
}
# No folder of core holds more modules than a reader takes in at a glance.
MAX_MODULES_PER_FOLDER = 15


def room(module: str) -> Tuple[int, str]:
    home = max((r for r in ROOMS if module == r or module.startswith(r + ".")), key=len)
    return ROOMS[home], home


def test_the_portable_rooms_import_down_only() -> None:
    portable = [name for name in modules() if name.startswith("core.portable.")]
    assert {room(name)[1] for name in portable} == set(ROOMS), "a module of core.portable outside the rooms"
    for name, edges in graph().items():
        if not name.startswith("core.portable."):
            continue
        level, home = room(name)
        for line, target in edges:
            if target == "core.portable":
                continue
            target_level, target_home = room(target)
            assert target_level < level or target_home == home, f"{name}:{line} imports {target}, up or across"


def test_text_voices_and_planning_never_reach_the_model() -> None:
    """Not by importing it (above) nor by taking it: no function of theirs has a parameter named
    model; they take what they use (planning's Reader, voices' VoiceBook)."""
    paths = [
        *(PORTABLE / "text").rglob("*.py"),
        *(PORTABLE / "voices").rglob("*.py"),
        PORTABLE / "synthesis/planning.py",
    ]
    assert len(paths) > 10
    for path in sorted(paths):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.Lambda)):
                names = {a.arg for a in node.args.args + node.args.kwonlyargs}
                assert "model" not in names, f"{path.relative_to(ROOT)}:{node.lineno} takes the model"


def test_no_folder_of_core_holds_more_than_fifteen_modules() -> None:
    for folder in sorted({p.parent for p in CORE.rglob("*.py")}):
        count = len(list(folder.glob("*.py")))
        assert count <= MAX_MODULES_PER_FOLDER, f"{folder.relative_to(ROOT)} holds {count} modules"


def test_no_test_module_imports_another() -> None:
    """Not by its package's name, nor by its bare name (pytest puts a test's folder on sys.path)."""
    found = modules()
    bare = {path.stem for name, path in found.items() if floor(name)[1] == "tests"}
    for name, edges in graph().items():
        if floor(name)[1] != "tests":
            continue
        for line, target in edges:
            shared = not target.startswith("tests.") or target.startswith("tests.support")
            assert shared, f"{name}:{line} imports {target}: what tests share goes in tests.support"
        for node, top in imports(ast.parse(found[name].read_text())):
            assert top not in bare, f"{name}:{node.lineno} imports the test module {top}"


def test_the_commands_above_core_are_entry_points_of_their_own_parts() -> None:
    """`pocket-tts-numpy` is core.cli's; the commands it finds as entry points live above core."""
    assert PYPROJECT["project"]["scripts"] == {"pocket-tts-numpy": "core.cli:command"}
    found = modules()
    commands = PYPROJECT["project"]["entry-points"]["pocket_tts_numpy.commands"]
    assert set(commands) == {"serve", "mcp", "build-site"}
    for target in commands.values():
        module, _, function = target.partition(":")
        assert module in found and floor(module)[0] > floor("core.cli")[0], target
        assert f"def {function}(" in found[module].read_text(), target


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
    assert {"core.portable.voices.state", "core.portable.voices.sources"} <= targets["core.portable.model"]
    assert "core.portable.model" in targets["core.portable.voice_registry"]
    assert "core.portable.errors" in targets["core.portable.text.tokenizer"]
    assert {"core.host", "core.portable.model"} <= targets["core"] and {"core.hub", "core.native"} <= targets[
        "core.host"
    ]
    assert "core.export" in targets["core.cli"]  # imported inside the function that exports
    assert "server.engine" in targets["server.app"]
    assert {"core.browser.site.compiled", "core.browser.site.pyodide"} <= targets["core.browser.site.build"]
    assert "core.portable.model" in targets["core.browser.engine"] or "core" in targets["core.browser.engine"]


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
# A front's other modules, held to the same rules (they may import each other): Wyoming's handler
# of a connection has its listener, its voices and its discovery beside it.
FRONT_MODULES = {
    "server.wyoming_tts": ("server.wyoming_server", "server.wyoming_voices", "server.wyoming_discovery"),
}
FRONT_MAY_NOT_IMPORT = {"server.scheduler", "server.relay", "server.slots", "core.portable.model"}


def test_the_fronts_drive_sessions_not_the_engines_parts() -> None:
    known = modules()
    own = {front: {front, *FRONT_MODULES.get(front, ())} for front in FRONTS}
    for front in FRONTS:
        others = set().union(*(own[other] for other in FRONTS if other not in (front, "server.routes")))
        for module in sorted(own[front]):
            imported = {target for _, target in first_party_imports(module, known[module], set(known))}
            assert not imported & FRONT_MAY_NOT_IMPORT, (module, imported & FRONT_MAY_NOT_IMPORT)
            assert not imported & others, (module, imported & others)
            tree = ast.parse(known[module].read_text())
            reached = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
            assert not reached & {"scheduler", "model", "slots", "_speech", "_text"}, (module, reached)


def test_every_core_module_uses_postponed_annotations() -> None:
    for path in sorted(CORE.rglob("*.py")):
        assert "from __future__ import annotations" in path.read_text(), path.relative_to(CORE)


def test_vermin_says_python_3_8() -> None:
    vermin = Path(sys.executable).parent / "vermin"
    done = subprocess.run(
        [str(vermin), "-t=3.8-", "--no-tips", "--violations", str(CORE)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
