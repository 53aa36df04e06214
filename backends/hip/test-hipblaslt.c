/* SPDX-License-Identifier: MIT */
/* test-hipblaslt: how keel-hip finds libhipblaslt (hip_hipblaslt_load.c)
 * and what its dense layer asks of it (hip_hipblaslt_plan.c), against a
 * fake library built here (fake_hipblaslt.c) that checks each call's
 * arguments, records them and computes f32 products by hipBLASLt's
 * documented semantics, since Debian has no hipBLASLt. Needs neither ROCm
 * nor a GPU. It covers: a library that loads, one that is missing, one
 * that lacks a function, releases whose types differ, which dense calls
 * are handed to hipBLASLt, the epilogue, attributes and layouts for each
 * activation with and without a bias in both layouts (with Y checked
 * against a float64 reference of Keel's definition), the refusals (no
 * algorithm, a matmul that declines) and the plan cache. What it cannot
 * show: that a real hipBLASLt agrees with the declared values and layouts,
 * or what its kernels compute (README, "The HIP plugin"). The enumerator
 * values below are written out as hipblaslt.h (ROCm 6.x) gives them, not
 * taken from hip_hipblaslt.h, so that a wrong declaration fails here. */
#include <check.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fake_hipblaslt.h"
#include "hip_hipblaslt_plan.h"
#include "test-dl.h"
#include "tests/fixture.h"

#define FAKE_FULL FAKE_HIPBLASLT_DIR "/fake-hipblaslt.so"
#define FAKE_NO_MATMUL FAKE_HIPBLASLT_DIR "/fake-hipblaslt-nomatmul.so"
#define MISSING "/nonexistent-keel-test/libhipblaslt.so.0"

/* hipblaslt.h's values, as numbers. */
enum {
    OP_N = 111, OP_T = 112,
    COMPUTE_32F = 2,
    R_32F = 0, R_16F = 2, R_16BF = 14,
    EPI_DEFAULT = 1, EPI_RELU = 2, EPI_BIAS = 4, EPI_RELU_BIAS = 6, EPI_GELU = 32, EPI_GELU_BIAS = 36,
};

static keel__hipblaslt_api_t api;
static fake_hlt_state_t *fake;
static keel__hipblaslt_handle_t handle;
static keel__hlt_cache_t cache = {.insert_lock = PTHREAD_MUTEX_INITIALIZER};
static void *const stream_tag = (void *)(uintptr_t)0x5f5f0000;

/* Loads the fake, resets what it answers, and makes a handle. Plans a
 * failed test left in the cache (Check runs the tests in one process) are
 * freed first, while the library that made them is still loaded. */
static void open_fake(void)
{
    if (api.lib != NULL)
        keel__hlt_cache_clear(&cache, &api);
    const char *names[] = {FAKE_FULL, NULL};
    char why[512];
    ck_assert_msg(keel__hipblaslt_load(names, &api, why, sizeof why) == 0, "load: %s", why);
    fake_hipblaslt_state_fn get = (fake_hipblaslt_state_fn)dlsym(api.lib, "fake_hipblaslt_state");
    fake_hipblaslt_reset_fn reset = (fake_hipblaslt_reset_fn)dlsym(api.lib, "fake_hipblaslt_reset");
    ck_assert(get != NULL && reset != NULL);
    reset();
    fake = get();
    ck_assert_int_eq(api.create(&handle), 0);
}

/* The cache emptied, the handle destroyed: every descriptor the plans
 * made is gone, and no call had arguments the library would reject. */
static void close_fake(void)
{
    keel__hlt_cache_clear(&cache, &api);
    ck_assert_int_eq(api.destroy(handle), 0);
    ck_assert_msg(fake->bad == 0, "%d rejected calls, the first: %s", fake->bad, fake->bad_why);
    ck_assert_int_eq(fake->live_descs, 0);
    ck_assert_int_eq(fake->live_layouts, 0);
    ck_assert_int_eq(fake->live_prefs, 0);
    ck_assert_int_eq(fake->creates, fake->destroys);
    dlclose(api.lib);
    api.lib = NULL;
}

/* ---- loading ---- */

/* No library: -1, every name tried in the reason, the table left empty
 * (the dense layer then takes the rocBLAS path). How the names are tried
 * and the reason cut to fit is hip_dl.c's, tested by test-rocblas-load. */
START_TEST(missing_library_is_reported)
{
    const char *names[] = {MISSING, "/nonexistent-keel-test/libhipblaslt.so", NULL};
    keel__hipblaslt_api_t a, zero;
    memset(&a, 0x5a, sizeof a);
    memset(&zero, 0, sizeof zero);
    char why[512];
    ck_assert_int_eq(keel__hipblaslt_load(names, &a, why, sizeof why), -1);
    ck_assert_msg(strstr(why, names[0]) != NULL && strstr(why, names[1]) != NULL, "why: %s", why);
    ck_assert(memcmp(&a, &zero, sizeof a) == 0);
}
END_TEST

START_TEST(each_name_in_its_own_slot)
{
    const char *names[] = {MISSING, FAKE_FULL, NULL};
    keel__hipblaslt_api_t a;
    char why[512];
    ck_assert_msg(keel__hipblaslt_load(names, &a, why, sizeof why) == 0, "load: %s", why);
    ck_assert_str_eq(a.lib_name, FAKE_FULL);
    const kt_dl_slot_t expect[] = {
        {"hipblasLtCreate", &a.create},
        {"hipblasLtDestroy", &a.destroy},
        {"hipblasLtGetVersion", &a.get_version},
        {"hipblasLtMatmulDescCreate", &a.desc_create},
        {"hipblasLtMatmulDescDestroy", &a.desc_destroy},
        {"hipblasLtMatmulDescSetAttribute", &a.desc_set},
        {"hipblasLtMatrixLayoutCreate", &a.layout_create},
        {"hipblasLtMatrixLayoutDestroy", &a.layout_destroy},
        {"hipblasLtMatmulPreferenceCreate", &a.pref_create},
        {"hipblasLtMatmulPreferenceDestroy", &a.pref_destroy},
        {"hipblasLtMatmulPreferenceSetAttribute", &a.pref_set},
        {"hipblasLtMatmulAlgoGetHeuristic", &a.heuristic},
        {"hipblasLtMatmul", &a.matmul},
    };
    kt_dl_check_slots(FAKE_FULL, expect, sizeof expect / sizeof expect[0]);
    dlclose(a.lib);
}
END_TEST

/* A truncated library: -1 naming the library and the missing function,
 * the table cleared, the library closed. */
START_TEST(missing_function_is_named)
{
    const char *names[] = {FAKE_NO_MATMUL, FAKE_FULL, NULL};
    keel__hipblaslt_api_t a;
    char why[512];
    /* The first library that loads decides; the next name is not tried. */
    ck_assert_int_eq(keel__hipblaslt_load(names, &a, why, sizeof why), -1);
    ck_assert_msg(strstr(why, FAKE_NO_MATMUL) != NULL && strstr(why, "has no hipblasLtMatmul") != NULL, "why: %s",
                  why);
    ck_assert_ptr_null(a.lib);
    ck_assert_ptr_null(kt_dl_addr(&a.create));
    ck_assert_ptr_null(dlopen(FAKE_NO_MATMUL, RTLD_NOW | RTLD_NOLOAD));
}
END_TEST

/* ---- the release check ---- */

static int version_check(int reported, char *why, size_t size, int *version)
{
    fake->version = reported;
    return keel__hipblaslt_check_version(&api, handle, version, why, size);
}

START_TEST(releases_that_fit_and_those_that_do_not)
{
    open_fake();
    char why[512];
    int v = -1;
    const int fit[] = {600, 800, 1100, 99999};
    for (size_t i = 0; i < sizeof fit / sizeof fit[0]; i++) {
        ck_assert_msg(version_check(fit[i], why, sizeof why, &v) == 1, "%d: %s", fit[i], why);
        ck_assert_int_eq(v, fit[i]);
    }
    const struct {
        int v;
        const char *shown;
    } refused[] = {{300, "0.3.0"}, {599, "0.5.99"}, {100000, "1.0.0"}, {100203, "1.2.3"}};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        v = -7;
        ck_assert_int_eq(version_check(refused[i].v, why, sizeof why, &v), 0);
        ck_assert_int_eq(v, -7); /* written only on success */
        ck_assert_msg(strstr(why, refused[i].shown) != NULL && strstr(why, FAKE_FULL) != NULL, "%d: %s",
                      refused[i].v, why);
    }
    fake->version_status = 1;
    ck_assert_int_eq(version_check(800, why, sizeof why, &v), 0);
    ck_assert_msg(strstr(why, "hipblasLtGetVersion: HIPBLAS_STATUS_NOT_INITIALIZED (1)") != NULL, "why: %s", why);
    close_fake();
}
END_TEST

START_TEST(status_names)
{
    ck_assert_str_eq(keel__hipblaslt_status_name(0), "HIPBLAS_STATUS_SUCCESS");
    ck_assert_str_eq(keel__hipblaslt_status_name(3), "HIPBLAS_STATUS_INVALID_VALUE");
    ck_assert_str_eq(keel__hipblaslt_status_name(7), "HIPBLAS_STATUS_NOT_SUPPORTED");
    ck_assert_str_eq(keel__hipblaslt_status_name(11), "HIPBLAS_STATUS_UNKNOWN");
    ck_assert_str_eq(keel__hipblaslt_status_name(12), "an unknown hipblasStatus_t");
    ck_assert_str_eq(keel__hipblaslt_status_name(-1), "an unknown hipblasStatus_t");
}
END_TEST

/* ---- dense calls ---- */

/* Host buffers of one dense call, 64-byte aligned, with leading dimensions
 * past the rows so that writes outside Y show. */
typedef struct {
    keel_dense_params_t p;
    float *w, *x, *bias, *y;
    size_t wn, xn, yn;
    void *ws;
} dense_t;

static float *alloc_f32(size_t n)
{
    float *p = aligned_alloc(64, ((n * sizeof(float) + 63) / 64) * 64);
    ck_assert_ptr_nonnull(p);
    return p;
}

static void dense_make(dense_t *d, keel_layout_t layout, int transw, keel_activation_t act, int bias, size_t m,
                       size_t n, size_t k)
{
    memset(d, 0, sizeof *d);
    keel_dense_params_t *p = &d->p;
    p->struct_size = sizeof *p;
    p->layout = layout;
    p->transw = transw ? KEEL_TRANS : KEEL_NO_TRANS;
    p->m = m, p->n = n, p->k = k;
    p->dtype = KEEL_F32;
    p->act = act;
    int col = layout == KEEL_COL_MAJOR;
    size_t wr = transw ? k : m, wc = transw ? m : k; /* W as stored */
    p->ldw = (col ? wr : wc) + 3;
    p->ldx = (col ? k : n) + 2;
    p->ldy = (col ? m : n) + 5;
    d->wn = p->ldw * (col ? wc : wr);
    d->xn = p->ldx * (col ? n : k);
    d->yn = p->ldy * (col ? n : m);
    d->w = alloc_f32(d->wn), d->x = alloc_f32(d->xn), d->y = alloc_f32(d->yn);
    kt_fill_random_f32(d->w, d->wn);
    kt_fill_random_f32(d->x, d->xn);
    kt_poison(d->y, d->yn * sizeof(float));
    if (bias) {
        d->bias = alloc_f32(m);
        kt_fill_random_f32(d->bias, m);
    }
    p->w = d->w, p->x = d->x, p->y = d->y, p->bias = d->bias;
    d->ws = aligned_alloc(64, 4096);
    ck_assert_ptr_nonnull(d->ws);
}

static void dense_free(dense_t *d)
{
    free(d->w), free(d->x), free(d->y), free(d->bias), free(d->ws);
}

/* Element (r, c) of a matrix in @p layout with leading dimension @p ld. */
static size_t at(keel_layout_t layout, size_t r, size_t c, size_t ld)
{
    return layout == KEEL_COL_MAJOR ? r + c * ld : r * ld + c;
}

/* Keel's definition, Y = act(op(W) X + bias), in float64. */
static double reference(const dense_t *d, size_t i, size_t j)
{
    const keel_dense_params_t *p = &d->p;
    double acc = 0;
    for (size_t l = 0; l < p->k; l++) {
        double wv = p->transw == KEEL_TRANS ? d->w[at(p->layout, l, i, p->ldw)] : d->w[at(p->layout, i, l, p->ldw)];
        acc += wv * d->x[at(p->layout, l, j, p->ldx)];
    }
    if (d->bias)
        acc += d->bias[i];
    if (p->act == KEEL_ACT_RELU)
        acc = acc > 0 ? acc : 0;
    else if (p->act == KEEL_ACT_GELU_TANH)
        acc = 0.5 * acc * (1.0 + tanh(sqrt(2.0 / M_PI) * (acc + 0.044715 * acc * acc * acc)));
    return acc;
}

/* Y against the reference; what lies between the rows (the leading
 * dimension's padding) still poisoned. */
static void check_y(const dense_t *d)
{
    const keel_dense_params_t *p = &d->p;
    uint32_t poison;
    memset(&poison, KT_POISON_BYTE, sizeof poison);
    size_t inner = p->layout == KEEL_COL_MAJOR ? p->m : p->n;
    for (size_t e = 0; e < d->yn; e++) {
        if (e % p->ldy >= inner) {
            uint32_t bits;
            memcpy(&bits, &d->y[e], sizeof bits);
            ck_assert_msg(bits == poison, "Y[%zu], outside the result, was written", e);
        }
    }
    for (size_t i = 0; i < p->m; i++)
        for (size_t j = 0; j < p->n; j++) {
            double want = reference(d, i, j), got = d->y[at(p->layout, i, j, p->ldy)];
            ck_assert_msg(fabs(got - want) <= 1e-5 + 1e-5 * fabs(want), "Y(%zu, %zu) = %.9g, want %.9g", i, j, got,
                          want);
        }
}

/* Runs @p d through the cache; the outcome, with the reason in @p why. */
static keel__hlt_outcome_t dense_run(dense_t *d, int *status, char *why, size_t size)
{
    keel__hlt_key_t key;
    const char *refused = NULL;
    ck_assert_msg(keel__hlt_dense_key(&d->p, 3, &key, &refused) == 0, "refused: %s", refused);
    ck_assert_ptr_null(refused);
    return keel__hlt_dense_run(&cache, &api, handle, &key, &d->p, d->ws, 4096, stream_tag, status, why, size);
}

static int epilogue_for(keel_activation_t act, int bias)
{
    switch (act) {
    case KEEL_ACT_RELU: return bias ? EPI_RELU_BIAS : EPI_RELU;
    case KEEL_ACT_GELU_TANH: return bias ? EPI_GELU_BIAS : EPI_GELU;
    default: return bias ? EPI_BIAS : EPI_DEFAULT;
    }
}

static void check_layout(const char *which, const fake_hlt_layout_t *l, int type, uint64_t rows, uint64_t cols,
                         size_t ld)
{
    ck_assert_msg(l->type == type && l->rows == rows && l->cols == cols && l->ld == (int64_t)ld,
                  "%s: type %d, %llu x %llu, ld %lld; want type %d, %llu x %llu, ld %zu", which, l->type,
                  (unsigned long long)l->rows, (unsigned long long)l->cols, (long long)l->ld, type,
                  (unsigned long long)rows, (unsigned long long)cols, ld);
}

/* One dense call through the fake, its arguments and its result checked. */
static void one_dense(keel_layout_t layout, int transw, keel_activation_t act, int bias, size_t m, size_t n, size_t k)
{
    dense_t d;
    dense_make(&d, layout, transw, act, bias, m, n, k);
    int heuristics = fake->heuristics, matmuls = fake->matmuls, status = -1;
    char why[256];
    ck_assert_msg(dense_run(&d, &status, why, sizeof why) == KEEL_HLT_RAN, "refused: %s", why);
    ck_assert_int_eq(status, 0);
    ck_assert_int_eq(fake->heuristics, heuristics + 1);
    ck_assert_int_eq(fake->matmuls, matmuls + 1);
    const keel_dense_params_t *p = &d.p;
    int col = layout == KEEL_COL_MAJOR;
    const fake_hlt_desc_t *ds = &fake->mm.desc;
    ck_assert_int_eq(ds->compute_type, COMPUTE_32F);
    ck_assert_int_eq(ds->scale_type, R_32F);
    ck_assert_int_eq(ds->epilogue, epilogue_for(act, bias));
    ck_assert_int_eq(ds->bias_type, bias ? R_32F : -1);
    ck_assert_ptr_eq(ds->bias, bias ? (const void *)d.bias : NULL);
    if (col) { /* D = op(W) X */
        ck_assert_int_eq(ds->transa, transw ? OP_T : OP_N);
        ck_assert_int_eq(ds->transb, OP_N);
        ck_assert_ptr_eq(fake->mm.a, d.w);
        ck_assert_ptr_eq(fake->mm.b, d.x);
        check_layout("A", &fake->mm.la, R_32F, transw ? k : m, transw ? m : k, p->ldw);
        check_layout("B", &fake->mm.lb, R_32F, k, n, p->ldx);
        check_layout("D", &fake->mm.ld, R_32F, m, n, p->ldy);
    } else { /* D = Y^T = X^T op(W)^T */
        ck_assert_int_eq(ds->transa, OP_N);
        ck_assert_int_eq(ds->transb, transw ? OP_T : OP_N);
        ck_assert_ptr_eq(fake->mm.a, d.x);
        ck_assert_ptr_eq(fake->mm.b, d.w);
        check_layout("A", &fake->mm.la, R_32F, n, k, p->ldx);
        check_layout("B", &fake->mm.lb, R_32F, transw ? m : k, transw ? k : m, p->ldw);
        check_layout("D", &fake->mm.ld, R_32F, n, m, p->ldy);
    }
    ck_assert(fake->mm.c_is_d_layout);
    ck_assert_ptr_eq(fake->mm.c, d.y);
    ck_assert_ptr_eq(fake->mm.d, d.y);
    ck_assert(fake->mm.alpha == 1.0f && fake->mm.beta == 0.0f);
    ck_assert_ptr_eq(fake->mm.handle, handle);
    ck_assert_ptr_eq(fake->mm.workspace, d.ws);
    ck_assert_uint_eq(fake->mm.workspace_bytes, 4096);
    ck_assert_ptr_eq(fake->mm.stream, stream_tag);
    ck_assert_uint_eq(fake->pref_ws, 4096);
    ck_assert_int_eq(fake->mm.algo.data[0], 0); /* the heuristic's first */
    check_y(&d);
    dense_free(&d);
}

START_TEST(column_major_epilogue_per_activation_and_bias)
{
    open_fake();
    const keel_activation_t acts[] = {KEEL_ACT_NONE, KEEL_ACT_RELU, KEEL_ACT_GELU_TANH};
    for (size_t a = 0; a < 3; a++)
        for (int bias = 0; bias < 2; bias++)
            for (int tw = 0; tw < 2; tw++)
                one_dense(KEEL_COL_MAJOR, tw, acts[a], bias, 13 + a, 7 + (size_t)bias, 19 + (size_t)tw);
    close_fake();
}
END_TEST

START_TEST(row_major_without_bias)
{
    open_fake();
    const keel_activation_t acts[] = {KEEL_ACT_NONE, KEEL_ACT_RELU, KEEL_ACT_GELU_TANH};
    for (size_t a = 0; a < 3; a++)
        for (int tw = 0; tw < 2; tw++)
            one_dense(KEEL_ROW_MAJOR, tw, acts[a], 0, 11, 6 + a, 17 + (size_t)tw);
    close_fake();
}
END_TEST

/* f16 and bf16: the layouts and the bias take Y's type, the product f32. */
START_TEST(sixteen_bit_types)
{
    open_fake();
    const struct {
        keel_dtype_t dt;
        int hip;
    } types[] = {{KEEL_F16, R_16F}, {KEEL_BF16, R_16BF}};
    for (size_t t = 0; t < 2; t++) {
        dense_t d;
        dense_make(&d, KEEL_COL_MAJOR, 1, KEEL_ACT_RELU, 1, 32, 8, 64);
        d.p.dtype = types[t].dt; /* the f32 buffers are large enough: the fake computes f32 only */
        int status;
        char why[256];
        ck_assert_msg(dense_run(&d, &status, why, sizeof why) == KEEL_HLT_RAN, "%s", why);
        ck_assert_int_eq(fake->mm.desc.compute_type, COMPUTE_32F);
        ck_assert_int_eq(fake->mm.desc.scale_type, R_32F);
        ck_assert_int_eq(fake->mm.desc.bias_type, types[t].hip);
        ck_assert_int_eq(fake->mm.desc.epilogue, EPI_RELU_BIAS);
        ck_assert_int_eq(fake->mm.la.type, types[t].hip);
        ck_assert_int_eq(fake->mm.lb.type, types[t].hip);
        ck_assert_int_eq(fake->mm.ld.type, types[t].hip);
        dense_free(&d);
    }
    close_fake();
}
END_TEST

/* A tf32 request computes in f32, as the rocBLAS path does. */
START_TEST(tf32_request_computes_in_f32)
{
    open_fake();
    dense_t d;
    dense_make(&d, KEEL_COL_MAJOR, 0, KEEL_ACT_GELU_TANH, 1, 9, 5, 33);
    d.p.compute = KEEL_COMPUTE_TF32;
    int status;
    char why[256];
    ck_assert_msg(dense_run(&d, &status, why, sizeof why) == KEEL_HLT_RAN, "%s", why);
    ck_assert_int_eq(fake->mm.desc.compute_type, COMPUTE_32F);
    check_y(&d);
    dense_free(&d);
    close_fake();
}
END_TEST

/* What keel-hip keeps from hipBLASLt, before any call to it. */
START_TEST(calls_not_handed_to_hipblaslt)
{
    open_fake();
    dense_t d;
    dense_make(&d, KEEL_COL_MAJOR, 1, KEEL_ACT_RELU, 1, 8, 4, 16);
    keel__hlt_key_t key;
    const struct {
        const char *what, *why_has;
    } cases[] = {
        {"f64", "f32, f16 and bf16"},
        {"erf GELU", "tanh"},
        {"k = 0", "k = 0"},
        {"row-major with a bias", "rows of column-major D"},
        {"m above 2^31-1", "2^31-1"},
        {"ldw above 2^31-1", "2^31-1"},
        {"misaligned W", "16-byte"},
        {"misaligned bias", "16-byte"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        keel_dense_params_t p = d.p;
        switch (i) {
        case 0: p.dtype = KEEL_F64; break;
        case 1: p.act = KEEL_ACT_GELU_ERF; break;
        case 2: p.k = 0; break;
        case 3: p.layout = KEEL_ROW_MAJOR; break;
        case 4: p.m = (size_t)INT32_MAX + 1; break;
        case 5: p.ldw = (size_t)INT32_MAX + 1; break;
        case 6: p.w = (const char *)d.w + 4; break;
        default: p.bias = (const char *)d.bias + 8; break;
        }
        const char *why = NULL;
        ck_assert_msg(keel__hlt_dense_key(&p, 0, &key, &why) == -1, "%s was handed to hipBLASLt", cases[i].what);
        ck_assert_msg(why != NULL && strstr(why, cases[i].why_has) != NULL, "%s: %s", cases[i].what,
                      why ? why : "(null)");
    }
    /* The unedited call is taken, with its shape in the key. */
    const char *why = "unset";
    ck_assert_int_eq(keel__hlt_dense_key(&d.p, 2, &key, &why), 0);
    ck_assert_ptr_null(why);
    ck_assert(key.device == 2 && key.dtype == KEEL_F32 && key.act == KEEL_ACT_RELU && key.has_bias == 1 &&
              key.transw == 1 && key.row_major == 0 && key.m == 8 && key.n == 4 && key.k == 16 &&
              key.ldw == d.p.ldw && key.ldx == d.p.ldx && key.ldy == d.p.ldy);
    ck_assert_int_eq(fake->heuristics + fake->matmuls + fake->live_descs, 0);
    dense_free(&d);
    close_fake();
}
END_TEST

/* hipBLASLt refuses: the call is KEEL_HLT_REFUSED with the reason, Y is
 * untouched, and a plan without an algorithm is remembered. */
START_TEST(refusals_fall_back)
{
    open_fake();
    const struct {
        const char *what, *why_has;
        int count, status, state;
        size_t ws;
    } cases[] = {
        {"no algorithm", "found no algorithm", 0, 0, 0, 0},
        {"heuristic NOT_SUPPORTED", "hipblasLtMatmulAlgoGetHeuristic: HIPBLAS_STATUS_NOT_SUPPORTED (7)", 1, 7, 0, 0},
        {"result state NOT_SUPPORTED", "found no algorithm", 1, 0, 7, 0},
        {"workspace too small", "more than 4096", 1, 0, 0, 8192},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fake->heuristic_count = cases[i].count;
        fake->heuristic_status = cases[i].status;
        fake->heuristic_state = cases[i].state;
        fake->heuristic_ws = cases[i].ws;
        dense_t d;
        dense_make(&d, KEEL_COL_MAJOR, 1, KEEL_ACT_GELU_TANH, 1, 20 + i, 3, 8); /* a new shape each */
        int heuristics = fake->heuristics, status = -1;
        char why[256];
        for (int call = 0; call < 2; call++) {
            ck_assert_int_eq(dense_run(&d, &status, why, sizeof why), KEEL_HLT_REFUSED);
            ck_assert_msg(strstr(why, cases[i].why_has) != NULL, "%s: %s", cases[i].what, why);
        }
        ck_assert_int_eq(fake->heuristics, heuristics + 1); /* asked once: the refusal is cached */
        ck_assert_int_eq(fake->matmuls, 0);
        ck_assert_int_eq(fake->live_prefs, 0);
        uint32_t poison, first;
        memset(&poison, KT_POISON_BYTE, sizeof poison);
        memcpy(&first, d.y, sizeof first);
        ck_assert(first == poison);
        dense_free(&d);
    }
    close_fake();
}
END_TEST

/* A matmul that declines is a refusal; one that fails otherwise is an error. */
START_TEST(matmul_statuses)
{
    open_fake();
    const struct {
        int status;
        keel__hlt_outcome_t out;
        const char *why_has;
    } cases[] = {
        {7, KEEL_HLT_REFUSED, "hipblasLtMatmul: HIPBLAS_STATUS_NOT_SUPPORTED (7)"},
        {3, KEEL_HLT_REFUSED, "hipblasLtMatmul: HIPBLAS_STATUS_INVALID_VALUE (3)"},
        {8, KEEL_HLT_REFUSED, "HIPBLAS_STATUS_ARCH_MISMATCH"},
        {5, KEEL_HLT_FAILED, "hipblasLtMatmul: HIPBLAS_STATUS_EXECUTION_FAILED (5)"},
        {2, KEEL_HLT_FAILED, "HIPBLAS_STATUS_ALLOC_FAILED"},
        {6, KEEL_HLT_FAILED, "HIPBLAS_STATUS_INTERNAL_ERROR"},
    };
    dense_t d;
    dense_make(&d, KEEL_COL_MAJOR, 0, KEEL_ACT_NONE, 1, 16, 4, 8);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fake->matmul_status = cases[i].status;
        int status = -1;
        char why[256];
        ck_assert_int_eq(dense_run(&d, &status, why, sizeof why), cases[i].out);
        ck_assert_int_eq(status, cases[i].status);
        ck_assert_msg(strstr(why, cases[i].why_has) != NULL, "status %d: %s", cases[i].status, why);
    }
    /* The plan stays good: the next call runs. */
    fake->matmul_status = 0;
    int status;
    char why[256];
    ck_assert_int_eq(dense_run(&d, &status, why, sizeof why), KEEL_HLT_RAN);
    ck_assert_int_eq(fake->heuristics, 1);
    check_y(&d);
    dense_free(&d);
    close_fake();
}
END_TEST

/* A workspace smaller than the algorithm's at run time: refused before the matmul. */
START_TEST(small_workspace_at_run_is_refused)
{
    open_fake();
    fake->heuristic_ws = 2048;
    dense_t d;
    dense_make(&d, KEEL_COL_MAJOR, 0, KEEL_ACT_RELU, 0, 16, 4, 8);
    keel__hlt_key_t key;
    const char *refused;
    ck_assert_int_eq(keel__hlt_dense_key(&d.p, 0, &key, &refused), 0);
    int owned, status = -1;
    keel__hlt_plan_t *e = keel__hlt_plan_get(&cache, &api, handle, &key, 4096, &owned);
    ck_assert(e != NULL && e->ok && !owned);
    char why[256];
    ck_assert_int_eq(keel__hlt_dense_run(&cache, &api, handle, &key, &d.p, d.ws, 1024, stream_tag, &status, why,
                                         sizeof why),
                     KEEL_HLT_REFUSED);
    ck_assert_int_eq(status, 7);
    ck_assert_int_eq(fake->matmuls, 0);
    ck_assert_int_eq(keel__hlt_dense_run(&cache, &api, handle, &key, &d.p, d.ws, 4096, stream_tag, &status, why,
                                         sizeof why),
                     KEEL_HLT_RAN);
    ck_assert_uint_eq(fake->mm.workspace_bytes, 4096);
    check_y(&d);
    dense_free(&d);
    close_fake();
}
END_TEST

/* ---- the plan cache ---- */

static keel__hlt_key_t key_of(uint64_t m)
{
    keel__hlt_key_t k;
    memset(&k, 0, sizeof k);
    k.dtype = KEEL_F32, k.act = KEEL_ACT_RELU, k.has_bias = 1;
    k.m = m, k.n = 4, k.k = 8, k.ldw = m, k.ldx = 8, k.ldy = m;
    return k;
}

START_TEST(one_plan_per_key)
{
    open_fake();
    keel__hlt_key_t a = key_of(16), b = key_of(32), a_dev1 = key_of(16);
    a_dev1.device = 1;
    int owned;
    keel__hlt_plan_t *pa = keel__hlt_plan_get(&cache, &api, handle, &a, 4096, &owned);
    ck_assert(pa != NULL && pa->ok && !owned);
    ck_assert_ptr_eq(keel__hlt_plan_get(&cache, &api, handle, &a, 4096, &owned), pa);
    ck_assert_int_eq(fake->heuristics, 1);
    keel__hlt_plan_t *pb = keel__hlt_plan_get(&cache, &api, handle, &b, 4096, &owned);
    keel__hlt_plan_t *pd = keel__hlt_plan_get(&cache, &api, handle, &a_dev1, 4096, &owned);
    ck_assert(pb != pa && pd != pa && pd != pb);
    ck_assert_int_eq(fake->heuristics, 3);
    ck_assert_int_eq(fake->live_descs, 3);
    ck_assert_int_eq(fake->live_layouts, 9);
    close_fake();
}
END_TEST

START_TEST(full_cache_hands_out_owned_plans)
{
    open_fake();
    int owned;
    for (uint64_t i = 0; i < KEEL_HLT_PLAN_SLOTS; i++) {
        keel__hlt_key_t k = key_of(16 + i);
        ck_assert(keel__hlt_plan_get(&cache, &api, handle, &k, 4096, &owned) != NULL);
        ck_assert_int_eq(owned, 0);
    }
    keel__hlt_key_t k = key_of(16 + KEEL_HLT_PLAN_SLOTS);
    keel__hlt_plan_t *e = keel__hlt_plan_get(&cache, &api, handle, &k, 4096, &owned);
    ck_assert(e != NULL && e->ok);
    ck_assert_int_eq(owned, 1);
    keel__hlt_plan_free(&api, e);
    ck_assert_int_eq(fake->live_descs, KEEL_HLT_PLAN_SLOTS);
    /* The ones kept are still found. */
    keel__hlt_key_t first = key_of(16);
    ck_assert_ptr_nonnull(keel__hlt_plan_get(&cache, &api, handle, &first, 4096, &owned));
    ck_assert_int_eq(owned, 0);
    ck_assert_int_eq(fake->heuristics, KEEL_HLT_PLAN_SLOTS + 1);
    close_fake();
}
END_TEST

typedef struct {
    keel__hlt_key_t key;
    keel__hlt_plan_t *got;
} racer_t;

static void *race(void *arg)
{
    racer_t *r = arg;
    int owned;
    r->got = keel__hlt_plan_get(&cache, &api, handle, &r->key, 4096, &owned);
    return NULL;
}

/* Threads asking for one key at once all get the plan the cache keeps. */
START_TEST(racing_builds_keep_one_plan)
{
    open_fake();
    enum { N = 8 };
    pthread_t t[N];
    racer_t r[N];
    for (int i = 0; i < N; i++) {
        r[i].key = key_of(64);
        ck_assert_int_eq(pthread_create(&t[i], NULL, race, &r[i]), 0);
    }
    for (int i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < N; i++)
        ck_assert_ptr_eq(r[i].got, r[0].got);
    ck_assert_int_eq(fake->live_descs, 1); /* the losers freed theirs */
    close_fake();
}
END_TEST

int main(int argc, char **argv)
{
    Suite *s = suite_create("hipblaslt");
    TCase *load = tcase_create("load");
    tcase_add_test(load, missing_library_is_reported);
    tcase_add_test(load, each_name_in_its_own_slot);
    tcase_add_test(load, missing_function_is_named);
    tcase_add_test(load, releases_that_fit_and_those_that_do_not);
    tcase_add_test(load, status_names);
    suite_add_tcase(s, load);
    TCase *dense = tcase_create("dense");
    tcase_add_test(dense, column_major_epilogue_per_activation_and_bias);
    tcase_add_test(dense, row_major_without_bias);
    tcase_add_test(dense, sixteen_bit_types);
    tcase_add_test(dense, tf32_request_computes_in_f32);
    tcase_add_test(dense, calls_not_handed_to_hipblaslt);
    tcase_add_test(dense, refusals_fall_back);
    tcase_add_test(dense, matmul_statuses);
    tcase_add_test(dense, small_workspace_at_run_is_refused);
    suite_add_tcase(s, dense);
    TCase *plans = tcase_create("plans");
    tcase_add_test(plans, one_plan_per_key);
    tcase_add_test(plans, full_cache_hands_out_owned_plans);
    tcase_add_test(plans, racing_builds_keep_one_plan);
    suite_add_tcase(s, plans);
    return kt_main(argc, argv, s, 0, 0);
}
