/* SPDX-License-Identifier: MIT */
/* keel-aot: a kernel compiled ahead of time. keel-cc made scale.keelmod from
 * scale.kc; this program loads it on whatever device Keel selects
 * (KEEL_BACKEND, KEEL_DEVICE), runs it on random data and checks the result
 * against the host, in double precision.
 *
 * Usage: keel-aot [MODULE-FILE]   (default: scale.keelmod)
 * Exit status: 0 when every element matches, 1 otherwise. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <keel.h>

#define CHECK(call)                                                                                  \
    do {                                                                                             \
        keel_status_t st_ = (call);                                                                  \
        if (st_ != KEEL_OK) {                                                                        \
            fprintf(stderr, "keel-aot: %s failed: %s: %s\n", #call, keel_status_name(st_),           \
                    keel_last_error());                                                              \
            return 1;                                                                                \
        }                                                                                            \
    } while (0)

/* Uniform in [-1, 1), from a xorshift64* generator seeded by the clock. */
static uint64_t rng;
static float random_float(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (float)((double)((rng * 2685821657736338717ull) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "scale.keelmod";
    int n = 1000003;   /* not a multiple of the block: the last block's tail idles */
    float a = 1.75f;
    size_t bytes = (size_t)n * sizeof(float);
    float *x = malloc(bytes), *y = malloc(bytes);
    if (!x || !y)
        return 1;
    rng = (uint64_t)time(NULL) | 1;
    for (int i = 0; i < n; i++) {
        x[i] = random_float();
        y[i] = NAN;   /* an element the kernel skips shows */
    }

    keel_device_t *dev;
    keel_stream_t *stream;
    keel_module_t *module;
    keel_kernel_t *kernel;
    void *dx, *dy;
    CHECK(keel_device_default(&dev));
    CHECK(keel_stream_create(dev, KEEL_STREAM_DEFAULT, 0, &stream));
    /* The module file holds code for several backends: Keel takes the part
     * for this device, or compiles the kernel's source if it has none. */
    CHECK(keel_module_load_file(dev, path, &module));
    CHECK(keel_module_get_kernel(module, "scale", &kernel));

    CHECK(keel_malloc(dev, bytes, &dx));
    CHECK(keel_malloc(dev, bytes, &dy));
    CHECK(keel_memcpy_async(dx, x, bytes, stream));
    CHECK(keel_memcpy_async(dy, y, bytes, stream));
    keel_dim3_t grid = {(unsigned)(n + 255) / 256, 1, 1}, block = {256, 1, 1};
    /* The module file records the kernel's parameters (int, float, two
     * pointers): a launch with other arguments is refused, not run. */
    CHECK(KEEL_LAUNCH(kernel, grid, block, 0, stream, n, a, dx, dy));
    CHECK(keel_memcpy_async(y, dy, bytes, stream));
    CHECK(keel_stream_synchronize(stream));

    int bad = -1;
    for (int i = 0; i < n && bad < 0; i++) {
        double ref = (double)a * x[i];
        if (!(fabs(y[i] - ref) <= 1e-6 * fabs(ref)))
            bad = i;
    }
    if (bad >= 0)
        fprintf(stderr, "keel-aot: y[%d] = %.9g, expected %.9g\n", bad, y[bad], (double)a * x[bad]);
    else
        printf("keel-aot: %s: scale on %s: %d elements match the host\n", path, keel_device_name(dev), n);

    CHECK(keel_free(dx));
    CHECK(keel_free(dy));
    CHECK(keel_module_unload(module));
    CHECK(keel_stream_destroy(stream));
    free(x);
    free(y);
    return bad >= 0;
}
