/* SPDX-License-Identifier: MIT */
/* The Python array API's DLPack protocol: Array.__dlpack__,
 * Array.__dlpack_device__, keel.from_dlpack, and __cuda_array_interface__. */
#include <string.h>
#include "keelpy.h"

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
    if (!PyCapsule_IsValid(cap, "dltensor"))
        return; /* consumed: renamed "used_dltensor" */
    DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
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

static PyObject *export_capsule(kp_Array *a)
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
    PyObject *cap = PyCapsule_New(m, "dltensor", capsule_destructor);
    if (!cap)
        m->deleter(m);
    return cap;
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
    /* max_version: the capsule is DLPack 0.6's unversioned "dltensor",
     * which the array API lets a producer give any consumer. */
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
        return export_capsule(self);
    kp_Array *c = copy_of(self);
    if (!c)
        return NULL;
    PyObject *cap = export_capsule(c);
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
    int src_type = kDLCPU;
    if (PyCapsule_CheckExact(x)) {
        Py_INCREF(x);
        cap = x;
        DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
        if (!m)
            goto out;
        src_type = m->dl_tensor.device.device_type;
        d = a[1] && a[1] != Py_None ? kp_device_arg(a[1]) : device_for(src_type, m->dl_tensor.device.device_id);
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
        if (device_memory && (d->is_cuda || d->is_hip) && keel_stream_get_native(ks, &h) == KEEL_OK) {
            PyObject *kw = Py_BuildValue("{s:K}", "stream", (unsigned long long)h);
            PyObject *meth = kw ? PyObject_GetAttrString(x, "__dlpack__") : NULL;
            PyObject *none = meth ? PyTuple_New(0) : NULL;
            cap = none ? PyObject_Call(meth, none, kw) : NULL;
            Py_XDECREF(none);
            Py_XDECREF(meth);
            Py_XDECREF(kw);
        } else {
            cap = PyObject_CallMethod(x, "__dlpack__", NULL);
        }
        if (!cap)
            goto out;
    }
    DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
    if (!m) {
        PyErr_Clear();
        PyErr_SetString(PyExc_BufferError, "from_dlpack: the producer gave no \"dltensor\" capsule (consumed already?)");
        goto out;
    }
    if (copy != 1) {
        const keel_tensor_t *t = NULL;
        keel_status_t st = keel_dlpack_import(d->dev, m, &t);
        if (st == KEEL_OK) {
            PyCapsule_SetName(cap, "used_dltensor");
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
        r = copy_host_tensor(d, &m->dl_tensor);
    } else {
        /* Device memory: import it, then copy on the device. */
        const keel_tensor_t *t = NULL;
        keel_status_t st = keel_dlpack_import(d->dev, m, &t);
        if (st != KEEL_OK) {
            kp_raise(st);
            goto out;
        }
        PyCapsule_SetName(cap, "used_dltensor");
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
