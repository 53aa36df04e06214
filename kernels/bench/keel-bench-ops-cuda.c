/* SPDX-License-Identifier: MIT */
/* keel-bench-ops-cuda: the built-in operations on a CUDA device against the
 * ceilings and the direct alternative, in one process, interleaved:
 *  - memory-bound operations against a device-to-device copy moving the same
 *    bytes (cudaMemcpyAsync): ratio = copy time / keel time;
 *  - GEMM against cublasGemmEx called directly on the same data with the
 *    same settings: ratio = cuBLAS time / keel time, and their geometric mean.
 * Each measurement enqueues a batch of calls (about 10 ms) and synchronizes
 * once; Keel's and the alternative's batches alternate, 15 pairs, and the
 * ratio printed is the median of the pairs' ratios (a drift of the clocks
 * moves both sides of a pair alike).
 *
 * Usage: KEEL_BACKEND_PATH=<builddir>/.libs keel-bench-ops-cuda [--quick]
 * PyTorch comparisons: kernels/bench/torch_ops.py. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include "keel.h"

#include "bench/bench_util.h"
#include "keel/ops.h"

#define CHECK(call)                                                                                  \
    do {                                                                                             \
        keel_status_t s_ = (call);                                                                   \
        if (s_ != KEEL_OK) {                                                                         \
            fprintf(stderr, "%s failed: %s (%s)\n", #call, keel_status_name(s_), keel_last_error()); \
            exit(1);                                                                                 \
        }                                                                                            \
    } while (0)
#define CK_CUDA(call)                                                                          \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_));                 \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static keel_stream_t *ks;
static cudaStream_t cs;
static cublasHandle_t blas;
static int quick;

typedef void (*fn_t)(void *);

static double time_batch(fn_t f, void *ctx, int keel, int reps)
{
    double t0 = now();
    for (int i = 0; i < reps; i++)
        f(ctx);
    if (keel)
        CHECK(keel_stream_synchronize(ks));
    else
        CK_CUDA(cudaStreamSynchronize(cs));
    return (now() - t0) / reps;
}

/* Calls per batch so that a batch takes about 10 ms. The first call is a
 * warm-up (a GEMM shape's first call picks its algorithm, milliseconds):
 * timing it would give a batch of a few calls, each paying a share of the
 * synchronization. */
static int batch_reps(fn_t f, void *ctx, int keel)
{
    time_batch(f, ctx, keel, 1);
    double one = time_batch(f, ctx, keel, 3);
    int reps = one > 0 ? (int)(0.01 / one) : 100;
    return reps < 1 ? 1 : reps > 10000 ? 10000 : reps;
}

/* keel vs alternative in alternating batches (keel first in every other
 * pair), so that a drift of the GPU's clocks moves both sides alike; the
 * ratio is the median of the per-pair ratios, the times are medians.
 * Returns alt / keel. */
static double compare2(const char *name, double work, const char *unit, fn_t kf, fn_t af, void *ctx, int alt_keel)
{
    enum { MAXP = 15 };
    int pairs = quick ? 5 : MAXP;
    int rk = batch_reps(kf, ctx, 1), ra = batch_reps(af, ctx, alt_keel);
    double tk[MAXP], ta[MAXP], ratio[MAXP];
    for (int r = 0; r < pairs; r++) {
        if (r % 2) {
            tk[r] = time_batch(kf, ctx, 1, rk);
            ta[r] = time_batch(af, ctx, alt_keel, ra);
        } else {
            ta[r] = time_batch(af, ctx, alt_keel, ra);
            tk[r] = time_batch(kf, ctx, 1, rk);
        }
        ratio[r] = ta[r] / tk[r];
    }
    double mk = median(tk, pairs), ma = median(ta, pairs), mr = median(ratio, pairs);
    printf("%-40s keel %10.2f us %9.1f %-7s alt %10.2f us %9.1f %-7s ratio %.3f\n", name, mk * 1e6,
           work / mk * 1e-9, unit, ma * 1e6, work / ma * 1e-9, unit, mr);
    fflush(stdout);
    return mr;
}

static double compare(const char *name, double work, const char *unit, fn_t kf, fn_t af, void *ctx)
{
    return compare2(name, work, unit, kf, af, ctx, 0);
}

/* ---- memory-bound ---- */

typedef struct {
    size_t n;
    void *a, *b, *y, *out, *cpy_src, *cpy_dst;
    size_t copy_bytes; /* the copy that moves the same bytes */
    size_t rows, cols;
} mb_t;

static void copy_alt(void *c)
{
    mb_t *m = c;
    CK_CUDA(cudaMemcpyAsync(m->cpy_dst, m->cpy_src, m->copy_bytes, cudaMemcpyDeviceToDevice, cs));
}

static void k_add(void *c)
{
    mb_t *m = c;
    CHECK(keel_binary(ks, KEEL_BINARY_ADD, KEEL_F32, 1, m->n, 1.0, m->a, m->n, 1.0, m->b, m->n, KEEL_BROADCAST_NONE,
                      m->y, m->n));
}
static void k_add_bf16(void *c)
{
    mb_t *m = c;
    CHECK(keel_binary(ks, KEEL_BINARY_ADD, KEEL_BF16, 1, m->n, 1.0, m->a, m->n, 1.0, m->b, m->n, KEEL_BROADCAST_NONE,
                      m->y, m->n));
}
static void k_gelu(void *c)
{
    mb_t *m = c;
    CHECK(keel_unary(ks, KEEL_UNARY_GELU, KEEL_F32, m->n, m->a, m->y));
}
static void k_cast(void *c)
{
    mb_t *m = c;
    CHECK(keel_cast(ks, KEEL_F32, m->a, KEEL_BF16, m->y, m->n));
}
static void k_bias_row(void *c)
{
    mb_t *m = c;
    CHECK(keel_binary(ks, KEEL_BINARY_ADD, KEEL_F32, m->rows, m->cols, 1.0, m->a, m->cols, 1.0, m->b, 0,
                      KEEL_BROADCAST_ROW, m->y, m->cols));
}
static void k_sum(void *c)
{
    mb_t *m = c;
    CHECK(keel_reduce(ks, KEEL_REDUCE_SUM, KEEL_F32, 1, m->n, m->a, m->n, KEEL_AXIS_ALL, m->out));
}
static void k_sum_rows(void *c)
{
    mb_t *m = c;
    CHECK(keel_reduce(ks, KEEL_REDUCE_SUM, KEEL_F32, m->rows, m->cols, m->a, m->cols, KEEL_AXIS_ROWS, m->out));
}
static void k_softmax(void *c)
{
    mb_t *m = c;
    CHECK(keel_softmax_rows(ks, KEEL_F32, m->rows, m->cols, m->a, m->cols, m->y, m->cols, 0));
}
static void k_layernorm(void *c)
{
    mb_t *m = c;
    CHECK(keel_layernorm_rows(ks, KEEL_F32, m->rows, m->cols, m->a, m->cols, NULL, NULL, 1e-5, m->y, m->cols));
}

/* ---- GEMM ---- */

typedef struct {
    size_t m, n, k;
    keel_dtype_t in, out;
    keel_compute_t compute;
    void *a, *b, *c;
} mm_t;

static cudaDataType_t cty(keel_dtype_t d)
{
    return d == KEEL_F64 ? CUDA_R_64F : d == KEEL_F16 ? CUDA_R_16F : d == KEEL_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* Column-major C = A B, as the transformer benchmarks usually state it. */
static void k_gemm(void *c)
{
    mm_t *g = c;
    keel_gemm_params_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.layout = KEEL_COL_MAJOR;
    p.m = g->m, p.n = g->n, p.k = g->k, p.alpha = 1.0, p.beta = 0.0;
    p.a_type = p.b_type = g->in;
    p.c_type = g->out;
    p.compute = g->compute;
    p.a = g->a, p.lda = g->m, p.b = g->b, p.ldb = g->k, p.c = g->c, p.ldc = g->m;
    CHECK(keel_gemm(ks, &p));
}

static void cublas_gemm(void *c)
{
    mm_t *g = c;
    float one = 1.0f, zero = 0.0f;
    cublasComputeType_t ct = g->compute == KEEL_COMPUTE_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cublasStatus_t st = cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)g->m, (int)g->n, (int)g->k, &one, g->a,
                                     cty(g->in), (int)g->m, g->b, cty(g->in), (int)g->k, &zero, g->c, cty(g->out),
                                     (int)g->m, ct, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasGemmEx: %s\n", cublasGetStatusString(st));
        exit(1);
    }
}

typedef struct {
    size_t m, n, k;
    void *w, *x, *bias, *y;
} dn_t;

static void k_dense(void *c)
{
    dn_t *d = c;
    keel_dense_params_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.layout = KEEL_COL_MAJOR;
    p.transw = KEEL_TRANS;
    p.m = d->m, p.n = d->n, p.k = d->k;
    p.dtype = KEEL_BF16;
    p.act = KEEL_ACT_RELU;
    p.w = d->w, p.ldw = d->k, p.x = d->x, p.ldx = d->k, p.bias = d->bias, p.y = d->y, p.ldy = d->m;
    CHECK(keel_dense(ks, &p));
}

/* The unfused alternative, three calls on the same stream: GEMM (which is
 * cublasGemmEx), a bias pass, a relu pass. */
static void gemm_then_bias_relu(void *c)
{
    dn_t *d = c;
    keel_gemm_params_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.layout = KEEL_COL_MAJOR;
    p.transa = KEEL_TRANS;
    p.m = d->m, p.n = d->n, p.k = d->k, p.alpha = 1.0, p.beta = 0.0;
    p.a_type = p.b_type = p.c_type = KEEL_BF16;
    p.a = d->w, p.lda = d->k, p.b = d->x, p.ldb = d->k, p.c = d->y, p.ldc = d->m;
    CHECK(keel_gemm(ks, &p));
    /* column-major m x n Y is row-major n x m: the bias runs along its rows */
    CHECK(keel_binary(ks, KEEL_BINARY_ADD, KEEL_BF16, d->n, d->m, 1.0, d->y, d->m, 1.0, d->bias, 0,
                      KEEL_BROADCAST_ROW, d->y, d->m));
    CHECK(keel_unary(ks, KEEL_UNARY_RELU, KEEL_BF16, d->m * d->n, d->y, d->y));
}

static void *dev_alloc(keel_device_t *dev, size_t bytes)
{
    void *p;
    CHECK(keel_malloc(dev, bytes, &p));
    CHECK(keel_memset(p, 0x3c, bytes)); /* small finite values in every dtype */
    return p;
}

int main(int argc, char **argv)
{
    quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    keel_device_t *dev;
    if (keel_device_get("cuda", 0, &dev) != KEEL_OK) {
        fprintf(stderr, "keel-bench-ops-cuda: no CUDA device: %s\n", keel_last_error());
        return 77;
    }
    CHECK(keel_device_default_stream(dev, &ks));
    keel_device_properties_t props;
    memset(&props, 0, sizeof props);
    props.struct_size = sizeof props;
    CHECK(keel_device_get_properties(dev, &props));
    CK_CUDA(cudaSetDevice(0));
    CK_CUDA(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS || cublasSetStream(blas, cs) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cuBLAS setup failed\n");
        return 1;
    }
    printf("# keel-bench-ops-cuda on %s (%s)\n", props.name, props.architecture);
    printf("# memory-bound: alt = a device-to-device copy of the same bytes; GEMM: alt = cublasGemmEx direct\n");

    size_t n = quick ? (size_t)1 << 26 : (size_t)1 << 28;
    mb_t m = {0};
    m.n = n;
    m.a = dev_alloc(dev, n * 4);
    m.b = dev_alloc(dev, n * 4);
    m.y = dev_alloc(dev, n * 4);
    m.out = dev_alloc(dev, n * 4);
    m.cpy_src = dev_alloc(dev, n * 8);
    m.cpy_dst = dev_alloc(dev, n * 8);
    char name[96];
    /* add reads 8n and writes 4n bytes: a copy of 6n bytes moves 12n */
    m.copy_bytes = 6 * n;
    snprintf(name, sizeof name, "add f32 n=2^%d", (int)log2((double)n));
    compare(name, 12.0 * n, "GB/s", k_add, copy_alt, &m);
    m.copy_bytes = 3 * n;
    snprintf(name, sizeof name, "add bf16 n=2^%d", (int)log2((double)n));
    compare(name, 6.0 * n, "GB/s", k_add_bf16, copy_alt, &m);
    m.copy_bytes = 4 * n;
    compare("gelu f32", 8.0 * n, "GB/s", k_gelu, copy_alt, &m);
    m.copy_bytes = 3 * n;
    compare("cast f32->bf16", 6.0 * n, "GB/s", k_cast, copy_alt, &m);
    m.rows = n / 4096, m.cols = 4096;
    m.copy_bytes = 4 * n;
    compare("add bias row f32 (rows x 4096)", 8.0 * n, "GB/s", k_bias_row, copy_alt, &m);
    m.copy_bytes = 2 * n;
    compare("sum f32", 4.0 * n, "GB/s", k_sum, copy_alt, &m);
    compare("sum rows f32 (rows x 4096)", 4.0 * n, "GB/s", k_sum_rows, copy_alt, &m);
    const size_t cols_list[] = {128, 1024, 4096, 16384, 65536, 262144};
    for (size_t i = 0; i < sizeof cols_list / sizeof cols_list[0]; i++) {
        m.cols = cols_list[i];
        m.rows = n / 4 / m.cols; /* a quarter of the buffer: 2^26 elements at full size */
        m.copy_bytes = 4 * m.rows * m.cols;
        snprintf(name, sizeof name, "softmax f32 %zux%zu", m.rows, m.cols);
        compare(name, 8.0 * m.rows * m.cols, "GB/s", k_softmax, copy_alt, &m);
        snprintf(name, sizeof name, "layernorm f32 %zux%zu", m.rows, m.cols);
        compare(name, 8.0 * m.rows * m.cols, "GB/s", k_layernorm, copy_alt, &m);
    }
    keel_free(m.a), keel_free(m.b), keel_free(m.y), keel_free(m.out), keel_free(m.cpy_src), keel_free(m.cpy_dst);

    /* GEMM sweep */
    const size_t squares[] = {256, 512, 1024, 2048, 4096, 8192, 16384};
    const size_t shapes[][3] = {{4096, 4096, 4096}, {4096, 11008, 4096}, {4096, 4096, 11008}, {8192, 1024, 8192},
                                {4096, 64, 4096},   {16384, 4096, 1024}};
    struct {
        keel_dtype_t in, out;
        keel_compute_t c;
        const char *name;
    } types[] = {{KEEL_F32, KEEL_F32, KEEL_COMPUTE_DEFAULT, "f32"},
                 {KEEL_F32, KEEL_F32, KEEL_COMPUTE_TF32, "tf32"},
                 {KEEL_F16, KEEL_F16, KEEL_COMPUTE_DEFAULT, "f16"},
                 {KEEL_BF16, KEEL_BF16, KEEL_COMPUTE_DEFAULT, "bf16"}};
    size_t maxn = quick ? 8192 : 16384;
    void *A = dev_alloc(dev, maxn * maxn * 4), *B = dev_alloc(dev, maxn * maxn * 4), *C = dev_alloc(dev, maxn * maxn * 4);
    for (size_t t = 0; t < 4; t++) {
        double logsum = 0, worst = 1e30;
        int count = 0;
        for (size_t i = 0; i < sizeof squares / sizeof squares[0] + sizeof shapes / sizeof shapes[0]; i++) {
            mm_t g = {0};
            size_t ns = sizeof squares / sizeof squares[0];
            if (i < ns)
                g.m = g.n = g.k = squares[i];
            else
                g.m = shapes[i - ns][0], g.n = shapes[i - ns][1], g.k = shapes[i - ns][2];
            if (g.m > maxn || g.n > maxn || g.k > maxn || (quick && g.m * g.n * g.k > (size_t)1 << 36))
                continue;
            if (types[t].in == KEEL_F32 && types[t].c == KEEL_COMPUTE_DEFAULT && g.m * g.n * g.k > (size_t)1 << 39)
                continue; /* f32 without tensor cores: minutes at 16384^3 */
            g.in = types[t].in, g.out = types[t].out, g.compute = types[t].c;
            g.a = A, g.b = B, g.c = C;
            snprintf(name, sizeof name, "gemm %s %zux%zux%zu", types[t].name, g.m, g.n, g.k);
            double r = compare(name, 2.0 * g.m * g.n * g.k, "GFLOP/s", k_gemm, cublas_gemm, &g);
            logsum += log(r);
            worst = r < worst ? r : worst;
            count++;
        }
        printf("gemm %s: geometric mean ratio %.3f, worst %.3f over %d shapes\n", types[t].name,
               exp(logsum / (count ? count : 1)), worst, count);
    }
    keel_free(A), keel_free(B), keel_free(C);

    /* dense bf16 + bias + relu in one call, against GEMM, bias and relu as three calls */
    const size_t dshapes[][3] = {{4096, 4096, 4096}, {4096, 64, 4096}};
    for (size_t i = 0; i < 2; i++) {
        dn_t d = {dshapes[i][0], dshapes[i][1], dshapes[i][2], NULL, NULL, NULL, NULL};
        d.w = dev_alloc(dev, d.m * d.k * 2);
        d.x = dev_alloc(dev, d.k * d.n * 2);
        d.bias = dev_alloc(dev, d.m * 2);
        d.y = dev_alloc(dev, d.m * d.n * 2);
        snprintf(name, sizeof name, "dense bf16 relu %zux%zux%zu", d.m, d.n, d.k);
        compare2(name, 2.0 * d.m * d.n * d.k, "GFLOP/s", k_dense, gemm_then_bias_relu, &d, 1);
        keel_free(d.w), keel_free(d.x), keel_free(d.bias), keel_free(d.y);
    }
    cublasDestroy(blas);
    cudaStreamDestroy(cs);
    return 0;
}
