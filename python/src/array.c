/* SPDX-License-Identifier: MIT */
/* Arrays: a shape, strides and a dtype over a Buffer. */
#include <string.h>
#include "keelpy.h"

static const struct {
    const char *name, *alias, *fmt;
    uint8_t code, bits;
} dtypes[] = {
    {"float32", "f4", "f", kDLFloat, 32},  {"float64", "f8", "d", kDLFloat, 64}, {"float16", "f2", "e", kDLFloat, 16},
    {"bfloat16", "bf16", NULL, kDLBfloat, 16}, {"int8", "i1", "b", kDLInt, 8},  {"int16", "i2", "h", kDLInt, 16},
    {"int32", "i4", "i", kDLInt, 32},      {"int64", "i8", "q", kDLInt, 64},    {"uint8", "u1", "B", kDLUInt, 8},
    {"uint16", "u2", "H", kDLUInt, 16},    {"uint32", "u4", "I", kDLUInt, 32},  {"uint64", "u8", "Q", kDLUInt, 64},
};
#define NDTYPES (sizeof dtypes / sizeof dtypes[0])

int kp_dtype_parse(PyObject *o, DLDataType *out)
{
    if (!o || o == Py_None) {
        *out = (DLDataType){kDLFloat, 32, 1};
        return 0;
    }
    PyObject *name = PyUnicode_Check(o) ? (Py_INCREF(o), o) : PyObject_Str(o); /* numpy dtypes print their name */
    if (!name)
        return -1;
    const char *s = PyUnicode_AsUTF8(name);
    if (s && (*s == '<' || *s == '=' || *s == '|'))
        s++;
    for (size_t i = 0; s && i < NDTYPES; i++) {
        if (strcmp(s, dtypes[i].name) == 0 || strcmp(s, dtypes[i].alias) == 0) {
            *out = (DLDataType){dtypes[i].code, dtypes[i].bits, 1};
            Py_DECREF(name);
            return 0;
        }
    }
    if (s)
        PyErr_Format(PyExc_TypeError, "unknown dtype %R (float32, float64, float16, bfloat16, int8..int64, "
                     "uint8..uint64)", o);
    Py_DECREF(name);
    return -1;
}

/* The dtype of a struct-module format ("f", "<d", "l"), for buffer-protocol objects. */
static int dtype_of_format(const char *fmt, Py_ssize_t itemsize, DLDataType *out)
{
    if (*fmt == '<' || *fmt == '=' || *fmt == '@')
        fmt++;
    char c = fmt[0];
    if (c && !fmt[1]) {
        if (c == 'l' || c == 'L' || c == 'n' || c == 'N') /* native longs: by size */
            c = (c == 'l' || c == 'n') ? (itemsize == 8 ? 'q' : 'i') : (itemsize == 8 ? 'Q' : 'I');
        for (size_t i = 0; i < NDTYPES; i++)
            if (dtypes[i].fmt && dtypes[i].fmt[0] == c) {
                *out = (DLDataType){dtypes[i].code, dtypes[i].bits, 1};
                return 0;
            }
    }
    PyErr_Format(PyExc_TypeError, "buffer format \"%s\" is none of Keel's dtypes", fmt);
    return -1;
}

const char *kp_dtype_name(DLDataType t)
{
    for (size_t i = 0; i < NDTYPES; i++)
        if (dtypes[i].code == t.code && dtypes[i].bits == t.bits && t.lanes == 1)
            return dtypes[i].name;
    return "unknown";
}

int kp_array_keel_dtype(const kp_Array *a, keel_dtype_t *out)
{
    if (keel_dtype_from_dlpack(a->dtype, out) == KEEL_OK)
        return 0;
    PyErr_Format(PyExc_TypeError, "the operation takes float32, float64, float16 or bfloat16 arrays, not %s",
                 kp_dtype_name(a->dtype));
    return -1;
}

int64_t kp_array_size(const kp_Array *a)
{
    int64_t n = 1;
    for (int i = 0; i < a->ndim; i++)
        n *= a->shape[i];
    return n;
}

int kp_array_is_compact(const kp_Array *a)
{
    int64_t s = 1;
    for (int i = a->ndim - 1; i >= 0; i--) {
        if (a->shape[i] != 1 && a->strides[i] != s)
            return 0;
        s *= a->shape[i];
    }
    return 1;
}

kp_Array *kp_array_wrap(kp_Buffer *b, void *data, int ndim, const int64_t *shape, const int64_t *strides,
                        DLDataType dtype)
{
    if (ndim < 0 || ndim > KP_MAX_NDIM) {
        PyErr_Format(PyExc_ValueError, "%d dimensions: keel.Array has at most %d", ndim, KP_MAX_NDIM);
        return NULL;
    }
    kp_Array *a = PyObject_New(kp_Array, &kp_ArrayType);
    if (!a)
        return NULL;
    Py_INCREF(b);
    a->buffer = b;
    a->data = data;
    a->ndim = ndim;
    a->dtype = dtype;
    a->stream = b->device->default_stream;
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        a->shape[i] = shape[i];
        a->strides[i] = strides ? strides[i] : s;
        s *= shape[i];
    }
    return a;
}

kp_Array *kp_array_empty(kp_Device *d, int ndim, const int64_t *shape, DLDataType dtype, keel_memory_kind_t kind)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            PyErr_Format(PyExc_ValueError, "negative extent %lld in the shape", (long long)shape[i]);
            return NULL;
        }
        n *= shape[i];
    }
    size_t bytes = (size_t)n * (dtype.bits / 8);
    kp_Buffer *b = kp_buffer_new(d, bytes ? bytes : 1, kind);
    if (!b)
        return NULL;
    kp_Array *a = kp_array_wrap(b, b->ptr, ndim, shape, NULL, dtype);
    Py_DECREF(b);
    return a;
}

static void array_dealloc(kp_Array *self)
{
    Py_XDECREF(self->buffer);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A shape from an int or a sequence of ints. */
static int shape_parse(PyObject *o, int *ndim, int64_t *shape)
{
    if (PyLong_Check(o)) {
        *ndim = 1;
        shape[0] = PyLong_AsLongLong(o);
        return shape[0] == -1 && PyErr_Occurred() ? -1 : 0;
    }
    PyObject *seq = PySequence_Fast(o, "shape must be an int or a sequence of ints");
    if (!seq)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > KP_MAX_NDIM) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "%zd dimensions: keel.Array has at most %d", n, KP_MAX_NDIM);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        shape[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (shape[i] == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
    }
    *ndim = (int)n;
    Py_DECREF(seq);
    return 0;
}

static int kind_arg(PyObject *o, keel_memory_kind_t *k)
{
    if (!o || o == Py_None) {
        *k = KEEL_MEMORY_DEVICE;
        return 0;
    }
    const char *s = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
    if (s && strcmp(s, "device") == 0)
        *k = KEEL_MEMORY_DEVICE;
    else if (s && strcmp(s, "pinned") == 0)
        *k = KEEL_MEMORY_PINNED;
    else if (s && strcmp(s, "managed") == 0)
        *k = KEEL_MEMORY_MANAGED;
    else {
        PyErr_Format(PyExc_ValueError, "kind must be \"device\", \"pinned\" or \"managed\", not %R", o);
        return -1;
    }
    return 0;
}

static PyObject *empty(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)self;
    static const char *const names[] = {"shape", "dtype", "device", "kind", NULL};
    PyObject *a[4];
    if (kp_kwargs("empty", args, nargs, kwnames, names, a) < 0)
        return NULL;
    if (!a[0])
        return PyErr_Format(PyExc_TypeError, "empty() needs a shape");
    int ndim;
    int64_t shape[KP_MAX_NDIM];
    DLDataType t;
    keel_memory_kind_t kind;
    if (shape_parse(a[0], &ndim, shape) < 0 || kp_dtype_parse(a[1], &t) < 0 || kind_arg(a[3], &kind) < 0)
        return NULL;
    kp_Device *d = kp_device_arg(a[2]);
    if (!d)
        return NULL;
    PyObject *r = (PyObject *)kp_array_empty(d, ndim, shape, t, kind);
    Py_DECREF(d);
    return r;
}

/* A new array holding a copy of a buffer-protocol object. */
static PyObject *array_from_buffer(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)self;
    static const char *const names[] = {"obj", "device", "kind", NULL};
    PyObject *a[3];
    if (kp_kwargs("array_from_buffer", args, nargs, kwnames, names, a) < 0)
        return NULL;
    if (!a[0])
        return PyErr_Format(PyExc_TypeError, "array_from_buffer() needs an object");
    keel_memory_kind_t kind;
    if (kind_arg(a[2], &kind) < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(a[0], &view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    DLDataType t;
    int64_t shape[KP_MAX_NDIM];
    PyObject *r = NULL;
    if (view.ndim > KP_MAX_NDIM) {
        PyErr_Format(PyExc_ValueError, "%d dimensions: keel.Array has at most %d", view.ndim, KP_MAX_NDIM);
        goto out;
    }
    if (dtype_of_format(view.format ? view.format : "B", view.itemsize, &t) < 0)
        goto out;
    for (int i = 0; i < view.ndim; i++)
        shape[i] = view.shape[i];
    if (view.ndim == 0 && view.len != view.itemsize) { /* a flat buffer without a shape */
        shape[0] = view.len / view.itemsize;
        view.ndim = 1;
    }
    kp_Device *d = kp_device_arg(a[1]);
    if (!d)
        goto out;
    kp_Array *arr = kp_array_empty(d, view.ndim, shape, t, kind);
    Py_DECREF(d);
    if (!arr)
        goto out;
    keel_status_t st = KEEL_OK;
    if (view.len)
        KP_BLOCKING(st, keel_memcpy(arr->data, view.buf, (size_t)view.len));
    if (st != KEEL_OK) {
        Py_DECREF(arr);
        kp_raise(st);
        goto out;
    }
    r = (PyObject *)arr;
out:
    PyBuffer_Release(&view);
    return r;
}

static PyObject *array_copy(kp_Array *self, PyObject *obj, int to_host)
{
    if (kp_buffer_check(self->buffer) < 0)
        return NULL;
    if (!kp_array_is_compact(self))
        return PyErr_Format(PyExc_ValueError, "copies need a compact array (this one has strides)");
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, (to_host ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    size_t bytes = (size_t)kp_array_size(self) * (self->dtype.bits / 8);
    if ((size_t)view.len != bytes) {
        PyErr_Format(PyExc_ValueError, "the object has %zd bytes, the array %zu", view.len, bytes);
        PyBuffer_Release(&view);
        return NULL;
    }
    keel_status_t st = KEEL_OK;
    /* Ordered after the array's own stream's work. */
    KP_BLOCKING(st, keel_stream_synchronize(self->stream));
    if (st == KEEL_OK && bytes)
        KP_BLOCKING(st, to_host ? keel_memcpy(view.buf, self->data, bytes) : keel_memcpy(self->data, view.buf, bytes));
    PyBuffer_Release(&view);
    if (st != KEEL_OK)
        return kp_raise(st);
    Py_RETURN_NONE;
}

static PyObject *array_copy_to(kp_Array *self, PyObject *obj) { return array_copy(self, obj, 1); }
static PyObject *array_copy_from(kp_Array *self, PyObject *obj) { return array_copy(self, obj, 0); }

static PyObject *array_reshape(kp_Array *self, PyObject *args)
{
    PyObject *o = PyTuple_GET_SIZE(args) == 1 ? PyTuple_GET_ITEM(args, 0) : args;
    int ndim;
    int64_t shape[KP_MAX_NDIM];
    if (shape_parse(o, &ndim, shape) < 0)
        return NULL;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    if (n != kp_array_size(self) || !kp_array_is_compact(self))
        return PyErr_Format(PyExc_ValueError, "cannot reshape %lld elements%s into that shape",
                            (long long)kp_array_size(self), kp_array_is_compact(self) ? "" : " (not compact)");
    kp_Array *r = kp_array_wrap(self->buffer, self->data, ndim, shape, NULL, self->dtype);
    if (r)
        r->stream = self->stream;
    return (PyObject *)r;
}

static PyObject *tuple_of(const int64_t *v, int n, int64_t scale)
{
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++)
        PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(v[i] * scale));
    return t;
}

static PyObject *array_shape(kp_Array *self, void *c) { (void)c; return tuple_of(self->shape, self->ndim, 1); }
static PyObject *array_strides(kp_Array *self, void *c) { (void)c; return tuple_of(self->strides, self->ndim, 1); }
static PyObject *array_ndim(kp_Array *self, void *c) { (void)c; return PyLong_FromLong(self->ndim); }
static PyObject *array_size(kp_Array *self, void *c) { (void)c; return PyLong_FromLongLong(kp_array_size(self)); }
static PyObject *array_dtype(kp_Array *self, void *c) { (void)c; return PyUnicode_FromString(kp_dtype_name(self->dtype)); }
static PyObject *array_itemsize(kp_Array *self, void *c) { (void)c; return PyLong_FromLong(self->dtype.bits / 8); }
static PyObject *array_ptr(kp_Array *self, void *c) { (void)c; return PyLong_FromVoidPtr(self->data); }
static PyObject *array_nbytes(kp_Array *self, void *c)
{
    (void)c;
    return PyLong_FromLongLong(kp_array_size(self) * (self->dtype.bits / 8));
}
static PyObject *array_buffer(kp_Array *self, void *c)
{
    (void)c;
    Py_INCREF(self->buffer);
    return (PyObject *)self->buffer;
}
static PyObject *array_device(kp_Array *self, void *c)
{
    (void)c;
    Py_INCREF(self->buffer->device);
    return (PyObject *)self->buffer->device;
}
static PyObject *array_compact(kp_Array *self, void *c) { (void)c; return PyBool_FromLong(kp_array_is_compact(self)); }

static PyObject *array_repr(kp_Array *self)
{
    PyObject *shape = tuple_of(self->shape, self->ndim, 1);
    if (!shape)
        return NULL;
    PyObject *r = PyUnicode_FromFormat("keel.Array(shape=%S, dtype=%s, device=%s)", shape, kp_dtype_name(self->dtype),
                                       keel_device_name(self->buffer->device->dev));
    Py_DECREF(shape);
    return r;
}

static PyObject *array_synchronize(kp_Array *self, PyObject *unused)
{
    (void)unused;
    keel_status_t st;
    KP_BLOCKING(st, keel_stream_synchronize(self->stream));
    if (st != KEEL_OK)
        return kp_raise(st);
    Py_RETURN_NONE;
}

static PyMethodDef array_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))kp_array_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None): a DLPack capsule of the array"},
    {"__dlpack_device__", (PyCFunction)kp_array_dlpack_device, METH_NOARGS, "(device_type, device_id) of DLPack"},
    {"copy_to", (PyCFunction)array_copy_to, METH_O, "copy into a writable C-contiguous buffer-protocol object"},
    {"copy_from", (PyCFunction)array_copy_from, METH_O, "copy a C-contiguous buffer-protocol object in"},
    {"reshape", (PyCFunction)array_reshape, METH_VARARGS, "a view of a compact array with another shape"},
    {"synchronize", (PyCFunction)array_synchronize, METH_NOARGS, "wait for the work enqueued on the array's stream"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef array_getset[] = {
    {"shape", (getter)array_shape, NULL, "extents", NULL},
    {"strides", (getter)array_strides, NULL, "strides in elements", NULL},
    {"ndim", (getter)array_ndim, NULL, "number of dimensions", NULL},
    {"size", (getter)array_size, NULL, "number of elements", NULL},
    {"dtype", (getter)array_dtype, NULL, "element type name", NULL},
    {"itemsize", (getter)array_itemsize, NULL, "bytes per element", NULL},
    {"nbytes", (getter)array_nbytes, NULL, "bytes of the elements", NULL},
    {"ptr", (getter)array_ptr, NULL, "address of element 0", NULL},
    {"buffer", (getter)array_buffer, NULL, "the Buffer that owns the memory", NULL},
    {"device", (getter)array_device, NULL, "its Device", NULL},
    {"is_compact", (getter)array_compact, NULL, "row-major without gaps", NULL},
    {"__cuda_array_interface__", (getter)kp_array_cai, NULL, "CUDA Array Interface v3 (CUDA devices only)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject kp_ArrayType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "keel.Array",
    .tp_basicsize = sizeof(kp_Array),
    .tp_dealloc = (destructor)array_dealloc,
    .tp_repr = (reprfunc)array_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An n-dimensional array in Keel memory (keel.empty, keel.asarray, keel.from_dlpack).",
    .tp_methods = array_methods,
    .tp_getset = array_getset,
};

static PyMethodDef array_functions[] = {
    {"empty", (PyCFunction)(void (*)(void))empty, METH_FASTCALL | METH_KEYWORDS,
     "empty(shape, dtype=\"float32\", device=None, kind=\"device\"): a new, uninitialized Array"},
    {"array_from_buffer", (PyCFunction)(void (*)(void))array_from_buffer, METH_FASTCALL | METH_KEYWORDS,
     "array_from_buffer(obj, device=None, kind=\"device\"): a new Array holding a copy of a buffer-protocol object"},
    {NULL, NULL, 0, NULL},
};

int kp_array_init(PyObject *m)
{
    if (PyType_Ready(&kp_ArrayType) < 0 || PyModule_AddFunctions(m, array_functions) < 0)
        return -1;
    Py_INCREF(&kp_ArrayType);
    return PyModule_AddObject(m, "Array", (PyObject *)&kp_ArrayType);
}
