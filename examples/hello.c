/* The example of README.md: allocate, copy, launch, synchronize, free. */
#include <stdio.h>
#include <keel.h>

#define CHECK(call)                                                          \
    do {                                                                     \
        if ((call) != KEEL_OK) {                                             \
            fprintf(stderr, "%s failed: %s\n", #call, keel_last_error());    \
            return 1;                                                        \
        }                                                                    \
    } while (0)

/* A CPU kernel runs once per block and loops over the block's threads. */
static void scale(const keel_cpu_kernel_ctx_t *ctx, void **args)
{
    size_t n = *(size_t *)args[0];
    float a = *(float *)args[1];
    float *x = *(float **)args[2];
    KEEL_CPU_FOR_EACH_THREAD(ctx, t) {
        size_t i = (size_t)ctx->block_idx.x * ctx->block_dim.x + t.x;
        if (i < n)
            x[i] *= a;
    }
}
static const keel_cpu_kernel_desc_t scale_desc = {
    KEEL_CPU_KERNEL_ABI, "scale", scale, 3, {sizeof(size_t), sizeof(float), sizeof(float *)}};

int main(void)
{
    float host[1000];
    size_t n = 1000;
    float a = 2.0f;
    for (size_t i = 0; i < n; i++)
        host[i] = (float)i;

    keel_device_t *dev;
    keel_stream_t *stream;
    keel_kernel_t *kernel;
    void *x;
    CHECK(keel_device_get("cpu", 0, &dev));
    CHECK(keel_stream_create(dev, KEEL_STREAM_DEFAULT, 0, &stream));
    CHECK(keel_kernel_register_cpu(dev, &scale_desc, &kernel));

    CHECK(keel_malloc(dev, sizeof host, &x));                         /* allocate */
    CHECK(keel_memcpy_async(x, host, sizeof host, stream));           /* copy in */
    void *args[] = {&n, &a, &x};
    keel_dim3_t grid = {(n + 255) / 256, 1, 1}, block = {256, 1, 1};
    CHECK(keel_launch_kernel(kernel, grid, block, 0, stream, args));  /* launch */
    CHECK(keel_memcpy_async(host, x, sizeof host, stream));           /* copy out */
    CHECK(keel_stream_synchronize(stream));                           /* wait */
    CHECK(keel_free(x));                                              /* free */
    CHECK(keel_kernel_release(kernel));
    CHECK(keel_stream_destroy(stream));

    printf("host[999] = %g (expected 1998)\n", host[999]);
    return host[999] == 1998.0f ? 0 : 1;
}
