// The compiled kernels of core/portable/kernels.c as an importable shared library of this package: pip
// builds it at install time where a C compiler exists (setup.py; optional), with the kernels compiled
// once per instruction set of the architecture, each copy's functions named after it
// (pk_linear_f32_avx2, ...). Python calls the kernels through ctypes: core/native.py loads the same
// file, asks which sets were compiled (pk_sets) and which this processor has (pk_supports), and binds
// the pk_* functions of the best through core/portable/kernels.py, which checks every array before
// handing over a pointer. As a module it has one function, `address`, the pointer of an array so
// checked.
#include <Python.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

// The sets compiled in, best first, comma-separated ("avx512,avx2,baseline").
EXPORT const char *pk_sets(void) { return PK_SETS; }

// Whether this processor (and its operating system, which must save the wider registers) runs `set`.
EXPORT int pk_supports(const char *set) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (strcmp(set, "avx512") == 0)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (strcmp(set, "avx2") == 0) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  return strcmp(set, "baseline") == 0;
}

// The address of a contiguous buffer's first byte (a NumPy array's data pointer, its offset
// included): what core/portable/kernels.py hands a kernel once it has checked the array, in a
// tenth of the time of NumPy's __array_interface__, which builds a dict for it.
static PyObject *address(PyObject *module, PyObject *array) {
  Py_buffer view;
  if (PyObject_GetBuffer(array, &view, PyBUF_ANY_CONTIGUOUS) < 0) return NULL;
  void *start = view.buf;
  PyBuffer_Release(&view);
  return PyLong_FromVoidPtr(start);
}

static PyMethodDef kernels_methods[] = {
    {"address", address, METH_O, "The address of a contiguous buffer's first byte."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef kernels_module = {PyModuleDef_HEAD_INIT, "_kernels",
                                            "core/portable/kernels.c, compiled per instruction set (see core/native.py)",
                                            -1, kernels_methods};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&kernels_module); }
