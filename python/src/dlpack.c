/* SPDX-License-Identifier: MIT */
/* The Python array API's DLPack protocol: Array.__dlpack__,
 * Array.__dlpack_device__, keel.from_dlpack, and __cuda_array_interface__.
 * Both capsule kinds: DLPack 1.x's "dltensor_versioned" (with its flags)
 * and the unversioned "dltensor" of earlier consumers and producers. */
#include <stdlib.h>
#include <string.h>
#include "keelpy.h"
#include "dlpack_versioned.h"

#define CAPSULE "dltensor"
#define CAPSULE_VERSIONED "dltensor_versioned"

/* ---- export ---- */

/* The deleter's release: the consumer let go (on any thread). */
static void export_released(void *user_data)
{
    if (!Py_IsInitialized())
        return; /* at exit: nothing left to give back */
    PyGILState_STATE g = PyGILState_Ensure();
    kp_Array *a = user_data;
    kp_buffer_export_done(a->buffer);
    Py_DECREF(a);
    PyGILState_Release(g);
}

/* A capsule nobody consumed still owns its tensor. */
static void capsule_destructor(PyObject *cap)
{
    if (!PyCapsule_IsValid(cap, CAPSULE))
        return; /* consumed: renamed "used_dltensor" */
    DLManagedTensor *m = PyCapsule_GetPointer(cap, CAPSULE);
    if (m && m->deleter)
        m->deleter(m);
}

/* The producer's half of the stream handshake: the consumer's stream
 * (the array API's integer) must see the array's work. */
static int order_for_consumer(kp_Array *self, PyObject *stream)
{
    kp_Device *d = self->buffer->device;
    keel_status_t st;
    if (d->is_cuda || d->is_hip) {
        long long s;
        if (!stream || stream == Py_None)
            s = d->is_cuda ? 1 : 0; /* the legacy default stream */
        else if ((s = PyLong_AsLongLong(stream)) == -1 && PyErr_Occurred())
            return -1;
        if (s == -1)
            return 0; /* the consumer orders it itself */
        if (d->is_cuda && s == 0) {
            PyErr_SetString(PyExc_ValueError, "__dlpack__: stream 0 is ambiguous for CUDA (use 1 or 2)");
            return -1;
        }
        if ((st = keel_stream_order_native(self->stream, (uintptr_t)s)) != KEEL_OK)
            return kp_raise_int(st);
        return 0;
    }
    /* A host consumer reads at once: the array's work must be done. */
    if (stream && stream != Py_None) {
        long long s = PyLong_AsLongLong(stream);
        if (s == -1 && PyErr_Occurred())
            return -1;
        if (s == -1)
            return 0;
        PyErr_Format(PyExc_ValueError, "__dlpack__: stream must be None or -1 for %s, not %lld",
                     keel_device_name(d->dev), s);
        return -1;
    }
    KP_BLOCKING(st, keel_stream_synchronize(self->stream));
    return st == KEEL_OK ? 0 : kp_raise_int(st);
}

/* A versioned tensor over an unversioned one that Keel exported: its
 * deleter runs the unversioned one's. */
typedef struct versioned_export {
    DLManagedTensorVersioned v;
    DLManagedTensor *m;
} versioned_export_t;

static void versioned_export_delete(DLManagedTensorVersioned *v)
{
    versioned_export_t *e = v->manager_ctx;
    if (e->m->deleter)
        e->m->deleter(e->m);
    free(e);
}

static void capsule_destructor_versioned(PyObject *cap)
{
    if (!PyCapsule_IsValid(cap, CAPSULE_VERSIONED))
        return; /* consumed: renamed "used_dltensor_versioned" */
    DLManagedTensorVersioned *v = PyCapsule_GetPointer(cap, CAPSULE_VERSIONED);
    if (v && v->deleter)
        v->deleter(v);
}

/* The capsule of m: versioned (flags as given) or not. Owns m either way. */
static PyObject *capsule_of(DLManagedTensor *m, int versioned, uint64_t flags)
{
    if (!versioned) {
        PyObject *cap = PyCapsule_New(m, CAPSULE, capsule_destructor);
        if (!cap)
            m->deleter(m);
        return cap;
    }
    versioned_export_t *e = calloc(1, sizeof *e);
    if (!e) {
        m->deleter(m);
        return PyErr_NoMemory();
    }
    e->v.version.major = KP_DLPACK_MAJOR;
    e->v.version.minor = KP_DLPACK_MINOR;
    e->v.manager_ctx = e;
    e->v.deleter = versioned_export_delete;
    e->v.flags = flags;
    e->v.dl_tensor = m->dl_tensor;
    e->m = m;
    PyObject *cap = PyCapsule_New(&e->v, CAPSULE_VERSIONED, capsule_destructor_versioned);
    if (!cap)
        versioned_export_delete(&e->v);
    return cap;
}

static PyObject *export_capsule(kp_Array *a, int versioned, uint64_t flags)
{
    keel_dlpack_export_params_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.data = a->data;
    p.ndim = a->ndim;
    p.shape = a->shape;
    p.strides = a->strides;
    p.dtype = a->dtype;
    p.release = export_released;
    p.user_data = a;
    DLManagedTensor *m = NULL;
    keel_status_t st = keel_dlpack_export(&p, &m);
    if (st != KEEL_OK)
        return kp_raise(st);
    Py_INCREF(a); /* dropped by the deleter */
    a->buffer->exports++;
    return capsule_of(m, versioned, flags);
}

static kp_Array *copy_of(kp_Array *self);

PyObject *kp_array_dlpack(kp_Array *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *a[4];
    if (nargs > 0)
        return PyErr_Format(PyExc_TypeError, "__dlpack__() takes keyword arguments only");
    if (kp_kwargs("__dlpack__", args, nargs, kwnames, names, a) < 0 || kp_buffer_check(self->buffer) < 0)
        return NULL;
    /* max_version: a consumer that reads DLPack 1.x gets a versioned
     * capsule; one that names no version (or an older one) the unversioned
     * "dltensor". */
    int versioned = 0;
    if (a[1] && a[1] != Py_None) {
        int major, minor;
        if (!PyTuple_Check(a[1]))
            return PyErr_Format(PyExc_TypeError, "__dlpack__: max_version must be a (major, minor) tuple, not %s",
                                Py_TYPE(a[1])->tp_name);
        if (!PyArg_ParseTuple(a[1], "ii:max_version", &major, &minor))
            return NULL;
        versioned = major >= KP_DLPACK_MAJOR;
    }
    if (a[2] && a[2] != Py_None) {
        DLDevice mine;
        keel_status_t st = keel_dlpack_device(self->buffer->device->dev, self->buffer->kind, &mine);
        if (st != KEEL_OK)
            return kp_raise(st);
        int type, id;
        if (!PyArg_ParseTuple(a[2], "ii:dl_device", &type, &id))
            return NULL;
        if (type != (int)mine.device_type || id != mine.device_id)
            return PyErr_Format(PyExc_BufferError, "__dlpack__: the array is on DLPack device (%d, %d), not (%d, %d)",
                                (int)mine.device_type, mine.device_id, type, id);
    }
    int copy = a[3] && a[3] != Py_None ? PyObject_IsTrue(a[3]) : 0;
    if (copy < 0 || order_for_consumer(self, a[0]) < 0)
        return NULL;
    if (!copy)
        return export_capsule(self, versioned, 0);
    kp_Array *c = copy_of(self);
    if (!c)
        return NULL;
    PyObject *cap = export_capsule(c, versioned, DLPACK_FLAG_BITMASK_IS_COPIED);
    Py_DECREF(c);
    return cap;
}

PyObject *kp_array_dlpack_device(kp_Array *self, PyObject *unused)
{
    (void)unused;
    DLDevice d;
    keel_status_t st = keel_dlpack_device(self->buffer->device->dev, self->buffer->kind, &d);
    if (st != KEEL_OK)
        return kp_raise(st);
    return Py_BuildValue("(ii)", (int)d.device_type, d.device_id);
}

/* A compact copy on the same device, done by the time it returns. */
static kp_Array *copy_of(kp_Array *self)
{
    if (!kp_array_is_compact(self)) {
        PyErr_SetString(PyExc_BufferError, "__dlpack__(copy=True) needs a compact array");
        return NULL;
    }
    kp_Array *c = kp_array_empty(self->buffer->device, self->ndim, self->shape, self->dtype, self->buffer->kind);
    if (!c)
        return NULL;
    size_t bytes = (size_t)kp_array_size(self) * (self->dtype.bits / 8);
    keel_status_t st = KEEL_OK;
    if (bytes) {
        KP_BLOCKING(st, keel_stream_synchronize(self->stream));
        if (st == KEEL_OK)
            KP_BLOCKING(st, keel_memcpy(c->data, self->data, bytes));
    }
    if (st != KEEL_OK) {
        Py_DECREF(c);
        return (kp_Array *)kp_raise(st);
    }
    return c;
}

/* ---- import ---- */

/* The Keel device for memory of a DLPack device, when none is named. */
static kp_Device *device_for(int type, int id)
{
    keel_device_t *dev = NULL, *def = NULL;
    keel_status_t st;
    switch (type) {
    case kDLCUDA: st = keel_device_get("cuda", id, &dev); break;
    case kDLROCM: st = keel_device_get("hip", id, &dev); break;
    case kDLCUDAHost:
    case kDLCUDAManaged:
    case kDLROCMHost: {
        /* The default device when it is of that family, else the CPU's. */
        kp_Device *d = keel_device_default(&def) == KEEL_OK ? (kp_Device *)kp_device_of(def) : NULL;
        if (!d)
            PyErr_Clear();
        if (d && ((type == kDLROCMHost && d->is_hip) || (type != kDLROCMHost && d->is_cuda) || d->is_cpu))
            return d;
        Py_XDECREF(d);
        st = keel_device_get("cpu", 0, &dev);
        break;
    }
    default: st = keel_device_get("cpu", 0, &dev); break;
    }
    if (st != KEEL_OK)
        return (kp_Device *)kp_raise(st);
    return (kp_Device *)kp_device_of(dev);
}

/* Wraps an imported tensor as an Array (owning it). */
static PyObject *wrap_imported(kp_Device *d, const keel_tensor_t *t)
{
    if (t->ndim > KP_MAX_NDIM) {
        keel_dlpack_release(t);
        return PyErr_Format(PyExc_BufferError, "from_dlpack: %d dimensions; keel.Array has at most %d", (int)t->ndim,
                            KP_MAX_NDIM);
    }
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    kp_Buffer *b = kp_buffer_imported(d, t, (size_t)n * (t->dtype.bits / 8) * t->dtype.lanes);
    if (!b)
        return NULL;
    kp_Array *a = kp_array_wrap(b, t->data, t->ndim, t->shape, t->strides, t->dtype);
    Py_DECREF(b);
    return (PyObject *)a;
}

/* A compact copy of host memory described by m onto device d. */
static PyObject *copy_host_tensor(kp_Device *d, const DLTensor *t)
{
    int64_t shape[KP_MAX_NDIM], s = 1;
    if (t->ndim > KP_MAX_NDIM)
        return PyErr_Format(PyExc_BufferError, "from_dlpack: %d dimensions; keel.Array has at most %d", (int)t->ndim,
                            KP_MAX_NDIM);
    for (int i = t->ndim - 1; i >= 0; i--) {
        shape[i] = t->shape[i];
        if (t->strides && t->shape[i] != 1 && t->strides[i] != s)
            return PyErr_Format(PyExc_BufferError, "from_dlpack: copying needs a compact tensor");
        s *= t->shape[i];
    }
    kp_Array *a = kp_array_empty(d, t->ndim, shape, t->dtype, KEEL_MEMORY_DEVICE);
    if (!a)
        return NULL;
    size_t bytes = (size_t)s * (t->dtype.bits / 8);
    keel_status_t st = KEEL_OK;
    if (bytes)
        KP_BLOCKING(st, keel_memcpy(a->data, (char *)t->data + t->byte_offset, bytes));
    if (st != KEEL_OK) {
        Py_DECREF(a);
        return kp_raise(st);
    }
    return (PyObject *)a;
}

/* An unversioned tensor over a versioned one, for keel_dlpack_import: its
 * deleter runs the producer's. */
typedef struct versioned_import {
    DLManagedTensor m;
    DLManagedTensorVersioned *v;
} versioned_import_t;

static void versioned_import_delete(DLManagedTensor *m)
{
    versioned_import_t *w = m->manager_ctx;
    if (w->v->deleter)
        w->v->deleter(w->v);
    free(w);
}

/* The producer's tensor in a capsule of either kind. */
typedef struct capsule_tensor {
    DLManagedTensor *m;         /* unversioned, or NULL */
    DLManagedTensorVersioned *v; /* versioned, or NULL */
    const DLTensor *t;
} capsule_tensor_t;

/* Reads cap into *ct: 0, or -1 with BufferError. */
static int capsule_tensor(PyObject *cap, capsule_tensor_t *ct)
{
    memset(ct, 0, sizeof *ct);
    if (PyCapsule_IsValid(cap, CAPSULE_VERSIONED)) {
        ct->v = PyCapsule_GetPointer(cap, CAPSULE_VERSIONED);
        if (ct->v->version.major != KP_DLPACK_MAJOR) {
            PyErr_Format(PyExc_BufferError, "from_dlpack: the tensor is of DLPack %u.%u; Keel reads %d.x",
                         (unsigned)ct->v->version.major, (unsigned)ct->v->version.minor, KP_DLPACK_MAJOR);
            return -1;
        }
        ct->t = &ct->v->dl_tensor;
        return 0;
    }
    if (PyCapsule_IsValid(cap, CAPSULE)) {
        ct->m = PyCapsule_GetPointer(cap, CAPSULE);
        ct->t = &ct->m->dl_tensor;
        return 0;
    }
    PyErr_Clear();
    PyErr_SetString(PyExc_BufferError,
                    "from_dlpack: the producer gave no \"dltensor\" or \"dltensor_versioned\" capsule (consumed already?)");
    return -1;
}

/* Imports the capsule's tensor for d, consuming the capsule on success.
 * KEEL_OK; a Keel error (not raised); or -1 with a Python error raised. */
static int import_tensor(kp_Device *d, PyObject *cap, const capsule_tensor_t *ct, const keel_tensor_t **t,
                         keel_status_t *st)
{
    DLManagedTensor *m = ct->m;
    versioned_import_t *w = NULL;
    if (ct->v) {
        if (!(w = malloc(sizeof *w))) {
            PyErr_NoMemory();
            return -1;
        }
        w->m.dl_tensor = ct->v->dl_tensor;
        w->m.manager_ctx = w;
        w->m.deleter = versioned_import_delete;
        w->v = ct->v;
        m = &w->m;
    }
    *st = keel_dlpack_import(d->dev, m, t);
    if (*st == KEEL_OK)
        PyCapsule_SetName(cap, ct->v ? "used_dltensor_versioned" : "used_dltensor");
    else
        free(w);
    return 0;
}

/* x.__dlpack__(stream=..., max_version=(1, 0)); a producer that refuses
 * max_version with TypeError (DLPack before 1.0) is asked again without. */
static PyObject *call_dlpack(PyObject *x, PyObject *stream)
{
    PyObject *meth = PyObject_GetAttrString(x, "__dlpack__");
    PyObject *none = meth ? PyTuple_New(0) : NULL;
    PyObject *kw = none ? PyDict_New() : NULL, *cap = NULL, *ver = NULL;
    if (!kw || (stream && PyDict_SetItemString(kw, "stream", stream) < 0) ||
        !(ver = Py_BuildValue("(ii)", KP_DLPACK_MAJOR, KP_DLPACK_MINOR)) ||
        PyDict_SetItemString(kw, "max_version", ver) < 0)
        goto out;
    cap = PyObject_Call(meth, none, kw);
    if (!cap && PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Clear();
        if (PyDict_DelItemString(kw, "max_version") == 0)
            cap = PyObject_Call(meth, none, kw);
    }
out:
    Py_XDECREF(ver);
    Py_XDECREF(kw);
    Py_XDECREF(none);
    Py_XDECREF(meth);
    return cap;
}

PyObject *kp_from_dlpack(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)self;
    static const char *const names[] = {"x", "device", "copy", "stream", NULL};
    PyObject *a[4];
    if (kp_kwargs("from_dlpack", args, nargs, kwnames, names, a) < 0)
        return NULL;
    PyObject *x = a[0];
    if (!x)
        return PyErr_Format(PyExc_TypeError, "from_dlpack() needs an object");
    int copy = a[2] && a[2] != Py_None ? PyObject_IsTrue(a[2]) : -1; /* -1: a copy only if needed */
    if (copy == -1 && PyErr_Occurred())
        return NULL;
    kp_Device *d = NULL;
    PyObject *cap = NULL, *r = NULL;
    capsule_tensor_t ct;
    int src_type = kDLCPU;
    if (PyCapsule_CheckExact(x)) {
        Py_INCREF(x);
        cap = x;
        if (capsule_tensor(cap, &ct) < 0)
            goto out;
        src_type = ct.t->device.device_type;
        d = a[1] && a[1] != Py_None ? kp_device_arg(a[1]) : device_for(src_type, ct.t->device.device_id);
        if (!d)
            goto out;
    } else {
        PyObject *dev = PyObject_CallMethod(x, "__dlpack_device__", NULL);
        int type, id;
        if (!dev)
            goto out;
        if (!PyArg_ParseTuple(dev, "ii", &type, &id)) {
            Py_DECREF(dev);
            goto out;
        }
        Py_DECREF(dev);
        src_type = type;
        d = a[1] && a[1] != Py_None ? kp_device_arg(a[1]) : device_for(type, id);
        if (!d)
            goto out;
        /* The consumer's half of the handshake: the producer orders its work
         * before Keel's stream (GPU), or finishes it (host memory). */
        keel_stream_t *ks = kp_stream_arg(a[3], d);
        if (!ks)
            goto out;
        uintptr_t h = 0;
        int device_memory = type == kDLCUDA || type == kDLROCM || type == kDLCUDAManaged;
        PyObject *stream = NULL;
        if (device_memory && (d->is_cuda || d->is_hip) && keel_stream_get_native(ks, &h) == KEEL_OK &&
            !(stream = PyLong_FromUnsignedLongLong((unsigned long long)h)))
            goto out;
        cap = call_dlpack(x, stream);
        Py_XDECREF(stream);
        if (!cap || capsule_tensor(cap, &ct) < 0)
            goto out;
    }
    /* Keel's arrays are writable: a read-only tensor is copied, never wrapped. */
    if (ct.v && (ct.v->flags & DLPACK_FLAG_BITMASK_READ_ONLY)) {
        if (copy == 0) {
            PyErr_SetString(PyExc_BufferError, "from_dlpack(copy=False): the tensor is read-only and a Keel array is "
                                               "writable; pass copy=None or copy=True for a copy");
            goto out;
        }
        copy = 1;
    }
    const keel_tensor_t *t = NULL;
    keel_status_t st = KEEL_OK;
    if (copy != 1) {
        if (import_tensor(d, cap, &ct, &t, &st) < 0)
            goto out;
        if (st == KEEL_OK) {
            r = wrap_imported(d, t);
            goto out;
        }
        if (st != KEEL_ERROR_DEVICE_MISMATCH || copy == 0 || src_type != kDLCPU) {
            if (st == KEEL_ERROR_DEVICE_MISMATCH && copy == 0)
                PyErr_Format(PyExc_BufferError, "from_dlpack(copy=False): %s", keel_last_error());
            else
                kp_raise(st);
            goto out;
        }
    }
    /* A copy: asked for, or host memory for a device that cannot address it. */
    if (src_type == kDLCPU || src_type == kDLCUDAHost || src_type == kDLROCMHost || src_type == kDLCUDAManaged ||
        d->is_cpu) {
        r = copy_host_tensor(d, ct.t);
    } else {
        /* Device memory: import it, then copy on the device. */
        if (import_tensor(d, cap, &ct, &t, &st) < 0)
            goto out;
        if (st != KEEL_OK) {
            kp_raise(st);
            goto out;
        }
        PyObject *view = wrap_imported(d, t);
        if (view) {
            r = (PyObject *)copy_of((kp_Array *)view);
            Py_DECREF(view);
        }
    }
out:
    Py_XDECREF(cap);
    Py_XDECREF(d);
    return r;
}

/* ---- __cuda_array_interface__ ---- */

PyObject *kp_array_cai(kp_Array *self, void *closure)
{
    (void)closure;
    kp_Device *d = self->buffer->device;
    if (!d->is_cuda)
        return PyErr_Format(PyExc_AttributeError, "__cuda_array_interface__ is for CUDA memory; this array is on %s",
                            keel_device_name(d->dev));
    char typestr[8];
    char kind = self->dtype.code == kDLFloat ? 'f' : self->dtype.code == kDLInt ? 'i' : self->dtype.code == kDLUInt ? 'u' : 0;
    if (!kind)
        return PyErr_Format(PyExc_AttributeError, "__cuda_array_interface__ has no typestr for %s",
                            kp_dtype_name(self->dtype));
    snprintf(typestr, sizeof typestr, "<%c%d", kind, self->dtype.bits / 8);
    PyObject *shape = PyTuple_New(self->ndim), *strides = NULL;
    for (int i = 0; shape && i < self->ndim; i++)
        PyTuple_SET_ITEM(shape, i, PyLong_FromLongLong(self->shape[i]));
    if (kp_array_is_compact(self)) {
        Py_INCREF(Py_None);
        strides = Py_None;
    } else {
        strides = PyTuple_New(self->ndim);
        for (int i = 0; strides && i < self->ndim; i++)
            PyTuple_SET_ITEM(strides, i, PyLong_FromLongLong(self->strides[i] * (self->dtype.bits / 8)));
    }
    uintptr_t h = 0;
    keel_status_t st = keel_stream_get_native(self->stream, &h);
    if (st != KEEL_OK) {
        Py_XDECREF(shape);
        Py_XDECREF(strides);
        return kp_raise(st);
    }
    PyObject *r = Py_BuildValue("{s:N,s:s,s:(NO),s:i,s:N,s:N}", "shape", shape, "typestr", typestr, "data",
                                PyLong_FromVoidPtr(self->data), Py_False, "version", 3, "strides", strides, "stream",
                                PyLong_FromSize_t(h));
    return r;
}
