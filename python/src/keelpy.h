/* SPDX-License-Identifier: MIT */
/* Shared declarations of the keel._keel extension: the object types and the
 * helpers every file uses. */
#ifndef KEELPY_H
#define KEELPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdatomic.h>
#include <keel.h>
#include <keel/dlpack.h>

/* ---- errors (errors.c) ---- */
extern PyObject *kp_KeelError;
/* Raises KeelError(status, keel_last_error()) and returns NULL. */
PyObject *kp_raise(keel_status_t st);
/* As kp_raise, for functions returning int: -1. */
int kp_raise_int(keel_status_t st);
int kp_errors_init(PyObject *m);

/* Appends a new reference (NULL: the error of the call that made it) to a
 * list and drops it: 0, or -1 with the Python error set. */
static inline int kp_list_append_new(PyObject *list, PyObject *item)
{
    int rc = item ? PyList_Append(list, item) : -1;
    Py_XDECREF(item);
    return rc;
}

/* Python host functions queued and not yet run: while there are any, calls
 * that may wait for a stream release the GIL, which those functions need. */
extern atomic_long kp_host_fns_pending;
#define KP_CALL(st, expr)                                   \
    do {                                                    \
        if (atomic_load_explicit(&kp_host_fns_pending, memory_order_relaxed)) { \
            Py_BEGIN_ALLOW_THREADS st = (expr);             \
            Py_END_ALLOW_THREADS                            \
        } else {                                            \
            st = (expr);                                    \
        }                                                   \
    } while (0)
/* A call that may block: always without the GIL. */
#define KP_BLOCKING(st, expr)                               \
    do {                                                    \
        Py_BEGIN_ALLOW_THREADS st = (expr);                 \
        Py_END_ALLOW_THREADS                                \
    } while (0)

/* ---- devices (device.c) ---- */
typedef struct {
    PyObject_HEAD
    keel_device_t *dev;
    keel_stream_t *default_stream;
    PyObject *stream_obj;        /* its Stream object, made on first use */
    int is_cuda, is_hip, is_cpu;
} kp_Device;
extern PyTypeObject kp_DeviceType;
/* The Device object of a handle (one per handle, kept for the process). */
PyObject *kp_device_of(keel_device_t *dev);
/* The device an argument names: None (the default), a Device, or "cpu:0", "cuda". */
kp_Device *kp_device_arg(PyObject *arg);
int kp_device_init(PyObject *m);

/* ---- streams, events, graphs (stream.c, graph.c) ---- */
typedef struct {
    PyObject_HEAD
    keel_stream_t *stream;
    kp_Device *device;
    int owned;
} kp_Stream;
extern PyTypeObject kp_StreamType, kp_EventType;
/* The default stream of a device, as a Stream object (cached on the device). */
PyObject *kp_default_stream(kp_Device *d);
/* The stream an argument names: None (the device's default) or a Stream of that device. */
keel_stream_t *kp_stream_arg(PyObject *arg, kp_Device *d);
int kp_stream_init(PyObject *m);
int kp_graph_init(PyObject *m);

/* ---- buffers (buffer.c) ---- */
typedef struct {
    PyObject_HEAD
    void *ptr;
    size_t nbytes;
    keel_memory_kind_t kind;
    kp_Device *device;
    const keel_tensor_t *imported; /* memory of another library (DLPack), or NULL */
    long exports;                /* DLPack tensors of it still held by consumers */
    int closed;                  /* free() was called: no new use; freed once exports is 0 */
} kp_Buffer;
extern PyTypeObject kp_BufferType;
/* A new buffer of nbytes of kind on d. */
kp_Buffer *kp_buffer_new(kp_Device *d, size_t nbytes, keel_memory_kind_t kind);
int kp_buffer_init(PyObject *m);
/* Raises (and returns -1) when b was freed. */
int kp_buffer_check(kp_Buffer *b);
/* One export of b fewer (any thread, GIL held); frees it when free() asked and none is left. */
void kp_buffer_export_done(kp_Buffer *b);
/* A new buffer over memory imported through DLPack (owns t). */
kp_Buffer *kp_buffer_imported(kp_Device *d, const keel_tensor_t *t, size_t nbytes);

/* ---- arrays (array.c, dlpack.c) ---- */
#define KP_MAX_NDIM 8
typedef struct {
    PyObject_HEAD
    kp_Buffer *buffer;           /* owns the memory */
    char *data;                  /* element 0 */
    int ndim;
    int64_t shape[KP_MAX_NDIM];
    int64_t strides[KP_MAX_NDIM]; /* elements */
    DLDataType dtype;
    keel_stream_t *stream;       /* where work on it was last enqueued */
} kp_Array;
extern PyTypeObject kp_ArrayType;
/* A new array over buffer (a reference is taken) at data. */
kp_Array *kp_array_wrap(kp_Buffer *b, void *data, int ndim, const int64_t *shape, const int64_t *strides,
                        DLDataType dtype);
/* A new compact array of its own buffer. */
kp_Array *kp_array_empty(kp_Device *d, int ndim, const int64_t *shape, DLDataType dtype, keel_memory_kind_t kind);
int64_t kp_array_size(const kp_Array *a);
int kp_array_is_compact(const kp_Array *a);
/* DLDataType from a dtype name ("float32", "f4", "int64", ...), and back. */
int kp_dtype_parse(PyObject *name, DLDataType *out);
const char *kp_dtype_name(DLDataType t);
/* The Keel dtype of an array, or -1 with a TypeError for other dtypes. */
int kp_array_keel_dtype(const kp_Array *a, keel_dtype_t *out);
int kp_array_init(PyObject *m);
PyObject *kp_from_dlpack(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *kp_array_dlpack(kp_Array *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *kp_array_dlpack_device(kp_Array *self, PyObject *unused);
PyObject *kp_array_cai(kp_Array *self, void *closure);

/* ---- operations and kernels (ops.c, kernel.c) ---- */
int kp_ops_init(PyObject *m);
extern PyMethodDef kp_ops_methods[];
int kp_kernel_init(PyObject *m);
extern PyMethodDef kp_bench_methods[];

/* Parses keyword-only fast-call arguments: names[] (NULL-terminated) into out[]. */
int kp_kwargs(const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, const char *const *names,
              PyObject **out);

#endif /* KEELPY_H */
