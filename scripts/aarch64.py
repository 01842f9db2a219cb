"""A 64-bit ARM (aarch64) CPython with NumPy and this checkout's compiled kernels, run under qemu on
an x86-64 Linux machine: what tests/core/test_aarch64.py runs the kernel checks on.

    .venv/bin/python -m scripts.aarch64

Needs qemu-user-static, gcc-aarch64-linux-gnu and libc6-dev-arm64-cross (.ci/run installs them) and
Debian's apt. Prepares build/aarch64:
- rootfs/: Debian's arm64 python3.11 with NumPy and Python's headers (190 MB), from .debs that apt
  downloads with a state of its own (the host's dpkg is not touched); made once, kept while its
  stamp (the package list) holds.
- site/: the tests' pure-Python tools (pytest and its dependencies, PyYAML without its C part,
  num2words, docopt, tqdm), copied from the environment this runs in.
- tree/: core (with browser/ as core.browser, as pip installs it) and tests, copied at every run,
  and core/_kernels built for aarch64 as setup.py builds it there: kernels.c once per set of its
  AARCH64 table, with the functions renamed after the set (rebuilt where a source changed).
- bin/python-<cpu>: the interpreter under `qemu-aarch64-static -cpu <cpu>`, for each processor in
  CPUS. It is its own sys.executable, so a test's subprocesses run emulated too.

Emulation proves results, not speed: qemu runs these kernels 4-65x slower than the host.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "aarch64"
ROOTFS = BUILD / "rootfs"
SITE = BUILD / "site"
TREE = BUILD / "tree"
BIN = BUILD / "bin"
TOOLS = ("qemu-aarch64-static", "aarch64-linux-gnu-gcc", "apt-get", "dpkg")
PACKAGES = ("python3-minimal", "python3.11", "python3-numpy", "libpython3.11-dev")
# The modules the emulated tests import beyond core and the standard library, as pytest 9 and
# the command line need them (pure Python: a C part, such as PyYAML's, is left behind and its
# module falls back to Python).
MODULES = (
    "pytest",
    "_pytest",
    "pluggy",
    "iniconfig",
    "packaging",
    "pygments",
    "py",
    "yaml",
    "num2words",
    "docopt",
    "tqdm",
)
# What qemu emulates, and the best set core/_kernels.c must find on each: `max` has every feature
# qemu implements (i8mm included), the Cortex-A76 dotprod but not i8mm, the Cortex-A72 neither.
CPUS = {"max": "i8mm", "cortex-a76": "dotprod", "cortex-a72": "baseline"}
KERNELS = ROOT / "core" / "portable" / "network" / "kernels.c"
MODULE = ROOT / "core" / "_kernels.c"
EXTENSION = "_kernels.cpython-311-aarch64-linux-gnu.so"


def missing_tools() -> List[str]:
    """The programs this needs that are not on PATH."""
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def python(cpu: str) -> Path:
    """The launcher of the emulated interpreter on processor model `cpu` (after prepare())."""
    return BIN / f"python-{cpu}"


def prepare() -> None:
    """Makes or refreshes everything under build/aarch64 (see the module's docstring)."""
    missing = missing_tools()
    if missing:
        raise RuntimeError(f"missing {', '.join(missing)} (apt-get install qemu-user-static gcc-aarch64-linux-gnu)")
    started = time.monotonic()
    _rootfs()
    _site()
    _tree()
    _launchers()
    _progress(f"build/aarch64 ready in {time.monotonic() - started:.1f} s")


def _progress(message: str) -> None:
    print(f"aarch64: {message}", file=sys.stderr, flush=True)


def _stamp(path: Path, text: str) -> bool:
    """Whether `path` holds `text` (a build's inputs, hashed) already."""
    return path.exists() and path.read_text() == text


def _rootfs() -> None:
    stamp = " ".join(PACKAGES)
    if _stamp(BUILD / "rootfs.stamp", stamp):
        return
    _progress(f"downloading Debian's arm64 {', '.join(PACKAGES)} and what they need (a private apt state)")
    apt = BUILD / "apt"
    shutil.rmtree(apt, ignore_errors=True)
    shutil.rmtree(ROOTFS, ignore_errors=True)
    for folder in (apt / "state" / "lists" / "partial", apt / "cache" / "archives" / "partial", ROOTFS):
        folder.mkdir(parents=True)
    (apt / "status").write_text("")
    options = [
        "-o", "APT::Architecture=arm64", "-o", "APT::Architectures::=arm64",
        "-o", f"Dir::State={apt / 'state'}", "-o", f"Dir::State::status={apt / 'status'}",
        "-o", f"Dir::Cache={apt / 'cache'}",
    ]  # fmt: skip
    subprocess.run(["apt-get", *options, "-q", "update"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(
        ["apt-get", *options, "-q", "install", "--download-only", "-y", "--no-install-recommends", *PACKAGES],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    debs = sorted((apt / "cache" / "archives").glob("*.deb"))
    _progress(f"unpacking {len(debs)} packages into build/aarch64/rootfs")
    for deb in debs:
        subprocess.run(["dpkg", "-x", str(deb), str(ROOTFS)], check=True)
    # NumPy links libblas.so.3 and liblapack.so.3, which Debian points at a BLAS through the
    # alternatives that dpkg -x does not make.
    lib = ROOTFS / "usr" / "lib" / "aarch64-linux-gnu"
    for name in ("blas", "lapack"):
        link = lib / f"lib{name}.so.3"
        link.unlink(missing_ok=True)
        link.symlink_to(f"{name}/lib{name}.so.3")
    # Compiled once here: an emulated `import numpy` compiling its modules takes 12 s, not 4.
    packages = [ROOTFS / "usr" / "lib" / "python3.11", ROOTFS / "usr" / "lib" / "python3" / "dist-packages"]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *map(str, packages)], check=False)
    shutil.rmtree(apt)  # its lists and .debs (50 MB): the rootfs is made
    (BUILD / "rootfs.stamp").write_text(stamp)


def _site() -> None:
    shutil.rmtree(SITE, ignore_errors=True)
    SITE.mkdir(parents=True)
    for name in MODULES:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise RuntimeError(f"{name} is not installed here: run this with .venv/bin/python")
        origin = Path(spec.origin)
        if origin.name == "__init__.py":
            shutil.copytree(origin.parent, SITE / name, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
        else:
            shutil.copy2(origin, SITE / origin.name)


def _tree() -> None:
    ignore = shutil.ignore_patterns("*.so", "__pycache__")
    shutil.rmtree(TREE, ignore_errors=True)
    shutil.copytree(ROOT / "core", TREE / "core", ignore=ignore)
    shutil.copytree(ROOT / "browser", TREE / "core" / "browser", ignore=ignore)
    shutil.copytree(ROOT / "tests", TREE / "tests", ignore=ignore)
    shutil.copy2(ROOT / "pyproject.toml", TREE / "pyproject.toml")
    sets = instruction_sets()
    sources = b"".join(path.read_bytes() for path in (KERNELS, MODULE, ROOT / "setup.py", Path(__file__)))
    stamp = hashlib.sha256(sources).hexdigest()
    built = BUILD / "kernels" / EXTENSION
    if not _stamp(BUILD / "kernels.stamp", stamp):
        _build_kernels(sets, built)
        (BUILD / "kernels.stamp").write_text(stamp)
    shutil.copy2(built, TREE / "core" / EXTENSION)


def instruction_sets() -> Dict[str, List[str]]:
    """setup.py's AARCH64 table: its sets, best first, and their flags."""
    return _from_setup("AARCH64")


def _from_setup(name: str) -> Any:
    """A constant of setup.py, read without running it."""
    for node in ast.parse((ROOT / "setup.py").read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(target, "id", "") == name for target in node.targets):
            return ast.literal_eval(node.value)
    raise RuntimeError(f"setup.py has no {name}")


def _build_kernels(sets: Dict[str, List[str]], out: Path) -> None:
    """core/_kernels for aarch64 as setup.py's BuildKernels builds it on an aarch64 machine."""
    _progress(f"cross-compiling core/_kernels for aarch64 ({', '.join(sets)})")
    objects = BUILD / "kernels"
    shutil.rmtree(objects, ignore_errors=True)
    objects.mkdir(parents=True)
    compiler = "aarch64-linux-gnu-gcc"
    flags = [*_from_setup("FLAGS"), "-fPIC"]  # -fPIC: what setuptools adds for a shared library
    names = re.findall(r"EXPORT\((\w+)\)", KERNELS.read_text())
    built = []
    for name, extra in sets.items():
        renames = [f"-D{function}={function}_{name}" for function in names]
        built.append(objects / f"kernels_{name}.o")
        subprocess.run([compiler, *flags, *extra, *renames, "-c", str(KERNELS), "-o", str(built[-1])], check=True)
    include = ROOTFS / "usr" / "include"
    # Python.h, whose pyconfig.h includes <aarch64-linux-gnu/python3.11/pyconfig.h>: the rootfs's
    # headers after the cross compiler's own.
    headers = [f"-I{include / 'python3.11'}", "-idirafter", str(include)]
    module = objects / "_kernels.o"
    sets_macro = '-DPK_SETS="' + ",".join(sets) + '"'
    subprocess.run(
        [compiler, *flags, "-pthread", *headers, sets_macro, "-c", str(MODULE), "-o", str(module)], check=True
    )
    subprocess.run([compiler, "-shared", "-pthread", str(module), *map(str, built), "-o", str(out)], check=True)


def _launchers() -> None:
    BIN.mkdir(parents=True, exist_ok=True)
    for cpu in CPUS:
        launcher = python(cpu)
        launcher.write_text(
            "#!/bin/sh\n"
            f"export PYTHONPATH={TREE}:{SITE}\n"
            f'exec qemu-aarch64-static -cpu {cpu} -L {ROOTFS} -0 "$0" {ROOTFS}/usr/bin/python3.11 "$@"\n'
        )
        launcher.chmod(0o755)


if __name__ == "__main__":
    prepare()
    for cpu, best in CPUS.items():
        done = subprocess.run(
            [str(python(cpu)), "-c", "from core import native; print(','.join(native.instruction_sets()))"],
            capture_output=True,
            text=True,
            cwd=TREE,
        )
        print(f"{cpu}: {done.stdout.strip() or done.stderr.strip()} (expected best: {best})")
