/* SPDX-License-Identifier: MIT */
/* The keel._keel module: its functions and types, gathered from each file. */
#include "keelpy.h"

static PyObject *version(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyUnicode_FromString(keel_version_string());
}

static PyMethodDef base_methods[] = {
    {"version", version, METH_NOARGS, "Version of the linked libkeel."},
    {"from_dlpack", (PyCFunction)(void (*)(void))kp_from_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "from_dlpack(x, /, *, device=None, copy=None, stream=None): an Array over x's memory, without a copy."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "keel._keel", "Keel's C extension (use the keel package).", -1, NULL,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__keel(void)
{
    PyObject *m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    if (PyModule_AddFunctions(m, base_methods) < 0 || PyModule_AddFunctions(m, kp_ops_methods) < 0 ||
        PyModule_AddFunctions(m, kp_bench_methods) < 0 ||
        kp_errors_init(m) < 0 || kp_device_init(m) < 0 || kp_stream_init(m) < 0 || kp_graph_init(m) < 0 ||
        kp_buffer_init(m) < 0 || kp_array_init(m) < 0 || kp_ops_init(m) < 0 || kp_kernel_init(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
