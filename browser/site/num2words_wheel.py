"""num2words's wheel for the page, trimmed to the languages core reads numbers in.

num2words's package imports every one of its ~60 language modules and makes a converter of each
as it is imported: 62 modules and ~45 ms of a worker's start in the page (measured: re-importing
num2words in the page's Python), for the 7 languages core.portable.text.normalize speaks. `trim`
rewrites the wheel with the converters of those languages alone (their modules, the ones those
import, and the package's own helpers), and the rest of the package as it is: what
num2words(...) says in those languages is the same (tests/site/test_num2words_wheel.py compares).
The server and the command line import num2words as pip installs it.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import zipfile
from pathlib import Path
from typing import Dict, Iterable, Set

PACKAGE = "num2words/"
INIT = PACKAGE + "__init__.py"


def trim(wheel: Path, languages: Iterable[str]) -> None:
    """Rewrite `wheel` (in place) with the converters of `languages` (num2words's codes) alone."""
    with zipfile.ZipFile(wheel) as archive:
        infos = archive.infolist()
        files = {info.filename: archive.read(info) for info in infos}
    init = files[INIT].decode("utf-8")
    converters = _converters(init)
    missing = sorted(set(languages) - set(converters))
    if missing:
        raise SystemExit(f"num2words in {wheel.name} has no converter for {', '.join(missing)}")
    kept = {code: converters[code] for code in languages}
    modules = _imported({module for module, _ in kept.values()}, files)
    init = _rewrite(init, kept)
    files[INIT] = init.encode("utf-8")
    dropped = {
        name for name in files if name.startswith(PACKAGE + "lang_") and name[len(PACKAGE) : -len(".py")] not in modules
    }
    files = {name: data for name, data in files.items() if name not in dropped}
    record = next(name for name in files if name.endswith(".dist-info/RECORD"))
    files[record] = _record(files[record].decode("utf-8"), files, dropped).encode("utf-8")
    with zipfile.ZipFile(wheel, "w") as archive:
        for info in infos:  # as they were (dates, compression): the same wheel from every build
            if info.filename in files:
                archive.writestr(info, files[info.filename])


def _converters(init: str) -> Dict[str, tuple]:
    """CONVERTER_CLASSES of the package's __init__: code -> (module, its source text)."""
    for node in ast.parse(init).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["CONVERTER_CLASSES"]:
            assert isinstance(node.value, ast.Dict)
            converters = {}
            for key, value in zip(node.value.keys, node.value.values):
                # each 'xx': lang_XX.Num2Word_XX()
                module = value.func.value.id  # type: ignore[attr-defined]
                converters[key.value] = (module, ast.get_source_segment(init, value))  # type: ignore[union-attr]
            return converters
    raise SystemExit("num2words's __init__ has no CONVERTER_CLASSES")


def _imported(modules: Set[str], files: Dict[str, bytes]) -> Set[str]:
    """`modules` and the package's lang_ modules they import, transitively."""
    todo, seen = list(modules), set(modules)
    while todo:
        tree = ast.parse(files[PACKAGE + todo.pop() + ".py"])
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                names = [node.module] if node.module else [alias.name for alias in node.names]
                for name in names:
                    if name.startswith("lang_") and name not in seen:
                        seen.add(name)
                        todo.append(name)
    return seen


def _rewrite(init: str, kept: Dict[str, tuple]) -> str:
    """The __init__ with its import of the language modules and CONVERTER_CLASSES over `kept`."""
    lines = init.splitlines(keepends=True)
    spans = []
    for node in ast.parse(init).body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module is None:
            modules = sorted({module for module, _ in kept.values()})
            spans.append((node, f"from . import {', '.join(modules)}\n"))
        elif isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["CONVERTER_CLASSES"]:
            body = "".join(f"    {code!r}: {source},\n" for code, (_, source) in kept.items())
            spans.append((node, "CONVERTER_CLASSES = {\n" + body + "}\n"))
    assert len(spans) == 2, "num2words's __init__ is not laid out as expected"
    for node, text in sorted(spans, key=lambda span: -span[0].lineno):
        lines[node.lineno - 1 : node.end_lineno] = [text]
    return "".join(lines)


def _record(record: str, files: Dict[str, bytes], dropped: Set[str]) -> str:
    """The wheel's RECORD without the dropped files, each kept file's hash and size as it now is."""
    lines = []
    for line in record.splitlines():
        name = line.split(",", 1)[0]
        if name in dropped:
            continue
        if name in files and not name.endswith("/RECORD"):
            digest = base64.urlsafe_b64encode(hashlib.sha256(files[name]).digest()).rstrip(b"=").decode()
            line = f"{name},sha256={digest},{len(files[name])}"
        lines.append(line)
    return "\n".join(lines) + "\n"
