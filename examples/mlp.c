/* SPDX-License-Identifier: MIT */
/* keel-mlp: the built-in BLAS operations of keel/ops.h, the calls that
 * replace cuBLAS (cublasSgemm) and a cuBLASLt matmul with a bias and ReLU
 * epilogue.
 *
 *   1. keel_gemm: C = alpha A B + beta C, row-major f32.
 *   2. keel_dense: a two-layer MLP forward pass, PyTorch's
 *        h = relu(F.linear(x, w1, b1)),  y = F.linear(h, w2, b2)
 *      on row-major tensors x [batch, in], w1 [hidden, in], w2 [out, hidden].
 *
 * Both are checked against a double-precision product on the host with the
 * error bound of an f32 sum of K products, (K + 2) eps sum |terms|; the
 * second layer's bound adds what the first layer's error can change. Runs on
 * the device KEEL_BACKEND selects. */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#define EXAMPLE_NAME "keel-mlp"
#include "example.h"

enum { M = 96, N = 80, K = 300 };                          /* the GEMM */
enum { BATCH = 64, IN = 300, HIDDEN = 128, OUT = 10 };    /* the MLP */

static uint64_t seed, rng;

/* out[b][o] and its bound for one dense layer on the host, in double:
 * out = act(w in + bias), in [batch][k] with an error of at most in_err
 * per element (the device's input to this layer may differ by that). */
static void dense_ref(int batch, int k, int m, const double *in, const double *in_err, const float *w,
                      const float *bias, int relu, double *out, double *out_err)
{
    for (int b = 0; b < batch; b++)
        for (int o = 0; o < m; o++) {
            double s = bias[o], mag = fabs(bias[o]), prop = 0;
            for (int p = 0; p < k; p++) {
                double wv = w[(size_t)o * k + p], xv = in[(size_t)b * k + p], e = in_err[(size_t)b * k + p];
                s += wv * xv;
                mag += fabs(wv) * (fabs(xv) + e);
                prop += fabs(wv) * e;
            }
            /* relu moves no value farther from the reference than it was */
            out[(size_t)b * m + o] = relu && s < 0 ? 0 : s;
            out_err[(size_t)b * m + o] = (k + 2) * (double)FLT_EPSILON * mag + prop;
        }
}

/* The number of elements of got that are farther from ref than err allows. */
static size_t count_bad(size_t n, const float *got, const double *ref, const double *err, double *worst)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs(got[i] - ref[i]);
        if (!(e <= err[i])) /* NaN fails too */
            bad++;
        if (e > *worst)
            *worst = e;
    }
    return bad;
}

static int gemm(keel_device_t *dev, keel_stream_t *s)
{
    static float ha[M * K], hb[K * N], hc[M * N];
    static double ref[M * N], err[M * N];
    double worst = 0;
    const double alpha = 1.5, beta = -0.5;
    example_fill(ha, M * K, -1, 1, &rng);
    example_fill(hb, K * N, -1, 1, &rng);
    example_fill(hc, M * N, -1, 1, &rng);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double sum = 0, mag = 0;
            for (int p = 0; p < K; p++) {
                sum += (double)ha[i * K + p] * hb[p * N + j];
                mag += fabs((double)ha[i * K + p] * hb[p * N + j]);
            }
            ref[i * N + j] = alpha * sum + beta * hc[i * N + j];
            err[i * N + j] = (K + 2) * (double)FLT_EPSILON * (fabs(alpha) * mag + fabs(beta * hc[i * N + j]));
        }

    void *da, *db, *dc;
    CHECK(example_upload(dev, s, ha, sizeof ha, &da));
    CHECK(example_upload(dev, s, hb, sizeof hb, &db));
    CHECK(example_upload(dev, s, hc, sizeof hc, &dc));

    /* Zero the struct first: fields a later Keel adds then read as their
     * defaults. Leading dimensions count elements, as in cuBLAS. */
    keel_gemm_params_t p = {0};
    p.struct_size = sizeof p;
    p.layout = KEEL_ROW_MAJOR;
    p.transa = p.transb = KEEL_NO_TRANS;
    p.m = M, p.n = N, p.k = K;
    p.alpha = alpha, p.beta = beta;
    p.a_type = p.b_type = p.c_type = KEEL_F32;
    p.compute = KEEL_COMPUTE_DEFAULT; /* f32 throughout, never tf32 */
    p.a = da, p.lda = K;
    p.b = db, p.ldb = N;
    p.c = dc, p.ldc = N;
    CHECK(keel_gemm(s, &p));
    CHECK(keel_memcpy_async(hc, dc, sizeof hc, s));
    CHECK(keel_stream_synchronize(s));
    CHECK(keel_free(da));
    CHECK(keel_free(db));
    CHECK(keel_free(dc));

    size_t bad = count_bad(M * N, hc, ref, err, &worst);
    if (bad) {
        fprintf(stderr, "keel-mlp: gemm FAILED: %zu of %d elements wrong (worst error %.3g, seed %llu)\n", bad,
                M * N, worst, (unsigned long long)seed);
        return 1;
    }
    printf("keel-mlp: gemm %dx%dx%d verified (worst error %.2g)\n", M, N, K, worst);
    return 0;
}

static int mlp(keel_device_t *dev, keel_stream_t *s)
{
    static float x[BATCH * IN], w1[HIDDEN * IN], b1[HIDDEN], w2[OUT * HIDDEN], b2[OUT], y[BATCH * OUT];
    static double xd[BATCH * IN], x_err[BATCH * IN], h[BATCH * HIDDEN], h_err[BATCH * HIDDEN];
    static double ref[BATCH * OUT], err[BATCH * OUT];
    example_fill(x, BATCH * IN, -1, 1, &rng);
    example_fill(w1, HIDDEN * IN, -0.1f, 0.1f, &rng);
    example_fill(b1, HIDDEN, -0.5f, 0.5f, &rng);
    example_fill(w2, OUT * HIDDEN, -0.1f, 0.1f, &rng);
    example_fill(b2, OUT, -0.5f, 0.5f, &rng);
    for (int i = 0; i < BATCH * IN; i++)
        xd[i] = x[i], x_err[i] = 0;
    dense_ref(BATCH, IN, HIDDEN, xd, x_err, w1, b1, 1, h, h_err);
    dense_ref(BATCH, HIDDEN, OUT, h, h_err, w2, b2, 0, ref, err);

    void *dx, *dw1, *db1, *dh, *dw2, *db2, *dy;
    CHECK(example_upload(dev, s, x, sizeof x, &dx));
    CHECK(example_upload(dev, s, w1, sizeof w1, &dw1));
    CHECK(example_upload(dev, s, b1, sizeof b1, &db1));
    CHECK(example_upload(dev, s, w2, sizeof w2, &dw2));
    CHECK(example_upload(dev, s, b2, sizeof b2, &db2));
    CHECK(keel_malloc(dev, BATCH * HIDDEN * sizeof(float), &dh)); /* the hidden layer stays on the device */
    CHECK(keel_malloc(dev, sizeof y, &dy));

    /* F.linear(x, w, b) on row-major tensors, as keel/ops.h spells it:
     * column-major with W transposed, m = out features, n = batch,
     * k = in features. This is the form the fused GPU paths take. */
    keel_dense_params_t l1 = {0};
    l1.struct_size = sizeof l1;
    l1.layout = KEEL_COL_MAJOR;
    l1.transw = KEEL_TRANS;
    l1.m = HIDDEN, l1.n = BATCH, l1.k = IN;
    l1.dtype = KEEL_F32;
    l1.act = KEEL_ACT_RELU;
    l1.w = dw1, l1.ldw = IN;
    l1.x = dx, l1.ldx = IN;
    l1.bias = db1;
    l1.y = dh, l1.ldy = HIDDEN;
    CHECK(keel_dense(s, &l1));

    keel_dense_params_t l2 = l1; /* the same form, other shapes, no activation */
    l2.m = OUT, l2.n = BATCH, l2.k = HIDDEN;
    l2.act = KEEL_ACT_NONE;
    l2.w = dw2, l2.ldw = HIDDEN;
    l2.x = dh, l2.ldx = HIDDEN;
    l2.bias = db2;
    l2.y = dy, l2.ldy = OUT;
    CHECK(keel_dense(s, &l2));
    CHECK(keel_memcpy_async(y, dy, sizeof y, s));
    CHECK(keel_stream_synchronize(s));
    void *bufs[] = {dx, dw1, db1, dh, dw2, db2, dy};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        CHECK(keel_free(bufs[i]));

    double worst = 0;
    size_t bad = count_bad(BATCH * OUT, y, ref, err, &worst);
    if (bad) {
        fprintf(stderr, "keel-mlp: mlp FAILED: %zu of %d outputs wrong (worst error %.3g, seed %llu)\n", bad,
                BATCH * OUT, worst, (unsigned long long)seed);
        return 1;
    }
    printf("keel-mlp: mlp %d -> %d (relu) -> %d, batch %d, verified (worst error %.2g)\n", IN, HIDDEN, OUT, BATCH,
           worst);
    return 0;
}

int main(void)
{
    keel_device_t *dev;
    keel_stream_t *s;
    seed = rng = example_seed();
    CHECK(keel_device_default(&dev));
    CHECK(keel_stream_create(dev, KEEL_STREAM_DEFAULT, 0, &s));
    int rc = gemm(dev, s) || mlp(dev, s);
    CHECK(keel_stream_destroy(s));
    if (rc == 0)
        printf("keel-mlp: on %s verified\n", keel_device_name(dev));
    return rc;
}
