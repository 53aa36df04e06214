/* SPDX-License-Identifier: MIT */
/* The ceiling this host sets on a staged pageable copy, for keel-bench-cuda.
 *
 * A staged copy moves each chunk through host memory twice before the copy
 * engine reads it once more: host threads copy pageable memory into a pinned
 * slot (host to device) or a pinned slot into pageable memory (device to
 * host) while the engine moves the previous chunk. Its rate is therefore at
 * most the rate of the two running at once: `threads` threads copying
 * `bytes` of pageable memory to or from one pinned buffer, each a contiguous
 * slice, while the engine copies the same number of bytes between another
 * pinned buffer and the device in the same direction; the pair's wall time
 * bounds a staged copy of those bytes. Side 0 is the engine's pinned copy
 * alone, side 1 that bound, both in GB/s, so the ratio is the fraction of
 * the pinned bandwidth that no staging pipeline on this host can exceed. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel.h"
#include "bench/bench_host_ceiling.h"
#include "bench/bench_cuda.h"

struct slice {
    void *dst;
    const void *src;
    size_t bytes;
};

static void *copy_slice(void *arg)
{
    struct slice *s = arg;
    memcpy(s->dst, s->src, s->bytes);
    return NULL;
}

/* Copies hc->bytes between hc->pageable and hc->pin over hc->threads
 * threads, each a contiguous slice, the calling thread one of them. */
static void host_copy(const host_ceiling_t *hc)
{
    pthread_t tid[HOST_CEILING_MAX_THREADS];
    struct slice sl[HOST_CEILING_MAX_THREADS];
    int t = hc->threads, started = 0;
    size_t per = hc->bytes / (size_t)t;
    for (int i = 0; i < t; i++) {
        size_t off = (size_t)i * per, n = i == t - 1 ? hc->bytes - off : per;
        char *pg = (char *)hc->pageable + off, *pn = (char *)hc->pin + off;
        sl[i] = hc->h2d ? (struct slice){pn, pg, n} : (struct slice){pg, pn, n};
    }
    for (int i = 1; i < t; i++)
        if (pthread_create(&tid[i], NULL, copy_slice, &sl[i]) == 0)
            started |= 1 << i;
        else
            copy_slice(&sl[i]); /* no thread: copied here, the bound only gets lower */
    copy_slice(&sl[0]);
    for (int i = 1; i < t; i++)
        if (started & (1 << i))
            pthread_join(tid[i], NULL);
}

static void engine_copy(const host_ceiling_t *hc, void *pin)
{
    if (hc->h2d)
        CK_CUDA(cudaMemcpyAsync(hc->dev, pin, hc->bytes, cudaMemcpyHostToDevice, hc->s));
    else
        CK_CUDA(cudaMemcpyAsync(pin, hc->dev, hc->bytes, cudaMemcpyDeviceToHost, hc->s));
}

double host_ceiling_measure(int bound, void *arg)
{
    const host_ceiling_t *hc = arg;
    CK_CUDA(cudaStreamSynchronize(hc->s));
    double t0 = now();
    if (bound) {
        engine_copy(hc, hc->pin2); /* the engine on the other pinned buffer ... */
        host_copy(hc);             /* ... while the threads use the first */
    } else {
        engine_copy(hc, hc->pin);
    }
    CK_CUDA(cudaStreamSynchronize(hc->s));
    return (double)hc->bytes / (now() - t0) / 1e9;
}

int host_ceiling_threads(int cores)
{
    /* the plugin's default (backends/gpu/gpu_staging.c) */
    int t = cores > 1 ? cores / 2 : 1;
    if (t > 8)
        t = 8;
    /* the value in force, as Keel reads it (the name, else its alias) */
    int n = 0;
    keel_env_var_count(&n);
    for (int i = 0; i < n; i++) {
        const char *name = NULL, *value = NULL;
        if (keel_env_var_get(i, &name, NULL) != KEEL_OK || strcmp(name, "KEEL_GPU_COPY_THREADS") != 0)
            continue;
        if (keel_env_var_value(i, &value, NULL) == KEEL_OK && value && value[0]) {
            char *end;
            long v = strtol(value, &end, 10);
            if (*end == '\0' && v >= 1 && v <= HOST_CEILING_MAX_THREADS)
                t = (int)v;
        }
        break;
    }
    return t;
}
