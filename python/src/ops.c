/* SPDX-License-Identifier: MIT */
/* The built-in operations of keel/ops.h on Arrays. Each takes its inputs,
 * out= (a new array when None) and stream= (the device's default stream
 * when None), enqueues the work and returns out without waiting. */
#include <string.h>
#include "keelpy.h"

/* An Array argument, open and on the expected device (d NULL: any). */
static kp_Array *array_arg(PyObject *o, const char *fn, const char *what, kp_Device *d)
{
    if (!o || !PyObject_TypeCheck(o, &kp_ArrayType)) {
        PyErr_Format(PyExc_TypeError, "%s(): %s must be a keel.Array, not %.100s", fn, what,
                     o ? Py_TYPE(o)->tp_name : "nothing");
        return NULL;
    }
    kp_Array *a = (kp_Array *)o;
    if (kp_buffer_check(a->buffer) < 0)
        return NULL;
    if (d && a->buffer->device != d) {
        PyErr_Format(PyExc_ValueError, "%s(): %s is on %s, the other operands on %s", fn, what,
                     keel_device_name(a->buffer->device->dev), keel_device_name(d->dev));
        return NULL;
    }
    return a;
}

static int compact(kp_Array *a, const char *fn, const char *what)
{
    if (kp_array_is_compact(a))
        return 0;
    PyErr_Format(PyExc_ValueError, "%s(): %s must be compact (row-major without gaps)", fn, what);
    return -1;
}

/* out= as given (same dtype and element count as want_shape) or a new array. */
static kp_Array *out_arg(PyObject *o, const char *fn, kp_Device *d, int ndim, const int64_t *shape, DLDataType t)
{
    if (!o || o == Py_None)
        return kp_array_empty(d, ndim, shape, t, KEEL_MEMORY_DEVICE);
    kp_Array *a = array_arg(o, fn, "out", d);
    if (!a || compact(a, fn, "out") < 0)
        return NULL;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    if (kp_array_size(a) != n || a->dtype.code != t.code || a->dtype.bits != t.bits) {
        PyErr_Format(PyExc_ValueError, "%s(): out has %lld elements of %s, the result %lld of %s", fn,
                     (long long)kp_array_size(a), kp_dtype_name(a->dtype), (long long)n, kp_dtype_name(t));
        return NULL;
    }
    Py_INCREF(a);
    return a;
}

static PyObject *done(keel_status_t st, kp_Array *out, keel_stream_t *s)
{
    if (st != KEEL_OK) {
        Py_DECREF(out);
        return kp_raise(st);
    }
    out->stream = s;
    return (PyObject *)out;
}

static double num(PyObject *o, double dflt)
{
    return o && o != Py_None ? PyFloat_AsDouble(o) : dflt;
}

/* rows x cols view of an array: the last axis against the others. */
static void rows_cols(const kp_Array *a, size_t *rows, size_t *cols)
{
    size_t r = 1;
    for (int i = 0; i + 1 < a->ndim; i++)
        r *= (size_t)a->shape[i];
    *rows = a->ndim ? r : 1;
    *cols = a->ndim ? (size_t)a->shape[a->ndim - 1] : 1;
}

/* The compact operand x of a float dtype (in *dt), from arg o. */
static kp_Array *one_operand(PyObject *o, const char *fn, keel_dtype_t *dt)
{
    kp_Array *x = array_arg(o, fn, "x", NULL);
    if (!x || compact(x, fn, "x") < 0 || kp_array_keel_dtype(x, dt) < 0)
        return NULL;
    return x;
}

/* The two compact operands x (of a float dtype, in *dt) and y of the same
 * device and dtype, from args a[0] and a[1]. */
static int two_operands(PyObject *const *a, const char *fn, const char *nx, const char *ny, kp_Array **x,
                        kp_Array **y, keel_dtype_t *dt)
{
    if (!(*x = array_arg(a[0], fn, nx, NULL)) || compact(*x, fn, nx) < 0 || kp_array_keel_dtype(*x, dt) < 0)
        return -1;
    if (!(*y = array_arg(a[1], fn, ny, (*x)->buffer->device)) || compact(*y, fn, ny) < 0)
        return -1;
    if ((*y)->dtype.code != (*x)->dtype.code || (*y)->dtype.bits != (*x)->dtype.bits) {
        PyErr_Format(PyExc_TypeError, "%s(): %s is %s, %s is %s", fn, nx, kp_dtype_name((*x)->dtype), ny,
                     kp_dtype_name((*y)->dtype));
        return -1;
    }
    return 0;
}

/* ---- elementwise ---- */

static PyObject *unary(keel_unary_op_t op, const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"x", "out", "stream", NULL};
    PyObject *a[3];
    if (kp_kwargs(fn, args, nargs, kwnames, names, a) < 0)
        return NULL;
    keel_dtype_t dt;
    kp_Array *x = one_operand(a[0], fn, &dt);
    if (!x)
        return NULL;
    kp_Device *d = x->buffer->device;
    keel_stream_t *s = kp_stream_arg(a[2], d);
    kp_Array *y = s ? out_arg(a[1], fn, d, x->ndim, x->shape, x->dtype) : NULL;
    if (!y)
        return NULL;
    keel_status_t st;
    KP_CALL(st, keel_unary(s, op, dt, (size_t)kp_array_size(x), x->data, y->data));
    return done(st, y, s);
}

#define UNARY(name, OP)                                                                             \
    static PyObject *op_##name(PyObject *self, PyObject *const *args, Py_ssize_t n, PyObject *kw) \
    {                                                                                               \
        (void)self;                                                                                 \
        return unary(OP, #name, args, n, kw);                                                       \
    }
UNARY(neg, KEEL_UNARY_NEG)
UNARY(abs, KEEL_UNARY_ABS)
UNARY(exp, KEEL_UNARY_EXP)
UNARY(log, KEEL_UNARY_LOG)
UNARY(sqrt, KEEL_UNARY_SQRT)
UNARY(relu, KEEL_UNARY_RELU)
UNARY(gelu, KEEL_UNARY_GELU)
UNARY(gelu_tanh, KEEL_UNARY_GELU_TANH)
UNARY(silu, KEEL_UNARY_SILU)
UNARY(sigmoid, KEEL_UNARY_SIGMOID)
UNARY(tanh, KEEL_UNARY_TANH)

static PyObject *binary(keel_binary_op_t op, const char *fn, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames)
{
    static const char *const names[] = {"a", "b", "alpha", "beta", "out", "stream", NULL};
    PyObject *a[6];
    if (kp_kwargs(fn, args, nargs, kwnames, names, a) < 0)
        return NULL;
    kp_Array *x, *y;
    keel_dtype_t dt;
    if (two_operands(a, fn, "a", "b", &x, &y, &dt) < 0)
        return NULL;
    kp_Device *d = x->buffer->device;
    size_t rows, cols;
    rows_cols(x, &rows, &cols);
    int64_t nb = kp_array_size(y);
    keel_broadcast_t bc;
    int same = y->ndim == x->ndim;
    for (int i = 0; same && i < x->ndim; i++)
        same = y->shape[i] == x->shape[i];
    if (same)
        bc = KEEL_BROADCAST_NONE;
    else if (y->ndim >= 1 && y->shape[y->ndim - 1] == (int64_t)cols && nb == (int64_t)cols)
        bc = KEEL_BROADCAST_ROW;
    else if (y->ndim >= 2 && y->shape[y->ndim - 1] == 1 && nb == (int64_t)rows)
        bc = KEEL_BROADCAST_COL;
    else
        return PyErr_Format(PyExc_ValueError, "%s(): b's shape neither equals a's nor broadcasts as a row (last "
                            "axis) or a column", fn);
    double alpha = num(a[2], 1.0), beta = num(a[3], 1.0);
    if (PyErr_Occurred())
        return NULL;
    keel_stream_t *s = kp_stream_arg(a[5], d);
    kp_Array *o = s ? out_arg(a[4], fn, d, x->ndim, x->shape, x->dtype) : NULL;
    if (!o)
        return NULL;
    keel_status_t st;
    KP_CALL(st, keel_binary(s, op, dt, rows, cols, alpha, x->data, cols, beta, y->data, cols, bc, o->data, cols));
    return done(st, o, s);
}

#define BINARY(name, OP)                                                                            \
    static PyObject *op_##name(PyObject *self, PyObject *const *args, Py_ssize_t n, PyObject *kw) \
    {                                                                                               \
        (void)self;                                                                                 \
        return binary(OP, #name, args, n, kw);                                                      \
    }
BINARY(add, KEEL_BINARY_ADD)
BINARY(sub, KEEL_BINARY_SUB)
BINARY(mul, KEEL_BINARY_MUL)
BINARY(div, KEEL_BINARY_DIV)
BINARY(maximum, KEEL_BINARY_MAX)
BINARY(minimum, KEEL_BINARY_MIN)

/* ---- reductions, softmax, layer norm ---- */

static PyObject *reduce(keel_reduce_op_t op, const char *fn, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames)
{
    static const char *const names[] = {"x", "axis", "out", "stream", NULL};
    PyObject *a[4];
    if (kp_kwargs(fn, args, nargs, kwnames, names, a) < 0)
        return NULL;
    keel_dtype_t dt;
    kp_Array *x = one_operand(a[0], fn, &dt);
    if (!x)
        return NULL;
    size_t rows, cols;
    rows_cols(x, &rows, &cols);
    keel_reduce_axis_t axis = KEEL_AXIS_ALL;
    int ndim = 0;
    int64_t shape[KP_MAX_NDIM];
    if (a[1] && a[1] != Py_None) {
        long ax = PyLong_AsLong(a[1]);
        if (ax == -1 && PyErr_Occurred())
            return NULL;
        if (ax == -1 || (x->ndim >= 1 && ax == x->ndim - 1)) { /* over the last axis: one per row */
            axis = KEEL_AXIS_ROWS;
            ndim = x->ndim - 1;
            memcpy(shape, x->shape, sizeof(int64_t) * (size_t)ndim);
        } else if (x->ndim == 2 && ax == 0) {
            axis = KEEL_AXIS_COLS;
            ndim = 1;
            shape[0] = x->shape[1];
        } else {
            return PyErr_Format(PyExc_ValueError, "%s(): axis %ld of a %d-dimensional array (the last axis, or 0 of "
                                "a matrix)", fn, ax, x->ndim);
        }
    }
    kp_Device *d = x->buffer->device;
    keel_stream_t *s = kp_stream_arg(a[3], d);
    kp_Array *o = s ? out_arg(a[2], fn, d, ndim, shape, x->dtype) : NULL;
    if (!o)
        return NULL;
    keel_status_t st;
    KP_CALL(st, keel_reduce(s, op, dt, rows, cols, x->data, cols, axis, o->data));
    return done(st, o, s);
}

#define REDUCE(name, OP)                                                                            \
    static PyObject *op_##name(PyObject *self, PyObject *const *args, Py_ssize_t n, PyObject *kw) \
    {                                                                                               \
        (void)self;                                                                                 \
        return reduce(OP, #name, args, n, kw);                                                      \
    }
REDUCE(sum, KEEL_REDUCE_SUM)
REDUCE(max, KEEL_REDUCE_MAX)
REDUCE(min, KEEL_REDUCE_MIN)
REDUCE(mean, KEEL_REDUCE_MEAN)
REDUCE(norm2, KEEL_REDUCE_NORM2)

static PyObject *op_argmax(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)self;
    static const char *const names[] = {"x", "out", "stream", NULL};
    PyObject *a[3];
    if (kp_kwargs("argmax", args, nargs, kwnames, names, a) < 0)
        return NULL;
    keel_dtype_t dt;
    kp_Array *x = one_operand(a[0], "argmax", &dt);
    if (!x)
        return NULL;
    size_t rows, cols;
    rows_cols(x, &rows, &cols);
    kp_Device *d = x->buffer->device;
    keel_stream_t *s = kp_stream_arg(a[2], d);
    int ndim = x->ndim ? x->ndim - 1 : 0;
    kp_Array *o = s ? out_arg(a[1], "argmax", d, ndim, x->shape, (DLDataType){kDLInt, 64, 1}) : NULL;
    if (!o)
        return NULL;
    keel_status_t st;
    KP_CALL(st, keel_argmax_rows(s, dt, rows, cols, x->data, cols, (int64_t *)o->data));
    return done(st, o, s);
}

static PyObject *softmax(int log, const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"x", "out", "stream", NULL};
    PyObject *a[3];
    if (kp_kwargs(fn, args, nargs, kwnames, names, a) < 0)
        return NULL;
    keel_dtype_t dt;
    kp_Array *x = one_operand(a[0], fn, &dt);
    if (!x)
        return NULL;
    size_t rows, cols;
    rows_cols(x, &rows, &cols);
    kp_Device *d = x->buffer->device;
    keel_stream_t *s = kp_stream_arg(a[2], d);
    kp_Array *o = s ? out_arg(a[1], fn, d, x->ndim, x->shape, x->dtype) : NULL;
    if (!o)
        return NULL;
    keel_status_t st;
    KP_CALL(st, keel_softmax_rows(s, dt, rows, cols, x->data, cols, o->data, cols, log));
    return done(st, o, s);
}

static PyObject *op_softmax(PyObject *self, PyObject *const *args, Py_ssize_t n, PyObject *kw)
{
    (void)self;
    return softmax(0, "softmax", args, n, kw);
}

static PyObject *op_log_softmax(PyObject *self, PyObject *const *args, Py_ssize_t n, PyObject *kw)
{
    (void)self;
    return softmax(1, "log_softmax", args, n, kw);
}

/* An optional vector operand of cols elements of x's dtype. */
static int vector_arg(PyObject *o, const char *fn, const char *what, kp_Array *x, size_t n, const void **p)
{
    *p = NULL;
    if (!o || o == Py_None)
        return 0;
    kp_Array *v = array_arg(o, fn, what, x->buffer->device);
    if (!v || compact(v, fn, what) < 0)
        return -1;
    if (kp_array_size(v) != (int64_t)n || v->dtype.code != x->dtype.code || v->dtype.bits != x->dtype.bits) {
        PyErr_Format(PyExc_ValueError, "%s(): %s must have %zu elements of %s", fn, what, n, kp_dtype_name(x->dtype));
        return -1;
    }
    *p = v->data;
    return 0;
}

static PyObject *op_layer_norm(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)self;
    static const char *const names[] = {"x", "gamma", "beta", "eps", "out", "stream", NULL};
    PyObject *a[6];
    if (kp_kwargs("layer_norm", args, nargs, kwnames, names, a) < 0)
        return NULL;
    keel_dtype_t dt;
    kp_Array *x = one_operand(a[0], "layer_norm", &dt);
    if (!x)
        return NULL;
    size_t rows, cols;
    rows_cols(x, &rows, &cols);
    const void *g, *b;
    double eps = num(a[3], 1e-5);
    if (PyErr_Occurred() || vector_arg(a[1], "layer_norm", "gamma", x, cols, &g) < 0 ||
        vector_arg(a[2], "layer_norm", "beta", x, cols, &b) < 0)
        return NULL;
    kp_Device *d = x->buffer->device;
    keel_stream_t *s = kp_stream_arg(a[5], d);
    kp_Array *o = s ? out_arg(a[4], "layer_norm", d, x->ndim, x->shape, x->dtype) : NULL;
    if (!o)
        return NULL;
    keel_status_t st;
    KP_CALL(st, keel_layernorm_rows(s, dt, rows, cols, x->data, cols, g, b, eps, o->data, cols));
    return done(st, o, s);
}

/* ---- BLAS ---- */

static PyObject *op_matmul(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)self;
    static const char *const names[] = {"a", "b", "alpha", "beta", "out", "stream", "tf32", NULL};
    PyObject *a[7];
    if (kp_kwargs("matmul", args, nargs, kwnames, names, a) < 0)
        return NULL;
    kp_Array *x, *y;
    keel_dtype_t dt;
    if (two_operands(a, "matmul", "a", "b", &x, &y, &dt) < 0)
        return NULL;
    if (x->ndim < 2 || x->ndim > 3 || y->ndim != x->ndim)
        return PyErr_Format(PyExc_ValueError, "matmul(): a and b must both be matrices or both batches of them "
                            "(2 or 3 dimensions), not %d and %d", x->ndim, y->ndim);
    int bt = x->ndim == 3;
    int64_t batch = bt ? x->shape[0] : 1, m = x->shape[bt], k = x->shape[bt + 1], n = y->shape[bt + 1];
    if (y->shape[bt] != k || (bt && y->shape[0] != batch))
        return PyErr_Format(PyExc_ValueError, "matmul(): shapes do not match (a is %lld x %lld, b has %lld rows)",
                            (long long)m, (long long)k, (long long)y->shape[bt]);
    double alpha = num(a[2], 1.0), beta = num(a[3], 0.0);
    int tf32 = a[6] ? PyObject_IsTrue(a[6]) : 0;
    if (PyErr_Occurred() || tf32 < 0)
        return NULL;
    kp_Device *d = x->buffer->device;
    keel_stream_t *s = kp_stream_arg(a[5], d);
    int64_t shape[3] = {batch, m, n};
    kp_Array *o = s ? out_arg(a[4], "matmul", d, x->ndim, bt ? shape : shape + 1, x->dtype) : NULL;
    if (!o)
        return NULL;
    keel_gemm_params_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.layout = KEEL_ROW_MAJOR;
    p.m = (size_t)m;
    p.n = (size_t)n;
    p.k = (size_t)k;
    p.alpha = alpha;
    p.beta = beta;
    p.a_type = p.b_type = p.c_type = dt;
    p.compute = tf32 ? KEEL_COMPUTE_TF32 : KEEL_COMPUTE_DEFAULT;
    p.a = x->data;
    p.lda = (size_t)k;
    p.b = y->data;
    p.ldb = (size_t)n;
    p.c = o->data;
    p.ldc = (size_t)n;
    p.batch_count = (size_t)batch;
    p.stride_a = (size_t)(m * k);
    p.stride_b = (size_t)(k * n);
    p.stride_c = (size_t)(m * n);
    keel_status_t st;
    KP_CALL(st, keel_gemm(s, &p));
    return done(st, o, s);
}

static int activation(PyObject *o, keel_activation_t *act)
{
    static const struct { const char *name; keel_activation_t act; } acts[] = {
        {"none", KEEL_ACT_NONE}, {"relu", KEEL_ACT_RELU}, {"gelu", KEEL_ACT_GELU_ERF}, {"gelu_tanh", KEEL_ACT_GELU},
    };
    if (!o || o == Py_None) {
        *act = KEEL_ACT_NONE;
        return 0;
    }
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
        if (PyUnicode_Check(o) && PyUnicode_CompareWithASCIIString(o, acts[i].name) == 0) {
            *act = acts[i].act;
            return 0;
        }
    PyErr_Format(PyExc_ValueError, "activation must be \"none\", \"relu\", \"gelu\" or \"gelu_tanh\", not %R", o);
    return -1;
}

/* y = act(x @ w.T + bias), as torch.nn.functional.linear: x [batch, in], w [out, in]. */
static PyObject *op_dense(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)self;
    static const char *const names[] = {"x", "w", "bias", "activation", "out", "stream", "tf32", NULL};
    PyObject *a[7];
    if (kp_kwargs("dense", args, nargs, kwnames, names, a) < 0)
        return NULL;
    kp_Array *x, *w;
    keel_dtype_t dt;
    if (two_operands(a, "dense", "x", "w", &x, &w, &dt) < 0)
        return NULL;
    if (x->ndim != 2 || w->ndim != 2 || w->shape[1] != x->shape[1])
        return PyErr_Format(PyExc_ValueError, "dense(): x must be [batch, in] and w [out, in] with the same in");
    int64_t batch = x->shape[0], in = x->shape[1], outf = w->shape[0];
    const void *bias;
    keel_activation_t act;
    int tf32 = a[6] ? PyObject_IsTrue(a[6]) : 0;
    if (tf32 < 0 || vector_arg(a[2], "dense", "bias", w, (size_t)outf, &bias) < 0 || activation(a[3], &act) < 0)
        return NULL;
    kp_Device *d = x->buffer->device;
    keel_stream_t *s = kp_stream_arg(a[5], d);
    int64_t shape[2] = {batch, outf};
    kp_Array *o = s ? out_arg(a[4], "dense", d, 2, shape, x->dtype) : NULL;
    if (!o)
        return NULL;
    keel_dense_params_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.layout = KEEL_COL_MAJOR;
    p.transw = KEEL_TRANS;
    p.m = (size_t)outf;
    p.n = (size_t)batch;
    p.k = (size_t)in;
    p.dtype = dt;
    p.compute = tf32 ? KEEL_COMPUTE_TF32 : KEEL_COMPUTE_DEFAULT;
    p.act = act;
    p.w = w->data;
    p.ldw = (size_t)in;
    p.x = x->data;
    p.ldx = (size_t)in;
    p.bias = bias;
    p.y = o->data;
    p.ldy = (size_t)outf;
    keel_status_t st;
    KP_CALL(st, keel_dense(s, &p));
    return done(st, o, s);
}

/* ---- fill and cast ---- */

static PyObject *op_fill(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)self;
    static const char *const names[] = {"x", "value", "stream", NULL};
    PyObject *a[3];
    if (kp_kwargs("fill", args, nargs, kwnames, names, a) < 0)
        return NULL;
    keel_dtype_t dt;
    kp_Array *x = one_operand(a[0], "fill", &dt);
    if (!x)
        return NULL;
    double v = num(a[1], 0.0);
    if (PyErr_Occurred())
        return NULL;
    keel_stream_t *s = kp_stream_arg(a[2], x->buffer->device);
    if (!s)
        return NULL;
    keel_status_t st;
    KP_CALL(st, keel_fill(s, dt, x->data, (size_t)kp_array_size(x), v));
    Py_INCREF(x);
    return done(st, x, s);
}

static PyObject *op_cast(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)self;
    static const char *const names[] = {"x", "dtype", "out", "stream", NULL};
    PyObject *a[4];
    if (kp_kwargs("cast", args, nargs, kwnames, names, a) < 0)
        return NULL;
    kp_Array *x = array_arg(a[0], "cast", "x", NULL);
    keel_dtype_t from, to;
    DLDataType t;
    if (!x || compact(x, "cast", "x") < 0 || kp_array_keel_dtype(x, &from) < 0 || kp_dtype_parse(a[1], &t) < 0)
        return NULL;
    if (keel_dtype_from_dlpack(t, &to) != KEEL_OK)
        return PyErr_Format(PyExc_TypeError, "cast(): to float32, float64, float16 or bfloat16, not %s",
                            kp_dtype_name(t));
    kp_Device *d = x->buffer->device;
    keel_stream_t *s = kp_stream_arg(a[3], d);
    kp_Array *o = s ? out_arg(a[2], "cast", d, x->ndim, x->shape, t) : NULL;
    if (!o)
        return NULL;
    keel_status_t st;
    KP_CALL(st, keel_cast(s, from, x->data, to, o->data, (size_t)kp_array_size(x)));
    return done(st, o, s);
}

#define OP(name, doc) {#name, (PyCFunction)(void (*)(void))op_##name, METH_FASTCALL | METH_KEYWORDS, doc}
PyMethodDef kp_ops_methods[] = {
    OP(neg, "neg(x, *, out=None, stream=None)"), OP(abs, "abs(x, *, out=None, stream=None)"),
    OP(exp, "exp(x, *, out=None, stream=None)"), OP(log, "log(x, *, out=None, stream=None)"),
    OP(sqrt, "sqrt(x, *, out=None, stream=None)"), OP(relu, "relu(x, *, out=None, stream=None)"),
    OP(gelu, "gelu(x, *, out=None, stream=None): the erf form"),
    OP(gelu_tanh, "gelu_tanh(x, *, out=None, stream=None): the tanh form"),
    OP(silu, "silu(x, *, out=None, stream=None)"), OP(sigmoid, "sigmoid(x, *, out=None, stream=None)"),
    OP(tanh, "tanh(x, *, out=None, stream=None)"),
    OP(add, "add(a, b, alpha=1, beta=1, *, out=None, stream=None): alpha a + beta b"),
    OP(sub, "sub(a, b, alpha=1, beta=1, *, out=None, stream=None): alpha a - beta b"),
    OP(mul, "mul(a, b, alpha=1, beta=1, *, out=None, stream=None): (alpha a) (beta b)"),
    OP(div, "div(a, b, alpha=1, beta=1, *, out=None, stream=None): (alpha a) / (beta b)"),
    OP(maximum, "maximum(a, b, *, out=None, stream=None)"), OP(minimum, "minimum(a, b, *, out=None, stream=None)"),
    OP(sum, "sum(x, axis=None, *, out=None, stream=None)"), OP(max, "max(x, axis=None, *, out=None, stream=None)"),
    OP(min, "min(x, axis=None, *, out=None, stream=None)"), OP(mean, "mean(x, axis=None, *, out=None, stream=None)"),
    OP(norm2, "norm2(x, axis=None, *, out=None, stream=None): sqrt(sum x^2)"),
    OP(argmax, "argmax(x, *, out=None, stream=None): int64 index of the largest element of each row"),
    OP(softmax, "softmax(x, *, out=None, stream=None): over the last axis"),
    OP(log_softmax, "log_softmax(x, *, out=None, stream=None): over the last axis"),
    OP(layer_norm, "layer_norm(x, gamma=None, beta=None, eps=1e-5, *, out=None, stream=None): over the last axis"),
    OP(matmul, "matmul(a, b, alpha=1, beta=0, *, out=None, stream=None, tf32=False): alpha a @ b + beta out"),
    OP(dense, "dense(x, w, bias=None, activation=\"none\", *, out=None, stream=None, tf32=False): "
              "act(x @ w.T + bias), as torch's linear"),
    OP(fill, "fill(x, value, *, stream=None): set every element"),
    OP(cast, "cast(x, dtype, *, out=None, stream=None)"),
    {NULL, NULL, 0, NULL},
};

int kp_ops_init(PyObject *m)
{
    (void)m;
    return 0;
}
