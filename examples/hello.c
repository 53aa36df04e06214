/* SPDX-License-Identifier: MIT */
/* The example of README.md: one kernel for every device; allocate, copy, launch, synchronize, free. */
#include <stdio.h>
#include <keel.h>

#define CHECK(call)                                                          \
    do {                                                                     \
        if ((call) != KEEL_OK) {                                             \
            fprintf(stderr, "%s failed: %s\n", #call, keel_last_error());    \
            return 1;                                                        \
        }                                                                    \
    } while (0)

/* The kernel, written once in Keel's kernel language: Keel compiles it for
 * the device it runs on (NVRTC, hipRTC or the C compiler) and caches it. */
static const char *source =
    "keel_kernel void scale(int n, float a, float *x)\n"
    "{\n"
    "    int i = keel_global_x();\n"
    "    if (i < n)\n"
    "        x[i] *= a;\n"
    "}\n";

int main(void)
{
    float host[1000];
    int n = 1000;
    float a = 2.0f;
    for (int i = 0; i < n; i++)
        host[i] = (float)i;

    keel_device_t *dev;
    keel_stream_t *stream;
    keel_module_t *module;
    keel_kernel_t *kernel;
    void *x;
    CHECK(keel_device_default(&dev));                                 /* KEEL_BACKEND chooses */
    CHECK(keel_stream_create(dev, KEEL_STREAM_DEFAULT, 0, &stream));
    CHECK(keel_module_build(dev, source, "scale.kc", NULL, 0, &module));
    CHECK(keel_module_get_kernel(module, "scale", &kernel));

    CHECK(keel_malloc(dev, sizeof host, &x));                         /* allocate */
    CHECK(keel_memcpy_async(x, host, sizeof host, stream));           /* copy in */
    keel_dim3_t grid = {(n + 255) / 256, 1, 1}, block = {256, 1, 1};
    CHECK(KEEL_LAUNCH(kernel, grid, block, 0, stream, n, a, x));      /* launch, checked */
    CHECK(keel_memcpy_async(host, x, sizeof host, stream));           /* copy out */
    CHECK(keel_stream_synchronize(stream));                           /* wait */
    CHECK(keel_free(x));                                              /* free */
    CHECK(keel_module_unload(module));
    CHECK(keel_stream_destroy(stream));

    printf("host[999] = %g (expected 1998)\n", host[999]);
    return host[999] == 1998.0f ? 0 : 1;
}
