/* SPDX-License-Identifier: MIT */
/* keel-streams: overlapping copies and kernels on several streams, the
 * pattern of CUDA's "simpleStreams": a vector is cut into chunks, and each
 * chunk goes through its own stream (copy in, kernel, copy out) so that one
 * chunk's copies can overlap another chunk's kernel.
 *
 *   - the host buffers are pinned (keel_malloc_pinned, as cudaMallocHost), so
 *     the copies are asynchronous;
 *   - an event on the main stream starts all chunk streams together, each
 *     chunk stream records an event when its chunk is done, and the main
 *     stream waits on every one of them (keel_stream_wait_event) before its
 *     last event: the host waits only for that one stream;
 *   - keel_event_elapsed_time gives the time of the whole pipeline.
 *
 * Keel streams never order themselves implicitly with one another (as CUDA
 * streams made with cudaStreamNonBlocking): events do it. Checks every
 * element against a double-precision computation on the host. */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#define EXAMPLE_NAME "keel-streams"
#include "example.h"

enum { CHUNKS = 4 };

/* y = a x^2 + x for each element, written once in Keel's kernel language. */
static const char *source =
    "keel_kernel void poly(int n, float a, const float *x, float *y)\n"
    "{\n"
    "    int i = keel_global_x();\n"
    "    if (i < n)\n"
    "        y[i] = a * x[i] * x[i] + x[i];\n"
    "}\n";

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : (size_t)1 << 22;
    if (n < CHUNKS || n > ((size_t)1 << 28)) {
        fprintf(stderr, "usage: keel-streams [N]   (N in %d..2^28)\n", CHUNKS);
        return 1;
    }
    const float a = 0.75f;

    keel_device_t *dev;
    keel_module_t *mod;
    keel_kernel_t *poly;
    CHECK(keel_device_default(&dev));
    CHECK(keel_module_build(dev, source, "poly.kc", NULL, 0, &mod));
    CHECK(keel_module_get_kernel(mod, "poly", &poly));

    float *hx, *hy, *dx, *dy;
    CHECK(keel_malloc_pinned(dev, n * sizeof(float), (void **)&hx));
    CHECK(keel_malloc_pinned(dev, n * sizeof(float), (void **)&hy));
    CHECK(keel_malloc(dev, n * sizeof(float), (void **)&dx));
    CHECK(keel_malloc(dev, n * sizeof(float), (void **)&dy));
    uint64_t seed = example_seed(), rng = seed;
    example_fill(hx, n, -2, 2, &rng);
    for (size_t i = 0; i < n; i++)
        hy[i] = NAN; /* an element no stream writes cannot pass */

    keel_stream_t *main_stream, *streams[CHUNKS];
    keel_event_t *start, *end, *done[CHUNKS];
    CHECK(keel_stream_create(dev, KEEL_STREAM_DEFAULT, 0, &main_stream));
    CHECK(keel_event_create(dev, KEEL_EVENT_DEFAULT, &start));
    CHECK(keel_event_create(dev, KEEL_EVENT_DEFAULT, &end));
    for (int c = 0; c < CHUNKS; c++) {
        CHECK(keel_stream_create(dev, KEEL_STREAM_DEFAULT, 0, &streams[c]));
        /* only ordering is wanted of these: no timing, which is cheaper */
        CHECK(keel_event_create(dev, KEEL_EVENT_DISABLE_TIMING, &done[c]));
    }

    CHECK(keel_event_record(start, main_stream));
    for (int c = 0; c < CHUNKS; c++) {
        size_t off = c * n / CHUNKS; /* chunk c: [c n / CHUNKS, (c + 1) n / CHUNKS) */
        int len = (int)((c + 1) * n / CHUNKS - off);
        keel_stream_t *s = streams[c];
        CHECK(keel_stream_wait_event(s, start));
        CHECK(keel_memcpy_async(dx + off, hx + off, len * sizeof(float), s));
        CHECK(KEEL_LAUNCH(poly, example_grid(len), example_block(), 0, s, len, a, (const float *)(dx + off),
                          dy + off));
        CHECK(keel_memcpy_async(hy + off, dy + off, len * sizeof(float), s));
        CHECK(keel_event_record(done[c], s));
        CHECK(keel_stream_wait_event(main_stream, done[c]));
    }
    CHECK(keel_event_record(end, main_stream));
    CHECK(keel_stream_synchronize(main_stream)); /* every chunk is done once this is */
    float ms = 0;
    CHECK(keel_event_elapsed_time(start, end, &ms));

    /* Each product and sum of f32 rounds once: three roundings of values
     * no larger than |a x^2| + |x|. */
    size_t bad = 0;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double x = hx[i], ref = a * x * x + x;
        double e = fabs(hy[i] - ref);
        if (!(e <= 3 * (double)FLT_EPSILON * (fabs(a * x * x) + fabs(x))))
            bad++;
        if (e > worst)
            worst = e;
    }

    for (int c = 0; c < CHUNKS; c++) {
        CHECK(keel_event_destroy(done[c]));
        CHECK(keel_stream_destroy(streams[c]));
    }
    CHECK(keel_event_destroy(start));
    CHECK(keel_event_destroy(end));
    CHECK(keel_stream_destroy(main_stream));
    CHECK(keel_free(dx));
    CHECK(keel_free(dy));
    CHECK(keel_free(hx));
    CHECK(keel_free(hy));
    CHECK(keel_module_unload(mod));
    if (bad) {
        fprintf(stderr, "keel-streams: FAILED: %zu of %zu elements wrong (worst error %.3g, seed %llu)\n", bad, n,
                worst, (unsigned long long)seed);
        return 1;
    }
    printf("keel-streams: %zu elements in %d streams on %s verified (worst error %.2g), %.3f ms, %.2f GB/s\n", n,
           CHUNKS, keel_device_name(dev), worst, ms, ms > 0 ? 2.0 * n * sizeof(float) / (ms * 1e6) : 0.0);
    return 0;
}
