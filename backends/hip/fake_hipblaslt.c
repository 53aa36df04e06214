/* SPDX-License-Identifier: MIT */
/* A stand-in for libhipblaslt, for test-hipblaslt only: it exports the
 * functions keel-hip resolves, with the argument lists of hipblaslt.h
 * (as hip_hipblaslt.h declares them), checks each call's arguments the way
 * the documentation states them (a known enumerator, attribute sizes, a
 * leading dimension no smaller than the rows, shapes that agree, a 16-byte
 * aligned workspace as large as the algorithm needs, a bias pointer when
 * the epilogue adds one), records what it was given (fake_hipblaslt.h) and
 * answers what the test asks. Its matmul computes D on host memory for f32
 * data, by the documented semantics: column-major operands, op() per
 * TRANSA/TRANSB, D = alpha op(A) op(B) + beta C, the bias added along the
 * rows of D, then ReLU or the tanh GELU. Built with
 * -DFAKE_HIPBLASLT_NO_MATMUL it lacks hipblasLtMatmul. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fake_hipblaslt.h"

#define EXPORT __attribute__((visibility("default")))

enum { MAGIC_HANDLE = 0x4c54484e, MAGIC_DESC = 0x4c544445, MAGIC_LAYOUT = 0x4c544c41, MAGIC_PREF = 0x4c545052 };

typedef struct {
    int magic;
} handle_t;
struct keel__hlt_desc {
    int magic;
    fake_hlt_desc_t d;
};
struct keel__hlt_layout {
    int magic;
    fake_hlt_layout_t l;
};
struct keel__hlt_pref {
    int magic;
    int ws_set;
    uint64_t ws;
};

static fake_hlt_state_t state;

EXPORT fake_hlt_state_t *fake_hipblaslt_state(void);
EXPORT void fake_hipblaslt_reset(void);

fake_hlt_state_t *fake_hipblaslt_state(void)
{
    return &state;
}

void fake_hipblaslt_reset(void)
{
    memset(&state, 0, sizeof state);
    state.version = 800; /* 0.8.0, ROCm 6.2 */
    state.heuristic_count = 1;
}

/* Counts a call the real library would reject; keeps the first reason. */
static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad(const char *fmt, ...)
{
    if (state.bad++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(state.bad_why, sizeof state.bad_why, fmt, ap);
        va_end(ap);
    }
    return KEEL_HLT_STATUS_INVALID_VALUE;
}

static int known_type(int t)
{
    return t == KEEL_HLT_R_32F || t == KEEL_HLT_R_64F || t == KEEL_HLT_R_16F || t == KEEL_HLT_R_16BF;
}

static int known_op(int op)
{
    return op == 111 || op == 112 || op == 113;
}

static int known_epilogue(int e)
{
    return e == 1 || e == 2 || e == 4 || e == 6 || e == 32 || e == 36;
}

static int adds_bias(int e)
{
    return e == 4 || e == 6 || e == 36;
}

static int handle_ok(keel__hipblaslt_handle_t h)
{
    return h != NULL && ((handle_t *)h)->magic == MAGIC_HANDLE;
}

static int desc_ok(keel__hlt_desc_t d)
{
    return d != NULL && d->magic == MAGIC_DESC;
}

static int layout_ok(keel__hlt_layout_t l)
{
    return l != NULL && l->magic == MAGIC_LAYOUT;
}

EXPORT int hipblasLtCreate(keel__hipblaslt_handle_t *handle);
int hipblasLtCreate(keel__hipblaslt_handle_t *handle)
{
    if (handle == NULL)
        return bad("hipblasLtCreate: handle is NULL");
    handle_t *h = malloc(sizeof *h);
    if (h == NULL)
        return KEEL_HLT_STATUS_ALLOC_FAILED;
    h->magic = MAGIC_HANDLE;
    *handle = h;
    state.creates++;
    return KEEL_HLT_STATUS_SUCCESS;
}

EXPORT int hipblasLtDestroy(keel__hipblaslt_handle_t handle);
int hipblasLtDestroy(keel__hipblaslt_handle_t handle)
{
    if (!handle_ok(handle))
        return bad("hipblasLtDestroy: not a handle");
    ((handle_t *)handle)->magic = 0;
    free(handle);
    state.destroys++;
    return KEEL_HLT_STATUS_SUCCESS;
}

EXPORT int hipblasLtGetVersion(keel__hipblaslt_handle_t handle, int *version);
int hipblasLtGetVersion(keel__hipblaslt_handle_t handle, int *version)
{
    if (!handle_ok(handle) || version == NULL)
        return bad("hipblasLtGetVersion: handle or version pointer invalid");
    if (state.version_status != KEEL_HLT_STATUS_SUCCESS)
        return state.version_status;
    *version = state.version;
    return KEEL_HLT_STATUS_SUCCESS;
}

EXPORT int hipblasLtMatmulDescCreate(keel__hlt_desc_t *desc, int compute_type, int scale_type);
int hipblasLtMatmulDescCreate(keel__hlt_desc_t *desc, int compute_type, int scale_type)
{
    if (desc == NULL)
        return bad("hipblasLtMatmulDescCreate: desc is NULL");
    if (!(compute_type >= 0 && compute_type <= 10) && !(compute_type >= 100 && compute_type <= 103))
        return bad("hipblasLtMatmulDescCreate: compute type %d is no hipblasComputeType_t", compute_type);
    if (!known_type(scale_type))
        return bad("hipblasLtMatmulDescCreate: scale type %d is no real hipDataType", scale_type);
    struct keel__hlt_desc *d = malloc(sizeof *d);
    if (d == NULL)
        return KEEL_HLT_STATUS_ALLOC_FAILED;
    d->magic = MAGIC_DESC;
    d->d = (fake_hlt_desc_t){compute_type, scale_type, 111, 111, 1, -1, NULL};
    *desc = d;
    state.live_descs++;
    return KEEL_HLT_STATUS_SUCCESS;
}

EXPORT int hipblasLtMatmulDescDestroy(keel__hlt_desc_t desc);
int hipblasLtMatmulDescDestroy(keel__hlt_desc_t desc)
{
    if (!desc_ok(desc))
        return bad("hipblasLtMatmulDescDestroy: not a descriptor");
    desc->magic = 0;
    free(desc);
    state.live_descs--;
    return KEEL_HLT_STATUS_SUCCESS;
}

/* Sets the int32_t attribute @p name from @p buf of @p size bytes into
 * @p field, when @p known accepts its value. */
static int set_int(const char *name, int (*known)(int), int *field, const void *buf, size_t size)
{
    if (size != sizeof(int32_t))
        return bad("hipblasLtMatmulDescSetAttribute(%s): %zu bytes for an int32_t", name, size);
    int32_t v;
    memcpy(&v, buf, sizeof v);
    if (!known(v))
        return bad("hipblasLtMatmulDescSetAttribute(%s): %d is not a value it takes", name, (int)v);
    *field = v;
    return KEEL_HLT_STATUS_SUCCESS;
}

EXPORT int hipblasLtMatmulDescSetAttribute(keel__hlt_desc_t desc, int attr, const void *buf, size_t size);
int hipblasLtMatmulDescSetAttribute(keel__hlt_desc_t desc, int attr, const void *buf, size_t size)
{
    if (!desc_ok(desc) || buf == NULL)
        return bad("hipblasLtMatmulDescSetAttribute: descriptor or buffer invalid");
    switch (attr) {
    case 0: return set_int("TRANSA", known_op, &desc->d.transa, buf, size);
    case 1: return set_int("TRANSB", known_op, &desc->d.transb, buf, size);
    case 2: return set_int("EPILOGUE", known_epilogue, &desc->d.epilogue, buf, size);
    case 3:
        if (size != sizeof(void *))
            return bad("hipblasLtMatmulDescSetAttribute(BIAS_POINTER): %zu bytes for a pointer", size);
        memcpy(&desc->d.bias, buf, sizeof(void *));
        return KEEL_HLT_STATUS_SUCCESS;
    case 4: return set_int("BIAS_DATA_TYPE", known_type, &desc->d.bias_type, buf, size);
    default: return bad("hipblasLtMatmulDescSetAttribute: attribute %d is not one keel-hip sets", attr);
    }
}

EXPORT int hipblasLtMatrixLayoutCreate(keel__hlt_layout_t *layout, int type, uint64_t rows, uint64_t cols,
                                       int64_t ld);
int hipblasLtMatrixLayoutCreate(keel__hlt_layout_t *layout, int type, uint64_t rows, uint64_t cols, int64_t ld)
{
    if (layout == NULL)
        return bad("hipblasLtMatrixLayoutCreate: layout is NULL");
    if (!known_type(type))
        return bad("hipblasLtMatrixLayoutCreate: type %d is no real hipDataType", type);
    if (rows == 0 || cols == 0 || ld < 0 || (uint64_t)ld < rows)
        return bad("hipblasLtMatrixLayoutCreate: %llu x %llu with ld %lld", (unsigned long long)rows,
                   (unsigned long long)cols, (long long)ld);
    struct keel__hlt_layout *l = malloc(sizeof *l);
    if (l == NULL)
        return KEEL_HLT_STATUS_ALLOC_FAILED;
    l->magic = MAGIC_LAYOUT;
    l->l = (fake_hlt_layout_t){type, rows, cols, ld};
    *layout = l;
    state.live_layouts++;
    return KEEL_HLT_STATUS_SUCCESS;
}

EXPORT int hipblasLtMatrixLayoutDestroy(keel__hlt_layout_t layout);
int hipblasLtMatrixLayoutDestroy(keel__hlt_layout_t layout)
{
    if (!layout_ok(layout))
        return bad("hipblasLtMatrixLayoutDestroy: not a layout");
    layout->magic = 0;
    free(layout);
    state.live_layouts--;
    return KEEL_HLT_STATUS_SUCCESS;
}

EXPORT int hipblasLtMatmulPreferenceCreate(keel__hlt_pref_t *pref);
int hipblasLtMatmulPreferenceCreate(keel__hlt_pref_t *pref)
{
    if (pref == NULL)
        return bad("hipblasLtMatmulPreferenceCreate: pref is NULL");
    struct keel__hlt_pref *p = calloc(1, sizeof *p);
    if (p == NULL)
        return KEEL_HLT_STATUS_ALLOC_FAILED;
    p->magic = MAGIC_PREF;
    *pref = p;
    state.live_prefs++;
    return KEEL_HLT_STATUS_SUCCESS;
}

EXPORT int hipblasLtMatmulPreferenceDestroy(keel__hlt_pref_t pref);
int hipblasLtMatmulPreferenceDestroy(keel__hlt_pref_t pref)
{
    if (pref == NULL || pref->magic != MAGIC_PREF)
        return bad("hipblasLtMatmulPreferenceDestroy: not a preference");
    pref->magic = 0;
    free(pref);
    state.live_prefs--;
    return KEEL_HLT_STATUS_SUCCESS;
}

EXPORT int hipblasLtMatmulPreferenceSetAttribute(keel__hlt_pref_t pref, int attr, const void *buf, size_t size);
int hipblasLtMatmulPreferenceSetAttribute(keel__hlt_pref_t pref, int attr, const void *buf, size_t size)
{
    if (pref == NULL || pref->magic != MAGIC_PREF || buf == NULL)
        return bad("hipblasLtMatmulPreferenceSetAttribute: preference or buffer invalid");
    if (attr != 1 || size != sizeof(uint64_t))
        return bad("hipblasLtMatmulPreferenceSetAttribute: attribute %d with %zu bytes", attr, size);
    memcpy(&pref->ws, buf, sizeof pref->ws);
    pref->ws_set = 1;
    return KEEL_HLT_STATUS_SUCCESS;
}

/* op(L)'s rows and columns. */
static void op_shape(const fake_hlt_layout_t *l, int op, uint64_t *rows, uint64_t *cols)
{
    *rows = op == 111 ? l->rows : l->cols;
    *cols = op == 111 ? l->cols : l->rows;
}

/* Whether D = op(A) op(B) agrees in shape, and C with D. */
static int shapes_agree(const char *fn, const fake_hlt_desc_t *d, const fake_hlt_layout_t *a,
                        const fake_hlt_layout_t *b, const fake_hlt_layout_t *c, const fake_hlt_layout_t *dl)
{
    uint64_t ar, ac, br, bc;
    op_shape(a, d->transa, &ar, &ac);
    op_shape(b, d->transb, &br, &bc);
    if (ar != dl->rows || bc != dl->cols || ac != br) {
        bad("%s: op(A) %llu x %llu times op(B) %llu x %llu is not D %llu x %llu", fn, (unsigned long long)ar,
            (unsigned long long)ac, (unsigned long long)br, (unsigned long long)bc, (unsigned long long)dl->rows,
            (unsigned long long)dl->cols);
        return 0;
    }
    if (c->rows != dl->rows || c->cols != dl->cols || c->type != dl->type) {
        bad("%s: C and D differ", fn);
        return 0;
    }
    if (adds_bias(d->epilogue) && d->bias_type < 0) {
        bad("%s: epilogue %d adds a bias of no type", fn, d->epilogue);
        return 0;
    }
    return 1;
}

EXPORT int hipblasLtMatmulAlgoGetHeuristic(keel__hipblaslt_handle_t handle, keel__hlt_desc_t desc,
                                           keel__hlt_layout_t a, keel__hlt_layout_t b, keel__hlt_layout_t c,
                                           keel__hlt_layout_t d, keel__hlt_pref_t pref, int requested,
                                           keel__hlt_heuristic_t *results, int *returned);
int hipblasLtMatmulAlgoGetHeuristic(keel__hipblaslt_handle_t handle, keel__hlt_desc_t desc, keel__hlt_layout_t a,
                                    keel__hlt_layout_t b, keel__hlt_layout_t c, keel__hlt_layout_t d,
                                    keel__hlt_pref_t pref, int requested, keel__hlt_heuristic_t *results,
                                    int *returned)
{
    static const char fn[] = "hipblasLtMatmulAlgoGetHeuristic";
    if (!handle_ok(handle) || !desc_ok(desc) || !layout_ok(a) || !layout_ok(b) || !layout_ok(c) || !layout_ok(d) ||
        pref == NULL || pref->magic != MAGIC_PREF || results == NULL || returned == NULL)
        return bad("%s: an invalid handle, descriptor, layout, preference or result pointer", fn);
    if (requested < 1)
        return bad("%s: requestedAlgoCount %d", fn, requested);
    if (!pref->ws_set)
        return bad("%s: the preference allows no workspace", fn);
    if (!shapes_agree(fn, &desc->d, &a->l, &b->l, &c->l, &d->l))
        return KEEL_HLT_STATUS_INVALID_VALUE;
    state.heuristics++;
    state.requested = requested;
    state.pref_ws = pref->ws;
    state.hdesc = desc->d;
    state.ha = a->l, state.hb = b->l, state.hc = c->l, state.hd = d->l;
    if (state.heuristic_status != KEEL_HLT_STATUS_SUCCESS)
        return state.heuristic_status;
    int n = state.heuristic_count < requested ? state.heuristic_count : requested;
    for (int i = 0; i < n; i++) {
        memset(&results[i], 0, sizeof results[i]);
        memset(results[i].algo.data, FAKE_HLT_ALGO_TAG, sizeof results[i].algo.data);
        results[i].algo.data[0] = (uint8_t)i;
        results[i].algo.max_workspace_bytes = state.heuristic_ws;
        results[i].workspace_size = state.heuristic_ws;
        results[i].state = state.heuristic_state;
        results[i].waves_count = 1.0f;
    }
    *returned = n;
    return KEEL_HLT_STATUS_SUCCESS;
}

#ifndef FAKE_HIPBLASLT_NO_MATMUL
/* D = epilogue(alpha op(A) op(B) + beta C) on f32 host data. */
static void compute(const fake_hlt_desc_t *ds, float alpha, const float *a, const fake_hlt_layout_t *la,
                    const float *b, const fake_hlt_layout_t *lb, float beta, const float *c,
                    const fake_hlt_layout_t *lc, float *d, const fake_hlt_layout_t *ld)
{
    uint64_t ar, ac;
    op_shape(la, ds->transa, &ar, &ac);
    for (uint64_t j = 0; j < ld->cols; j++)
        for (uint64_t i = 0; i < ld->rows; i++) {
            double acc = 0;
            for (uint64_t l = 0; l < ac; l++) {
                double x = ds->transa == 111 ? a[i + l * la->ld] : a[l + i * la->ld];
                double y = ds->transb == 111 ? b[l + j * lb->ld] : b[j + l * lb->ld];
                acc += x * y;
            }
            float v = alpha * (float)acc;
            if (beta != 0.0f) /* with beta 0, C is not read */
                v += beta * c[i + j * lc->ld];
            if (adds_bias(ds->epilogue))
                v += ((const float *)ds->bias)[i];
            if (ds->epilogue == 2 || ds->epilogue == 6)
                v = v > 0 ? v : 0;
            else if (ds->epilogue == 32 || ds->epilogue == 36)
                v = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
            d[i + j * ld->ld] = v;
        }
}

EXPORT int hipblasLtMatmul(keel__hipblaslt_handle_t handle, keel__hlt_desc_t desc, const void *alpha, const void *a,
                           keel__hlt_layout_t la, const void *b, keel__hlt_layout_t lb, const void *beta,
                           const void *c, keel__hlt_layout_t lc, void *d, keel__hlt_layout_t ld,
                           const keel__hlt_algo_t *algo, void *workspace, size_t workspace_bytes, void *stream);
int hipblasLtMatmul(keel__hipblaslt_handle_t handle, keel__hlt_desc_t desc, const void *alpha, const void *a,
                    keel__hlt_layout_t la, const void *b, keel__hlt_layout_t lb, const void *beta, const void *c,
                    keel__hlt_layout_t lc, void *d, keel__hlt_layout_t ld, const keel__hlt_algo_t *algo,
                    void *workspace, size_t workspace_bytes, void *stream)
{
    static const char fn[] = "hipblasLtMatmul";
    if (!handle_ok(handle) || !desc_ok(desc) || !layout_ok(la) || !layout_ok(lb) || !layout_ok(lc) ||
        !layout_ok(ld))
        return bad("%s: an invalid handle, descriptor or layout", fn);
    if (alpha == NULL || beta == NULL || a == NULL || b == NULL || c == NULL || d == NULL)
        return bad("%s: a NULL scalar or matrix", fn);
    if (algo == NULL || algo->data[1] != FAKE_HLT_ALGO_TAG)
        return bad("%s: not an algorithm the heuristic returned", fn);
    if (workspace_bytes < algo->max_workspace_bytes || (workspace_bytes > 0 && workspace == NULL) ||
        ((uintptr_t)workspace & 15u) != 0)
        return bad("%s: workspace %p of %zu bytes for an algorithm needing %zu", fn, workspace, workspace_bytes,
                   algo->max_workspace_bytes);
    if (adds_bias(desc->d.epilogue) && desc->d.bias == NULL)
        return bad("%s: epilogue %d and no bias pointer", fn, desc->d.epilogue);
    if (!shapes_agree(fn, &desc->d, &la->l, &lb->l, &lc->l, &ld->l))
        return KEEL_HLT_STATUS_INVALID_VALUE;
    state.matmuls++;
    state.mm.handle = handle;
    state.mm.desc = desc->d;
    memcpy(&state.mm.alpha, alpha, sizeof(float)); /* the scale type is f32 */
    memcpy(&state.mm.beta, beta, sizeof(float));
    state.mm.a = a, state.mm.b = b, state.mm.c = c, state.mm.d = d;
    state.mm.la = la->l, state.mm.lb = lb->l, state.mm.lc = lc->l, state.mm.ld = ld->l;
    state.mm.c_is_d_layout = lc == ld;
    state.mm.algo = *algo;
    state.mm.workspace = workspace, state.mm.workspace_bytes = workspace_bytes;
    state.mm.stream = stream;
    if (state.matmul_status != KEEL_HLT_STATUS_SUCCESS)
        return state.matmul_status;
    const fake_hlt_desc_t *ds = &desc->d;
    if (la->l.type == KEEL_HLT_R_32F && lb->l.type == KEEL_HLT_R_32F && ld->l.type == KEEL_HLT_R_32F &&
        ds->scale_type == KEEL_HLT_R_32F && (!adds_bias(ds->epilogue) || ds->bias_type == KEEL_HLT_R_32F))
        compute(ds, state.mm.alpha, a, &la->l, b, &lb->l, state.mm.beta, c, &lc->l, d, &ld->l);
    return KEEL_HLT_STATUS_SUCCESS;
}
#endif
