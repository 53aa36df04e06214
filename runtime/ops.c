/* SPDX-License-Identifier: MIT */
/* Public entry points of the built-in operations (keel/ops.h): validation of
 * every argument against the stream and the allocation registry, then one
 * call into the stream's backend table (keel/backend_ops.h).
 *
 * The checks run before anything is enqueued, so a refused call writes
 * nothing. Sizes are size_t; every product that makes an extent is checked
 * for overflow, because a wrapped extent would pass the registry check and
 * let a backend run off the end of an allocation. */
#include <math.h>
#include <stddef.h>
#include <string.h>
#include "backends/cpu/cpu_check.h"
#include "runtime/internal.h"
#include "runtime/ops_fallback.h"
#include "keel/backend_ops.h"
#include "kernels/dtype_size.h"

/* The checks' path takes keel__dtype_size inline, where the exported
 * keel_dtype_size would cost a PLT hop. */
size_t keel_dtype_size(keel_dtype_t dtype)
{
    return keel__dtype_size(dtype);
}

const char *keel_dtype_name(keel_dtype_t dtype)
{
    switch (dtype) {
    case KEEL_F32: return "f32";
    case KEEL_F64: return "f64";
    case KEEL_F16: return "f16";
    case KEEL_BF16: return "bf16";
    }
    return "unknown";
}

/* ---- helpers ---- */

/* The error paths below are out of line and marked cold, so the hot path of
 * every call carries no formatting and keeps its registers. */
#define COLD __attribute__((cold, noinline))
#define HOT_INLINE static inline __attribute__((always_inline))


static COLD keel_status_t get_ops_error(keel_stream_t *stream, const char *fn)
{
    KEEL__CHECK_HANDLE(stream, KEEL__MAGIC_STREAM, fn, "stream");
    const keel_ops_vtable_t *t = stream->device->plugin->ops;
    if (t == NULL)
        return keel__set_error(KEEL_ERROR_NOT_SUPPORTED, "%s: the %s backend has no built-in operations", fn,
                               stream->device->backend->name);
    return keel__set_error(KEEL_ERROR_ABI_MISMATCH,
                           "%s: the %s backend's operations table has ABI version %u, this Keel expects %d", fn,
                           stream->device->backend->name, t->abi_version, KEEL_OPS_ABI_VERSION);
}

/* The stream's ops table, or an error naming the backend. */
HOT_INLINE keel_status_t get_ops(keel_stream_t *stream, const char *fn, const keel_ops_vtable_t **ops)
{
    const keel_ops_vtable_t *t = NULL;
    if (__builtin_expect(stream != NULL && stream->magic == KEEL__MAGIC_STREAM, 1))
        t = stream->device->plugin->ops;
    *ops = t;
    if (KEEL__UNLIKELY(t == NULL || t->abi_version != KEEL_OPS_ABI_VERSION))
        return get_ops_error(stream, fn);
    if (KEEL__UNLIKELY(keel__cpu_check))   /* the operands noted below are this call's */
        keel__cpu_check_note_reset();
    return KEEL_OK;
}

/* An entry of the table, honouring the struct_size the backend was built with. */
#define OPS_ENTRY(t, field)                                                                         \
    ((t)->struct_size >= offsetof(keel_ops_vtable_t, field) + sizeof((t)->field) ? (t)->field : NULL)

static COLD keel_status_t missing(keel_stream_t *stream, const char *fn)
{
    return keel__set_error(KEEL_ERROR_NOT_SUPPORTED, "%s: the %s backend does not implement it", fn,
                           stream->device->backend->name);
}

static COLD keel_status_t dtype_error(keel_dtype_t dt, const char *fn, const char *what)
{
    return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: %s %d is not a keel_dtype_t", fn, what, (int)dt);
}

HOT_INLINE keel_status_t check_dtype(keel_dtype_t dt, const char *fn, const char *what)
{
    if (KEEL__UNLIKELY(keel__dtype_size(dt) == 0))
        return dtype_error(dt, fn, what);
    return KEEL_OK;
}

static int mul_ovf(size_t a, size_t b, size_t *r)
{
    return __builtin_mul_overflow(a, b, r);
}

static int add_ovf(size_t a, size_t b, size_t *r)
{
    return __builtin_add_overflow(a, b, r);
}

/* Elements spanned by a matrix of `outer` lines of `inner` elements, lines ld
 * apart: (outer - 1) * ld + inner, 0 when empty. Returns nonzero on overflow. */
static int span(size_t outer, size_t inner, size_t ld, size_t *r)
{
    size_t t;
    if (outer == 0 || inner == 0) {
        *r = 0;
        return 0;
    }
    return mul_ovf(outer - 1, ld, &t) || add_ovf(t, inner, r);
}

/* Span of a batch: (count - 1) * stride + one. */
static int batch_span(size_t count, size_t stride, size_t one, size_t *r)
{
    size_t t;
    if (one == 0) {
        *r = 0;
        return 0;
    }
    return mul_ovf(count - 1, stride, &t) || add_ovf(t, one, r);
}

static COLD keel_status_t overflow(const char *fn, const char *what)
{
    return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: the extent of %s overflows size_t", fn, what);
}

/* The full check of one pointer, with its message: run only once the fast
 * check below has refused the pointer, so it finds the same fault (or, if
 * another thread changed the registry in between, what holds now). */
static COLD keel_status_t check_ptr_slow(keel_stream_t *stream, const char *fn, const char *what, const void *ptr,
                                         size_t elems, size_t esize)
{
    size_t bytes;
    keel__alloc_t a;
    if (mul_ovf(elems, esize, &bytes))
        return overflow(fn, what);
    if (ptr == NULL)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, what);
    if (!keel__registry_find(ptr, &a))
        return keel__set_error(KEEL_ERROR_INVALID_POINTER, "%s: %s %p is not memory Keel allocated", fn, what, ptr);
    if (a.device != stream->device)
        return keel__set_error(KEEL_ERROR_DEVICE_MISMATCH, "%s: %s %p belongs to %s, the stream to %s", fn, what,
                               ptr, a.device ? a.device->name : "the host", stream->device->name);
    size_t off = (uintptr_t)ptr - a.base;
    if (bytes > a.size - off)
        return keel__set_error(KEEL_ERROR_OUT_OF_RANGE,
                               "%s: %s %p needs %zu bytes but its allocation of %zu bytes at %p has %zu left", fn,
                               what, ptr, bytes, a.size, (void *)a.base, a.size - off);
    if (off % esize != 0)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: %s %p is not aligned to its %zu-byte elements", fn,
                               what, ptr, esize);
    return KEEL_OK;
}

/* ptr must lie in an allocation of the stream's device with room for
 * `elems` elements of esize bytes from ptr, at a multiple of esize from the
 * allocation's base. Nothing is checked for an empty extent. esize is a
 * power of two (a dtype's size, or 8 for int64_t), so the alignment test is
 * a mask. The registry lookup is served by the thread's cache when the
 * registry has not changed since this thread last saw the allocation. */
HOT_INLINE keel_status_t check_ptr(keel_stream_t *stream, const char *fn, const char *what, const void *ptr,
                                   size_t elems, size_t esize)
{
    size_t bytes;
    const keel__alloc_t *a;
    if (elems == 0)
        return KEEL_OK;
    if (__builtin_expect(!mul_ovf(elems, esize, &bytes) && ptr != NULL && (a = keel__registry_lookup(ptr)) != NULL &&
                             a->device == stream->device,
                         1)) {
        size_t off = (uintptr_t)ptr - a->base;
        if (__builtin_expect(bytes <= a->size - off && (off & (esize - 1)) == 0, 1)) {
            if (KEEL__UNLIKELY(keel__cpu_check))
                keel__cpu_check_note(fn, what, ptr, bytes);
            return KEEL_OK;
        }
    }
    keel_status_t st = check_ptr_slow(stream, fn, what, ptr, elems, esize);
    if (KEEL__UNLIKELY(keel__cpu_check) && st == KEEL_OK)
        keel__cpu_check_note(fn, what, ptr, elems * esize);
    return st;
}

static COLD keel_status_t ld_error(const char *fn, const char *what, size_t ld, size_t cols)
{
    return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: leading dimension %zu of %s is below its %zu columns",
                           fn, ld, what, cols);
}

/* A row-major matrix rows x cols, leading dimension ld: ld >= cols, in its allocation. */
HOT_INLINE keel_status_t check_matrix(keel_stream_t *stream, const char *fn, const char *what, const void *ptr,
                                      size_t rows, size_t cols, size_t ld, size_t esize)
{
    size_t e;
    if (rows > 1 && KEEL__UNLIKELY(ld < cols))
        return ld_error(fn, what, ld, cols);
    if (KEEL__UNLIKELY(span(rows, cols, ld, &e)))
        return overflow(fn, what);
    return check_ptr(stream, fn, what, ptr, e, esize);
}

/* The fast check of n operands (n <= 4) of esize-byte elements at once:
 * p[i] with room for elems[i] elements (none empty), each in an allocation
 * of the stream's device, in range and aligned, all found in the thread's
 * registry cache in one search. 1 when every one passes; 0 otherwise, and
 * the caller checks each operand with check_ptr, which finds the fault and
 * words its message. */
HOT_INLINE int operands_ok(keel_stream_t *stream, const void *const *p, const size_t *elems, int n, size_t esize)
{
    const keel__alloc_t *a[4];
    if (KEEL__UNLIKELY(keel__cpu_check)) /* the checking mode notes every operand (check_ptr) */
        return 0;
    size_t bytes[4];
    for (int i = 0; i < n; i++)
        if (p[i] == NULL || elems[i] == 0 || mul_ovf(elems[i], esize, &bytes[i]))
            return 0;
    if (!keel__registry_lookup_cached(p, n, a))
        return 0;
    int ok = 1;
    for (int i = 0; i < n; i++) {
        size_t off = (uintptr_t)p[i] - a[i]->base;
        ok &= a[i]->device == stream->device && bytes[i] <= a[i]->size - off && (off & (esize - 1)) == 0;
    }
    return ok;
}

#define TRY(x)                                  \
    do {                                        \
        keel_status_t s_ = (x);                 \
        if (KEEL__UNLIKELY(s_ != KEEL_OK))      \
            return s_;                          \
    } while (0)

/* Output and input ranges (elements of esize) may be the same block (in
 * place, where the call allows it) or disjoint, never partly shared: a
 * partial overlap makes the result depend on the order the backend uses. */
static COLD keel_status_t overlap_error(const char *fn, const char *out_name, const void *out, const char *in_name,
                                        const void *in, int same_allowed)
{
    return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: %s %p overlaps %s %p%s", fn, out_name, out, in_name,
                           in, same_allowed ? " without being the same array" : "");
}

HOT_INLINE keel_status_t check_overlap(const char *fn, const char *out_name, const void *out, size_t out_elems,
                                       const char *in_name, const void *in, size_t in_elems, size_t esize,
                                       int same_allowed)
{
    if (!out || !in || !out_elems || !in_elems)
        return KEEL_OK;
    uintptr_t o0 = (uintptr_t)out, o1 = o0 + out_elems * esize, i0 = (uintptr_t)in, i1 = i0 + in_elems * esize;
    if (o0 >= i1 || i0 >= o1)
        return KEEL_OK;
    if (same_allowed && o0 == i0)
        return KEEL_OK;
    return overlap_error(fn, out_name, out, in_name, in, same_allowed);
}

/* ---- fill, cast, copies ---- */

keel_status_t keel_fill(keel_stream_t *stream, keel_dtype_t dtype, void *ptr, size_t n, double value)
{
    static const char fn[] = "keel_fill";
    const keel_ops_vtable_t *ops;
    TRY(get_ops(stream, fn, &ops));
    TRY(check_dtype(dtype, fn, "dtype"));
    TRY(check_ptr(stream, fn, "ptr", ptr, n, keel__dtype_size(dtype)));
    if (n == 0)
        return KEEL_OK;
    if (!OPS_ENTRY(ops, fill))
        return missing(stream, fn);
    KEEL__FAULT_ENQUEUE(fn);
    return ops->fill(stream->ctx, dtype, ptr, n, value);
}

keel_status_t keel_cast(keel_stream_t *stream, keel_dtype_t src_dtype, const void *src, keel_dtype_t dst_dtype,
                        void *dst, size_t n)
{
    static const char fn[] = "keel_cast";
    const keel_ops_vtable_t *ops;
    TRY(get_ops(stream, fn, &ops));
    TRY(check_dtype(src_dtype, fn, "src_dtype"));
    TRY(check_dtype(dst_dtype, fn, "dst_dtype"));
    size_t ss = keel__dtype_size(src_dtype), ds = keel__dtype_size(dst_dtype);
    TRY(check_ptr(stream, fn, "src", src, n, ss));
    TRY(check_ptr(stream, fn, "dst", dst, n, ds));
    if (n == 0)
        return KEEL_OK;
    /* n * size fits: check_ptr verified it. */
    uintptr_t s0 = (uintptr_t)src, s1 = s0 + n * ss, d0 = (uintptr_t)dst, d1 = d0 + n * ds;
    if (s0 < d1 && d0 < s1 && !(s0 == d0 && ss == ds))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: src %p and dst %p overlap", fn, src, dst);
    if (!OPS_ENTRY(ops, cast))
        return missing(stream, fn);
    KEEL__FAULT_ENQUEUE(fn);
    return ops->cast(stream->ctx, src_dtype, src, dst_dtype, dst, n);
}

static keel_status_t copy2d_common(keel_stream_t *stream, const char *fn, int transpose, keel_dtype_t dtype,
                                   size_t rows, size_t cols, const void *src, size_t src_ld, void *dst,
                                   size_t dst_ld)
{
    const keel_ops_vtable_t *ops;
    TRY(get_ops(stream, fn, &ops));
    TRY(check_dtype(dtype, fn, "dtype"));
    size_t es = keel__dtype_size(dtype);
    TRY(check_matrix(stream, fn, "src", src, rows, cols, src_ld, es));
    if (transpose)
        TRY(check_matrix(stream, fn, "dst", dst, cols, rows, dst_ld, es));
    else
        TRY(check_matrix(stream, fn, "dst", dst, rows, cols, dst_ld, es));
    if (rows == 0 || cols == 0)
        return KEEL_OK;
    size_t se = 0, de = 0;
    span(rows, cols, src_ld, &se);
    if (transpose)
        span(cols, rows, dst_ld, &de);
    else
        span(rows, cols, dst_ld, &de);
    uintptr_t s0 = (uintptr_t)src, s1 = s0 + se * es, d0 = (uintptr_t)dst, d1 = d0 + de * es;
    if (s0 < d1 && d0 < s1)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: src %p and dst %p overlap", fn, src, dst);
    if (transpose) {
        if (!OPS_ENTRY(ops, transpose))
            return missing(stream, fn);
        KEEL__FAULT_ENQUEUE(fn);
        return ops->transpose(stream->ctx, dtype, rows, cols, src, src_ld, dst, dst_ld);
    }
    if (!OPS_ENTRY(ops, copy_2d))
        return missing(stream, fn);
    KEEL__FAULT_ENQUEUE(fn);
    return ops->copy_2d(stream->ctx, dtype, rows, cols, src, src_ld, dst, dst_ld);
}

keel_status_t keel_copy_2d(keel_stream_t *stream, keel_dtype_t dtype, size_t rows, size_t cols, const void *src,
                           size_t src_ld, void *dst, size_t dst_ld)
{
    return copy2d_common(stream, "keel_copy_2d", 0, dtype, rows, cols, src, src_ld, dst, dst_ld);
}

keel_status_t keel_transpose(keel_stream_t *stream, keel_dtype_t dtype, size_t rows, size_t cols, const void *src,
                             size_t src_ld, void *dst, size_t dst_ld)
{
    return copy2d_common(stream, "keel_transpose", 1, dtype, rows, cols, src, src_ld, dst, dst_ld);
}

/* ---- elementwise ---- */

keel_status_t keel_unary(keel_stream_t *stream, keel_unary_op_t op, keel_dtype_t dtype, size_t n, const void *x,
                         void *y)
{
    static const char fn[] = "keel_unary";
    const keel_ops_vtable_t *ops;
    TRY(get_ops(stream, fn, &ops));
    if (KEEL__UNLIKELY(op < KEEL_UNARY_NEG || op > KEEL_UNARY_TANH))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: op %d is not a keel_unary_op_t", fn, (int)op);
    TRY(check_dtype(dtype, fn, "dtype"));
    size_t es = keel__dtype_size(dtype);
    TRY(check_ptr(stream, fn, "x", x, n, es));
    TRY(check_ptr(stream, fn, "y", y, n, es));
    if (n == 0)
        return KEEL_OK;
    uintptr_t x0 = (uintptr_t)x, y0 = (uintptr_t)y;
    if (x0 != y0 && x0 < y0 + n * es && y0 < x0 + n * es)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: x %p and y %p overlap without being equal", fn, x, y);
    if (!OPS_ENTRY(ops, unary))
        return missing(stream, fn);
    KEEL__FAULT_ENQUEUE(fn);
    return ops->unary(stream->ctx, op, dtype, n, x, y);
}

/* keel_binary's checks and dispatch; fn names the public call in messages. */
static keel_status_t binary_op(const char *fn, keel_stream_t *stream, keel_binary_op_t op, keel_dtype_t dtype,
                               size_t rows, size_t cols, double alpha, const void *a, size_t lda, double beta,
                               const void *b, size_t ldb, keel_broadcast_t broadcast, void *y, size_t ldy)
{
    const keel_ops_vtable_t *ops;
    TRY(get_ops(stream, fn, &ops));
    if (KEEL__UNLIKELY(op < KEEL_BINARY_ADD || op > KEEL_BINARY_MIN))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: op %d is not a keel_binary_op_t", fn, (int)op);
    if (KEEL__UNLIKELY(broadcast != KEEL_BROADCAST_NONE && broadcast != KEEL_BROADCAST_ROW &&
                       broadcast != KEEL_BROADCAST_COL))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: broadcast %d is not a keel_broadcast_t", fn,
                               (int)broadcast);
    TRY(check_dtype(dtype, fn, "dtype"));
    size_t es = keel__dtype_size(dtype);
    /* The common call (same-shape operands) checks its three in one go. */
    size_t ext[3];
    const void *opnd[3] = {a, b, y};
    if (KEEL__UNLIKELY(broadcast != KEEL_BROADCAST_NONE ||
                       (rows > 1 && (lda < cols || ldb < cols || ldy < cols)) || span(rows, cols, lda, &ext[0]) ||
                       span(rows, cols, ldb, &ext[1]) || span(rows, cols, ldy, &ext[2]) ||
                       !operands_ok(stream, opnd, ext, 3, es))) {
        TRY(check_matrix(stream, fn, "a", a, rows, cols, lda, es));
        if (broadcast == KEEL_BROADCAST_NONE)
            TRY(check_matrix(stream, fn, "b", b, rows, cols, ldb, es));
        else if (rows && cols)
            TRY(check_ptr(stream, fn, "b", b, broadcast == KEEL_BROADCAST_ROW ? cols : rows, es));
        TRY(check_matrix(stream, fn, "y", y, rows, cols, ldy, es));
        if (rows == 0 || cols == 0)
            return KEEL_OK;
    }
    if (KEEL__UNLIKELY((y == a && ldy != lda && rows > 1) ||
                       (broadcast == KEEL_BROADCAST_NONE && y == b && ldy != ldb && rows > 1)))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT,
                               "%s: in-place y must have the leading dimension of the operand it replaces", fn);
    size_t ea = 0, eb = 0, ey = 0;
    span(rows, cols, lda, &ea);
    span(rows, cols, ldy, &ey);
    if (broadcast == KEEL_BROADCAST_NONE)
        span(rows, cols, ldb, &eb);
    else
        eb = broadcast == KEEL_BROADCAST_ROW ? cols : rows;
    TRY(check_overlap(fn, "y", y, ey, "a", a, ea, es, 1));
    TRY(check_overlap(fn, "y", y, ey, "b", b, eb, es, broadcast == KEEL_BROADCAST_NONE));
    if (!OPS_ENTRY(ops, binary))
        return missing(stream, fn);
    keel_binary_args_t args = {op, dtype, broadcast, rows, cols, alpha, beta, a, lda, b,
                               broadcast == KEEL_BROADCAST_NONE ? ldb : 0, y, ldy};
    KEEL__FAULT_ENQUEUE(fn);
    return ops->binary(stream->ctx, &args);
}

keel_status_t keel_binary(keel_stream_t *stream, keel_binary_op_t op, keel_dtype_t dtype, size_t rows, size_t cols,
                          double alpha, const void *a, size_t lda, double beta, const void *b, size_t ldb,
                          keel_broadcast_t broadcast, void *y, size_t ldy)
{
    return binary_op("keel_binary", stream, op, dtype, rows, cols, alpha, a, lda, beta, b, ldb, broadcast, y, ldy);
}

keel_status_t keel_binary_vec(keel_stream_t *stream, keel_binary_op_t op, keel_dtype_t dtype, size_t n,
                              const void *a, const void *b, void *y)
{
    return binary_op("keel_binary_vec", stream, op, dtype, 1, n, 1.0, a, n, 1.0, b, n, KEEL_BROADCAST_NONE, y, n);
}

/* ---- reductions, softmax, layer norm ---- */

keel_status_t keel_reduce(keel_stream_t *stream, keel_reduce_op_t op, keel_dtype_t dtype, size_t rows, size_t cols,
                          const void *x, size_t ld, keel_reduce_axis_t axis, void *out)
{
    static const char fn[] = "keel_reduce";
    const keel_ops_vtable_t *ops;
    TRY(get_ops(stream, fn, &ops));
    if (KEEL__UNLIKELY(op < KEEL_REDUCE_SUM || op > KEEL_REDUCE_NORM2))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: op %d is not a keel_reduce_op_t", fn, (int)op);
    if (KEEL__UNLIKELY(axis != KEEL_AXIS_ALL && axis != KEEL_AXIS_ROWS && axis != KEEL_AXIS_COLS))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: axis %d is not a keel_reduce_axis_t", fn, (int)axis);
    TRY(check_dtype(dtype, fn, "dtype"));
    size_t es = keel__dtype_size(dtype);
    TRY(check_matrix(stream, fn, "x", x, rows, cols, ld, es));
    size_t nout = axis == KEEL_AXIS_ALL ? 1 : axis == KEEL_AXIS_ROWS ? rows : cols;
    size_t per = axis == KEEL_AXIS_ALL ? 0 : axis == KEEL_AXIS_ROWS ? cols : rows;
    int empty = rows == 0 || cols == 0;
    TRY(check_ptr(stream, fn, "out", out, nout, es));
    if (nout == 0)
        return KEEL_OK;
    if (empty) {
        if (op != KEEL_REDUCE_SUM && op != KEEL_REDUCE_NORM2)
            return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT,
                                   "%s: max, min and mean of zero elements are not defined (rows %zu, cols %zu)",
                                   fn, rows, cols);
        (void)per;
        if (!OPS_ENTRY(ops, fill))
            return missing(stream, fn);
        KEEL__FAULT_ENQUEUE(fn);
        return ops->fill(stream->ctx, dtype, out, nout, 0.0);
    }
    if (!OPS_ENTRY(ops, reduce))
        return missing(stream, fn);
    KEEL__FAULT_ENQUEUE(fn);
    return ops->reduce(stream->ctx, op, dtype, rows, cols, x, ld, axis, out);
}

keel_status_t keel_argmax_rows(keel_stream_t *stream, keel_dtype_t dtype, size_t rows, size_t cols, const void *x,
                               size_t ld, int64_t *out)
{
    static const char fn[] = "keel_argmax_rows";
    const keel_ops_vtable_t *ops;
    TRY(get_ops(stream, fn, &ops));
    TRY(check_dtype(dtype, fn, "dtype"));
    if (KEEL__UNLIKELY(cols == 0 && rows > 0))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: argmax of an empty row is not defined", fn);
    TRY(check_matrix(stream, fn, "x", x, rows, cols, ld, keel__dtype_size(dtype)));
    TRY(check_ptr(stream, fn, "out", out, rows, sizeof(int64_t)));
    if (rows == 0)
        return KEEL_OK;
    if (!OPS_ENTRY(ops, argmax_rows))
        return missing(stream, fn);
    KEEL__FAULT_ENQUEUE(fn);
    return ops->argmax_rows(stream->ctx, dtype, rows, cols, x, ld, out);
}

static keel_status_t check_inplace_rows(const char *fn, const void *x, size_t ldx, const void *y, size_t ldy,
                                        size_t rows)
{
    if (KEEL__UNLIKELY(x == y && ldx != ldy && rows > 1))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: in place, y must have the leading dimension of x", fn);
    return KEEL_OK;
}

keel_status_t keel_softmax_rows(keel_stream_t *stream, keel_dtype_t dtype, size_t rows, size_t cols, const void *x,
                                size_t ldx, void *y, size_t ldy, int log_softmax)
{
    static const char fn[] = "keel_softmax_rows";
    const keel_ops_vtable_t *ops;
    TRY(get_ops(stream, fn, &ops));
    TRY(check_dtype(dtype, fn, "dtype"));
    size_t es = keel__dtype_size(dtype);
    TRY(check_matrix(stream, fn, "x", x, rows, cols, ldx, es));
    TRY(check_matrix(stream, fn, "y", y, rows, cols, ldy, es));
    TRY(check_inplace_rows(fn, x, ldx, y, ldy, rows));
    if (rows == 0 || cols == 0)
        return KEEL_OK;
    size_t ex = 0, ey = 0;
    span(rows, cols, ldx, &ex);
    span(rows, cols, ldy, &ey);
    TRY(check_overlap(fn, "y", y, ey, "x", x, ex, es, 1));
    if (!OPS_ENTRY(ops, softmax_rows))
        return missing(stream, fn);
    KEEL__FAULT_ENQUEUE(fn);
    return ops->softmax_rows(stream->ctx, dtype, rows, cols, x, ldx, y, ldy, log_softmax != 0);
}

keel_status_t keel_layernorm_rows(keel_stream_t *stream, keel_dtype_t dtype, size_t rows, size_t cols,
                                  const void *x, size_t ldx, const void *gamma, const void *beta, double eps,
                                  void *y, size_t ldy)
{
    static const char fn[] = "keel_layernorm_rows";
    const keel_ops_vtable_t *ops;
    TRY(get_ops(stream, fn, &ops));
    TRY(check_dtype(dtype, fn, "dtype"));
    if (KEEL__UNLIKELY(!(eps >= 0.0) || isinf(eps)))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: eps %g is not a finite value >= 0", fn, eps);
    size_t es = keel__dtype_size(dtype);
    TRY(check_matrix(stream, fn, "x", x, rows, cols, ldx, es));
    TRY(check_matrix(stream, fn, "y", y, rows, cols, ldy, es));
    TRY(check_inplace_rows(fn, x, ldx, y, ldy, rows));
    if (rows == 0 || cols == 0)
        return KEEL_OK;
    if (gamma)
        TRY(check_ptr(stream, fn, "gamma", gamma, cols, es));
    if (beta)
        TRY(check_ptr(stream, fn, "beta", beta, cols, es));
    size_t ex = 0, ey = 0;
    span(rows, cols, ldx, &ex);
    span(rows, cols, ldy, &ey);
    TRY(check_overlap(fn, "y", y, ey, "x", x, ex, es, 1));
    TRY(check_overlap(fn, "y", y, ey, "gamma", gamma, cols, es, 0));
    TRY(check_overlap(fn, "y", y, ey, "beta", beta, cols, es, 0));
    if (!OPS_ENTRY(ops, layernorm_rows))
        return missing(stream, fn);
    KEEL__FAULT_ENQUEUE(fn);
    return ops->layernorm_rows(stream->ctx, dtype, rows, cols, x, ldx, gamma, beta, eps, y, ldy);
}

/* ---- BLAS ---- */

/* Elements spanned by a stored matrix of r x c in a layout with leading dimension ld. */
static keel_status_t check_stored(keel_stream_t *stream, const char *fn, const char *what, keel_layout_t layout,
                                  size_t r, size_t c, size_t ld, size_t *elems)
{
    size_t outer = layout == KEEL_ROW_MAJOR ? r : c, inner = layout == KEEL_ROW_MAJOR ? c : r;
    if (KEEL__UNLIKELY(ld < (inner ? inner : 1)))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: leading dimension %zu of %s is below %zu", fn, ld,
                               what, inner ? inner : 1);
    if (span(outer, inner, ld, elems))
        return overflow(fn, what);
    (void)stream;
    return KEEL_OK;
}

static keel_status_t check_enum_layout(const char *fn, keel_layout_t layout)
{
    if (KEEL__UNLIKELY(layout != KEEL_ROW_MAJOR && layout != KEEL_COL_MAJOR))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: layout %d is not a keel_layout_t", fn, (int)layout);
    return KEEL_OK;
}

static keel_status_t check_enum_trans(const char *fn, const char *what, keel_transpose_op_t t)
{
    if (KEEL__UNLIKELY(t != KEEL_NO_TRANS && t != KEEL_TRANS))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: %s %d is not a keel_transpose_op_t", fn, what,
                               (int)t);
    return KEEL_OK;
}

static keel_status_t check_compute(const char *fn, keel_compute_t compute, keel_dtype_t in)
{
    switch (compute) {
    case KEEL_COMPUTE_DEFAULT: return KEEL_OK;
    case KEEL_COMPUTE_F32:
        if (in != KEEL_F64)
            return KEEL_OK;
        break;
    case KEEL_COMPUTE_TF32:
        if (in == KEEL_F32)
            return KEEL_OK;
        break;
    case KEEL_COMPUTE_F64:
        if (in == KEEL_F64)
            return KEEL_OK;
        break;
    default:
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: compute %d is not a keel_compute_t", fn,
                               (int)compute);
    }
    static const char *const names[] = {"DEFAULT", "F32", "TF32", "F64"};
    return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: compute %s does not apply to %s data", fn,
                           names[compute], keel_dtype_name(in));
}

/* The end of keel_gemm, keel_gemv and keel_dense: the backend's entry, or
 * Keel's portable kernels (runtime/ops_fallback.c) where the backend's BLAS
 * is not usable, KEEL_BLAS asks for them, or the entry refuses the call as
 * not supported. */
#define BLAS_DISPATCH(entry, portable_fn, args)                                           \
    do {                                                                                  \
        int pk_ = keel__blas_pick(stream, (entry) != NULL, fn);                           \
        if (pk_)                                                                          \
            return pk_ > 0 ? portable_fn(stream, args, fn) : keel_last_status();          \
        keel_status_t st_ = (entry)(stream->ctx, args);                                   \
        if (KEEL__UNLIKELY(st_ == KEEL_ERROR_NOT_SUPPORTED) && keel__blas_retry(stream, fn)) \
            return portable_fn(stream, args, fn);                                          \
        return st_;                                                                       \
    } while (0)

keel_status_t keel_gemm(keel_stream_t *stream, const keel_gemm_params_t *params)
{
    static const char fn[] = "keel_gemm";
    const keel_ops_vtable_t *ops;
    TRY(get_ops(stream, fn, &ops));
    if (KEEL__UNLIKELY(params == NULL))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: params is NULL", fn);
    if (KEEL__UNLIKELY(params->struct_size < offsetof(keel_gemm_params_t, batch_count) ||
                       params->struct_size > sizeof(keel_gemm_params_t)))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: params->struct_size %zu is not one Keel knows (%zu)",
                               fn, params->struct_size, sizeof(keel_gemm_params_t));
    keel_gemm_params_t p;
    memset(&p, 0, sizeof(p));
    memcpy(&p, params, params->struct_size);
    p.struct_size = sizeof(p);
    if (p.batch_count == 0)
        p.batch_count = 1;
    if (p.batch_count == 1)
        p.stride_a = p.stride_b = p.stride_c = 0;

    TRY(check_enum_layout(fn, p.layout));
    TRY(check_enum_trans(fn, "transa", p.transa));
    TRY(check_enum_trans(fn, "transb", p.transb));
    TRY(check_dtype(p.a_type, fn, "a_type"));
    TRY(check_dtype(p.b_type, fn, "b_type"));
    TRY(check_dtype(p.c_type, fn, "c_type"));
    if (KEEL__UNLIKELY(p.a_type != p.b_type ||
                       (p.c_type != p.a_type &&
                        !(p.c_type == KEEL_F32 && (p.a_type == KEEL_F16 || p.a_type == KEEL_BF16)))))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT,
                               "%s: dtypes A %s, B %s, C %s are not a supported combination (A = B, and C = A or "
                               "C = f32 with f16/bf16 inputs)",
                               fn, keel_dtype_name(p.a_type), keel_dtype_name(p.b_type), keel_dtype_name(p.c_type));
    TRY(check_compute(fn, p.compute, p.a_type));
    if (KEEL__UNLIKELY(!isfinite(p.alpha) || !isfinite(p.beta)))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: alpha %g and beta %g must be finite", fn, p.alpha,
                               p.beta);

    size_t ar = p.transa ? p.k : p.m, ac = p.transa ? p.m : p.k;
    size_t br = p.transb ? p.n : p.k, bc = p.transb ? p.k : p.n;
    size_t ea = 0, eb = 0, ec = 0;
    int ab_used = p.m && p.n && p.k;
    TRY(check_stored(stream, fn, "A", p.layout, ar, ac, p.lda, &ea));
    TRY(check_stored(stream, fn, "B", p.layout, br, bc, p.ldb, &eb));
    TRY(check_stored(stream, fn, "C", p.layout, p.m, p.n, p.ldc, &ec));
    if (p.batch_count > 1 && ec && KEEL__UNLIKELY(p.stride_c < ec))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT,
                               "%s: stride_c %zu makes the batch's C matrices (%zu elements each) overlap", fn,
                               p.stride_c, ec);
    size_t ta, tb, tc;
    if (batch_span(p.batch_count, p.stride_a, ab_used ? ea : 0, &ta))
        return overflow(fn, "A");
    if (batch_span(p.batch_count, p.stride_b, ab_used ? eb : 0, &tb))
        return overflow(fn, "B");
    if (batch_span(p.batch_count, p.stride_c, ec, &tc))
        return overflow(fn, "C");
    TRY(check_ptr(stream, fn, "A", p.a, ta, keel__dtype_size(p.a_type)));
    TRY(check_ptr(stream, fn, "B", p.b, tb, keel__dtype_size(p.b_type)));
    TRY(check_ptr(stream, fn, "C", p.c, tc, keel__dtype_size(p.c_type)));
    if (p.m == 0 || p.n == 0)
        return KEEL_OK;
    /* in bytes: A and C may differ in dtype (check_ptr proved the products fit) */
    TRY(check_overlap(fn, "C", p.c, tc * keel__dtype_size(p.c_type), "A", p.a, ta * keel__dtype_size(p.a_type), 1, 0));
    TRY(check_overlap(fn, "C", p.c, tc * keel__dtype_size(p.c_type), "B", p.b, tb * keel__dtype_size(p.b_type), 1, 0));
    keel_gemm_params_t q = p;
    if (p.layout == KEEL_ROW_MAJOR) {
        /* C = op(A) op(B) in row-major is C^T = op(B)^T op(A)^T in column-major. */
        q.layout = KEEL_COL_MAJOR;
        q.transa = p.transb;
        q.transb = p.transa;
        q.m = p.n;
        q.n = p.m;
        q.a = p.b;
        q.lda = p.ldb;
        q.b = p.a;
        q.ldb = p.lda;
        q.a_type = p.b_type;
        q.b_type = p.a_type;
        q.stride_a = p.stride_b;
        q.stride_b = p.stride_a;
    }
    KEEL__FAULT_ENQUEUE(fn);
    BLAS_DISPATCH(OPS_ENTRY(ops, gemm), keel__portable_gemm, &q);
}

keel_status_t keel_gemv(keel_stream_t *stream, keel_dtype_t dtype, keel_layout_t layout, keel_transpose_op_t trans,
                        size_t m, size_t n, double alpha, const void *a, size_t lda, const void *x, size_t incx,
                        double beta, void *y, size_t incy)
{
    static const char fn[] = "keel_gemv";
    const keel_ops_vtable_t *ops;
    TRY(get_ops(stream, fn, &ops));
    TRY(check_dtype(dtype, fn, "dtype"));
    TRY(check_enum_layout(fn, layout));
    TRY(check_enum_trans(fn, "trans", trans));
    if (KEEL__UNLIKELY(incx == 0 || incy == 0))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: incx %zu and incy %zu must be >= 1", fn, incx, incy);
    if (KEEL__UNLIKELY(!isfinite(alpha) || !isfinite(beta)))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: alpha %g and beta %g must be finite", fn, alpha, beta);
    size_t es = keel__dtype_size(dtype), ea, ex, ey;
    size_t xlen = trans ? m : n, ylen = trans ? n : m;
    TRY(check_stored(stream, fn, "A", layout, m, n, lda, &ea));
    if (span(xlen, 1, incx, &ex))
        return overflow(fn, "x");
    if (span(ylen, 1, incy, &ey))
        return overflow(fn, "y");
    int used = m && n;
    TRY(check_ptr(stream, fn, "A", a, used ? ea : 0, es));
    TRY(check_ptr(stream, fn, "x", x, used ? ex : 0, es));
    TRY(check_ptr(stream, fn, "y", y, ey, es));
    if (ylen == 0)
        return KEEL_OK;
    TRY(check_overlap(fn, "y", y, ey, "A", a, used ? ea : 0, es, 0));
    TRY(check_overlap(fn, "y", y, ey, "x", x, used ? ex : 0, es, 0));
    keel_gemv_args_t g = {dtype, trans, m, n, alpha, beta, a, lda, x, incx, y, incy};
    if (layout == KEEL_ROW_MAJOR) {
        /* Row-major A (m x n) is column-major A^T (n x m). */
        g.trans = trans ? KEEL_NO_TRANS : KEEL_TRANS;
        g.m = n;
        g.n = m;
    }
    KEEL__FAULT_ENQUEUE(fn);
    BLAS_DISPATCH(OPS_ENTRY(ops, gemv), keel__portable_gemv, &g);
}

keel_status_t keel_dense(keel_stream_t *stream, const keel_dense_params_t *params)
{
    static const char fn[] = "keel_dense";
    const keel_ops_vtable_t *ops;
    TRY(get_ops(stream, fn, &ops));
    if (KEEL__UNLIKELY(params == NULL))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: params is NULL", fn);
    if (KEEL__UNLIKELY(params->struct_size < offsetof(keel_dense_params_t, ldy) + sizeof(size_t) ||
                       params->struct_size > sizeof(keel_dense_params_t)))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: params->struct_size %zu is not one Keel knows (%zu)",
                               fn, params->struct_size, sizeof(keel_dense_params_t));
    keel_dense_params_t p;
    memset(&p, 0, sizeof(p));
    memcpy(&p, params, params->struct_size);
    p.struct_size = sizeof(p);
    TRY(check_enum_layout(fn, p.layout));
    TRY(check_enum_trans(fn, "transw", p.transw));
    TRY(check_dtype(p.dtype, fn, "dtype"));
    TRY(check_compute(fn, p.compute, p.dtype));
    if (KEEL__UNLIKELY(p.act < KEEL_ACT_NONE || p.act > KEEL_ACT_GELU_ERF))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: act %d is not a keel_activation_t", fn, (int)p.act);
    size_t es = keel__dtype_size(p.dtype), ew, ex, ey;
    size_t wr = p.transw ? p.k : p.m, wc = p.transw ? p.m : p.k;
    int used = p.m && p.n && p.k;
    TRY(check_stored(stream, fn, "W", p.layout, wr, wc, p.ldw, &ew));
    TRY(check_stored(stream, fn, "X", p.layout, p.k, p.n, p.ldx, &ex));
    TRY(check_stored(stream, fn, "Y", p.layout, p.m, p.n, p.ldy, &ey));
    TRY(check_ptr(stream, fn, "W", p.w, used ? ew : 0, es));
    TRY(check_ptr(stream, fn, "X", p.x, used ? ex : 0, es));
    TRY(check_ptr(stream, fn, "Y", p.y, ey, es));
    if (p.bias && p.n)
        TRY(check_ptr(stream, fn, "bias", p.bias, p.m, es));
    if (p.m == 0 || p.n == 0)
        return KEEL_OK;
    TRY(check_overlap(fn, "Y", p.y, ey, "W", p.w, used ? ew : 0, es, 0));
    TRY(check_overlap(fn, "Y", p.y, ey, "X", p.x, used ? ex : 0, es, 0));
    TRY(check_overlap(fn, "Y", p.y, ey, "bias", p.bias, p.m, es, 0));
    KEEL__FAULT_ENQUEUE(fn);
    BLAS_DISPATCH(OPS_ENTRY(ops, dense), keel__portable_dense, &p);
}
