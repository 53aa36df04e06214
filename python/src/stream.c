/* SPDX-License-Identifier: MIT */
/* Streams, events and host functions. */
#include "keelpy.h"

/* ---- Stream ---- */

static void stream_dealloc(kp_Stream *self)
{
    if (self->owned && self->stream) {
        keel_status_t st;
        KP_BLOCKING(st, keel_stream_destroy(self->stream));
        if (st != KEEL_OK)
            PyErr_WarnFormat(PyExc_RuntimeWarning, 1, "keel.Stream: destroying the stream failed: %s",
                             keel_last_error());
    }
    Py_XDECREF(self->device);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static kp_Stream *stream_alloc(kp_Device *d, keel_stream_t *s, int owned)
{
    kp_Stream *o = PyObject_New(kp_Stream, &kp_StreamType);
    if (!o)
        return NULL;
    o->stream = s;
    o->owned = owned;
    Py_INCREF(d);
    o->device = d;
    return o;
}

PyObject *kp_default_stream(kp_Device *d)
{
    if (!d->stream_obj && !(d->stream_obj = (PyObject *)stream_alloc(d, d->default_stream, 0)))
        return NULL;
    Py_INCREF(d->stream_obj);
    return d->stream_obj;
}

keel_stream_t *kp_stream_arg(PyObject *arg, kp_Device *d)
{
    if (!arg || arg == Py_None)
        return d->default_stream;
    if (!PyObject_TypeCheck(arg, &kp_StreamType)) {
        PyErr_Format(PyExc_TypeError, "stream must be None or a keel.Stream, not %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    kp_Stream *s = (kp_Stream *)arg;
    if (s->device != d) {
        PyErr_Format(kp_KeelError, "the stream is of %s, the data of %s", keel_device_name(s->device->dev),
                     keel_device_name(d->dev));
        return NULL;
    }
    return s->stream;
}

static PyObject *stream_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    (void)type;
    static char *names[] = {"device", "priority", NULL};
    PyObject *dev = Py_None;
    int priority = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|Oi:Stream", names, &dev, &priority))
        return NULL;
    kp_Device *d = kp_device_arg(dev);
    if (!d)
        return NULL;
    keel_stream_t *s = NULL;
    keel_status_t st = keel_stream_create(d->dev, 0, priority, &s);
    PyObject *r = st == KEEL_OK ? (PyObject *)stream_alloc(d, s, 1) : kp_raise(st);
    if (!r && s)
        keel_stream_destroy(s);
    Py_DECREF(d);
    return r;
}

static PyObject *stream_synchronize(kp_Stream *self, PyObject *unused)
{
    (void)unused;
    keel_status_t st;
    KP_BLOCKING(st, keel_stream_synchronize(self->stream));
    if (st != KEEL_OK)
        return kp_raise(st);
    Py_RETURN_NONE;
}

static PyObject *stream_query(kp_Stream *self, PyObject *unused)
{
    (void)unused;
    keel_status_t st = keel_stream_query(self->stream);
    if (st == KEEL_OK)
        Py_RETURN_TRUE;
    if (st == KEEL_ERROR_NOT_READY)
        Py_RETURN_FALSE;
    return kp_raise(st);
}

typedef struct {
    PyObject_HEAD
    keel_event_t *event;
    kp_Device *device;
} kp_Event;

static PyObject *stream_wait(kp_Stream *self, PyObject *ev)
{
    if (!PyObject_TypeCheck(ev, &kp_EventType))
        return PyErr_Format(PyExc_TypeError, "wait() takes a keel.Event, not %.100s", Py_TYPE(ev)->tp_name);
    keel_status_t st = keel_stream_wait_event(self->stream, ((kp_Event *)ev)->event);
    if (st != KEEL_OK)
        return kp_raise(st);
    Py_RETURN_NONE;
}

static PyObject *event_make(kp_Device *d, unsigned flags);

static PyObject *stream_record(kp_Stream *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"event", NULL};
    PyObject *a[1];
    if (kp_kwargs("record", args, nargs, kwnames, names, a) < 0)
        return NULL;
    PyObject *ev = a[0];
    if (!ev || ev == Py_None) {
        if (!(ev = event_make(self->device, 0)))
            return NULL;
    } else if (!PyObject_TypeCheck(ev, &kp_EventType)) {
        return PyErr_Format(PyExc_TypeError, "event must be a keel.Event");
    } else {
        Py_INCREF(ev);
    }
    keel_status_t st = keel_event_record(((kp_Event *)ev)->event, self->stream);
    if (st != KEEL_OK) {
        Py_DECREF(ev);
        return kp_raise(st);
    }
    return ev;
}

/* A Python callable run by a Keel thread: it takes the GIL, and reports an
 * exception it raises as unraisable (there is no caller to give it to). */
static void host_trampoline(void *user_data)
{
    PyObject *fn = user_data;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *r = PyObject_CallNoArgs(fn);
    if (!r)
        PyErr_WriteUnraisable(fn);
    Py_XDECREF(r);
    Py_DECREF(fn);
    atomic_fetch_sub(&kp_host_fns_pending, 1);
    PyGILState_Release(g);
}

static PyObject *stream_launch_host_func(kp_Stream *self, PyObject *fn)
{
    if (!PyCallable_Check(fn))
        return PyErr_Format(PyExc_TypeError, "launch_host_func() takes a callable, not %.100s", Py_TYPE(fn)->tp_name);
    Py_INCREF(fn);
    atomic_fetch_add(&kp_host_fns_pending, 1);
    keel_status_t st;
    KP_BLOCKING(st, keel_stream_launch_host_func(self->stream, host_trampoline, fn));
    if (st != KEEL_OK) {
        atomic_fetch_sub(&kp_host_fns_pending, 1);
        Py_DECREF(fn);
        return kp_raise(st);
    }
    Py_RETURN_NONE;
}

static PyObject *stream_native(kp_Stream *self, void *c)
{
    (void)c;
    uintptr_t h = 0;
    keel_status_t st = keel_stream_get_native(self->stream, &h);
    if (st == KEEL_ERROR_NOT_SUPPORTED)
        Py_RETURN_NONE;
    return st == KEEL_OK ? PyLong_FromSize_t(h) : kp_raise(st);
}

static PyObject *stream_priority(kp_Stream *self, void *c)
{
    (void)c;
    int p = 0;
    keel_status_t st = keel_stream_get_priority(self->stream, &p);
    return st == KEEL_OK ? PyLong_FromLong(p) : kp_raise(st);
}

static PyObject *stream_device(kp_Stream *self, void *c)
{
    (void)c;
    Py_INCREF(self->device);
    return (PyObject *)self->device;
}

static PyObject *stream_handle(kp_Stream *self, void *c)
{
    (void)c;
    return PyLong_FromVoidPtr(self->stream);
}

static PyObject *stream_begin_capture(kp_Stream *self, PyObject *unused)
{
    (void)unused;
    keel_status_t st = keel_stream_begin_capture(self->stream);
    if (st != KEEL_OK)
        return kp_raise(st);
    Py_RETURN_NONE;
}

PyObject *kp_graph_wrap(keel_graph_t *g, kp_Device *d);

static PyObject *stream_end_capture(kp_Stream *self, PyObject *unused)
{
    (void)unused;
    keel_graph_t *g = NULL;
    keel_status_t st = keel_stream_end_capture(self->stream, &g);
    if (st != KEEL_OK)
        return kp_raise(st);
    return kp_graph_wrap(g, self->device);
}

static PyObject *stream_repr(kp_Stream *self)
{
    return PyUnicode_FromFormat("keel.Stream(%s%s)", keel_device_name(self->device->dev),
                                self->owned ? "" : ", default");
}

static PyMethodDef stream_methods[] = {
    {"synchronize", (PyCFunction)stream_synchronize, METH_NOARGS, "wait for the stream's work"},
    {"query", (PyCFunction)stream_query, METH_NOARGS, "True when all its work is done"},
    {"wait", (PyCFunction)stream_wait, METH_O, "later work waits for the event"},
    {"record", (PyCFunction)(void (*)(void))stream_record, METH_FASTCALL | METH_KEYWORDS,
     "record(event=None): record an event (a new one when None) and return it"},
    {"launch_host_func", (PyCFunction)stream_launch_host_func, METH_O,
     "run a callable on a Keel thread after the work before it (it takes the GIL)"},
    {"begin_capture", (PyCFunction)stream_begin_capture, METH_NOARGS, "start recording a graph"},
    {"end_capture", (PyCFunction)stream_end_capture, METH_NOARGS, "stop recording; returns the Graph"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef stream_getset[] = {
    {"native_handle", (getter)stream_native, NULL, "cudaStream_t / hipStream_t as an int; None on the CPU", NULL},
    {"priority", (getter)stream_priority, NULL, "priority after clamping", NULL},
    {"device", (getter)stream_device, NULL, "its Device", NULL},
    {"handle", (getter)stream_handle, NULL, "the keel_stream_t * as an int", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject kp_StreamType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "keel.Stream",
    .tp_basicsize = sizeof(kp_Stream),
    .tp_dealloc = (destructor)stream_dealloc,
    .tp_repr = (reprfunc)stream_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Stream(device=None, priority=0): an in-order queue of device work.",
    .tp_new = stream_new,
    .tp_methods = stream_methods,
    .tp_getset = stream_getset,
};

/* ---- Event ---- */

static PyObject *event_make(kp_Device *d, unsigned flags)
{
    keel_event_t *e = NULL;
    keel_status_t st = keel_event_create(d->dev, flags, &e);
    if (st != KEEL_OK)
        return kp_raise(st);
    kp_Event *o = PyObject_New(kp_Event, &kp_EventType);
    if (!o) {
        keel_event_destroy(e);
        return NULL;
    }
    o->event = e;
    Py_INCREF(d);
    o->device = d;
    return (PyObject *)o;
}

static PyObject *event_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    (void)type;
    static char *names[] = {"device", "timing", "blocking", NULL};
    PyObject *dev = Py_None;
    int timing = 1, blocking = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|Opp:Event", names, &dev, &timing, &blocking))
        return NULL;
    kp_Device *d = kp_device_arg(dev);
    if (!d)
        return NULL;
    PyObject *r = event_make(d, (timing ? 0 : KEEL_EVENT_DISABLE_TIMING) | (blocking ? KEEL_EVENT_BLOCKING_SYNC : 0));
    Py_DECREF(d);
    return r;
}

static void event_dealloc(kp_Event *self)
{
    if (self->event)
        keel_event_destroy(self->event);
    Py_XDECREF(self->device);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *event_record(kp_Event *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"stream", NULL};
    PyObject *a[1];
    if (kp_kwargs("record", args, nargs, kwnames, names, a) < 0)
        return NULL;
    keel_stream_t *s = kp_stream_arg(a[0], self->device);
    if (!s)
        return NULL;
    keel_status_t st = keel_event_record(self->event, s);
    if (st != KEEL_OK)
        return kp_raise(st);
    Py_RETURN_NONE;
}

static PyObject *event_synchronize(kp_Event *self, PyObject *unused)
{
    (void)unused;
    keel_status_t st;
    KP_BLOCKING(st, keel_event_synchronize(self->event));
    if (st != KEEL_OK)
        return kp_raise(st);
    Py_RETURN_NONE;
}

static PyObject *event_query(kp_Event *self, PyObject *unused)
{
    (void)unused;
    keel_status_t st = keel_event_query(self->event);
    if (st == KEEL_OK)
        Py_RETURN_TRUE;
    if (st == KEEL_ERROR_NOT_READY)
        Py_RETURN_FALSE;
    return kp_raise(st);
}

static PyObject *event_elapsed(kp_Event *self, PyObject *end)
{
    if (!PyObject_TypeCheck(end, &kp_EventType))
        return PyErr_Format(PyExc_TypeError, "elapsed_time() takes a keel.Event");
    float ms = 0;
    keel_status_t st = keel_event_elapsed_time(self->event, ((kp_Event *)end)->event, &ms);
    return st == KEEL_OK ? PyFloat_FromDouble(ms) : kp_raise(st);
}

static PyMethodDef event_methods[] = {
    {"record", (PyCFunction)(void (*)(void))event_record, METH_FASTCALL | METH_KEYWORDS,
     "record(stream=None): mark the work enqueued on the stream so far"},
    {"synchronize", (PyCFunction)event_synchronize, METH_NOARGS, "wait for the recorded work"},
    {"query", (PyCFunction)event_query, METH_NOARGS, "True when the recorded work is done"},
    {"elapsed_time", (PyCFunction)event_elapsed, METH_O, "milliseconds from this event to end"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject kp_EventType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "keel.Event",
    .tp_basicsize = sizeof(kp_Event),
    .tp_dealloc = (destructor)event_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Event(device=None, timing=True, blocking=False): a marker in a stream.",
    .tp_new = event_new,
    .tp_methods = event_methods,
};

int kp_stream_init(PyObject *m)
{
    if (PyType_Ready(&kp_StreamType) < 0 || PyType_Ready(&kp_EventType) < 0)
        return -1;
    Py_INCREF(&kp_StreamType);
    Py_INCREF(&kp_EventType);
    if (PyModule_AddObject(m, "Stream", (PyObject *)&kp_StreamType) < 0 ||
        PyModule_AddObject(m, "Event", (PyObject *)&kp_EventType) < 0)
        return -1;
    return 0;
}
