"""The optional native build of the kernels (everything else is in pyproject.toml).

Where a C compiler and Python's headers exist, `pip install` compiles core/kernels.c for this machine
into server/_kernels (server/native.py loads it for the server's int8 and small products); where
they do not, the build is skipped and the server runs on NumPy alone (README, "Serving many
streams").
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "server._kernels",
            sources=["server/_kernels.c", "core/kernels.c"],
            extra_compile_args=["-O3", "-march=native", "-fno-math-errno", "-Wno-psabi"],
            optional=True,
        )
    ]
)
