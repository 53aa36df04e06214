/* SPDX-License-Identifier: MIT */
/* Buffers: device, pinned and managed memory, or another library's memory
 * imported through DLPack; copies from and to buffer-protocol objects. */
#include <string.h>
#include "keelpy.h"

static const char *kind_name(keel_memory_kind_t k)
{
    switch (k) {
    case KEEL_MEMORY_DEVICE: return "device";
    case KEEL_MEMORY_PINNED: return "pinned";
    case KEEL_MEMORY_MANAGED: return "managed";
    default: return "host";
    }
}

static int kind_parse(PyObject *o, keel_memory_kind_t *k)
{
    if (!o || o == Py_None) {
        *k = KEEL_MEMORY_DEVICE;
        return 0;
    }
    static const keel_memory_kind_t all[] = {KEEL_MEMORY_DEVICE, KEEL_MEMORY_PINNED, KEEL_MEMORY_MANAGED};
    for (int i = 0; i < 3; i++) {
        if (PyUnicode_Check(o) && PyUnicode_CompareWithASCIIString(o, kind_name(all[i])) == 0) {
            *k = all[i];
            return 0;
        }
    }
    PyErr_Format(PyExc_ValueError, "kind must be \"device\", \"pinned\" or \"managed\", not %R", o);
    return -1;
}

/* Gives the memory back: synchronous, as keel_free is. */
static keel_status_t release_memory(kp_Buffer *b)
{
    keel_status_t st = KEEL_OK;
    if (b->imported) {
        /* The producer may reuse the memory once its deleter runs. */
        KP_BLOCKING(st, keel_device_synchronize(b->device->dev));
        keel_status_t st2 = keel_dlpack_release(b->imported);
        b->imported = NULL;
        if (st == KEEL_OK)
            st = st2;
    } else if (b->ptr) {
        void *p = b->ptr;
        KP_BLOCKING(st, keel_free(p));
    }
    b->ptr = NULL;
    return st;
}

static kp_Buffer *buffer_alloc(kp_Device *d, void *p, size_t nbytes, keel_memory_kind_t kind,
                               const keel_tensor_t *imported)
{
    kp_Buffer *b = PyObject_New(kp_Buffer, &kp_BufferType);
    if (!b)
        return NULL;
    b->ptr = p;
    b->nbytes = nbytes;
    b->kind = kind;
    Py_INCREF(d);
    b->device = d;
    b->imported = imported;
    b->exports = 0;
    b->closed = 0;
    return b;
}

kp_Buffer *kp_buffer_new(kp_Device *d, size_t nbytes, keel_memory_kind_t kind)
{
    void *p = NULL;
    keel_status_t st = kind == KEEL_MEMORY_PINNED    ? keel_malloc_host(d->dev, nbytes, &p)
                       : kind == KEEL_MEMORY_MANAGED ? keel_malloc_managed(d->dev, nbytes, &p)
                                                     : keel_malloc(d->dev, nbytes, &p);
    if (st != KEEL_OK)
        return (kp_Buffer *)kp_raise(st);
    kp_Buffer *b = buffer_alloc(d, p, nbytes, kind, NULL);
    if (!b)
        keel_free(p);
    return b;
}

kp_Buffer *kp_buffer_imported(kp_Device *d, const keel_tensor_t *t, size_t nbytes)
{
    kp_Buffer *b = buffer_alloc(d, t->data, nbytes, t->kind, t);
    if (!b)
        keel_dlpack_release(t);
    return b;
}

int kp_buffer_check(kp_Buffer *b)
{
    if (!b->closed && (b->ptr || b->imported))
        return 0;
    PyErr_SetString(PyExc_ValueError, "the keel.Buffer was freed");
    return -1;
}

void kp_buffer_export_done(kp_Buffer *b)
{
    if (--b->exports == 0 && b->closed && (b->ptr || b->imported)) {
        keel_status_t st = release_memory(b);
        if (st != KEEL_OK)
            PyErr_WarnFormat(PyExc_RuntimeWarning, 1, "keel.Buffer: freeing failed: %s", keel_last_error());
    }
}

static void buffer_dealloc(kp_Buffer *self)
{
    /* Exports hold a reference: none is left here. */
    if (self->ptr || self->imported) {
        keel_status_t st = release_memory(self);
        if (st != KEEL_OK)
            PyErr_WarnFormat(PyExc_RuntimeWarning, 1, "keel.Buffer: freeing failed: %s", keel_last_error());
    }
    Py_XDECREF(self->device);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *buffer_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    (void)type;
    static char *names[] = {"nbytes", "device", "kind", NULL};
    Py_ssize_t n = 0;
    PyObject *dev = Py_None, *kind = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "n|OO:Buffer", names, &n, &dev, &kind))
        return NULL;
    keel_memory_kind_t k;
    if (n <= 0)
        return PyErr_Format(PyExc_ValueError, "nbytes must be > 0, not %zd", n);
    if (kind_parse(kind, &k) < 0)
        return NULL;
    kp_Device *d = kp_device_arg(dev);
    if (!d)
        return NULL;
    PyObject *r = (PyObject *)kp_buffer_new(d, (size_t)n, k);
    Py_DECREF(d);
    return r;
}

/* The contiguous bytes of a buffer-protocol object. */
static int get_bytes(PyObject *obj, Py_buffer *view, int writable)
{
    if (PyObject_GetBuffer(obj, view, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%.100s is not a C-contiguous%s buffer-protocol object", Py_TYPE(obj)->tp_name,
                     writable ? " writable" : "");
        return -1;
    }
    return 0;
}

static PyObject *copy(kp_Buffer *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int to_host)
{
    static const char *const names[] = {"obj", "offset", NULL};
    PyObject *a[2];
    if (kp_kwargs(to_host ? "copy_to" : "copy_from", args, nargs, kwnames, names, a) < 0 || kp_buffer_check(self) < 0)
        return NULL;
    if (!a[0])
        return PyErr_Format(PyExc_TypeError, "missing the object to copy %s", to_host ? "to" : "from");
    Py_ssize_t off = a[1] ? PyLong_AsSsize_t(a[1]) : 0;
    if (off == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (get_bytes(a[0], &view, to_host) < 0)
        return NULL;
    keel_status_t st = KEEL_OK;
    if (off < 0 || (size_t)off > self->nbytes || (size_t)view.len > self->nbytes - (size_t)off) {
        PyErr_Format(PyExc_ValueError, "%zd bytes at offset %zd do not fit the buffer of %zu bytes", view.len, off,
                     self->nbytes);
        PyBuffer_Release(&view);
        return NULL;
    }
    char *dev = (char *)self->ptr + off;
    KP_BLOCKING(st, to_host ? keel_memcpy(view.buf, dev, (size_t)view.len)
                            : keel_memcpy(dev, view.buf, (size_t)view.len));
    PyBuffer_Release(&view);
    if (st != KEEL_OK)
        return kp_raise(st);
    Py_RETURN_NONE;
}

static PyObject *buffer_copy_from(kp_Buffer *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return copy(self, args, nargs, kwnames, 0);
}

static PyObject *buffer_copy_to(kp_Buffer *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return copy(self, args, nargs, kwnames, 1);
}

static PyObject *buffer_free(kp_Buffer *self, PyObject *unused)
{
    (void)unused;
    if (self->closed)
        Py_RETURN_NONE;
    self->closed = 1;
    if (self->exports > 0) /* a consumer still holds it: freed when it lets go */
        Py_RETURN_NONE;
    keel_status_t st = release_memory(self);
    if (st != KEEL_OK)
        return kp_raise(st);
    Py_RETURN_NONE;
}

static PyObject *buffer_ptr(kp_Buffer *self, void *c)
{
    (void)c;
    return PyLong_FromVoidPtr(self->closed ? NULL : self->ptr);
}

static PyObject *buffer_nbytes(kp_Buffer *self, void *c)
{
    (void)c;
    return PyLong_FromSize_t(self->nbytes);
}

static PyObject *buffer_kind(kp_Buffer *self, void *c)
{
    (void)c;
    return PyUnicode_FromString(kind_name(self->kind));
}

static PyObject *buffer_device(kp_Buffer *self, void *c)
{
    (void)c;
    Py_INCREF(self->device);
    return (PyObject *)self->device;
}

static PyObject *buffer_exports(kp_Buffer *self, void *c)
{
    (void)c;
    return PyLong_FromLong(self->exports);
}

static PyObject *buffer_imported(kp_Buffer *self, void *c)
{
    (void)c;
    return PyBool_FromLong(self->imported != NULL);
}

static PyObject *buffer_repr(kp_Buffer *self)
{
    return PyUnicode_FromFormat("keel.Buffer(%zu bytes of %s memory on %s%s)", self->nbytes, kind_name(self->kind),
                                keel_device_name(self->device->dev), self->closed ? ", freed" : "");
}

static PyMethodDef buffer_methods[] = {
    {"copy_from", (PyCFunction)(void (*)(void))buffer_copy_from, METH_FASTCALL | METH_KEYWORDS,
     "copy_from(obj, offset=0): copy a C-contiguous buffer-protocol object in (synchronous)"},
    {"copy_to", (PyCFunction)(void (*)(void))buffer_copy_to, METH_FASTCALL | METH_KEYWORDS,
     "copy_to(obj, offset=0): copy into a writable buffer-protocol object (synchronous)"},
    {"free", (PyCFunction)buffer_free, METH_NOARGS,
     "free the memory now, or when the last DLPack consumer lets go of it"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef buffer_getset[] = {
    {"ptr", (getter)buffer_ptr, NULL, "address of the memory (0 once freed)", NULL},
    {"nbytes", (getter)buffer_nbytes, NULL, "size in bytes", NULL},
    {"kind", (getter)buffer_kind, NULL, "\"device\", \"pinned\" or \"managed\"", NULL},
    {"device", (getter)buffer_device, NULL, "its Device", NULL},
    {"exports", (getter)buffer_exports, NULL, "DLPack tensors of it held by consumers", NULL},
    {"imported", (getter)buffer_imported, NULL, "whether it is another library's memory", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject kp_BufferType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "keel.Buffer",
    .tp_basicsize = sizeof(kp_Buffer),
    .tp_dealloc = (destructor)buffer_dealloc,
    .tp_repr = (reprfunc)buffer_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Buffer(nbytes, device=None, kind=\"device\"): memory Keel allocated.",
    .tp_new = buffer_new,
    .tp_methods = buffer_methods,
    .tp_getset = buffer_getset,
};

int kp_buffer_init(PyObject *m)
{
    if (PyType_Ready(&kp_BufferType) < 0)
        return -1;
    Py_INCREF(&kp_BufferType);
    return PyModule_AddObject(m, "Buffer", (PyObject *)&kp_BufferType);
}
