/* SPDX-License-Identifier: MIT */
/* What the example programs share: a CHECK that reports a failed Keel call
 * and leaves main, a small random generator for test data, and the grid
 * that covers n elements, and an upload of host data to a new device buffer. Define EXAMPLE_NAME (the program's name) before
 * including it. */
#ifndef KEEL_EXAMPLE_H
#define KEEL_EXAMPLE_H

#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <keel.h>

#ifndef EXAMPLE_NAME
#error "define EXAMPLE_NAME before including example.h"
#endif

/* Every Keel call returns a status; on failure keel_last_error() holds the
 * detail (what was wrong, with the values involved). Like CUDA's usual
 * CUDA_CHECK, this prints both and returns 1 from main. */
#define CHECK(call)                                                                                  \
    do {                                                                                             \
        keel_status_t st_ = (call);                                                                  \
        if (st_ != KEEL_OK) {                                                                        \
            fprintf(stderr, "%s: %s failed: %s: %s\n", EXAMPLE_NAME, #call, keel_status_name(st_),   \
                    keel_last_error());                                                              \
            return 1;                                                                                \
        }                                                                                            \
    } while (0)

/* A seed for example_uniform: new each second, never 0 (xorshift stays 0
 * from 0). A program prints it when a check fails. */
static inline uint64_t example_seed(void)
{
    return ((uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull) | 1;
}

/* A uniform float in [-1, 1) from a xorshift generator. */
static inline float example_uniform(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return (float)((double)((x * 2685821657736338717ull) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* Fill x[0..n) with uniform values in [lo, hi). */
static inline void example_fill(float *x, size_t n, float lo, float hi, uint64_t *state)
{
    for (size_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * 0.5f * (example_uniform(state) + 1.0f);
}

/* Allocate @p bytes on @p dev and enqueue the copy of @p host into them on
 * @p s (cudaMalloc + cudaMemcpyAsync). Host memory that is not pinned must
 * stay unchanged until the stream has done the copy. */
static inline keel_status_t example_upload(keel_device_t *dev, keel_stream_t *s, const void *host, size_t bytes,
                                           void **dptr)
{
    void *d;
    keel_status_t st = keel_malloc(dev, bytes, &d);
    if (st != KEEL_OK)
        return st;
    if ((st = keel_memcpy_async(d, host, bytes, s)) != KEEL_OK) {
        keel_free(d);
        return st;
    }
    *dptr = d;
    return KEEL_OK;
}

/* One block of 256 threads per 256 elements, as a CUDA launch of
 * <<<(n + 255) / 256, 256>>>. */
#define EXAMPLE_BLOCK 256
static inline keel_dim3_t example_grid(size_t n)
{
    keel_dim3_t g = {(unsigned)((n + EXAMPLE_BLOCK - 1) / EXAMPLE_BLOCK), 1, 1};
    return g;
}
static inline keel_dim3_t example_block(void)
{
    keel_dim3_t b = {EXAMPLE_BLOCK, 1, 1};
    return b;
}

#endif /* KEEL_EXAMPLE_H */
