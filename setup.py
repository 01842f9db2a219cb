"""The optional native build of the kernels (everything else is in pyproject.toml).

Where a C compiler and Python's headers exist, `pip install` compiles core/portable/kernels.c for this
machine into core/_kernels (core/native.py loads it for every CPython entry: int8 and small products);
where they do not, the build is skipped and everything runs on NumPy alone.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "core._kernels",
            sources=["core/_kernels.c", "core/portable/kernels.c"],
            extra_compile_args=["-O3", "-march=native", "-fno-math-errno", "-Wno-psabi"],
            optional=True,
        )
    ]
)
