/* SPDX-License-Identifier: MIT */
/* keel-matmul: the classic tiled matrix multiply, written once in Keel's
 * kernel language and run on whatever device Keel selects (KEEL_BACKEND):
 * shared-memory tiles, a per-thread accumulator that lives across barriers,
 * sizes that need not be multiples of the tile. Checks C = A * B against a
 * double-precision product on the host and prints the kernel's speed.
 *
 *   keel-matmul [M N K]     (default 300 200 250) */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <keel.h>

#define EXAMPLE_NAME "keel-matmul"
#include "example.h"

/* C (m x n) = A (m x k) * B (k x n), row-major. One block computes a
 * 16 x 16 tile of C; each step loads a tile of A and of B into shared memory
 * (zero past the edges), waits, and accumulates their product. */
static const char *source =
    "#define TILE 16\n"
    "keel_block_kernel void matmul(int m, int n, int k, const float *a, const float *b, float *c)\n"
    "{\n"
    "    keel_shared float as[TILE][TILE];\n"
    "    keel_shared float bs[TILE][TILE];\n"
    "    keel_private(float, acc);\n"
    "    keel_threads { keel_priv(acc) = 0.0f; }\n"
    "    for (int t = 0; t < k; t += TILE) {\n"
    "        keel_threads {\n"
    "            int tx = keel_thread_x(), ty = keel_thread_y();\n"
    "            int row = keel_global_y(), col = keel_global_x();\n"
    "            as[ty][tx] = row < m && t + tx < k ? a[row * k + t + tx] : 0.0f;\n"
    "            bs[ty][tx] = t + ty < k && col < n ? b[(t + ty) * n + col] : 0.0f;\n"
    "        }\n"
    "        keel_barrier();\n"
    "        keel_threads {\n"
    "            float s = keel_priv(acc);\n"
    "            for (int i = 0; i < TILE; i++)\n"
    "                s += as[keel_thread_y()][i] * bs[i][keel_thread_x()];\n"
    "            keel_priv(acc) = s;\n"
    "        }\n"
    "        keel_barrier();\n"
    "    }\n"
    "    keel_threads {\n"
    "        if (keel_global_y() < m && keel_global_x() < n)\n"
    "            c[keel_global_y() * n + keel_global_x()] = keel_priv(acc);\n"
    "    }\n"
    "}\n";

int main(int argc, char **argv)
{
    int m = 300, n = 200, k = 250;
    if (argc == 4) {
        m = atoi(argv[1]);
        n = atoi(argv[2]);
        k = atoi(argv[3]);
    }
    if (argc != 1 && argc != 4) {
        fprintf(stderr, "usage: keel-matmul [M N K]\n");
        return 1;
    }
    if (m <= 0 || n <= 0 || k <= 0 || m > 8192 || n > 8192 || k > 8192) {
        fprintf(stderr, "keel-matmul: sizes must be in 1..8192\n");
        return 1;
    }
    size_t sa = (size_t)m * k, sb = (size_t)k * n, sc = (size_t)m * n;
    float *ha = malloc(sa * sizeof *ha), *hb = malloc(sb * sizeof *hb), *hc = malloc(sc * sizeof *hc);
    if (!ha || !hb || !hc) {
        fprintf(stderr, "keel-matmul: out of host memory\n");
        return 1;
    }
    uint64_t seed = example_seed(), rng = seed;
    example_fill(ha, sa, -1, 1, &rng);
    example_fill(hb, sb, -1, 1, &rng);
    for (size_t i = 0; i < sc; i++)
        hc[i] = NAN; /* an element the kernel never writes cannot pass */

    keel_device_t *dev;
    keel_stream_t *s;
    keel_module_t *mod;
    keel_kernel_t *kern;
    keel_event_t *t0, *t1;
    CHECK(keel_device_default(&dev));
    CHECK(keel_stream_create(dev, KEEL_STREAM_DEFAULT, 0, &s));
    CHECK(keel_event_create(dev, KEEL_EVENT_DEFAULT, &t0));
    CHECK(keel_event_create(dev, KEEL_EVENT_DEFAULT, &t1));
    CHECK(keel_module_build(dev, source, "matmul.kc", NULL, 0, &mod));
    CHECK(keel_module_get_kernel(mod, "matmul", &kern));

    void *da, *db, *dc;
    CHECK(keel_malloc(dev, sa * sizeof(float), &da));
    CHECK(keel_malloc(dev, sb * sizeof(float), &db));
    CHECK(keel_malloc(dev, sc * sizeof(float), &dc));
    CHECK(keel_memcpy_async(da, ha, sa * sizeof(float), s));
    CHECK(keel_memcpy_async(db, hb, sb * sizeof(float), s));
    CHECK(keel_memcpy_async(dc, hc, sc * sizeof(float), s));

    keel_dim3_t block = {16, 16, 1};
    keel_dim3_t grid = {(unsigned)(n + 15) / 16, (unsigned)(m + 15) / 16, 1};
    CHECK(keel_event_record(t0, s));
    CHECK(KEEL_LAUNCH(kern, grid, block, 0, s, m, n, k, (const float *)da, (const float *)db, (float *)dc));
    CHECK(keel_event_record(t1, s));
    CHECK(keel_memcpy_async(hc, dc, sc * sizeof(float), s));
    CHECK(keel_stream_synchronize(s));
    float ms = 0;
    CHECK(keel_event_elapsed_time(t0, t1, &ms));

    /* Each element against a double product, with a bound that grows with k. */
    size_t bad = 0;
    double worst = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double ref = 0, mag = 0;
            for (int p = 0; p < k; p++) {
                ref += (double)ha[(size_t)i * k + p] * hb[(size_t)p * n + j];
                mag += fabs((double)ha[(size_t)i * k + p] * hb[(size_t)p * n + j]);
            }
            double err = fabs(hc[(size_t)i * n + j] - ref);
            if (!(err <= 1e-5 * mag + 1e-6))
                bad++;
            if (err > worst)
                worst = err;
        }

    CHECK(keel_free(da));
    CHECK(keel_free(db));
    CHECK(keel_free(dc));
    CHECK(keel_event_destroy(t0));
    CHECK(keel_event_destroy(t1));
    CHECK(keel_module_unload(mod));
    CHECK(keel_stream_destroy(s));
    free(ha);
    free(hb);
    free(hc);
    if (bad) {
        fprintf(stderr, "keel-matmul: FAILED: %zu of %zu elements wrong (worst error %.3g, seed %llu)\n", bad, sc,
                worst, (unsigned long long)seed);
        return 1;
    }
    printf("keel-matmul: %dx%dx%d on %s verified (worst error %.2g), %.3f ms, %.2f GFLOP/s\n", m, n, k,
           keel_device_name(dev), worst, ms, ms > 0 ? 2.0 * m * n * k / (ms * 1e6) : 0.0);
    return 0;
}
