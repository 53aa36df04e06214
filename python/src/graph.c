/* SPDX-License-Identifier: MIT */
/* Graphs: captured stream work, instantiated and replayed. */
#include "keelpy.h"

typedef struct {
    PyObject_HEAD
    keel_graph_t *graph;
    kp_Device *device;
} kp_Graph;

typedef struct {
    PyObject_HEAD
    keel_graph_exec_t *exec;
    kp_Device *device;
} kp_GraphExec;

static PyTypeObject kp_GraphType, kp_GraphExecType;

PyObject *kp_graph_wrap(keel_graph_t *g, kp_Device *d)
{
    kp_Graph *o = PyObject_New(kp_Graph, &kp_GraphType);
    if (!o) {
        keel_graph_destroy(g);
        return NULL;
    }
    o->graph = g;
    Py_INCREF(d);
    o->device = d;
    return (PyObject *)o;
}

static void graph_dealloc(kp_Graph *self)
{
    keel_graph_destroy(self->graph);
    Py_XDECREF(self->device);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *graph_instantiate(kp_Graph *self, PyObject *unused)
{
    (void)unused;
    keel_graph_exec_t *e = NULL;
    keel_status_t st = keel_graph_instantiate(self->graph, &e);
    if (st != KEEL_OK)
        return kp_raise(st);
    kp_GraphExec *o = PyObject_New(kp_GraphExec, &kp_GraphExecType);
    if (!o) {
        keel_graph_exec_destroy(e);
        return NULL;
    }
    o->exec = e;
    Py_INCREF(self->device);
    o->device = self->device;
    return (PyObject *)o;
}

static void exec_dealloc(kp_GraphExec *self)
{
    keel_status_t st;
    KP_BLOCKING(st, keel_graph_exec_destroy(self->exec));
    (void)st;
    Py_XDECREF(self->device);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *exec_launch(kp_GraphExec *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"stream", NULL};
    PyObject *a[1];
    if (kp_kwargs("launch", args, nargs, kwnames, names, a) < 0)
        return NULL;
    keel_stream_t *s = kp_stream_arg(a[0], self->device);
    if (!s)
        return NULL;
    keel_status_t st;
    KP_CALL(st, keel_graph_launch(self->exec, s));
    if (st != KEEL_OK)
        return kp_raise(st);
    Py_RETURN_NONE;
}

static PyMethodDef graph_methods[] = {
    {"instantiate", (PyCFunction)graph_instantiate, METH_NOARGS, "a launchable GraphExec"},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef exec_methods[] = {
    {"launch", (PyCFunction)(void (*)(void))exec_launch, METH_FASTCALL | METH_KEYWORDS,
     "launch(stream=None): replay the graph on a stream of its device"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject kp_GraphType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "keel.Graph",
    .tp_basicsize = sizeof(kp_Graph),
    .tp_dealloc = (destructor)graph_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Work captured by Stream.begin_capture() ... Stream.end_capture().",
    .tp_methods = graph_methods,
};

static PyTypeObject kp_GraphExecType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "keel.GraphExec",
    .tp_basicsize = sizeof(kp_GraphExec),
    .tp_dealloc = (destructor)exec_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An instantiated Graph.",
    .tp_methods = exec_methods,
};

int kp_graph_init(PyObject *m)
{
    if (PyType_Ready(&kp_GraphType) < 0 || PyType_Ready(&kp_GraphExecType) < 0)
        return -1;
    Py_INCREF(&kp_GraphType);
    Py_INCREF(&kp_GraphExecType);
    if (PyModule_AddObject(m, "Graph", (PyObject *)&kp_GraphType) < 0 ||
        PyModule_AddObject(m, "GraphExec", (PyObject *)&kp_GraphExecType) < 0)
        return -1;
    return 0;
}
