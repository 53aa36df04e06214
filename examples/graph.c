/* SPDX-License-Identifier: MIT */
/* keel-graph: record a sequence of stream work once and replay it, as with
 * cudaStreamBeginCapture / cudaGraphInstantiate / cudaGraphLaunch.
 *
 * The sequence: copy the input to the device, a portable kernel
 * (y = a x + b), a built-in operation (the sum of y, keel_reduce), and the
 * copies of y and of the sum back to the host. It is captured on a stream
 * into a graph, instantiated, and launched several times; before each
 * launch the host writes new input into the same pinned buffer. A graph
 * holds the pointers and the kernel arguments of the capture, not the data
 * behind the pointers: new data goes through, new arguments need a new
 * capture.
 *
 * The input values are multiples of 1/4 small enough that every f32 result
 * here, the sum included in any order of addition, is exact: each replay's
 * results must equal the double-precision ones on the host. */
#include <stdlib.h>

#define EXAMPLE_NAME "keel-graph"
#include "example.h"

enum { N = 4096, REPLAYS = 5 };

static const char *source =
    "keel_kernel void axpb(int n, float a, float b, const float *x, float *y)\n"
    "{\n"
    "    int i = keel_global_x();\n"
    "    if (i < n)\n"
    "        y[i] = a * x[i] + b;\n"
    "}\n";

static const float A = 3.0f, B = 0.5f;

/* The work of one pass: what is captured, and what runs once before the
 * capture (the first call of an operation may set up a vendor library's
 * handle or workspace, which a capture may not allow). */
static keel_status_t enqueue(keel_stream_t *s, keel_kernel_t *axpb, float *dx, float *dy, float *dsum,
                             const float *hx, float *hy, float *hsum)
{
    keel_status_t st;
    if ((st = keel_memcpy_async(dx, hx, N * sizeof(float), s)) != KEEL_OK ||
        (st = KEEL_LAUNCH(axpb, example_grid(N), example_block(), 0, s, (int)N, A, B, (const float *)dx, dy)) !=
            KEEL_OK ||
        (st = keel_reduce(s, KEEL_REDUCE_SUM, KEEL_F32, 1, N, dy, N, KEEL_AXIS_ALL, dsum)) != KEEL_OK ||
        (st = keel_memcpy_async(hy, dy, N * sizeof(float), s)) != KEEL_OK ||
        (st = keel_memcpy_async(hsum, dsum, sizeof(float), s)) != KEEL_OK)
        return st;
    return KEEL_OK;
}

/* New input: k / 4 for random integers k in [-100, 100]. */
static void new_input(float *hx, float *hy, float *hsum, uint64_t *rng)
{
    for (int i = 0; i < N; i++) {
        hx[i] = (float)(int)(100.5f * example_uniform(rng)) / 4.0f;
        hy[i] = -1e30f; /* stale results cannot pass: no y is that */
    }
    *hsum = -1e30f;
}

/* 0 when y and the sum are exactly the host's. */
static int check(const float *hx, const float *hy, const float *hsum, int replay)
{
    double sum = 0;
    for (int i = 0; i < N; i++) {
        double y = (double)A * hx[i] + B;
        sum += y;
        if (hy[i] != y) {
            fprintf(stderr, "keel-graph: FAILED: replay %d: y[%d] = %.9g, expected %.9g\n", replay, i, hy[i], y);
            return 1;
        }
    }
    if (*hsum != sum) {
        fprintf(stderr, "keel-graph: FAILED: replay %d: sum = %.9g, expected %.9g\n", replay, *hsum, sum);
        return 1;
    }
    return 0;
}

int main(void)
{
    keel_device_t *dev;
    keel_stream_t *s;
    keel_module_t *mod;
    keel_kernel_t *axpb;
    CHECK(keel_device_default(&dev));
    CHECK(keel_stream_create(dev, KEEL_STREAM_DEFAULT, 0, &s));
    CHECK(keel_module_build(dev, source, "axpb.kc", NULL, 0, &mod));
    CHECK(keel_module_get_kernel(mod, "axpb", &axpb));

    /* All memory a graph uses is allocated before the capture and freed
     * after its last replay; the host side is pinned so that the copies
     * stay asynchronous and read the buffer at replay time. */
    float *hx, *hy, *hsum, *dx, *dy, *dsum;
    CHECK(keel_malloc_pinned(dev, N * sizeof(float), (void **)&hx));
    CHECK(keel_malloc_pinned(dev, N * sizeof(float), (void **)&hy));
    CHECK(keel_malloc_pinned(dev, sizeof(float), (void **)&hsum));
    CHECK(keel_malloc(dev, N * sizeof(float), (void **)&dx));
    CHECK(keel_malloc(dev, N * sizeof(float), (void **)&dy));
    CHECK(keel_malloc(dev, sizeof(float), (void **)&dsum));
    uint64_t seed = example_seed(), rng = seed;

    /* Once without a graph. */
    new_input(hx, hy, hsum, &rng);
    CHECK(enqueue(s, axpb, dx, dy, dsum, hx, hy, hsum));
    CHECK(keel_stream_synchronize(s));
    if (check(hx, hy, hsum, 0))
        return 1;

    /* Capture: the calls are recorded, nothing runs. */
    keel_graph_t *graph;
    keel_graph_exec_t *exec;
    CHECK(keel_stream_begin_capture(s));
    keel_status_t st = enqueue(s, axpb, dx, dy, dsum, hx, hy, hsum);
    if (st != KEEL_OK) {
        fprintf(stderr, "keel-graph: capture failed: %s: %s\n", keel_status_name(st), keel_last_error());
        keel_graph_t *partial;
        if (keel_stream_end_capture(s, &partial) == KEEL_OK) /* a stream must not be left capturing */
            keel_graph_destroy(partial);
        return 1;
    }
    CHECK(keel_stream_end_capture(s, &graph));
    CHECK(keel_graph_instantiate(graph, &exec));
    CHECK(keel_graph_destroy(graph)); /* the instantiated graph lives on */

    /* Replays, each on new input. */
    for (int r = 1; r <= REPLAYS; r++) {
        new_input(hx, hy, hsum, &rng);
        CHECK(keel_graph_launch(exec, s));
        CHECK(keel_stream_synchronize(s));
        if (check(hx, hy, hsum, r)) {
            fprintf(stderr, "keel-graph: seed %llu\n", (unsigned long long)seed);
            return 1;
        }
    }
    float last_sum = *hsum;
    CHECK(keel_graph_exec_destroy(exec));
    float *bufs[] = {hx, hy, hsum, dx, dy, dsum};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        CHECK(keel_free(bufs[i]));
    CHECK(keel_module_unload(mod));
    CHECK(keel_stream_destroy(s));
    printf("keel-graph: %d replays of copy, kernel, sum, copies on %s verified (last sum %g)\n", REPLAYS,
           keel_device_name(dev), last_sum);
    return 0;
}
