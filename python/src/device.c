/* SPDX-License-Identifier: MIT */
/* Backends and devices. */
#include <string.h>
#include "keelpy.h"

static PyObject *devices; /* address of the handle -> Device */

static void device_dealloc(PyObject *self)
{
    Py_TYPE(self)->tp_free(self);
}

PyObject *kp_device_of(keel_device_t *dev)
{
    PyObject *key = PyLong_FromVoidPtr(dev);
    if (!key)
        return NULL;
    PyObject *d = PyDict_GetItemWithError(devices, key);
    if (d || PyErr_Occurred()) {
        Py_DECREF(key);
        Py_XINCREF(d);
        return d;
    }
    kp_Device *o = PyObject_New(kp_Device, &kp_DeviceType);
    if (!o) {
        Py_DECREF(key);
        return NULL;
    }
    o->dev = dev;
    o->default_stream = NULL;
    o->stream_obj = NULL;
    keel_backend_t *b = NULL;
    keel_backend_info_t info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    keel_status_t st = keel_device_get_backend(dev, &b);
    if (st == KEEL_OK)
        st = keel_backend_get_info(b, &info);
    if (st == KEEL_OK)
        st = keel_device_default_stream(dev, &o->default_stream);
    if (st != KEEL_OK) {
        Py_DECREF(key);
        Py_DECREF(o);
        return kp_raise(st);
    }
    o->is_cuda = strcmp(info.name, "cuda") == 0;
    o->is_hip = strcmp(info.name, "hip") == 0;
    o->is_cpu = strcmp(info.name, "cpu") == 0;
    int r = PyDict_SetItem(devices, key, (PyObject *)o);
    Py_DECREF(key);
    if (r < 0) {
        Py_DECREF(o);
        return NULL;
    }
    return (PyObject *)o;
}

kp_Device *kp_device_arg(PyObject *arg)
{
    keel_device_t *dev = NULL;
    keel_status_t st;
    if (!arg || arg == Py_None) {
        st = keel_device_default(&dev);
    } else if (PyObject_TypeCheck(arg, &kp_DeviceType)) {
        Py_INCREF(arg);
        return (kp_Device *)arg;
    } else if (PyUnicode_Check(arg)) {
        const char *s = PyUnicode_AsUTF8(arg);
        if (!s)
            return NULL;
        char name[64];
        int index = 0;
        const char *colon = strchr(s, ':');
        size_t len = colon ? (size_t)(colon - s) : strlen(s);
        if (len >= sizeof name) {
            PyErr_Format(PyExc_ValueError, "device %R: the backend name is too long", arg);
            return NULL;
        }
        memcpy(name, s, len);
        name[len] = '\0';
        if (colon) {
            char *end;
            long v = strtol(colon + 1, &end, 10);
            if (*end || end == colon + 1 || v < 0 || v > 1 << 20) {
                PyErr_Format(PyExc_ValueError, "device %R: expected \"backend\" or \"backend:index\"", arg);
                return NULL;
            }
            index = (int)v;
        }
        st = keel_device_get(name, index, &dev);
    } else {
        PyErr_Format(PyExc_TypeError, "device must be None, a keel.Device or a string such as \"cpu:0\", not %.100s",
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    if (st != KEEL_OK)
        return (kp_Device *)kp_raise(st);
    return (kp_Device *)kp_device_of(dev);
}

static PyObject *device_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    (void)type;
    static char *names[] = {"name", NULL};
    PyObject *name = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:Device", names, &name))
        return NULL;
    return (PyObject *)kp_device_arg(name);
}

static PyObject *device_repr(kp_Device *self)
{
    return PyUnicode_FromFormat("keel.Device('%s')", keel_device_name(self->dev));
}

static PyObject *device_name(kp_Device *self, void *c)
{
    (void)c;
    return PyUnicode_FromString(keel_device_name(self->dev));
}

static PyObject *device_index(kp_Device *self, void *c)
{
    (void)c;
    int i = 0;
    keel_status_t st = keel_device_get_index(self->dev, &i);
    return st == KEEL_OK ? PyLong_FromLong(i) : kp_raise(st);
}

static PyObject *device_properties(kp_Device *self, void *c)
{
    (void)c;
    keel_device_properties_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    keel_status_t st = keel_device_get_properties(self->dev, &p);
    if (st != KEEL_OK)
        return kp_raise(st);
    return Py_BuildValue(
        "{s:s,s:s,s:s,s:s,s:s,s:i,s:n,s:n,s:i,s:i,s:(iii),s:(iii),s:i,s:n,s:i,s:(ii),s:i,s:i,s:i,s:i,s:i,s:i,s:i}",
        "name", p.name, "vendor", p.vendor, "architecture", p.architecture, "backend", p.backend, "type",
        p.type == KEEL_DEVICE_TYPE_GPU ? "gpu" : "cpu", "index", p.index, "total_memory", (Py_ssize_t)p.total_memory,
        "free_memory", (Py_ssize_t)p.free_memory, "compute_units", p.compute_units, "max_threads_per_block",
        p.max_threads_per_block, "max_block_dim", p.max_block_dim[0], p.max_block_dim[1], p.max_block_dim[2],
        "max_grid_dim", p.max_grid_dim[0], p.max_grid_dim[1], p.max_grid_dim[2], "warp_size", p.warp_size,
        "shared_memory_per_block", (Py_ssize_t)p.shared_memory_per_block, "clock_rate_khz", p.clock_rate_khz,
        "compute_capability", p.compute_capability_major, p.compute_capability_minor, "pci_bus_id", p.pci_bus_id,
        "unified_addressing", p.unified_addressing, "managed_memory", p.managed_memory, "concurrent_managed_access",
        p.concurrent_managed_access, "stream_priorities", p.stream_priorities, "stream_ordered_alloc",
        p.stream_ordered_alloc, "async_engines", p.async_engines);
}

static PyObject *device_backend(kp_Device *self, void *c)
{
    (void)c;
    return PyUnicode_FromString(self->is_cuda ? "cuda" : self->is_hip ? "hip" : self->is_cpu ? "cpu" : "other");
}

static PyObject *device_memory_info(kp_Device *self, PyObject *unused)
{
    (void)unused;
    size_t f = 0, t = 0;
    keel_status_t st = keel_device_memory_info(self->dev, &f, &t);
    return st == KEEL_OK ? Py_BuildValue("(nn)", (Py_ssize_t)f, (Py_ssize_t)t) : kp_raise(st);
}

static PyObject *device_synchronize(kp_Device *self, PyObject *unused)
{
    (void)unused;
    keel_status_t st;
    KP_BLOCKING(st, keel_device_synchronize(self->dev));
    if (st != KEEL_OK)
        return kp_raise(st);
    Py_RETURN_NONE;
}

static PyObject *device_default_stream(kp_Device *self, void *c)
{
    (void)c;
    return kp_default_stream(self);
}

static PyObject *device_can_access_peer(kp_Device *self, PyObject *peer)
{
    if (!PyObject_TypeCheck(peer, &kp_DeviceType))
        return PyErr_Format(PyExc_TypeError, "peer must be a keel.Device");
    int ok = 0;
    keel_status_t st = keel_device_can_access_peer(self->dev, ((kp_Device *)peer)->dev, &ok);
    return st == KEEL_OK ? PyBool_FromLong(ok) : kp_raise(st);
}

static PyGetSetDef device_getset[] = {
    {"name", (getter)device_name, NULL, "\"backend:index\"", NULL},
    {"index", (getter)device_index, NULL, "index within its backend", NULL},
    {"backend", (getter)device_backend, NULL, "backend name", NULL},
    {"properties", (getter)device_properties, NULL, "dict of the device's properties", NULL},
    {"default_stream", (getter)device_default_stream, NULL, "the device's default Stream", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef device_methods[] = {
    {"memory_info", (PyCFunction)device_memory_info, METH_NOARGS, "(free, total) bytes now"},
    {"synchronize", (PyCFunction)device_synchronize, METH_NOARGS, "wait for all work on the device"},
    {"can_access_peer", (PyCFunction)device_can_access_peer, METH_O, "whether it reads peer's memory directly"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject kp_DeviceType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "keel.Device",
    .tp_basicsize = sizeof(kp_Device),
    .tp_dealloc = device_dealloc,
    .tp_repr = (reprfunc)device_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Device(name=None): a Keel device; None is the default (KEEL_BACKEND, KEEL_DEVICE).",
    .tp_new = device_new,
    .tp_getset = device_getset,
    .tp_methods = device_methods,
};

static PyObject *backends(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    int n = 0;
    keel_status_t st = keel_backend_count(&n);
    if (st != KEEL_OK)
        return kp_raise(st);
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < n; i++) {
        keel_backend_t *b;
        keel_backend_info_t info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        if ((st = keel_backend_get(i, &b)) != KEEL_OK || (st = keel_backend_get_info(b, &info)) != KEEL_OK) {
            Py_DECREF(list);
            return kp_raise(st);
        }
        PyObject *d = Py_BuildValue("{s:s,s:s,s:z,s:O,s:s,s:s,s:i,s:i}", "name", info.name, "description",
                                    info.description ? info.description : "", "plugin_path", info.plugin_path,
                                    "usable", info.usable ? Py_True : Py_False, "status", keel_status_name(info.status),
                                    "reason", info.reason ? info.reason : "", "device_count", info.device_count,
                                    "abi_version", info.abi_version);
        if (kp_list_append_new(list, d) < 0) {
            Py_DECREF(list);
            return NULL;
        }
    }
    return list;
}

static PyObject *devices_of(PyObject *self, PyObject *name)
{
    (void)self;
    const char *s = PyUnicode_AsUTF8(name);
    if (!s)
        return NULL;
    keel_backend_t *b;
    keel_backend_info_t info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    keel_status_t st = keel_backend_find(s, &b);
    if (st == KEEL_OK)
        st = keel_backend_get_info(b, &info);
    if (st != KEEL_OK)
        return kp_raise(st);
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < info.device_count; i++) {
        keel_device_t *dev;
        if ((st = keel_backend_get_device(b, i, &dev)) != KEEL_OK) {
            Py_DECREF(list);
            return kp_raise(st);
        }
        PyObject *d = kp_device_of(dev);
        if (kp_list_append_new(list, d) < 0) {
            Py_DECREF(list);
            return NULL;
        }
    }
    return list;
}

static PyObject *init(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    keel_status_t st = keel_init();
    if (st != KEEL_OK)
        return kp_raise(st);
    Py_RETURN_NONE;
}

static PyMethodDef device_functions[] = {
    {"init", init, METH_NOARGS, "keel_init(): read the environment, load the backends"},
    {"backends", backends, METH_NOARGS, "every backend Keel knows, usable or not, as dicts"},
    {"devices", devices_of, METH_O, "devices(backend_name): the Devices of a usable backend"},
    {NULL, NULL, 0, NULL},
};

int kp_device_init(PyObject *m)
{
    devices = PyDict_New();
    if (!devices || PyType_Ready(&kp_DeviceType) < 0 || PyModule_AddFunctions(m, device_functions) < 0)
        return -1;
    Py_INCREF(&kp_DeviceType);
    return PyModule_AddObject(m, "Device", (PyObject *)&kp_DeviceType);
}
