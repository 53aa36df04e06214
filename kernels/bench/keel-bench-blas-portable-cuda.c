/* SPDX-License-Identifier: MIT */
/* keel-bench-blas-portable-cuda: Keel's portable SGEMM (the kernels of
 * kernels/portable/blas.kc that keel_gemm runs where no vendor BLAS is
 * usable, forced here with KEEL_BLAS=fallback) against cuBLAS's SGEMM on a
 * CUDA device, in one process, on the same fresh random matrices.
 *
 * Both compute in f32 without tensor cores (cuBLAS's default math mode
 * gives cublasSgemm no TF32). Each measurement enqueues a batch of calls
 * (about 50 ms) and synchronizes once; Keel's and cuBLAS's batches
 * alternate, Keel first in every other pair, and the ratio printed is the
 * median of the pairs' ratios (cuBLAS time / Keel time) with its spread.
 * Before timing, both results are compared with a float64 reference at
 * sampled elements, so a fast wrong kernel cannot pass.
 *
 * Target: column-major C = A B, 4096 x 4096 x 4096, at least 0.5 of
 * cuBLAS's speed. The other rows (transposes, a size that is not a multiple
 * of the tile, one whose leading dimensions leave the vector loads) are
 * printed for information. The last lines are one summary line per row
 * (bench/bench_summary.h). Exit status 1 when the target row misses or a
 * result is wrong, 3 on an error, 77 when there is no CUDA device.
 *
 * Usage: KEEL_BACKEND_PATH=<builddir>/.libs keel-bench-blas-portable-cuda [--quick] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include "keel.h"

#include "bench/bench_cuda.h"
#include "bench/bench_summary.h"
#include "keel/ops.h"

#define TARGET 0.5


static keel_device_t *dev;
static keel_stream_t *ks;
static cudaStream_t cs;
static cublasHandle_t blas;

typedef struct {
    int ta, tb;
    size_t m, n, k, lda, ldb, ldc;
    float *a, *b, *c_keel, *c_blas;
} shape_t;

static void keel_sgemm(const shape_t *g)
{
    keel_gemm_params_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.layout = KEEL_COL_MAJOR;
    p.transa = g->ta ? KEEL_TRANS : KEEL_NO_TRANS;
    p.transb = g->tb ? KEEL_TRANS : KEEL_NO_TRANS;
    p.m = g->m, p.n = g->n, p.k = g->k, p.alpha = 1.0, p.beta = 0.0;
    p.a_type = p.b_type = p.c_type = KEEL_F32;
    p.a = g->a, p.lda = g->lda, p.b = g->b, p.ldb = g->ldb, p.c = g->c_keel, p.ldc = g->ldc;
    CHECK(keel_gemm(ks, &p));
}

static void blas_sgemm(const shape_t *g)
{
    const float one = 1.0f, zero = 0.0f;
    CK_BLAS(cublasSgemm(blas, g->ta ? CUBLAS_OP_T : CUBLAS_OP_N, g->tb ? CUBLAS_OP_T : CUBLAS_OP_N, (int)g->m,
                        (int)g->n, (int)g->k, &one, g->a, (int)g->lda, g->b, (int)g->ldb, &zero, g->c_blas,
                        (int)g->ldc));
}

/* Seconds per call over a batch of reps calls. */
static double time_batch(const shape_t *g, int keel, int reps)
{
    double t0 = now();
    for (int i = 0; i < reps; i++) {
        if (keel)
            keel_sgemm(g);
        else
            blas_sgemm(g);
    }
    if (keel)
        CHECK(keel_stream_synchronize(ks));
    else
        CK_CUDA(cudaStreamSynchronize(cs));
    return (now() - t0) / reps;
}

static int batch_reps(const shape_t *g, int keel)
{
    double one = time_batch(g, keel, 2);
    int reps = one > 0 ? (int)(0.05 / one) : 50;
    return reps < 1 ? 1 : reps > 1000 ? 1000 : reps;
}

/* A's element (i, l) of op(A), B's (l, j) of op(B), on the host copies. */
static double op_a(const shape_t *g, const float *a, size_t i, size_t l)
{
    return g->ta ? a[l + i * g->lda] : a[i + l * g->lda];
}

static double op_b(const shape_t *g, const float *b, size_t l, size_t j)
{
    return g->tb ? b[j + l * g->ldb] : b[l + j * g->ldb];
}

/* Both results at 256 sampled elements against a float64 reference:
 * within f32's error bound for a sum of k products. 0 when both are right. */
static int verify(const shape_t *g, const float *ha, const float *hb)
{
    size_t nc = (g->n - 1) * g->ldc + g->m;
    float *ck = malloc(nc * sizeof(float)), *cb = malloc(nc * sizeof(float));
    CHECK(keel_memcpy(ck, g->c_keel, nc * sizeof(float)));
    CK_CUDA(cudaMemcpy(cb, g->c_blas, nc * sizeof(float), cudaMemcpyDeviceToHost));
    int bad = 0;
    unsigned long long r = 0x9e3779b97f4a7c15ull;
    for (int s = 0; s < 256 && bad < 5; s++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        size_t i = (size_t)(r >> 33) % g->m, j = (size_t)(r >> 13) % g->n;
        double ref = 0, mag = 0;
        for (size_t l = 0; l < g->k; l++) {
            double x = op_a(g, ha, i, l) * op_b(g, hb, l, j);
            ref += x;
            mag += fabs(x);
        }
        double tol = 2.0 * g->k * 0x1p-24 * mag + 1e-30;
        double ek = fabs(ck[i + j * g->ldc] - ref), eb = fabs(cb[i + j * g->ldc] - ref);
        if (!(ek <= tol) || !(eb <= tol)) {
            fprintf(stderr, "C(%zu,%zu): Keel %.9g, cuBLAS %.9g, float64 %.9g (tolerance %.3g)\n", i, j,
                    ck[i + j * g->ldc], cb[i + j * g->ldc], ref, tol);
            bad++;
        }
    }
    free(ck);
    free(cb);
    return bad;
}

/* One row, recorded in the summary against target (0: none): returns the
 * median ratio, or -1 when a result is wrong. */
static double run_shape(const char *name, shape_t *g, int pairs, double target)
{
    size_t na = (g->ta ? g->m : g->k) * g->lda, nb = (g->tb ? g->k : g->n) * g->ldb, nc = g->n * g->ldc;
    float *ha = malloc(na * sizeof(float)), *hb = malloc(nb * sizeof(float));
    for (size_t i = 0; i < na; i++)
        ha[i] = (float)(rand() / (RAND_MAX + 1.0) * 2.0 - 1.0);
    for (size_t i = 0; i < nb; i++)
        hb[i] = (float)(rand() / (RAND_MAX + 1.0) * 2.0 - 1.0);
    void *a, *b, *ck, *cb;
    CHECK(keel_malloc(dev, na * sizeof(float), &a));
    CHECK(keel_malloc(dev, nb * sizeof(float), &b));
    CHECK(keel_malloc(dev, nc * sizeof(float), &ck));
    CHECK(keel_malloc(dev, nc * sizeof(float), &cb));
    CHECK(keel_memcpy(a, ha, na * sizeof(float)));
    CHECK(keel_memcpy(b, hb, nb * sizeof(float)));
    CHECK(keel_memset(ck, 0xff, nc * sizeof(float))); /* NaN: an element left unwritten shows */
    CHECK(keel_memset(cb, 0xff, nc * sizeof(float)));
    g->a = a, g->b = b, g->c_keel = ck, g->c_blas = cb;

    /* the first calls build Keel's module (NVRTC) and pick cuBLAS's kernel */
    time_batch(g, 1, 1);
    time_batch(g, 0, 1);
    double ratio = -1;
    if (verify(g, ha, hb) == 0) {
        int rk = batch_reps(g, 1), rb = batch_reps(g, 0);
        double tk[32], tb[32], rr[32];
        for (int p = 0; p < pairs; p++) {
            if (p % 2) {
                tk[p] = time_batch(g, 1, rk);
                tb[p] = time_batch(g, 0, rb);
            } else {
                tb[p] = time_batch(g, 0, rb);
                tk[p] = time_batch(g, 1, rk);
            }
            rr[p] = tb[p] / tk[p];
        }
        double lo = rr[0], hi = rr[0];
        for (int p = 1; p < pairs; p++) {
            lo = rr[p] < lo ? rr[p] : lo;
            hi = rr[p] > hi ? rr[p] : hi;
        }
        double mk = median(tk, pairs), mb = median(tb, pairs);
        ratio = median(rr, pairs);
        double flop = 2.0 * g->m * g->n * g->k;
        printf("%-34s keel %7.2f TFLOP/s  cuBLAS %7.2f TFLOP/s  ratio %.3f (pairs %.3f..%.3f)\n", name,
               flop / mk * 1e-12, flop / mb * 1e-12, ratio, lo, hi);
        bench_record(name, ratio, lo, hi, 1, target, bench_judge(ratio, 1, target));
    } else {
        printf("%-34s WRONG RESULT (see above)\n", name);
        bench_record(name, NAN, NAN, NAN, 1, target, BENCH_WRONG);
    }
    fflush(stdout);
    CHECK(keel_free(a));
    CHECK(keel_free(b));
    CHECK(keel_free(ck));
    CHECK(keel_free(cb));
    free(ha);
    free(hb);
    return ratio;
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    /* before Keel reads its environment: keel_gemm runs Keel's own kernels */
    setenv("KEEL_BLAS", "fallback", 1);
    if (keel_device_get("cuda", 0, &dev) != KEEL_OK) {
        fprintf(stderr, "keel-bench-blas-portable-cuda: no CUDA device: %s\n", keel_last_error());
        return 77;
    }
    CHECK(keel_device_default_stream(dev, &ks));
    keel_blas_kind_t kind;
    char what[256];
    CHECK(keel_device_get_blas_info(dev, &kind, what, sizeof what));
    if (kind != KEEL_BLAS_PORTABLE) {
        fprintf(stderr, "keel-bench-blas-portable-cuda: keel_gemm does not run Keel's kernels here: %s\n", what);
        return 1;
    }
    keel_device_properties_t props;
    memset(&props, 0, sizeof props);
    props.struct_size = sizeof props;
    CHECK(keel_device_get_properties(dev, &props));
    CK_CUDA(cudaSetDevice(0)); /* Keel's cuda:0 */
    CK_CUDA(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    CK_BLAS(cublasCreate(&blas));
    CK_BLAS(cublasSetStream(blas, cs));
    CK_BLAS(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH));
    int version = 0;
    CK_BLAS(cublasGetVersion(blas, &version));
    unsigned seed = (unsigned)time(NULL);
    srand(seed);
    printf("# keel-bench-blas-portable-cuda on %s (%s), cuBLAS %d, data seed %u\n", props.name, props.architecture,
           version, seed);
    printf("# keel: %s; alt: cublasSgemm; column-major f32, alpha 1, beta 0; ratio = cuBLAS time / Keel time\n",
           what);
    int pairs = quick ? 5 : 15;
    time_t start = time(NULL);

    shape_t target = {0, 0, 4096, 4096, 4096, 4096, 4096, 4096, NULL, NULL, NULL, NULL};
    run_shape("sgemm NN 4096x4096x4096", &target, pairs, TARGET);
    struct {
        const char *name;
        shape_t s;
    } info[] = {
        {"sgemm TN 4096x4096x4096", {1, 0, 4096, 4096, 4096, 4096, 4096, 4096, NULL, NULL, NULL, NULL}},
        {"sgemm NT 4096x4096x4096", {0, 1, 4096, 4096, 4096, 4096, 4096, 4096, NULL, NULL, NULL, NULL}},
        {"sgemm NN 4000x4000x4000", {0, 0, 4000, 4000, 4000, 4000, 4000, 4000, NULL, NULL, NULL, NULL}},
        {"sgemm NN 4097x4097x4097 (odd ld)", {0, 0, 4097, 4097, 4097, 4097, 4097, 4097, NULL, NULL, NULL, NULL}},
        {"sgemm NN 8192x8192x1024", {0, 0, 8192, 8192, 1024, 8192, 1024, 8192, NULL, NULL, NULL, NULL}},
    };
    for (size_t i = 0; i < (quick ? 2 : sizeof info / sizeof info[0]); i++)
        run_shape(info[i].name, &info[i].s, pairs, 0); /* for information: no target */
    cublasDestroy(blas);
    cudaStreamDestroy(cs);
    bench_print_summary("ratio = cuBLAS time / Keel time, > 1: Keel faster", difftime(time(NULL), start));
    return bench_exit_status();
}
