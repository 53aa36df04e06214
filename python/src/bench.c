/* SPDX-License-Identifier: MIT */
/* The C API's own cost, measured in this process for python/bench: the
 * same launch or operation called in a C loop, without Python between calls. */
#include <time.h>
#include "keelpy.h"

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

/* _c_launch_loop(kernel_handle, stream_handle, n, calls, array): ns per
 * keel_launch_kernel of a kernel (int n, float s, float *x), grid 1, block 32. */
static PyObject *c_launch_loop(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long long kh, sh, ptr;
    int n, calls;
    if (!PyArg_ParseTuple(args, "KKiiK", &kh, &sh, &n, &calls, &ptr))
        return NULL;
    float s = 1.0f;
    void *x = (void *)(uintptr_t)ptr;
    void *argv[3] = {&n, &s, &x};
    keel_dim3_t one = {1, 1, 1}, block = {32, 1, 1};
    double t0 = now_ns();
    for (int i = 0; i < calls; i++) {
        keel_status_t st = keel_launch_kernel((keel_kernel_t *)(uintptr_t)kh, one, block, 0,
                                              (keel_stream_t *)(uintptr_t)sh, argv);
        if (st != KEEL_OK)
            return kp_raise(st);
    }
    return PyFloat_FromDouble((now_ns() - t0) / calls);
}

/* _c_add_loop(stream_handle, a, b, y, n, calls): ns per keel_binary add of n floats. */
static PyObject *c_add_loop(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long long sh, a, b, y;
    Py_ssize_t n;
    int calls;
    if (!PyArg_ParseTuple(args, "KKKKni", &sh, &a, &b, &y, &n, &calls))
        return NULL;
    double t0 = now_ns();
    for (int i = 0; i < calls; i++) {
        keel_status_t st = keel_binary((keel_stream_t *)(uintptr_t)sh, KEEL_BINARY_ADD, KEEL_F32, 1, (size_t)n, 1.0,
                                       (void *)(uintptr_t)a, (size_t)n, 1.0, (void *)(uintptr_t)b, (size_t)n,
                                       KEEL_BROADCAST_NONE, (void *)(uintptr_t)y, (size_t)n);
        if (st != KEEL_OK)
            return kp_raise(st);
    }
    return PyFloat_FromDouble((now_ns() - t0) / calls);
}


PyMethodDef kp_bench_methods[] = {
    {"_c_launch_loop", c_launch_loop, METH_VARARGS, "ns per C-API launch (for python/bench)"},
    {"_c_add_loop", c_add_loop, METH_VARARGS, "ns per C-API add (for python/bench)"},
    {NULL, NULL, 0, NULL},
};
