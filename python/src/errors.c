/* SPDX-License-Identifier: MIT */
/* KeelError: every failed Keel call raises it with the status and the detail. */
#include "keelpy.h"

PyObject *kp_KeelError;
atomic_long kp_host_fns_pending;

PyObject *kp_raise(keel_status_t st)
{
    const char *detail = keel_last_error();
    PyObject *args = Py_BuildValue("(siss)", detail && *detail ? detail : keel_status_string(st), (int)st,
                                   keel_status_name(st), detail ? detail : "");
    if (args) {
        PyErr_SetObject(kp_KeelError, args);
        Py_DECREF(args);
    }
    return NULL;
}

int kp_raise_int(keel_status_t st)
{
    kp_raise(st);
    return -1;
}

/* KeelError(message, status, status_name, detail): str() is the message. */
static PyObject *error_str(PyObject *self)
{
    PyObject *args = PyObject_GetAttrString(self, "args");
    if (!args)
        return NULL;
    PyObject *r = NULL;
    if (PyTuple_Check(args) && PyTuple_GET_SIZE(args) >= 3)
        r = PyUnicode_FromFormat("%S: %S", PyTuple_GET_ITEM(args, 2), PyTuple_GET_ITEM(args, 0));
    else
        r = PyObject_Str(args);
    Py_DECREF(args);
    return r;
}

static PyObject *error_field(PyObject *self, Py_ssize_t i)
{
    PyObject *args = PyObject_GetAttrString(self, "args");
    if (!args)
        return NULL;
    PyObject *r = PyTuple_Check(args) && PyTuple_GET_SIZE(args) > i ? PyTuple_GET_ITEM(args, i) : Py_None;
    Py_INCREF(r);
    Py_DECREF(args);
    return r;
}

static PyObject *error_status(PyObject *self, void *c) { (void)c; return error_field(self, 1); }
static PyObject *error_name(PyObject *self, void *c) { (void)c; return error_field(self, 2); }
static PyObject *error_message(PyObject *self, void *c) { (void)c; return error_field(self, 3); }

int kp_errors_init(PyObject *m)
{
    kp_KeelError = PyErr_NewExceptionWithDoc("keel.KeelError",
                                             "A Keel call failed: .status (int), .status_name "
                                             "(\"KEEL_ERROR_...\"), .message (keel_last_error()).",
                                             NULL, NULL);
    if (!kp_KeelError)
        return -1;
    static PyMethodDef str_def = {"__str__", (PyCFunction)error_str, METH_NOARGS, NULL};
    static PyGetSetDef props[] = {
        {"status", error_status, NULL, "the keel_status_t value", NULL},
        {"status_name", error_name, NULL, "the status's symbolic name", NULL},
        {"message", error_message, NULL, "keel_last_error() of the failed call", NULL},
        {NULL, NULL, NULL, NULL, NULL},
    };
    PyObject *f = PyDescr_NewMethod((PyTypeObject *)kp_KeelError, &str_def);
    if (!f || PyObject_SetAttrString(kp_KeelError, "__str__", f) < 0)
        return -1;
    Py_DECREF(f);
    for (PyGetSetDef *p = props; p->name; p++) {
        PyObject *d = PyDescr_NewGetSet((PyTypeObject *)kp_KeelError, p);
        if (!d || PyObject_SetAttrString(kp_KeelError, p->name, d) < 0)
            return -1;
        Py_DECREF(d);
    }
    for (int s = 0; s < KEEL_STATUS_COUNT; s++)
        if (PyModule_AddIntConstant(m, keel_status_name((keel_status_t)s), s) < 0)
            return -1;
    Py_INCREF(kp_KeelError);
    return PyModule_AddObject(m, "KeelError", kp_KeelError);
}

int kp_kwargs(const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, const char *const *names,
              PyObject **out)
{
    Py_ssize_t n = 0;
    while (names[n])
        n++;
    for (Py_ssize_t i = 0; i < n; i++)
        out[i] = NULL;
    if (nargs > n) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %zd arguments (%zd given)", fn, n, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        out[i] = args[i];
    Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nk; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        Py_ssize_t i = 0;
        for (; i < n; i++)
            if (PyUnicode_CompareWithASCIIString(key, names[i]) == 0)
                break;
        if (i == n) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fn, key);
            return -1;
        }
        if (out[i]) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", fn, names[i]);
            return -1;
        }
        out[i] = args[nargs + k];
    }
    return 0;
}
