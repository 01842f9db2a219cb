"""Build the compiled kernels (core/portable/network/kernels.c) the browser runs: the two WebAssembly modules. (The
same source natively is pip's: setup.py, once per instruction set.)

    python -m scripts.build_kernels              # core/portable/kernels*.wasm (committed)
    python -m scripts.build_kernels --check      # rebuild both .wasm and fail unless they equal the committed ones

Two WebAssembly builds of the one source: `kernels.wasm`, WebAssembly SIMD (Debian's clang 14, for
every browser with SIMD), and `kernels-relaxed.wasm`, relaxed SIMD (Debian's clang-19 with
-mrelaxed-simd: fused multiply-adds in the products; the page links it where the browser validates
it). Each module imports Pyodide's memory and must own none of it, so the build fails if a module
has a global in use, a shadow stack, data segments, or anything imported or exported besides the
memory and the `pk_*` functions; the SIMD build must also validate without relaxed SIMD. wasm-ld
always defines a stack-pointer global and a function table; when nothing uses them (checked), they
are cut from the binary, so the module carries no global at all. Needs Debian 12's `clang`, `lld`,
`clang-19`, `lld-19` and `wabt` (apt-get install -y clang lld clang-19 lld-19 wabt), which give the
same bytes on every machine.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional

from core.portable.network.kernels import NAMES, SIGNATURES

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "core" / "portable" / "network" / "kernels.c"
WASM = ROOT / "core" / "portable" / "network" / "kernels.wasm"
RELAXED_WASM = ROOT / "core" / "portable" / "network" / "kernels-relaxed.wasm"
WASM_FLAGS = [
    "--target=wasm32",
    "-msimd128",
    "-O3",
    "-fno-math-errno",
    "-fno-builtin",  # no calls to memset or memcpy for plain loops: the module has no libc
    "-nostdlib",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wl,--no-entry",
    "-Wl,--import-memory",
    "-Wl,-z,stack-size=0",
    "-Wl,--strip-all",
]


class WasmBuild(NamedTuple):
    """One WebAssembly build of the source: its committed file, compiler, linker (None: the compiler's
    own), extra flags, and the wasm-validate options that accept its instructions (none: SIMD only)."""

    path: Path
    compiler: str
    linker: Optional[str]
    flags: List[str]
    features: List[str]


SIMD = WasmBuild(WASM, "clang", None, [], [])
RELAXED = WasmBuild(RELAXED_WASM, "clang-19", "wasm-ld-19", ["-mrelaxed-simd"], ["--enable-relaxed-simd"])
BUILDS = (SIMD, RELAXED)

# Section ids of the WebAssembly binary format.
TABLE, GLOBAL, EXPORT, DATA, DATA_COUNT = 4, 6, 7, 11, 12


class BuildError(Exception):
    pass


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise BuildError(f"{name} is not installed (apt-get install -y clang lld clang-19 lld-19 wabt)")
    return path


def _run(command: List[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise BuildError(f"{' '.join(command)} failed:\n{done.stderr.strip()}")
    return done.stdout


def _uleb(data: bytes, at: int):
    value, shift = 0, 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def _sections(module: bytes):
    """(id, start, end) of every section of a WebAssembly binary, header excluded."""
    at = 8
    while at < len(module):
        section_id = module[at]
        size, payload = _uleb(module, at + 1)
        yield section_id, at, payload + size
        at = payload + size


def _without(module: bytes, section_ids: set) -> bytes:
    kept = [module[start:end] for section_id, start, end in _sections(module) if section_id not in section_ids]
    return module[:8] + b"".join(kept)


def check_module(path: Path, features: Optional[List[str]] = None) -> None:
    """Fail unless the module touches no memory of its own and validates with `features` (wasm-validate
    options; none: WebAssembly SIMD only): see the module docstring."""
    objdump = _tool("wasm-objdump")
    disassembly = _run([objdump, "-d", str(path)])
    if re.search(r"global\.(get|set)", disassembly):
        raise BuildError(f"{path}: the code uses a global (a shadow stack?): a local array or address-taken local")
    details = _run([objdump, "-x", str(path)])
    for section in ("Global", "Data", "DataCount", "Start", "Memory"):
        if re.search(rf"^{section}\[", details, re.M):
            raise BuildError(f"{path}: the module has a {section} section")
    imports = _listing(details, "Import")
    if len(imports) != 1 or not re.match(r"memory\[0\] .*<- env\.memory$", imports[0]):
        raise BuildError(f"{path}: imports {imports}, expected only env.memory")
    exports = _listing(details, "Export")
    names = [m.group(1) for m in (re.match(r'func\[\d+\] <\w+> -> "(\w+)"$', e) for e in exports) if m]
    if len(names) != len(exports) or sorted(names) != sorted(NAMES):
        raise BuildError(f"{path}: exports {exports}, expected the functions {list(NAMES)}")
    _run([_tool("wasm-validate"), *(features or []), str(path)])


def signatures(source: str) -> Dict[str, str]:
    """Each exported kernel's arguments as core/portable/network/kernels.py's SIGNATURES writes them ("p" a
    pointer, "i" an int, "f" a float), read from the C prototypes after EXPORT(name)."""
    found = {}
    for name, arguments in re.findall(r"EXPORT\((\w+)\)\s*(?:void|int)\s+\1\s*\(([^)]*)\)", source):
        codes = []
        for argument in arguments.split(","):
            kind = argument.rsplit(None, 1)[0].strip()
            codes.append("p" if "*" in argument else {"int": "i", "float": "f"}[kind])
        found[name] = "".join(codes)
    return found


def check_signatures() -> None:
    """The binding's SIGNATURES are the C prototypes (the binding cannot read the C: the browser's
    wheel carries no C source)."""
    declared = signatures(SOURCE.read_text())
    if declared != SIGNATURES:
        raise BuildError(
            f"core/portable/network/kernels.py SIGNATURES {SIGNATURES} differ from {SOURCE.name}'s {declared}"
        )


def _listing(details: str, section: str) -> List[str]:
    """The entries of one section in `wasm-objdump -x` output."""
    match = re.search(rf"^{section}\[\d+\]:\n((?: - .*\n?)*)", details, re.M)
    return [line[3:] for line in match.group(1).splitlines()] if match else []


def build_wasm(out: Path, build: WasmBuild = SIMD) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        linked = Path(tmp) / "linked.wasm"
        command = [_tool(build.compiler), *WASM_FLAGS, *build.flags]
        if build.linker:  # named: not an older wasm-ld found on the PATH
            command.append(f"-fuse-ld={_tool(build.linker)}")
        _run([*command, "-o", str(linked), str(SOURCE)])
        module = linked.read_bytes()
        if re.search(r"global\.(get|set)", _run([_tool("wasm-objdump"), "-d", str(linked)])):
            raise BuildError(
                f"{SOURCE}: the code uses a global (a shadow stack?): a local array or address-taken local"
            )
        stripped = Path(tmp) / "kernels.wasm"
        stripped.write_bytes(_without(module, {TABLE, GLOBAL}))
        check_module(stripped, build.features)
        module = stripped.read_bytes()
    out.write_bytes(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="fail unless the rebuilt modules equal the committed core/portable/*.wasm"
    )
    args = parser.parse_args()
    try:
        check_signatures()
        if args.check:
            for build in BUILDS:
                with tempfile.TemporaryDirectory() as tmp:
                    rebuilt = build_wasm(Path(tmp) / build.path.name, build)
                committed = build.path.read_bytes() if build.path.exists() else b""
                if rebuilt != committed:
                    raise BuildError(
                        f"{build.path} is not the build of {SOURCE} ({len(committed)} bytes committed, "
                        f"{len(rebuilt)} rebuilt): run python -m scripts.build_kernels and commit the result"
                    )
                print(f"{build.path.relative_to(ROOT)}: {len(rebuilt)} bytes, equal to a fresh build", file=sys.stderr)
            return
        for build in BUILDS:
            module = build_wasm(build.path, build)
            print(f"{build.path.relative_to(ROOT)}: {len(module)} bytes", file=sys.stderr)
    except BuildError as e:
        raise SystemExit(f"build_kernels: {e}") from None


if __name__ == "__main__":
    main()
