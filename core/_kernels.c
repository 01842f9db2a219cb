// The compiled kernels of core/portable/kernels.c as an importable shared library of this package: pip
// builds it at install time where a C compiler exists (setup.py; optional). Python does not call it as
// a module: core/native.py loads the same file with ctypes and binds the pk_* functions through
// core/portable/kernels.py, which checks every array before handing over a pointer.
#include <Python.h>

static struct PyModuleDef kernels_module = {PyModuleDef_HEAD_INIT, "_kernels",
                                            "core/portable/kernels.c, compiled for this machine (see core/native.py)", -1,
                                            NULL};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&kernels_module); }
