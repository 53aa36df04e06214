/* SPDX-License-Identifier: MIT */
/* Modules built from source at run time, and kernel launches with Python
 * arguments marshalled by the kernel's parameter types. */
#include <string.h>
#include "keelpy.h"

typedef struct {
    PyObject_HEAD
    keel_module_t *module;  /* NULL once unloaded */
    kp_Device *device;
} kp_Module;

typedef enum { P_PTR, P_INT, P_UINT, P_F32, P_F64, P_BYTES } pkind_t;

typedef struct {
    pkind_t kind;
    unsigned size;
} param_t;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    keel_kernel_t *kernel;
    kp_Module *module;
    unsigned nparams;
    param_t params[KEEL_MAX_KERNEL_ARGS];
    PyObject *signature;  /* tuple of (type, name, size) */
} kp_Kernel;

static PyTypeObject kp_ModuleType, kp_KernelType;

/* ---- parameter types ---- */

static int has_word(const char *s, const char *w)
{
    return strstr(s, w) != NULL;
}

/* The marshalling of one parameter from its C type and size. */
static int classify(const char *type, size_t size, param_t *p)
{
    p->size = (unsigned)size;
    if (strchr(type, '*')) {
        p->kind = P_PTR;
        p->size = sizeof(void *);
    } else if (has_word(type, "double")) {
        p->kind = P_F64;
    } else if (has_word(type, "float") && size == 4) {
        p->kind = P_F32;
    } else if ((size == 1 || size == 2 || size == 4 || size == 8) &&
               (has_word(type, "int") || has_word(type, "long") || has_word(type, "short") ||
                has_word(type, "char") || has_word(type, "size_t") || has_word(type, "bool") ||
                has_word(type, "unsigned") || has_word(type, "signed"))) {
        p->kind = has_word(type, "unsigned") || has_word(type, "uint") || has_word(type, "size_t") ||
                          has_word(type, "bool")
                      ? P_UINT
                      : P_INT;
    } else if (size > 0) {
        p->kind = P_BYTES; /* a struct: passed as a bytes-like object of its size */
    } else {
        PyErr_Format(PyExc_TypeError, "kernel parameter of type \"%s\" has no known size", type);
        return -1;
    }
    return 0;
}

/* Plans the marshalling from the kernel's own parameter list or from the
 * signature given (a sequence of C type strings). */
static int plan(kp_Kernel *k, PyObject *signature)
{
    PyObject *sig = PyList_New(0);
    if (!sig)
        return -1;
    unsigned n = 0;
    if (signature && signature != Py_None) {
        PyObject *seq = PySequence_Fast(signature, "signature must be a sequence of C type strings");
        if (!seq)
            goto fail;
        Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
        if (len > KEEL_MAX_KERNEL_ARGS) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_ValueError, "%zd parameters: at most %d", len, KEEL_MAX_KERNEL_ARGS);
            goto fail;
        }
        for (Py_ssize_t i = 0; i < len; i++) {
            const char *t = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, i));
            size_t size = 0;
            if (!t) {
                Py_DECREF(seq);
                goto fail;
            }
            if (strchr(t, '*'))
                size = sizeof(void *);
            else if (has_word(t, "double") || has_word(t, "long") || has_word(t, "int64") || has_word(t, "size_t"))
                size = 8;
            else if (has_word(t, "short") || has_word(t, "int16"))
                size = 2;
            else if (has_word(t, "char") || has_word(t, "int8") || has_word(t, "bool"))
                size = 1;
            else if (has_word(t, "int") || has_word(t, "float") || has_word(t, "unsigned"))
                size = 4;
            if (classify(t, size, &k->params[i]) < 0) {
                Py_DECREF(seq);
                goto fail;
            }
            if (kp_list_append_new(sig, Py_BuildValue("(ssn)", t, "", (Py_ssize_t)size)) < 0) {
                Py_DECREF(seq);
                goto fail;
            }
        }
        n = (unsigned)len;
        Py_DECREF(seq);
    } else {
        int count = 0;
        keel_status_t st = keel_kernel_get_attribute(k->kernel, KEEL_KERNEL_ATTR_NUM_ARGS, &count);
        if (st != KEEL_OK) {
            kp_raise(st);
            goto fail;
        }
        for (int i = 0; i < count; i++) {
            keel_kernel_param_t kp;
            memset(&kp, 0, sizeof kp);
            kp.struct_size = sizeof kp;
            st = keel_kernel_get_param(k->kernel, (unsigned)i, &kp);
            if (st == KEEL_ERROR_NOT_FOUND) {
                PyErr_Format(PyExc_TypeError, "the parameters of kernel %s are not known: pass signature=[...] "
                             "(its C parameter types)", keel_kernel_name(k->kernel));
                goto fail;
            }
            if (st != KEEL_OK) {
                kp_raise(st);
                goto fail;
            }
            if (classify(kp.type[0] ? kp.type : "struct", kp.size, &k->params[i]) < 0)
                goto fail;
            if (kp_list_append_new(sig, Py_BuildValue("(ssn)", kp.type, kp.name, (Py_ssize_t)kp.size)) < 0)
                goto fail;
        }
        n = (unsigned)count;
    }
    k->nparams = n;
    k->signature = PyList_AsTuple(sig);
    Py_DECREF(sig);
    return k->signature ? 0 : -1;
fail:
    Py_DECREF(sig);
    return -1;
}

/* ---- launches ---- */

static int dim3_arg(PyObject *o, keel_dim3_t *d, const char *what)
{
    d->x = d->y = d->z = 1;
    if (PyLong_Check(o)) {
        long v = PyLong_AsLong(o);
        if (v <= 0 || v > 0xffffffffL) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "%s must be positive, not %ld", what, v);
            return -1;
        }
        d->x = (unsigned)v;
        return 0;
    }
    if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) < 1 || PyTuple_GET_SIZE(o) > 3) {
        PyErr_Format(PyExc_TypeError, "%s must be an int or a tuple of 1 to 3 ints", what);
        return -1;
    }
    unsigned *v[3] = {&d->x, &d->y, &d->z};
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); i++) {
        long x = PyLong_AsLong(PyTuple_GET_ITEM(o, i));
        if (x <= 0 || x > 0xffffffffL) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "%s[%zd] must be positive, not %ld", what, i, x);
            return -1;
        }
        *v[i] = (unsigned)x;
    }
    return 0;
}

static int pointer_arg(PyObject *o, void **p, unsigned i)
{
    if (PyObject_TypeCheck(o, &kp_ArrayType)) {
        kp_Array *a = (kp_Array *)o;
        if (kp_buffer_check(a->buffer) < 0)
            return -1;
        *p = a->data;
    } else if (PyObject_TypeCheck(o, &kp_BufferType)) {
        if (kp_buffer_check((kp_Buffer *)o) < 0)
            return -1;
        *p = ((kp_Buffer *)o)->ptr;
    } else if (o == Py_None) {
        *p = NULL;
    } else if (PyLong_Check(o)) {
        *p = PyLong_AsVoidPtr(o);
        if (!*p && PyErr_Occurred())
            return -1;
    } else {
        PyErr_Format(PyExc_TypeError, "argument %u is a pointer: pass a keel.Array, a keel.Buffer, an int address or "
                     "None, not %.100s", i, Py_TYPE(o)->tp_name);
        return -1;
    }
    return 0;
}

static PyObject *launch(kp_Kernel *k, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (!k->module->module)
        return PyErr_Format(PyExc_ValueError, "the kernel's module was unloaded");
    PyObject *stream = NULL, *shared = NULL;
    Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nk; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i);
        if (PyUnicode_CompareWithASCIIString(key, "stream") == 0)
            stream = args[nargs + i];
        else if (PyUnicode_CompareWithASCIIString(key, "shared_mem") == 0)
            shared = args[nargs + i];
        else
            return PyErr_Format(PyExc_TypeError, "launch() got an unexpected keyword argument '%U'", key);
    }
    if (nargs < 2)
        return PyErr_Format(PyExc_TypeError, "launch(grid, block, *args): grid and block are missing");
    if ((unsigned)(nargs - 2) != k->nparams)
        return PyErr_Format(PyExc_TypeError, "kernel %s takes %u arguments, %zd given", keel_kernel_name(k->kernel),
                            k->nparams, nargs - 2);
    keel_dim3_t grid, block;
    if (dim3_arg(args[0], &grid, "grid") < 0 || dim3_arg(args[1], &block, "block") < 0)
        return NULL;
    size_t shared_bytes = 0;
    if (shared && shared != Py_None && (shared_bytes = PyLong_AsSize_t(shared)) == (size_t)-1 && PyErr_Occurred())
        return NULL;
    keel_stream_t *s = kp_stream_arg(stream, k->module->device);
    if (!s)
        return NULL;
    _Alignas(16) char store[KEEL_MAX_KERNEL_ARG_BYTES];
    void *argv[KEEL_MAX_KERNEL_ARGS];
    size_t off = 0;
    for (unsigned i = 0; i < k->nparams; i++) {
        const param_t *p = &k->params[i];
        PyObject *o = args[2 + i];
        size_t align = p->size >= 16 ? 16 : p->size >= 8 ? 8 : p->size >= 4 ? 4 : p->size >= 2 ? 2 : 1;
        off = (off + align - 1) & ~(align - 1);
        if (off + p->size > sizeof store)
            return PyErr_Format(PyExc_ValueError, "the arguments exceed %d bytes", KEEL_MAX_KERNEL_ARG_BYTES);
        char *dst = store + off;
        argv[i] = dst;
        off += p->size;
        switch (p->kind) {
        case P_PTR: {
            void *ptr;
            if (pointer_arg(o, &ptr, i) < 0)
                return NULL;
            memcpy(dst, &ptr, sizeof ptr);
            break;
        }
        case P_F32: {
            float f = (float)PyFloat_AsDouble(o);
            if (f == -1.0f && PyErr_Occurred())
                return NULL;
            memcpy(dst, &f, 4);
            break;
        }
        case P_F64: {
            double v = PyFloat_AsDouble(o);
            if (v == -1.0 && PyErr_Occurred())
                return NULL;
            memcpy(dst, &v, 8);
            break;
        }
        case P_INT:
        case P_UINT: {
            if (!PyLong_Check(o) && !PyIndex_Check(o))
                return PyErr_Format(PyExc_TypeError, "argument %u is an integer, not %.100s", i, Py_TYPE(o)->tp_name);
            int overflow = 0;
            long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
            unsigned long long u = (unsigned long long)v;
            if (overflow > 0 && p->kind == P_UINT && p->size == 8) {
                u = PyLong_AsUnsignedLongLong(o);
                if (PyErr_Occurred())
                    return NULL;
                overflow = 0;
            }
            if (v == -1 && PyErr_Occurred())
                return NULL;
            int bits = (int)p->size * 8;
            int fits = !overflow && (p->kind == P_INT ? (bits == 64 || (v >= -(1LL << (bits - 1)) && v < (1LL << (bits - 1))))
                                                      : (bits == 64 ? (v >= 0 || u > (unsigned long long)LLONG_MAX)
                                                                    : (v >= 0 && v < (1LL << bits))));
            if (!fits)
                return PyErr_Format(PyExc_OverflowError, "argument %u does not fit its %s%d-bit type", i,
                                    p->kind == P_UINT ? "unsigned " : "", bits);
            memcpy(dst, &u, p->size); /* little-endian: the low bytes */
            break;
        }
        case P_BYTES: {
            Py_buffer view;
            if (PyObject_GetBuffer(o, &view, PyBUF_C_CONTIGUOUS) < 0)
                return NULL;
            if ((size_t)view.len != p->size) {
                PyBuffer_Release(&view);
                return PyErr_Format(PyExc_ValueError, "argument %u must be %u bytes, not %zd", i, p->size, view.len);
            }
            memcpy(dst, view.buf, p->size);
            PyBuffer_Release(&view);
            break;
        }
        }
    }
    keel_status_t st;
    KP_CALL(st, keel_launch_kernel(k->kernel, grid, block, shared_bytes, s, argv));
    if (st != KEEL_OK)
        return kp_raise(st);
    Py_RETURN_NONE;
}

static PyObject *kernel_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return launch((kp_Kernel *)self, args, PyVectorcall_NARGS(nargsf), kwnames);
}

static PyObject *kernel_launch(kp_Kernel *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return launch(self, args, nargs, kwnames);
}

static void kernel_dealloc(kp_Kernel *self)
{
    Py_XDECREF(self->signature);
    Py_XDECREF(self->module);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *kernel_name(kp_Kernel *self, void *c)
{
    (void)c;
    return PyUnicode_FromString(keel_kernel_name(self->kernel));
}

static PyObject *kernel_handle(kp_Kernel *self, void *c)
{
    (void)c;
    return PyLong_FromVoidPtr(self->kernel);
}

static PyObject *kernel_params(kp_Kernel *self, void *c)
{
    (void)c;
    Py_INCREF(self->signature);
    return self->signature;
}

static PyObject *kernel_attribute(kp_Kernel *self, void *c)
{
    int v = 0;
    keel_status_t st = keel_kernel_get_attribute(self->kernel, (keel_kernel_attribute_t)(intptr_t)c, &v);
    return st == KEEL_OK ? PyLong_FromLong(v) : kp_raise(st);
}

static PyMethodDef kernel_methods[] = {
    {"launch", (PyCFunction)(void (*)(void))kernel_launch, METH_FASTCALL | METH_KEYWORDS,
     "launch(grid, block, *args, stream=None, shared_mem=0): enqueue a launch (also: kernel(grid, block, *args))"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef kernel_getset[] = {
    {"name", (getter)kernel_name, NULL, "the kernel's name", NULL},
    {"params", (getter)kernel_params, NULL, "((type, name, size), ...) of its parameters", NULL},
    {"handle", (getter)kernel_handle, NULL, "the keel_kernel_t * as an int", NULL},
    {"max_threads_per_block", (getter)kernel_attribute, NULL, "most threads a block may have",
     (void *)(intptr_t)KEEL_KERNEL_ATTR_MAX_THREADS_PER_BLOCK},
    {"num_regs", (getter)kernel_attribute, NULL, "registers per thread",
     (void *)(intptr_t)KEEL_KERNEL_ATTR_NUM_REGS},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject kp_KernelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "keel.Kernel",
    .tp_basicsize = sizeof(kp_Kernel),
    .tp_dealloc = (destructor)kernel_dealloc,
    .tp_vectorcall_offset = offsetof(kp_Kernel, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A kernel of a Module: kernel(grid, block, *args, stream=None, shared_mem=0) launches it.",
    .tp_methods = kernel_methods,
    .tp_getset = kernel_getset,
};

/* ---- modules ---- */

static PyObject *module_wrap(keel_module_t *mod, kp_Device *d)
{
    kp_Module *o = PyObject_New(kp_Module, &kp_ModuleType);
    if (!o) {
        keel_module_unload(mod);
        return NULL;
    }
    o->module = mod;
    Py_INCREF(d);
    o->device = d;
    return (PyObject *)o;
}

/* options: a sequence of strings, as char *[] (the strings live in seq). */
static int options_arg(PyObject *o, PyObject **seq, const char **opts, int *n)
{
    *seq = NULL;
    *n = 0;
    if (!o || o == Py_None)
        return 0;
    if (!(*seq = PySequence_Fast(o, "options must be a sequence of strings")))
        return -1;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(*seq);
    if (len > 64) {
        PyErr_SetString(PyExc_ValueError, "at most 64 options");
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++)
        if (!(opts[i] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(*seq, i))))
            return -1;
    *n = (int)len;
    return 0;
}

static PyObject *module_from(int how, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"source", "name", "options", "device", NULL};
    static const char *const load_names[] = {"path", "device", NULL};
    PyObject *a[4];
    const char *fn = how == 0 ? "build" : how == 1 ? "compile" : "load";
    if (kp_kwargs(fn, args, nargs, kwnames, how == 2 ? load_names : names, a) < 0)
        return NULL;
    if (!a[0])
        return PyErr_Format(PyExc_TypeError, "%s() needs the %s", fn, how == 2 ? "path" : "source");
    const char *src = PyUnicode_AsUTF8(a[0]);
    if (!src)
        return NULL;
    kp_Device *d = kp_device_arg(how == 2 ? a[1] : a[3]);
    if (!d)
        return NULL;
    const char *opts[64];
    int nopts = 0;
    PyObject *seq = NULL, *r = NULL;
    const char *name = NULL;
    if (how != 2 && a[1] && a[1] != Py_None && !(name = PyUnicode_AsUTF8(a[1])))
        goto out;
    if (how != 2 && options_arg(a[2], &seq, opts, &nopts) < 0)
        goto out;
    keel_module_t *mod = NULL;
    keel_status_t st;
    if (how == 0)
        KP_BLOCKING(st, keel_module_build(d->dev, src, name, nopts ? opts : NULL, nopts, &mod));
    else if (how == 1)
        KP_BLOCKING(st, keel_module_compile(d->dev, src, name ? name : "kernel.cu", nopts ? opts : NULL, nopts, &mod));
    else
        KP_BLOCKING(st, keel_module_load_file(d->dev, src, &mod));
    r = st == KEEL_OK ? module_wrap(mod, d) : kp_raise(st);
out:
    Py_XDECREF(seq);
    Py_DECREF(d);
    return r;
}

static PyObject *module_build(PyObject *cls, PyObject *const *args, Py_ssize_t n, PyObject *kw)
{
    (void)cls;
    return module_from(0, args, n, kw);
}

static PyObject *module_compile(PyObject *cls, PyObject *const *args, Py_ssize_t n, PyObject *kw)
{
    (void)cls;
    return module_from(1, args, n, kw);
}

static PyObject *module_load(PyObject *cls, PyObject *const *args, Py_ssize_t n, PyObject *kw)
{
    (void)cls;
    return module_from(2, args, n, kw);
}

static PyObject *module_get_kernel(kp_Module *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"name", "signature", NULL};
    PyObject *a[2];
    if (kp_kwargs("get_kernel", args, nargs, kwnames, names, a) < 0)
        return NULL;
    if (!self->module)
        return PyErr_Format(PyExc_ValueError, "the module was unloaded");
    const char *name = a[0] ? PyUnicode_AsUTF8(a[0]) : NULL;
    if (!name)
        return a[0] ? NULL : PyErr_Format(PyExc_TypeError, "get_kernel() needs a name");
    keel_kernel_t *kern = NULL;
    keel_status_t st = keel_module_get_kernel(self->module, name, &kern);
    if (st != KEEL_OK)
        return kp_raise(st);
    kp_Kernel *k = PyObject_New(kp_Kernel, &kp_KernelType);
    if (!k)
        return NULL;
    k->vectorcall = kernel_vectorcall;
    k->kernel = kern;
    k->signature = NULL;
    Py_INCREF(self);
    k->module = self;
    if (plan(k, a[1]) < 0) {
        Py_DECREF(k);
        return NULL;
    }
    return (PyObject *)k;
}

static PyObject *module_getitem(kp_Module *self, PyObject *key)
{
    return module_get_kernel(self, &key, 1, NULL);
}

static PyObject *module_unload(kp_Module *self, PyObject *unused)
{
    (void)unused;
    if (!self->module)
        Py_RETURN_NONE;
    keel_status_t st;
    KP_BLOCKING(st, keel_module_unload(self->module));
    if (st != KEEL_OK)
        return kp_raise(st);
    self->module = NULL;
    Py_RETURN_NONE;
}

static void module_dealloc(kp_Module *self)
{
    if (self->module) {
        keel_status_t st;
        KP_BLOCKING(st, keel_module_unload(self->module));
        (void)st;
    }
    Py_XDECREF(self->device);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef module_methods[] = {
    {"build", (PyCFunction)(void (*)(void))module_build, METH_FASTCALL | METH_KEYWORDS | METH_STATIC,
     "build(source, name=None, options=None, device=None): portable kernel-language source, for any backend"},
    {"compile", (PyCFunction)(void (*)(void))module_compile, METH_FASTCALL | METH_KEYWORDS | METH_STATIC,
     "compile(source, name=None, options=None, device=None): the backend's own language (CUDA C++, HIP, C)"},
    {"load", (PyCFunction)(void (*)(void))module_load, METH_FASTCALL | METH_KEYWORDS | METH_STATIC,
     "load(path, device=None): a module file (keel-cc) or the backend's own binary"},
    {"get_kernel", (PyCFunction)(void (*)(void))module_get_kernel, METH_FASTCALL | METH_KEYWORDS,
     "get_kernel(name, signature=None): a Kernel; signature lists C parameter types where Keel knows none"},
    {"unload", (PyCFunction)module_unload, METH_NOARGS, "unload now (waits for the device)"},
    {NULL, NULL, 0, NULL},
};

static PyMappingMethods module_mapping = {.mp_subscript = (binaryfunc)module_getitem};

static PyTypeObject kp_ModuleType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "keel.Module",
    .tp_basicsize = sizeof(kp_Module),
    .tp_dealloc = (destructor)module_dealloc,
    .tp_as_mapping = &module_mapping,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Loaded code on one device: Module.build(source), Module.compile(...), Module.load(path).",
    .tp_methods = module_methods,
};

int kp_kernel_init(PyObject *m)
{
    if (PyType_Ready(&kp_ModuleType) < 0 || PyType_Ready(&kp_KernelType) < 0)
        return -1;
    Py_INCREF(&kp_ModuleType);
    Py_INCREF(&kp_KernelType);
    if (PyModule_AddObject(m, "Module", (PyObject *)&kp_ModuleType) < 0 ||
        PyModule_AddObject(m, "Kernel", (PyObject *)&kp_KernelType) < 0)
        return -1;
    return 0;
}
