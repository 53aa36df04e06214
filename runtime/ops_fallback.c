/* SPDX-License-Identifier: MIT */
/* Keel's own GEMM, GEMV and dense layer (ops_fallback.h). runtime/ops.c
 * checks a call and asks keel__blas_pick which implementation takes it:
 * the backend's entry, or the kernels of kernels/portable/blas.kc, which
 * libkeel carries as text and builds with keel_module_build for the
 * stream's device at the first call of each pair of dtypes (an f32 GEMM,
 * an f16 one with f32 output, ...): the C compiler on the CPU, NVRTC or
 * hipRTC on a GPU, cached on disk as every portable kernel is. The modules
 * and the choice are kept per device until keel_finalize.
 *
 * The choice is made once per device: KEEL_BLAS, then the backend's blas
 * entry (is its vendor library usable here?), then whether it has the
 * entries at all. A call the backend refuses as not supported runs here
 * too, unless KEEL_BLAS=vendor. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "backends/cpu/cpu_check.h"
#include "runtime/ops_fallback.h"

static atomic_int blas_mode;

keel_status_t keel__env_blas(const char *value, int *mode)
{
    static const char *const words[] = {"auto", "fallback", "vendor"};
    for (int i = 0; i < 3; i++)
        if (strcasecmp(value, words[i]) == 0) {
            *mode = i;
            return KEEL_OK;
        }
    return keel__set_error(KEEL_ERROR_INVALID_ENVIRONMENT,
                           "KEEL_BLAS=\"%s\" is not a choice of BLAS; expected auto (the vendor library where it is "
                           "usable), fallback (Keel's portable kernels) or vendor (only the vendor library)",
                           value);
}

void keel__blas_set_mode(int mode)
{
    atomic_store(&blas_mode, mode);
}

/* ---- the kernels of one pair of dtypes ---- */

enum { NVARIANTS = 6 };

static const struct {
    const char *name;
    const char *opts[2];   /* the -D options kernels/portable/blas.kc reads */
} variants[NVARIANTS] = {
    {"f32", {"-DKB_AT=1", "-DKB_CT=1"}},          {"f64", {"-DKB_AT=2", "-DKB_CT=2"}},
    {"f16", {"-DKB_AT=3", "-DKB_CT=3"}},          {"bf16", {"-DKB_AT=4", "-DKB_CT=4"}},
    {"f16 -> f32", {"-DKB_AT=3", "-DKB_CT=1"}},   {"bf16 -> f32", {"-DKB_AT=4", "-DKB_CT=1"}},
};

/* The variant of inputs @p at and output @p ct (a pair keel_gemm accepts). */
static int variant_of(keel_dtype_t at, keel_dtype_t ct)
{
    switch (at) {
    case KEEL_F64: return 1;
    case KEEL_F16: return ct == KEEL_F32 ? 4 : 2;
    case KEEL_BF16: return ct == KEEL_F32 ? 5 : 3;
    default: return 0;
    }
}

typedef struct blas_kernels {
    atomic_int ready;           /* the fields below are set */
    keel_module_t *module;
    keel_kernel_t *gemm, *gemv_n, *gemv_t;
} blas_kernels_t;

struct keel__blas {
    pthread_mutex_t lock;       /* the choice, and each build */
    atomic_int kind;            /* keel_blas_kind_t + 1 once chosen, 0 before */
    char text[768];             /* what runs; written before kind */
    blas_kernels_t v[NVARIANTS];
};

/* The device's state, made at its first use; NULL when out of memory. */
static struct keel__blas *state_of(struct keel_device *d)
{
    struct keel__blas *b = atomic_load_explicit(&d->blas, memory_order_acquire);
    if (b)
        return b;
    struct keel__blas *fresh = keel__calloc(1, sizeof *fresh);
    if (!fresh)
        return NULL;
    pthread_mutex_init(&fresh->lock, NULL);
    if (atomic_compare_exchange_strong(&d->blas, &b, fresh))
        return fresh;
    pthread_mutex_destroy(&fresh->lock);
    free(fresh);
    return b;
}

static const keel_ops_vtable_t *ops_of(const struct keel_device *d)
{
    const keel_ops_vtable_t *t = d->plugin->ops;
    return t && t->abi_version == KEEL_OPS_ABI_VERSION ? t : NULL;
}

#define OPS_HAS(t, field) \
    ((t) && (t)->struct_size >= offsetof(keel_ops_vtable_t, field) + sizeof((t)->field) && (t)->field)

/* Makes the choice for @p d (an opened device); b->lock held. */
static void choose(struct keel__blas *b, struct keel_device *d)
{
    const keel_ops_vtable_t *ops = ops_of(d);
    int mode = atomic_load(&blas_mode);
    const char *backend = d->backend->name;
    keel_blas_kind_t kind;
    char why[640] = "";
    int has = OPS_HAS(ops, gemm) || OPS_HAS(ops, gemv) || OPS_HAS(ops, dense);
    int usable = has;
    if (OPS_HAS(ops, blas)) {
        usable = ops->blas(d->ctx, why, sizeof why) != 0;
        why[sizeof why - 1] = '\0';
        if (usable && !has) {
            usable = 0;
            snprintf(why, sizeof why, "the %s backend has no GEMM, GEMV or dense entries", backend);
        }
    } else if (has) {
        snprintf(why, sizeof why, "the %s backend's own", backend);
    } else {
        snprintf(why, sizeof why, "the %s backend has no BLAS", backend);
    }
    if (mode == KEEL__BLAS_FALLBACK) {
        kind = KEEL_BLAS_PORTABLE;
        snprintf(b->text, sizeof b->text, "Keel's portable kernels (KEEL_BLAS=fallback)");
    } else if (usable) {
        kind = KEEL_BLAS_VENDOR;
        snprintf(b->text, sizeof b->text, "%s", why);
    } else if (mode == KEEL__BLAS_VENDOR) {
        kind = KEEL_BLAS_NONE;
        snprintf(b->text, sizeof b->text, "none: %s, and KEEL_BLAS=vendor rules out Keel's portable kernels", why);
    } else {
        kind = KEEL_BLAS_PORTABLE;
        snprintf(b->text, sizeof b->text, "Keel's portable kernels (%s)", why);
    }
    atomic_store_explicit(&b->kind, (int)kind + 1, memory_order_release);
    keel__log(KEEL_LOG_INFO, "%s: keel_gemm, keel_gemv and keel_dense run on %s", d->name, b->text);
}

/* The device's choice (made on first use), or -1 when out of memory. */
static int kind_of(struct keel_device *d, struct keel__blas **out)
{
    struct keel__blas *b = state_of(d);
    if (!b)
        return -1;
    int k = atomic_load_explicit(&b->kind, memory_order_acquire);
    if (KEEL__UNLIKELY(k == 0)) {
        pthread_mutex_lock(&b->lock);
        if (atomic_load_explicit(&b->kind, memory_order_relaxed) == 0)
            choose(b, d);
        pthread_mutex_unlock(&b->lock);
        k = atomic_load_explicit(&b->kind, memory_order_acquire);
    }
    *out = b;
    return k - 1;
}

int keel__blas_pick(struct keel_stream *stream, int has_entry, const char *fn)
{
    struct keel__blas *b;
    switch (kind_of(stream->device, &b)) {
    case KEEL_BLAS_PORTABLE: return 1;
    case KEEL_BLAS_VENDOR:
        if (has_entry)
            return 0;
        if (atomic_load(&blas_mode) != KEEL__BLAS_VENDOR)
            return 1;   /* a backend with some of the entries only */
        keel__set_error(KEEL_ERROR_NOT_SUPPORTED,
                        "%s: the %s backend does not implement it, and KEEL_BLAS=vendor rules out Keel's portable "
                        "kernels",
                        fn, stream->device->backend->name);
        return -1;
    case KEEL_BLAS_NONE:
        keel__set_error(KEEL_ERROR_NOT_SUPPORTED, "%s: not supported on %s: its BLAS is %s", fn,
                        stream->device->name, b->text);
        return -1;
    default:
        keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
        return -1;
    }
}

int keel__blas_retry(struct keel_stream *stream, const char *fn)
{
    if (atomic_load(&blas_mode) == KEEL__BLAS_VENDOR)
        return 0;
    if (keel__log_enabled(KEEL_LOG_DEBUG))
        keel__log(KEEL_LOG_DEBUG, "%s: the %s backend does not support this call (%s); Keel's portable kernels run it",
                  fn, stream->device->backend->name, keel_last_error());
    return 1;
}

keel_status_t keel_device_get_blas_info(keel_device_t *device, keel_blas_kind_t *kind, char *text, size_t size)
{
    static const char fn[] = "keel_device_get_blas_info";
    keel_status_t st = keel__device_ready(device, fn);
    if (st != KEEL_OK)
        return st;
    if (size > 0 && !text)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: text is NULL but size is %zu", fn, size);
    struct keel__blas *b;
    int k = kind_of(device, &b);
    if (k < 0)
        return keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    if (kind)
        *kind = (keel_blas_kind_t)k;
    if (size > 0)
        snprintf(text, size, "%s", b->text);
    return KEEL_OK;
}

/* The kernels of variant @p v on the stream's device, built on first use. */
static keel_status_t kernels_of(struct keel_stream *s, int v, const char *fn, const blas_kernels_t **out)
{
    struct keel_device *d = s->device;
    struct keel__blas *b = state_of(d);
    if (!b)
        return keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    blas_kernels_t *k = &b->v[v];
    if (atomic_load_explicit(&k->ready, memory_order_acquire)) {
        *out = k;
        return KEEL_OK;
    }
    keel_status_t st = KEEL_OK;
    pthread_mutex_lock(&b->lock);
    if (!atomic_load_explicit(&k->ready, memory_order_relaxed)) {
        keel__log(KEEL_LOG_DEBUG, "%s: building Keel's portable BLAS kernels (%s) for %s", fn, variants[v].name,
                  d->name);
        keel_module_t *m = NULL;
        st = keel_module_build(d, keel__blas_kc_text, "kernels/portable/blas.kc", variants[v].opts, 2, &m);
        if (st == KEEL_OK && (st = keel_module_get_kernel(m, "keel_blas_gemm", &k->gemm)) == KEEL_OK &&
            (st = keel_module_get_kernel(m, "keel_blas_gemv_n", &k->gemv_n)) == KEEL_OK &&
            (st = keel_module_get_kernel(m, "keel_blas_gemv_t", &k->gemv_t)) == KEEL_OK) {
            k->module = m;
            atomic_store_explicit(&k->ready, 1, memory_order_release);
        } else {
            if (m) {
                char detail[1024];
                keel_status_t why = keel_last_status();
                snprintf(detail, sizeof detail, "%s", keel_last_error());
                (void)keel_module_unload(m);
                keel__restore_error(why, detail);
            }
            st = keel__prefix_error(st, "%s: Keel's portable BLAS kernels (%s) could not be built for %s", fn,
                                    variants[v].name, d->name);
        }
    }
    pthread_mutex_unlock(&b->lock);
    if (st == KEEL_OK)
        *out = k;
    return st;
}

/* ---- launches ---- */

static keel_status_t too_large(const char *fn, const char *what, size_t v)
{
    return keel__set_error(KEEL_ERROR_NOT_SUPPORTED,
                           "%s: %s %zu is past what Keel's portable BLAS kernels take (sizes up to 2^31-1, leading "
                           "dimensions, increments and strides up to 2^63-1)",
                           fn, what, v);
}

/* Whether every run of four elements Keel's GEMM loads from x starts at an
 * address it may read as one vector: 16 bytes for f32, 8 for 16-bit types
 * (the run's offset is a multiple of 4 when ld and the batch's stride are). */
static int vec_ok(const void *x, keel_dtype_t t, size_t ld, size_t stride, size_t batch)
{
    size_t align = t == KEEL_F32 ? 16 : t == KEEL_F16 || t == KEEL_BF16 ? 8 : 0;
    return x && align && (uintptr_t)x % align == 0 && ld % 4 == 0 && (batch <= 1 || stride % 4 == 0);
}

static keel_status_t launch(struct keel_stream *s, keel_kernel_t *k, keel_dim3_t grid, keel_dim3_t block,
                            void **args, const char *fn)
{
    const struct keel_device *d = s->device;
    if (grid.x > d->max_grid[0] || grid.y > d->max_grid[1])
        return keel__set_error(KEEL_ERROR_NOT_SUPPORTED,
                               "%s: %u x %u blocks of Keel's portable BLAS kernels are past %s's grid of %u x %u", fn,
                               grid.x, grid.y, d->name, d->max_grid[0], d->max_grid[1]);
    keel_status_t st = d->plugin->kernel->launch(k->ctx, grid, block, 0, s->ctx, args);
    return st == KEEL_OK ? KEEL_OK : keel__prefix_error(st, "%s", fn);
}

typedef struct gemm_call {
    int v;                      /* variant */
    size_t m, n, k;
    const void *a, *b;
    void *c;
    size_t lda, ldb, ldc, sa, sb, sc, batch;
    int a_mn, b_mn;             /* contiguous along m (A), along n (B) */
    keel_dtype_t at, ct;
    double alpha, beta;
    const void *bias;
    int bias_mode, act;
} gemm_call_t;

static keel_status_t run_gemm(struct keel_stream *s, const gemm_call_t *g, const char *fn)
{
    if (g->m > INT_MAX)
        return too_large(fn, "m", g->m);
    if (g->n > INT_MAX)
        return too_large(fn, "n", g->n);
    if (g->k > INT_MAX)
        return too_large(fn, "k", g->k);
    const size_t lmax = (size_t)LLONG_MAX;
    if (g->lda > lmax || g->ldb > lmax || g->ldc > lmax || g->sa > lmax || g->sb > lmax || g->sc > lmax)
        return too_large(fn, "a leading dimension or stride", g->lda > lmax ? g->lda : g->ldb > lmax ? g->ldb : g->ldc);
    size_t tiles_m = (g->m + 127) / 128, tiles_n = (g->n + 127) / 128;
    if (tiles_m * tiles_n > (size_t)INT_MAX)
        return too_large(fn, "m x n", g->m * g->n);
    const blas_kernels_t *kern;
    keel_status_t st = kernels_of(s, g->v, fn, &kern);
    if (st != KEEL_OK)
        return st;
    int m = (int)g->m, n = (int)g->n, k = (int)g->k, tm = (int)tiles_m, tn = (int)tiles_n;
    long long lda = (long long)g->lda, ldb = (long long)g->ldb, ldc = (long long)g->ldc;
    long long sa = (long long)g->sa, sb = (long long)g->sb, sc = (long long)g->sc;
    int vec_a = vec_ok(g->a, g->at, g->lda, g->sa, g->batch), vec_b = vec_ok(g->b, g->at, g->ldb, g->sb, g->batch);
    int a_mn = g->a_mn, b_mn = g->b_mn, bias_mode = g->bias_mode, act = g->act;
    double alpha = g->alpha, beta = g->beta;
    size_t ies = keel_dtype_size(g->at), oes = keel_dtype_size(g->ct);
    size_t chunk_max = s->device->max_grid[1] < 65535 ? s->device->max_grid[1] : 65535;
    keel_dim3_t block = {256, 1, 1};
    for (size_t b0 = 0; b0 < g->batch; b0 += chunk_max) {
        size_t chunk = g->batch - b0 < chunk_max ? g->batch - b0 : chunk_max;
        /* A and B may be NULL when k is 0 (they are not read) */
        const void *a = g->a ? (const char *)g->a + b0 * g->sa * ies : NULL;
        const void *b = g->b ? (const char *)g->b + b0 * g->sb * ies : NULL;
        void *c = (char *)g->c + b0 * g->sc * oes;
        const void *bias = g->bias;
        void *args[] = {&m,   &n,  &k,  &a,  &lda,   &sa,   &a_mn, &vec_a, &b,    &ldb,      &sb,  &b_mn,
                        &vec_b, &c, &ldc, &sc, &alpha, &beta, &tm,   &tn,    &bias, &bias_mode, &act};
        keel_dim3_t grid = {(unsigned)(tiles_m * tiles_n), (unsigned)chunk, 1};
        if ((st = launch(s, kern->gemm, grid, block, args, fn)) != KEEL_OK)
            return st;
    }
    return KEEL_OK;
}

/* The CPU backend's checking mode sees the operands the core noted as this
 * call's, as it does for a backend's own entry. */
static keel_status_t checked(struct keel_stream *s, keel_status_t (*run)(struct keel_stream *, const void *, const char *),
                             const void *arg, const char *fn)
{
    if (KEEL__UNLIKELY(keel__cpu_check)) {
        keel_status_t st = keel__cpu_check_op_begin(s);
        if (st != KEEL_OK)
            return st;
        st = run(s, arg, fn);
        keel__cpu_check_op_end();
        return st;
    }
    return run(s, arg, fn);
}

static keel_status_t gemm_run(struct keel_stream *s, const void *arg, const char *fn)
{
    return run_gemm(s, arg, fn);
}

keel_status_t keel__portable_gemm(struct keel_stream *s, const keel_gemm_params_t *p, const char *fn)
{
    gemm_call_t g = {
        .v = variant_of(p->a_type, p->c_type), .m = p->m, .n = p->n, .k = p->k,
        .a = p->a, .b = p->b, .c = p->c, .lda = p->lda, .ldb = p->ldb, .ldc = p->ldc,
        .sa = p->stride_a, .sb = p->stride_b, .sc = p->stride_c, .batch = p->batch_count,
        .a_mn = p->transa == KEEL_NO_TRANS, .b_mn = p->transb == KEEL_TRANS,
        .at = p->a_type, .ct = p->c_type, .alpha = p->alpha, .beta = p->beta,
    };
    return checked(s, gemm_run, &g, fn);
}

keel_status_t keel__portable_dense(struct keel_stream *s, const keel_dense_params_t *p, const char *fn)
{
    int col = p->layout == KEEL_COL_MAJOR, tw = p->transw == KEEL_TRANS;
    /* Column-major Y (m x n) = op(W) X, the bias on Y's rows; row-major Y is
     * column-major Y^T (n x m) = X^T op(W)^T, the bias on its columns. */
    gemm_call_t g = {
        .v = variant_of(p->dtype, p->dtype), .m = col ? p->m : p->n, .n = col ? p->n : p->m, .k = p->k,
        .a = col ? p->w : p->x, .b = col ? p->x : p->w, .c = p->y,
        .lda = col ? p->ldw : p->ldx, .ldb = col ? p->ldx : p->ldw, .ldc = p->ldy, .batch = 1,
        .a_mn = col ? !tw : 1, .b_mn = col ? 0 : tw,
        .at = p->dtype, .ct = p->dtype, .alpha = 1.0, .beta = 0.0,
        .bias = p->bias, .bias_mode = p->bias ? (col ? 1 : 2) : 0, .act = (int)p->act,
    };
    return checked(s, gemm_run, &g, fn);
}

static keel_status_t gemv_run(struct keel_stream *s, const void *arg, const char *fn)
{
    const keel_gemv_args_t *g = arg;
    if (g->m > INT_MAX)
        return too_large(fn, "m", g->m);
    if (g->n > INT_MAX)
        return too_large(fn, "n", g->n);
    const size_t lmax = (size_t)LLONG_MAX;
    if (g->lda > lmax || g->incx > lmax || g->incy > lmax)
        return too_large(fn, "a leading dimension or increment", g->lda > lmax ? g->lda : g->incx > lmax ? g->incx : g->incy);
    const blas_kernels_t *kern;
    keel_status_t st = kernels_of(s, variant_of(g->dtype, g->dtype), fn, &kern);
    if (st != KEEL_OK)
        return st;
    int t = g->trans == KEEL_TRANS;
    int m = (int)g->m, n = (int)g->n;
    long long lda = (long long)g->lda, incx = (long long)g->incx, incy = (long long)g->incy;
    const void *a = g->a, *x = g->x;
    void *y = g->y;
    double alpha = g->alpha, beta = g->beta;
    void *args[] = {&m, &n, &a, &lda, &x, &incx, &y, &incy, &alpha, &beta};
    /* gemv_n: 32 rows of y a block; gemv_t: 8 */
    size_t blocks = t ? (g->n + 7) / 8 : (g->m + 31) / 32;
    keel_dim3_t grid = {(unsigned)blocks, 1, 1}, block = {32, 8, 1};
    return launch(s, t ? kern->gemv_t : kern->gemv_n, grid, block, args, fn);
}

keel_status_t keel__portable_gemv(struct keel_stream *s, const keel_gemv_args_t *g, const char *fn)
{
    return checked(s, gemv_run, g, fn);
}

void keel__blas_teardown(void)
{
    for (int i = 0; i < keel__backend_count(); i++) {
        struct keel_backend *b = keel__backend_at(i);
        if (!b || !b->devices)
            continue;
        for (int j = 0; j < b->device_count; j++) {
            struct keel__blas *st = atomic_exchange(&b->devices[j].blas, NULL);
            if (st) {
                pthread_mutex_destroy(&st->lock);
                free(st);
            }
        }
    }
    atomic_store(&blas_mode, KEEL__BLAS_AUTO);
}
