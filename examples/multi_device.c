/* SPDX-License-Identifier: MIT */
/* keel-multi-device: split one job over every device of a backend, as a
 * CUDA program loops over cudaSetDevice(0 .. count - 1).
 *
 * Keel has no current device: every device is a handle, and every call
 * names its device, or a stream, module or pointer of it. The program takes
 * the backend of the default device (KEEL_BACKEND), and for each of its
 * devices builds the kernel (a module lives on one device), makes a stream,
 * allocates its part of the vectors, and enqueues copy in, kernel, copy out.
 * All devices work at once; the host then waits for each stream, and checks
 * the gathered result against a double-precision computation.
 *
 * On the CPU, KEEL_CPU_DEVICES=3 makes three devices:
 *   KEEL_BACKEND=cpu KEEL_CPU_DEVICES=3 keel-multi-device */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#define EXAMPLE_NAME "keel-multi-device"
#include "example.h"

enum { MAX_DEVICES = 16 };

static const char *source =
    "keel_kernel void saxpy(int n, float a, const float *x, float *y)\n"
    "{\n"
    "    int i = keel_global_x();\n"
    "    if (i < n)\n"
    "        y[i] = a * x[i] + y[i];\n"
    "}\n";

/* What one device holds. */
struct part {
    keel_device_t *dev;
    keel_stream_t *stream;
    keel_module_t *mod;
    float *dx, *dy;
    size_t off;
    int len;
};

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000003;
    if (n < MAX_DEVICES || n > ((size_t)1 << 28)) {
        fprintf(stderr, "usage: keel-multi-device [N]   (N in %d..2^28)\n", MAX_DEVICES);
        return 1;
    }
    const float a = -1.25f;

    /* The backend of the default device, and how many devices it has. */
    keel_device_t *first;
    keel_backend_t *backend;
    keel_backend_info_t info = {0};
    info.struct_size = sizeof info;
    CHECK(keel_device_default(&first));
    CHECK(keel_device_get_backend(first, &backend));
    CHECK(keel_backend_get_info(backend, &info));
    int count = info.device_count < MAX_DEVICES ? info.device_count : MAX_DEVICES;

    float *hx = malloc(n * sizeof *hx), *hy = malloc(n * sizeof *hy), *y0 = malloc(n * sizeof *y0);
    if (!hx || !hy || !y0) {
        fprintf(stderr, "keel-multi-device: out of host memory\n");
        return 1;
    }
    uint64_t seed = example_seed(), rng = seed;
    example_fill(hx, n, -1, 1, &rng);
    example_fill(y0, n, -1, 1, &rng);
    for (size_t i = 0; i < n; i++)
        hy[i] = y0[i];

    /* Device d takes elements [d n / count, (d + 1) n / count). */
    struct part parts[MAX_DEVICES];
    for (int d = 0; d < count; d++) {
        struct part *p = &parts[d];
        keel_kernel_t *saxpy;
        p->off = d * n / count;
        p->len = (int)((d + 1) * n / count - p->off);
        CHECK(keel_backend_get_device(backend, d, &p->dev));
        CHECK(keel_module_build(p->dev, source, "saxpy.kc", NULL, 0, &p->mod));
        CHECK(keel_module_get_kernel(p->mod, "saxpy", &saxpy));
        CHECK(keel_stream_create(p->dev, KEEL_STREAM_DEFAULT, 0, &p->stream));
        /* hx and hy are not pinned: they must stay unchanged until the
         * stream has copied them, and are not touched again before the waits. */
        CHECK(example_upload(p->dev, p->stream, hx + p->off, p->len * sizeof(float), (void **)&p->dx));
        CHECK(example_upload(p->dev, p->stream, hy + p->off, p->len * sizeof(float), (void **)&p->dy));
        CHECK(KEEL_LAUNCH(saxpy, example_grid(p->len), example_block(), 0, p->stream, p->len, a,
                          (const float *)p->dx, p->dy));
        CHECK(keel_memcpy_async(hy + p->off, p->dy, p->len * sizeof(float), p->stream));
    }
    /* Gather: each stream's last copy wrote its part of hy. */
    for (int d = 0; d < count; d++)
        CHECK(keel_stream_synchronize(parts[d].stream));

    size_t bad = 0;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double ref = (double)a * hx[i] + y0[i];
        double e = fabs(hy[i] - ref);
        if (!(e <= 2 * (double)FLT_EPSILON * (fabs((double)a * hx[i]) + fabs(y0[i]))))
            bad++;
        if (e > worst)
            worst = e;
    }

    for (int d = 0; d < count; d++) {
        CHECK(keel_free(parts[d].dx));
        CHECK(keel_free(parts[d].dy));
        CHECK(keel_stream_destroy(parts[d].stream));
        CHECK(keel_module_unload(parts[d].mod));
    }
    free(hx);
    free(hy);
    free(y0);
    if (bad) {
        fprintf(stderr, "keel-multi-device: FAILED: %zu of %zu elements wrong (worst error %.3g, seed %llu)\n", bad,
                n, worst, (unsigned long long)seed);
        return 1;
    }
    printf("keel-multi-device: %zu elements split over %d device%s of %s", n, count, count == 1 ? "" : "s",
           info.name);
    for (int d = 0; d < count; d++)
        printf("%s%s (%d)", d ? ", " : ": ", keel_device_name(parts[d].dev), parts[d].len);
    printf(", verified (worst error %.2g)\n", worst);
    return 0;
}
