/* SPDX-License-Identifier: MIT */
/* CPU implementations of the memory-bound built-in operations: fill, cast,
 * copies, elementwise math, reductions, softmax and layer norm.
 *
 * Each vtable entry copies its arguments into a payload and enqueues a runner
 * on the stream (keel__cpu_enqueue), or for a small operation on an idle
 * stream runs it on the spot (keel__cpu_enqueue_small); the runner spreads the loop over the
 * device's threads with keel__cpu_parallel_for, which stays inline for small
 * sizes. f32 and f64 loops work on the data directly so the compiler can
 * vectorize them; f16 and bf16 go through f32 tiles on the stack, so no call
 * allocates memory while it runs. */
#include "config.h"
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <tgmath.h>
#include "kernels/cpu/cpu_ops.h"
#include "backends/cpu/cpu_enqueue.h"

#define TILE KEEL_CPU_TILE

#define GRAIN KEEL_CPU_GRAIN

#define HOT KEEL_CPU_HOT
#define VEC KEEL_CPU_VEC

static size_t rows_grain(size_t cols)
{
    size_t g = GRAIN / (cols ? cols : 1);
    return g ? g : 1;
}

/* Up to this many elements an operation costs less than handing it to the
 * stream's worker thread and waking it: such operations run on the calling
 * thread when the stream is idle (keel__cpu_enqueue_small). */
#define SMALL_ELEMS ((size_t)1 << 14)

/* elems: the elements of the largest operand the operation touches. */
#define ENQUEUE(ctx, fn, payload, elems)                                                         \
    ((elems) <= SMALL_ELEMS ? keel__cpu_enqueue_small((ctx), (fn), &(payload), sizeof(payload)) \
                            : keel__cpu_enqueue((ctx), (fn), &(payload), sizeof(payload)))

/* The shortest path of a small operation on an idle stream: the loop body
 * itself, called on the calling thread between the two halves of an inline
 * run, with no runner, no parallel_for and no thread-local device in
 * between (n <= grain, so parallel_for would have run it inline anyway).
 * Evaluates to 1 when it ran; 0: the caller enqueues as usual. */
#define RUN_INLINE(ctx, body, args, n, grain)                                                     \
    ((n) <= SMALL_ELEMS && (n) <= (grain) && keel__cpu_inline_begin((struct cpu_stream *)(ctx)) \
         ? ((body)(&(args), 0, (n)), keel__cpu_inline_end((struct cpu_stream *)(ctx)), 1)         \
         : 0)

/* ======================================================================== */
/* fill                                                                      */
/* ======================================================================== */

typedef struct {
    keel_dtype_t dt;
    void *ptr;
    size_t n;
    union {
        float f;
        double d;
        uint16_t h;
    } v;
} fill_args_t;

static VEC void fill_body(void *arg, size_t b, size_t e)
{
    const fill_args_t *a = arg;
    switch (a->dt) {
    case KEEL_F32: {
        float *p = (float *)a->ptr, v = a->v.f;
        for (size_t i = b; i < e; i++)
            p[i] = v;
        break;
    }
    case KEEL_F64: {
        double *p = (double *)a->ptr, v = a->v.d;
        for (size_t i = b; i < e; i++)
            p[i] = v;
        break;
    }
    default: {
        uint16_t *p = (uint16_t *)a->ptr, v = a->v.h;
        for (size_t i = b; i < e; i++)
            p[i] = v;
        break;
    }
    }
}

static void fill_run(void *payload)
{
    fill_args_t *a = payload;
    keel__cpu_parallel_for(a->n, GRAIN, fill_body, a);
}

static keel_status_t cpu_fill(void *s, keel_dtype_t dt, void *ptr, size_t n, double value)
{
    fill_args_t a = {dt, ptr, n, {0}};
    switch (dt) {
    case KEEL_F32: a.v.f = (float)value; break;
    case KEEL_F64: a.v.d = value; break;
    case KEEL_F16: a.v.h = keel__f64_to_f16(value); break;
    case KEEL_BF16: a.v.h = keel__f64_to_bf16(value); break;
    }
    if (RUN_INLINE(s, fill_body, a, n, GRAIN))
        return KEEL_OK;
    return ENQUEUE(s, fill_run, a, n);
}

/* ======================================================================== */
/* cast                                                                      */
/* ======================================================================== */

typedef struct {
    keel_dtype_t sdt, ddt;
    const void *src;
    void *dst;
    size_t n;
} cast_args_t;

static VEC void cast_body(void *arg, size_t b, size_t e)
{
    const cast_args_t *a = arg;
    size_t ss = keel__dtype_size(a->sdt), ds = keel__dtype_size(a->ddt);
    const char *src = (const char *)a->src + b * ss;
    char *dst = (char *)a->dst + b * ds;
    size_t n = e - b;
    if (a->sdt == a->ddt) {
        if (src != dst)
            memcpy(dst, src, n * ss);
        return;
    }
    if (a->sdt == KEEL_F64) {
        const double *s = (const double *)src;
        if (a->ddt == KEEL_F32) {
            float *d = (float *)dst;
            for (size_t i = 0; i < n; i++)
                d[i] = (float)s[i];
        } else if (a->ddt == KEEL_F16) {
            uint16_t *d = (uint16_t *)dst;
            for (size_t i = 0; i < n; i++)
                d[i] = keel__f64_to_f16(s[i]);
        } else {
            uint16_t *d = (uint16_t *)dst;
            for (size_t i = 0; i < n; i++)
                d[i] = keel__f64_to_bf16(s[i]);
        }
        return;
    }
    if (a->sdt == KEEL_F32 && a->ddt == KEEL_F64) {
        const float *sf = (const float *)src;
        double *d = (double *)dst;
        for (size_t i = 0; i < n; i++)
            d[i] = sf[i];
        return;
    }
    if (a->sdt == KEEL_F32) { /* to f16 or bf16 */
        keel__store_f32(a->ddt, dst, n, (const float *)src);
        return;
    }
    if (a->ddt == KEEL_F32) { /* from f16 or bf16 */
        keel__load_f32(a->sdt, src, n, (float *)dst);
        return;
    }
    /* The source widens to f32 exactly; one rounding happens on the store. */
    float t[TILE];
    for (size_t off = 0; off < n; off += TILE) {
        size_t c = n - off < TILE ? n - off : TILE;
        keel__load_f32(a->sdt, src + off * ss, c, t);
        if (a->ddt == KEEL_F64) {
            double *d = (double *)dst + off;
            for (size_t i = 0; i < c; i++)
                d[i] = t[i];
        } else {
            keel__store_f32(a->ddt, dst + off * ds, c, t);
        }
    }
}

static void cast_run(void *payload)
{
    cast_args_t *a = payload;
    keel__cpu_parallel_for(a->n, GRAIN, cast_body, a);
}

static keel_status_t cpu_cast(void *s, keel_dtype_t sdt, const void *src, keel_dtype_t ddt, void *dst, size_t n)
{
    cast_args_t a = {sdt, ddt, src, dst, n};
    if (RUN_INLINE(s, cast_body, a, n, GRAIN))
        return KEEL_OK;
    return ENQUEUE(s, cast_run, a, n);
}

/* ======================================================================== */
/* copy_2d and transpose                                                     */
/* ======================================================================== */

typedef struct {
    size_t es, rows, cols;
    const char *src;
    size_t lds;
    char *dst;
    size_t ldd;
} copy2d_args_t;

static HOT void copy2d_body(void *arg, size_t b, size_t e)
{
    const copy2d_args_t *a = arg;
    for (size_t i = b; i < e; i++)
        memcpy(a->dst + i * a->ldd * a->es, a->src + i * a->lds * a->es, a->cols * a->es);
}

static void copy2d_run(void *payload)
{
    copy2d_args_t *a = payload;
    keel__cpu_parallel_for(a->rows, rows_grain(a->cols * a->es / 4), copy2d_body, a);
}

static keel_status_t cpu_copy_2d(void *s, keel_dtype_t dt, size_t rows, size_t cols, const void *src, size_t lds,
                                 void *dst, size_t ldd)
{
    copy2d_args_t a = {keel__dtype_size(dt), rows, cols, src, lds, dst, ldd};
    if (lds == cols && ldd == cols) {
        /* One contiguous block: split it by bytes, not by rows. */
        a.cols = 1;
        a.rows = rows * cols;
        a.lds = a.ldd = 1;
    }
    return ENQUEUE(s, copy2d_run, a, rows * cols);
}

/* Transposes in square blocks so both sides stay in cache lines. */
#define TBLK 32
#define DEFINE_TRANSPOSE(T)                                                                     \
    static HOT void transpose_##T(const copy2d_args_t *a, size_t rb, size_t re) \
    {                                                                                           \
        const T *src = (const T *)a->src;                                                       \
        T *dst = (T *)a->dst;                                                                   \
        for (size_t i0 = rb * TBLK; i0 < re * TBLK && i0 < a->rows; i0 += TBLK) {               \
            size_t i1 = i0 + TBLK < a->rows ? i0 + TBLK : a->rows;                              \
            for (size_t j0 = 0; j0 < a->cols; j0 += TBLK) {                                     \
                size_t j1 = j0 + TBLK < a->cols ? j0 + TBLK : a->cols;                          \
                for (size_t j = j0; j < j1; j++)                                                \
                    for (size_t i = i0; i < i1; i++)                                            \
                        dst[j * a->ldd + i] = src[i * a->lds + j];                              \
            }                                                                                   \
        }                                                                                       \
    }
DEFINE_TRANSPOSE(uint16_t)
DEFINE_TRANSPOSE(uint32_t)
DEFINE_TRANSPOSE(uint64_t)

static void transpose_body(void *arg, size_t b, size_t e)
{
    const copy2d_args_t *a = arg;
    if (a->es == 2)
        transpose_uint16_t(a, b, e);
    else if (a->es == 4)
        transpose_uint32_t(a, b, e);
    else
        transpose_uint64_t(a, b, e);
}

static void transpose_run(void *payload)
{
    copy2d_args_t *a = payload;
    size_t blocks = (a->rows + TBLK - 1) / TBLK;
    keel__cpu_parallel_for(blocks, rows_grain(a->cols * TBLK), transpose_body, a);
}

static keel_status_t cpu_transpose(void *s, keel_dtype_t dt, size_t rows, size_t cols, const void *src, size_t lds,
                                   void *dst, size_t ldd)
{
    copy2d_args_t a = {keel__dtype_size(dt), rows, cols, src, lds, dst, ldd};
    return ENQUEUE(s, transpose_run, a, rows * cols);
}

/* ======================================================================== */
/* unary                                                                     */
/* ======================================================================== */

/* The cheap operations, one definition for float and double (<tgmath.h>
 * picks sqrtf or sqrt). The switch is outside the loops so each loop is a
 * plain vectorizable one. The transcendental operations have their own
 * loops (kernels/cpu/ops_cpu_math.c). */
#define DEFINE_UNARY(T)                                                                            \
    static VEC void unary_##T(keel_unary_op_t op, const T *x, T *y, size_t n)                     \
    {                                                                                              \
        switch (op) {                                                                              \
        case KEEL_UNARY_NEG:                                                                       \
            for (size_t i = 0; i < n; i++)                                                         \
                y[i] = -x[i];                                                                      \
            break;                                                                                 \
        case KEEL_UNARY_ABS:                                                                       \
            for (size_t i = 0; i < n; i++)                                                         \
                y[i] = fabs(x[i]);                                                                 \
            break;                                                                                 \
        case KEEL_UNARY_SQRT:                                                                      \
            for (size_t i = 0; i < n; i++)                                                         \
                y[i] = sqrt(x[i]);                                                                 \
            break;                                                                                 \
        case KEEL_UNARY_RELU:                                                                      \
            for (size_t i = 0; i < n; i++)                                                         \
                y[i] = x[i] < 0 ? (T)0 : x[i];                                                     \
            break;                                                                                 \
        default:                                                                                   \
            keel__cpu_math_##T(op, x, y, n);                                                       \
            break;                                                                                 \
        }                                                                                          \
    }
#define keel__cpu_math_float keel__cpu_math_f32
#define keel__cpu_math_double keel__cpu_math_f64
DEFINE_UNARY(float)
DEFINE_UNARY(double)

typedef struct {
    keel_unary_op_t op;
    keel_dtype_t dt;
    size_t n;
    const void *x;
    void *y;
} unary_args_t;

static void unary_body(void *arg, size_t b, size_t e)
{
    const unary_args_t *a = arg;
    if (a->dt == KEEL_F32) {
        unary_float(a->op, (const float *)a->x + b, (float *)a->y + b, e - b);
    } else if (a->dt == KEEL_F64) {
        unary_double(a->op, (const double *)a->x + b, (double *)a->y + b, e - b);
    } else {
        const uint16_t *x = a->x;
        uint16_t *y = a->y;
        float t[TILE];
        for (size_t off = b; off < e; off += TILE) {
            size_t c = e - off < TILE ? e - off : TILE;
            keel__load_f32(a->dt, x + off, c, t);
            unary_float(a->op, t, t, c);
            keel__store_f32(a->dt, y + off, c, t);
        }
    }
}

/* Transcendentals cost far more than a load: split them sooner. */
static size_t unary_grain(keel_unary_op_t op)
{
    return op <= KEEL_UNARY_ABS || op == KEEL_UNARY_RELU ? GRAIN : GRAIN / 8;
}

static void unary_run(void *payload)
{
    unary_args_t *a = payload;
    keel__cpu_parallel_for(a->n, unary_grain(a->op), unary_body, a);
}

static keel_status_t cpu_unary(void *s, keel_unary_op_t op, keel_dtype_t dt, size_t n, const void *x, void *y)
{
    unary_args_t a = {op, dt, n, x, y};
    if (RUN_INLINE(s, unary_body, a, n, unary_grain(op)))
        return KEEL_OK;
    return ENQUEUE(s, unary_run, a, n);
}

/* ======================================================================== */
/* binary                                                                    */
/* ======================================================================== */

/* y[i] = op(alpha a[i], beta b[i * bs]); bs is 1, or 0 for a scalar b. NaN
 * wins in max and min (x != x tests), as NumPy's maximum. Each loop comes in
 * a vector-b and a scalar-b form so both vectorize. */
#define BIN_LOOPS(T, EXPR)                                                                         \
    do {                                                                                           \
        if (alpha == 1 && beta == 1 && bs) { /* the common case, without the two multiplies */    \
            for (size_t i = 0; i < n; i++) {                                                       \
                T u = a[i], v = b[i];                                                              \
                y[i] = (EXPR);                                                                     \
            }                                                                                      \
        } else if (bs) {                                                                           \
            for (size_t i = 0; i < n; i++) {                                                       \
                T u = alpha * a[i], v = beta * b[i];                                               \
                y[i] = (EXPR);                                                                     \
            }                                                                                      \
        } else {                                                                                   \
            const T v = beta * b[0];                                                               \
            for (size_t i = 0; i < n; i++) {                                                       \
                T u = alpha * a[i];                                                                \
                y[i] = (EXPR);                                                                     \
            }                                                                                      \
        }                                                                                          \
    } while (0)

#define DEFINE_BINARY(T)                                                                            \
    static VEC void binary_##T(keel_binary_op_t op, size_t n, T alpha, const T *a, T beta, const T *b,  \
                           size_t bs, T *y)                                                         \
    {                                                                                               \
        switch (op) {                                                                               \
        case KEEL_BINARY_ADD: BIN_LOOPS(T, u + v); break;                                           \
        case KEEL_BINARY_SUB: BIN_LOOPS(T, u - v); break;                                           \
        case KEEL_BINARY_MUL: BIN_LOOPS(T, u * v); break;                                           \
        case KEEL_BINARY_DIV: BIN_LOOPS(T, u / v); break;                                           \
        case KEEL_BINARY_MAX: BIN_LOOPS(T, u != u ? u : v != v ? v : u > v ? u : v); break;         \
        case KEEL_BINARY_MIN: BIN_LOOPS(T, u != u ? u : v != v ? v : u < v ? u : v); break;         \
        }                                                                                           \
    }
DEFINE_BINARY(float)
DEFINE_BINARY(double)

typedef struct {
    keel_binary_args_t a;
    int flat; /* rows == 1 after flattening a contiguous block */
} binary_run_t;

/* One row segment [j0, j1) of row i. */
static void binary_segment(const keel_binary_args_t *a, size_t i, size_t j0, size_t j1)
{
    size_t n = j1 - j0;
    size_t bs = a->broadcast == KEEL_BROADCAST_COL ? 0 : 1;
    size_t boff = a->broadcast == KEEL_BROADCAST_NONE ? i * a->ldb + j0
                  : a->broadcast == KEEL_BROADCAST_ROW ? j0 : i;
    size_t aoff = i * a->lda + j0, yoff = i * a->ldy + j0;
    if (a->dtype == KEEL_F32) {
        binary_float(a->op, n, (float)a->alpha, (const float *)a->a + aoff, (float)a->beta,
                     (const float *)a->b + boff, bs, (float *)a->y + yoff);
    } else if (a->dtype == KEEL_F64) {
        binary_double(a->op, n, a->alpha, (const double *)a->a + aoff, a->beta, (const double *)a->b + boff, bs,
                      (double *)a->y + yoff);
    } else {
        const uint16_t *pa = (const uint16_t *)a->a + aoff, *pb = (const uint16_t *)a->b + boff;
        uint16_t *py = (uint16_t *)a->y + yoff;
        float ta[TILE], tb[TILE];
        for (size_t off = 0; off < n; off += TILE) {
            size_t c = n - off < TILE ? n - off : TILE;
            keel__load_f32(a->dtype, pa + off, c, ta);
            keel__load_f32(a->dtype, pb + off * bs, bs ? c : 1, tb);
            binary_float(a->op, c, (float)a->alpha, ta, (float)a->beta, tb, bs, ta);
            keel__store_f32(a->dtype, py + off, c, ta);
        }
    }
}

static void binary_body(void *arg, size_t b, size_t e)
{
    const binary_run_t *r = arg;
    if (r->flat) {
        binary_segment(&r->a, 0, b, e);
        return;
    }
    for (size_t i = b; i < e; i++)
        binary_segment(&r->a, i, 0, r->a.cols);
}

static void binary_run(void *payload)
{
    binary_run_t *r = payload;
    if (r->flat)
        keel__cpu_parallel_for(r->a.cols, GRAIN, binary_body, r);
    else
        keel__cpu_parallel_for(r->a.rows, rows_grain(r->a.cols), binary_body, r);
}

static keel_status_t cpu_binary(void *s, const keel_binary_args_t *args)
{
    /* A small contiguous operation runs straight from the caller's
     * arguments: field by field, with no copy of the struct first (a copy
     * in 16-byte pieces of fields the caller has just stored one by one
     * stalls on store forwarding, which cost more than the loop itself at
     * 1k elements). Offsets in binary_segment are 0 for row 0. */
    size_t n = args->rows * args->cols;
    if (n <= SMALL_ELEMS && n <= GRAIN &&
        (args->rows == 1 || (args->broadcast == KEEL_BROADCAST_NONE && args->lda == args->cols &&
                             args->ldb == args->cols && args->ldy == args->cols)) &&
        keel__cpu_inline_begin((struct cpu_stream *)s)) {
        binary_segment(args, 0, 0, n);
        keel__cpu_inline_end((struct cpu_stream *)s);
        return KEEL_OK;
    }
    binary_run_t r = {*args, 0};
    keel_binary_args_t *a = &r.a;
    if (a->rows == 1) {
        r.flat = 1;
    } else if (a->broadcast != KEEL_BROADCAST_ROW && a->broadcast != KEEL_BROADCAST_COL && a->lda == a->cols &&
               a->ldb == a->cols && a->ldy == a->cols) {
        a->cols *= a->rows;
        a->rows = 1;
        a->lda = a->ldb = a->ldy = a->cols;
        r.flat = 1;
    }
    return ENQUEUE(s, binary_run, r, args->rows * args->cols);
}

/* ======================================================================== */
/* reductions                                                                */
/* ======================================================================== */

/* Accumulates in f64 whatever the dtype: exact enough that results do not
 * depend on the order the threads use, and the loop stays memory bound. */
typedef struct {
    double s;   /* sum, or sum of squares, or the max/min so far */
    size_t n;
} racc_t;

/* Eight independent accumulators, as scalars so that they stay in
 * registers: the compiler packs them into vectors without reassociating
 * anything, and the adds do not wait on one another. */
#define RL8(S) S(0) S(1) S(2) S(3) S(4) S(5) S(6) S(7)
#define DEFINE_RSEG(T)                                                                    \
    static HOT void rseg_##T(keel_reduce_op_t op, const T *x, size_t n, racc_t *acc) \
    {                                                                                     \
        size_t i = 0;                                                                     \
        switch (op) {                                                                     \
        case KEEL_REDUCE_SUM:                                                             \
        case KEEL_REDUCE_MEAN: {                                                          \
            double l0 = 0, l1 = 0, l2 = 0, l3 = 0, l4 = 0, l5 = 0, l6 = 0, l7 = 0;        \
            for (; i + 8 <= n; i += 8) {                                                  \
                RL8(RSUM)                                                                 \
            }                                                                             \
            double s = ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7));                 \
            for (; i < n; i++)                                                            \
                s += x[i];                                                                \
            acc->s += s;                                                                  \
            break;                                                                        \
        }                                                                                 \
        case KEEL_REDUCE_NORM2: {                                                         \
            double l0 = 0, l1 = 0, l2 = 0, l3 = 0, l4 = 0, l5 = 0, l6 = 0, l7 = 0;        \
            for (; i + 8 <= n; i += 8) {                                                  \
                RL8(RSQ)                                                                  \
            }                                                                             \
            double s = ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7));                 \
            for (; i < n; i++)                                                            \
                s += (double)x[i] * x[i];                                                 \
            acc->s += s;                                                                  \
            break;                                                                        \
        }                                                                                 \
        case KEEL_REDUCE_MAX:                                                             \
        case KEEL_REDUCE_MIN: {                                                           \
            int mx = op == KEEL_REDUCE_MAX;                                               \
            T m = acc->n ? (T)acc->s : x[0];                                              \
            T l0 = m, l1 = m, l2 = m, l3 = m, l4 = m, l5 = m, l6 = m, l7 = m;             \
            int n0 = 0, n1 = 0, n2 = 0, n3 = 0, n4 = 0, n5 = 0, n6 = 0, n7 = 0;           \
            if (mx)                                                                       \
                for (; i + 8 <= n; i += 8) {                                              \
                    RL8(RMAX)                                                             \
                }                                                                         \
            else                                                                          \
                for (; i + 8 <= n; i += 8) {                                              \
                    RL8(RMIN)                                                             \
                }                                                                         \
            int anynan = (m != m) | n0 | n1 | n2 | n3 | n4 | n5 | n6 | n7;                \
            T ls[8] = {l0, l1, l2, l3, l4, l5, l6, l7};                                   \
            for (int k = 0; k < 8; k++)                                                   \
                m = mx ? (ls[k] > m ? ls[k] : m) : (ls[k] < m ? ls[k] : m);               \
            for (; i < n; i++) {                                                          \
                m = mx ? (x[i] > m ? x[i] : m) : (x[i] < m ? x[i] : m);                   \
                anynan |= x[i] != x[i];                                                   \
            }                                                                             \
            acc->s = anynan ? NAN : m;                                                    \
            break;                                                                        \
        }                                                                                 \
        }                                                                                 \
        acc->n += n;                                                                      \
    }
#define RSUM(k) l##k += x[i + k];
#define RSQ(k) l##k += (double)x[i + k] * x[i + k];
#define RMAX(k) l##k = x[i + k] > l##k ? x[i + k] : l##k; n##k |= x[i + k] != x[i + k];
#define RMIN(k) l##k = x[i + k] < l##k ? x[i + k] : l##k; n##k |= x[i + k] != x[i + k];
DEFINE_RSEG(float)
DEFINE_RSEG(double)

static void rseg(keel_reduce_op_t op, keel_dtype_t dt, const void *x, size_t n, racc_t *acc)
{
    if (dt == KEEL_F32) {
        rseg_float(op, x, n, acc);
    } else if (dt == KEEL_F64) {
        rseg_double(op, x, n, acc);
    } else {
        float t[TILE];
        const uint16_t *p = x;
        for (size_t off = 0; off < n; off += TILE) {
            size_t c = n - off < TILE ? n - off : TILE;
            keel__load_f32(dt, p + off, c, t);
            rseg_float(op, t, c, acc);
        }
    }
}

static void racc_merge(keel_reduce_op_t op, racc_t *into, const racc_t *from)
{
    if (from->n == 0)
        return;
    if (into->n == 0) {
        *into = *from;
        return;
    }
    double a = into->s, b = from->s;
    switch (op) {
    case KEEL_REDUCE_MAX: into->s = a != a || b != b ? NAN : a > b ? a : b; break;
    case KEEL_REDUCE_MIN: into->s = a != a || b != b ? NAN : a < b ? a : b; break;
    default: into->s = a + b; break;
    }
    into->n += from->n;
}

static double racc_final(keel_reduce_op_t op, const racc_t *acc)
{
    switch (op) {
    case KEEL_REDUCE_MEAN: return acc->s / (double)acc->n;
    case KEEL_REDUCE_NORM2: return sqrt(acc->s);
    default: return acc->s;
    }
}

static void store_one(keel_dtype_t dt, void *out, size_t i, double v)
{
    switch (dt) {
    case KEEL_F32: ((float *)out)[i] = (float)v; break;
    case KEEL_F64: ((double *)out)[i] = v; break;
    case KEEL_F16: ((uint16_t *)out)[i] = keel__f64_to_f16(v); break;
    case KEEL_BF16: ((uint16_t *)out)[i] = keel__f64_to_bf16(v); break;
    }
}

#define RBLOCKS 64 /* partial results of a full reduction: enough for any pool here */

typedef struct {
    keel_reduce_op_t op;
    keel_dtype_t dt;
    keel_reduce_axis_t axis;
    size_t rows, cols, ld;
    const void *x;
    void *out;
    /* full reductions: the flat range is cut into nblk blocks of blk elements */
    size_t blk, nblk;
    racc_t *part;
} reduce_args_t;

static const void *elem(keel_dtype_t dt, const void *base, size_t i)
{
    return (const char *)base + i * keel__dtype_size(dt);
}

static void reduce_all_body(void *arg, size_t b, size_t e)
{
    const reduce_args_t *a = arg;
    for (size_t blk = b; blk < e; blk++) {
        racc_t acc = {0, 0};
        size_t f0 = blk * a->blk, f1 = f0 + a->blk < a->rows * a->cols ? f0 + a->blk : a->rows * a->cols;
        /* Walk the flat range [f0, f1) of the rows x cols block row by row. */
        while (f0 < f1) {
            size_t i = f0 / a->cols, j = f0 % a->cols;
            size_t c = a->cols - j < f1 - f0 ? a->cols - j : f1 - f0;
            rseg(a->op, a->dt, elem(a->dt, a->x, i * a->ld + j), c, &acc);
            f0 += c;
        }
        a->part[blk] = acc;
    }
}

static void reduce_rows_body(void *arg, size_t b, size_t e)
{
    const reduce_args_t *a = arg;
    for (size_t i = b; i < e; i++) {
        racc_t acc = {0, 0};
        rseg(a->op, a->dt, elem(a->dt, a->x, i * a->ld), a->cols, &acc);
        store_one(a->dt, a->out, i, racc_final(a->op, &acc));
    }
}

/* Column reductions: a strip of columns at a time, accumulating each row into
 * a vector of partial results, so every load is contiguous. */
#define CSTRIP 256
static void reduce_cols_body(void *arg, size_t b, size_t e)
{
    const reduce_args_t *a = arg;
    double acc[CSTRIP];
    float t[CSTRIP];
    for (size_t s = b; s < e; s++) {
        size_t j0 = s * CSTRIP, n = a->cols - j0 < CSTRIP ? a->cols - j0 : CSTRIP;
        int minmax = a->op == KEEL_REDUCE_MAX || a->op == KEEL_REDUCE_MIN;
        for (size_t i = 0; i < a->rows; i++) {
            const void *row = elem(a->dt, a->x, i * a->ld + j0);
            const double *dr = NULL;
            const float *fr = t;
            if (a->dt == KEEL_F64)
                dr = row;
            else
                keel__load_f32(a->dt, row, n, t);
            if (i == 0 && minmax) {
                for (size_t j = 0; j < n; j++)
                    acc[j] = dr ? dr[j] : fr[j];
                continue;
            }
            if (i == 0)
                for (size_t j = 0; j < n; j++)
                    acc[j] = 0;
            switch (a->op) {
            case KEEL_REDUCE_SUM:
            case KEEL_REDUCE_MEAN:
                for (size_t j = 0; j < n; j++)
                    acc[j] += dr ? dr[j] : fr[j];
                break;
            case KEEL_REDUCE_NORM2:
                for (size_t j = 0; j < n; j++) {
                    double v = dr ? dr[j] : fr[j];
                    acc[j] += v * v;
                }
                break;
            case KEEL_REDUCE_MAX:
                for (size_t j = 0; j < n; j++) {
                    double v = dr ? dr[j] : fr[j];
                    acc[j] = acc[j] != acc[j] ? acc[j] : (v > acc[j] || v != v) ? v : acc[j];
                }
                break;
            case KEEL_REDUCE_MIN:
                for (size_t j = 0; j < n; j++) {
                    double v = dr ? dr[j] : fr[j];
                    acc[j] = acc[j] != acc[j] ? acc[j] : (v < acc[j] || v != v) ? v : acc[j];
                }
                break;
            }
        }
        for (size_t j = 0; j < n; j++) {
            racc_t r = {acc[j], a->rows};
            store_one(a->dt, a->out, j0 + j, racc_final(a->op, &r));
        }
    }
}

static void reduce_run(void *payload)
{
    reduce_args_t *a = payload;
    if (a->axis == KEEL_AXIS_ALL) {
        racc_t part[RBLOCKS];
        a->part = part;
        keel__cpu_parallel_for(a->nblk, 1, reduce_all_body, a);
        racc_t acc = {0, 0};
        for (size_t b = 0; b < a->nblk; b++)
            racc_merge(a->op, &acc, &part[b]);
        store_one(a->dt, a->out, 0, racc_final(a->op, &acc));
    } else if (a->axis == KEEL_AXIS_ROWS) {
        keel__cpu_parallel_for(a->rows, rows_grain(a->cols), reduce_rows_body, a);
    } else {
        size_t strips = (a->cols + CSTRIP - 1) / CSTRIP;
        keel__cpu_parallel_for(strips, rows_grain(a->rows * CSTRIP), reduce_cols_body, a);
    }
}

static keel_status_t cpu_reduce(void *s, keel_reduce_op_t op, keel_dtype_t dt, size_t rows, size_t cols,
                                const void *x, size_t ld, keel_reduce_axis_t axis, void *out)
{
    reduce_args_t a = {op, dt, axis, rows, cols, ld, x, out, 0, 0, NULL};
    if (axis == KEEL_AXIS_ALL) {
        size_t total = rows * cols;
        if (ld == cols || rows == 1) {
            a.cols = total;
            a.rows = 1;
            a.ld = total;
        }
        /* Blocks of at least GRAIN elements, at most RBLOCKS of them; the
         * block count does not depend on the thread count, so neither does
         * the summation order. */
        size_t nblk = (total + GRAIN - 1) / GRAIN;
        if (nblk > RBLOCKS)
            nblk = RBLOCKS;
        if (nblk == 0)
            nblk = 1;
        a.blk = (total + nblk - 1) / nblk;
        a.nblk = (total + a.blk - 1) / a.blk;
    }
    return ENQUEUE(s, reduce_run, a, rows * cols);
}

/* ======================================================================== */
/* argmax                                                                    */
/* ======================================================================== */

typedef struct {
    keel_dtype_t dt;
    size_t rows, cols, ld;
    const void *x;
    int64_t *out;
} argmax_args_t;

#define DEFINE_ARGMAX(T)                                        \
    static size_t argmax_##T(const T *x, size_t n, size_t base, \
                             T *best, size_t *bi)               \
    {                                                           \
        T m = *best;                                            \
        size_t k = *bi;                                         \
        for (size_t j = 0; j < n; j++) {                        \
            if (m != m)                                         \
                break;                                          \
            if (x[j] > m || x[j] != x[j]) {                     \
                m = x[j];                                       \
                k = base + j;                                   \
            }                                                   \
        }                                                       \
        *best = m;                                              \
        *bi = k;                                                \
        return k;                                               \
    }
DEFINE_ARGMAX(float)
DEFINE_ARGMAX(double)

static void argmax_body(void *arg, size_t b, size_t e)
{
    const argmax_args_t *a = arg;
    for (size_t i = b; i < e; i++) {
        size_t k = 0;
        if (a->dt == KEEL_F64) {
            const double *row = (const double *)a->x + i * a->ld;
            double m = row[0];
            argmax_double(row, a->cols, 0, &m, &k);
        } else if (a->dt == KEEL_F32) {
            const float *row = (const float *)a->x + i * a->ld;
            float m = row[0];
            argmax_float(row, a->cols, 0, &m, &k);
        } else {
            const uint16_t *row = (const uint16_t *)a->x + i * a->ld;
            float t[TILE], m;
            keel__load_f32(a->dt, row, 1, &m);
            for (size_t off = 0; off < a->cols && m == m; off += TILE) {
                size_t c = a->cols - off < TILE ? a->cols - off : TILE;
                keel__load_f32(a->dt, row + off, c, t);
                argmax_float(t, c, off, &m, &k);
            }
        }
        a->out[i] = (int64_t)k;
    }
}

static void argmax_run(void *payload)
{
    argmax_args_t *a = payload;
    keel__cpu_parallel_for(a->rows, rows_grain(a->cols), argmax_body, a);
}

static keel_status_t cpu_argmax_rows(void *s, keel_dtype_t dt, size_t rows, size_t cols, const void *x, size_t ld,
                                     int64_t *out)
{
    argmax_args_t a = {dt, rows, cols, ld, x, out};
    return ENQUEUE(s, argmax_run, a, rows * cols);
}

/* ======================================================================== */
/* softmax and layer norm                                                    */
/* ======================================================================== */

typedef struct {
    keel_dtype_t dt;
    size_t rows, cols, ldx, ldy;
    const void *x;
    void *y;
    int log;
    const void *gamma, *beta;
    double eps;
} rowop_args_t;

/* The 16-bit forms walk the row in f32 tiles, three times, without a buffer
 * the size of the row. */
static void softmax_half(keel_dtype_t dt, const uint16_t *x, uint16_t *y, size_t n, int lg)
{
    float t[TILE];
    racc_t mx = {0, 0}, sum = {0, 0};
    for (size_t off = 0; off < n; off += TILE) {
        size_t c = n - off < TILE ? n - off : TILE;
        keel__load_f32(dt, x + off, c, t);
        rseg_float(KEEL_REDUCE_MAX, t, c, &mx);
    }
    const float m = (float)mx.s;
    for (size_t off = 0; off < n; off += TILE) {
        size_t c = n - off < TILE ? n - off : TILE;
        keel__load_f32(dt, x + off, c, t);
        for (size_t j = 0; j < c; j++)
            t[j] = keel__expf(t[j] - m);
        rseg_float(KEEL_REDUCE_SUM, t, c, &sum);
    }
    const float l = (float)log(sum.s) + m, r = (float)(1.0 / sum.s);
    for (size_t off = 0; off < n; off += TILE) {
        size_t c = n - off < TILE ? n - off : TILE;
        keel__load_f32(dt, x + off, c, t);
        if (lg)
            for (size_t j = 0; j < c; j++)
                t[j] = t[j] - l;
        else
            for (size_t j = 0; j < c; j++)
                t[j] = keel__expf(t[j] - m) * r;
        keel__store_f32(dt, y + off, c, t);
    }
}

static void softmax_body(void *arg, size_t b, size_t e)
{
    const rowop_args_t *a = arg;
    if (a->dt == KEEL_F32)
        keel__cpu_softmax_rows_f32((const float *)a->x + b * a->ldx, a->ldx, (float *)a->y + b * a->ldy, a->ldy, e - b,
                                   a->cols, a->log);
    else if (a->dt == KEEL_F64)
        keel__cpu_softmax_rows_f64((const double *)a->x + b * a->ldx, a->ldx, (double *)a->y + b * a->ldy, a->ldy,
                                   e - b, a->cols, a->log);
    else
        for (size_t i = b; i < e; i++)
            softmax_half(a->dt, (const uint16_t *)a->x + i * a->ldx, (uint16_t *)a->y + i * a->ldy, a->cols,
                         a->log);
}

static void softmax_run(void *payload)
{
    rowop_args_t *a = payload;
    keel__cpu_parallel_for(a->rows, rows_grain(a->cols * 4), softmax_body, a);
}

static keel_status_t cpu_softmax_rows(void *s, keel_dtype_t dt, size_t rows, size_t cols, const void *x, size_t ldx,
                                      void *y, size_t ldy, int lg)
{
    rowop_args_t a = {dt, rows, cols, ldx, ldy, x, y, lg, NULL, NULL, 0};
    return ENQUEUE(s, softmax_run, a, rows * cols);
}

/* Layer norm of a 16-bit row, in f32 tiles, as the f32 and f64 rows
 * (kernels/cpu/ops_cpu_rows.c): mean, variance around it, write. */
static void layernorm_half(keel_dtype_t dt, const uint16_t *x, uint16_t *y, size_t n, const uint16_t *g,
                           const uint16_t *bt, double eps)
{
    float t[TILE], tg[TILE], tb[TILE];
    double s = 0;
    for (size_t off = 0; off < n; off += TILE) {
        size_t c = n - off < TILE ? n - off : TILE;
        keel__load_f32(dt, x + off, c, t);
        for (size_t j = 0; j < c; j++)
            s += t[j];
    }
    double mean = s / (double)n, v = 0;
    for (size_t off = 0; off < n; off += TILE) {
        size_t c = n - off < TILE ? n - off : TILE;
        keel__load_f32(dt, x + off, c, t);
        for (size_t j = 0; j < c; j++) {
            double d = t[j] - mean;
            v += d * d;
        }
    }
    float rstd = (float)(1.0 / sqrt(v / (double)n + eps)), mu = (float)mean;
    for (size_t off = 0; off < n; off += TILE) {
        size_t c = n - off < TILE ? n - off : TILE;
        keel__load_f32(dt, x + off, c, t);
        if (g)
            keel__load_f32(dt, g + off, c, tg);
        if (bt)
            keel__load_f32(dt, bt + off, c, tb);
        for (size_t j = 0; j < c; j++) {
            float o = (t[j] - mu) * rstd;
            if (g)
                o *= tg[j];
            if (bt)
                o += tb[j];
            t[j] = o;
        }
        keel__store_f32(dt, y + off, c, t);
    }
}

static void layernorm_body(void *arg, size_t b, size_t e)
{
    const rowop_args_t *a = arg;
    if (a->dt == KEEL_F32)
        keel__cpu_layernorm_rows_f32((const float *)a->x + b * a->ldx, a->ldx, (float *)a->y + b * a->ldy, a->ldy,
                                     e - b, a->cols, a->gamma, a->beta, a->eps);
    else if (a->dt == KEEL_F64)
        keel__cpu_layernorm_rows_f64((const double *)a->x + b * a->ldx, a->ldx, (double *)a->y + b * a->ldy, a->ldy,
                                     e - b, a->cols, a->gamma, a->beta, a->eps);
    else
        for (size_t i = b; i < e; i++)
            layernorm_half(a->dt, (const uint16_t *)a->x + i * a->ldx, (uint16_t *)a->y + i * a->ldy, a->cols,
                           a->gamma, a->beta, a->eps);
}

static void layernorm_run(void *payload)
{
    rowop_args_t *a = payload;
    keel__cpu_parallel_for(a->rows, rows_grain(a->cols * 3), layernorm_body, a);
}

static keel_status_t cpu_layernorm_rows(void *s, keel_dtype_t dt, size_t rows, size_t cols, const void *x,
                                        size_t ldx, const void *gamma, const void *beta, double eps, void *y,
                                        size_t ldy)
{
    rowop_args_t a = {dt, rows, cols, ldx, ldy, x, y, 0, gamma, beta, eps};
    return ENQUEUE(s, layernorm_run, a, rows * cols);
}

/* ======================================================================== */

/* GEMM, GEMV and the dense layer run on OpenBLAS where Keel was built with
 * it; without it the table has no entries for them, and the core runs
 * Keel's portable kernels (runtime/ops_fallback.c). */
static int cpu_blas(void *device_ctx, char *text, size_t size)
{
    (void)device_ctx;
#ifdef HAVE_OPENBLAS
    keel__cpu_blas_name(text, size);
    return 1;
#else
    snprintf(text, size, "Keel was built without OpenBLAS");
    return 0;
#endif
}

static const keel_ops_vtable_t cpu_ops = {
    .abi_version = KEEL_OPS_ABI_VERSION,
    .struct_size = sizeof(keel_ops_vtable_t),
    .fill = cpu_fill,
    .cast = cpu_cast,
    .copy_2d = cpu_copy_2d,
    .transpose = cpu_transpose,
    .unary = cpu_unary,
    .binary = cpu_binary,
    .reduce = cpu_reduce,
    .argmax_rows = cpu_argmax_rows,
    .softmax_rows = cpu_softmax_rows,
    .layernorm_rows = cpu_layernorm_rows,
#ifdef HAVE_OPENBLAS
    .gemm = keel__cpu_gemm,
    .gemv = keel__cpu_gemv,
    .dense = keel__cpu_dense,
#endif
    .blas = cpu_blas,
};

KEEL_CPU_HIDDEN const void *keel__cpu_ops_table(void);
const void *keel__cpu_ops_table(void)
{
    return &cpu_ops;
}
