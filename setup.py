"""The optional native build of the kernels (everything else is in pyproject.toml).

Where a C compiler and Python's headers exist, `pip install` (or `python -m build`, for a wheel)
compiles core/portable/network/kernels.c into core/_kernels once per instruction set of the machine's
architecture, each copy's functions named after it (pk_linear_f32_avx2, ...): on x86-64 AVX-512
with VNNI (Ice Lake, Zen 4 and later), AVX-VNNI (Alder Lake, Zen 5), AVX2 with FMA, and the
baseline every x86-64 has; on aarch64 i8mm (smmla), dotprod (sdot) and the baseline (NEON);
elsewhere the baseline alone. A set the compiler cannot build (an older one without -mavxvnni, say)
is left out with a warning. core/native.py asks the library which sets this processor has and binds
the best (so a wheel built once runs on every machine of its architecture); where the build fails,
everything runs on NumPy and `core.backend()` says why.
"""

import os
import platform
import re

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CompileError

KERNELS = os.path.join("core", "portable", "network", "kernels.c")
FLAGS = ["-O3", "-fno-math-errno", "-Wno-psabi"]
# The instruction sets of each architecture, best first: compiler flags, and the features
# core/_kernels.c checks before the set is used.
X86_64 = {
    "avx512": ["-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl", "-mavx512vnni", "-mavx2", "-mfma"],
    "avxvnni": ["-mavxvnni", "-mavx2", "-mfma"],
    "avx2": ["-mavx2", "-mfma"],
    "baseline": [],
}
# aarch64's baseline (armv8-a) has NEON; dotprod adds sdot (Cortex-A55/A76, Neoverse N1, Apple M1),
# i8mm smmla (Neoverse V1/N2, Cortex-X2, Graviton 3, Apple M2).
AARCH64 = {
    "i8mm": ["-march=armv8.2-a+dotprod+i8mm"],
    "dotprod": ["-march=armv8.2-a+dotprod"],
    "baseline": [],
}


def instruction_sets():
    machine = platform.machine().lower()
    if machine in ("aarch64", "arm64"):
        return AARCH64
    return X86_64 if machine in ("x86_64", "amd64") else {"baseline": []}


class BuildKernels(build_ext):
    """Compiles the kernels once per instruction set, then links them all into core._kernels."""

    def build_extension(self, ext):
        with open(KERNELS) as source:
            names = re.findall(r"EXPORT\((\w+)\)", source.read())
        built, objects = [], []
        for name, flags in instruction_sets().items():
            renamed = [(function, f"{function}_{name}") for function in names]
            try:
                objects += self.compiler.compile(
                    [KERNELS],
                    output_dir=os.path.join(self.build_temp, name),
                    macros=renamed,
                    extra_postargs=FLAGS + flags,
                )
            except CompileError:
                if name == "baseline":
                    raise
                self.warn(f"the {name} kernels were left out: this compiler cannot build them")
                continue
            built.append(name)
        ext.extra_objects = objects
        ext.define_macros = [("PK_SETS", '"' + ",".join(built) + '"')]
        super().build_extension(ext)


setup(
    ext_modules=[
        Extension(
            "core._kernels",
            sources=["core/_kernels.c"],
            depends=[KERNELS],
            extra_compile_args=FLAGS + ["-pthread"],
            extra_link_args=["-pthread"],  # its helper thread (pk_linear_i8_shared, pk_linear_i8_two)
            optional=True,
        )
    ],
    cmdclass={"build_ext": BuildKernels},
)
