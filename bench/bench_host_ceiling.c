/* SPDX-License-Identifier: MIT */
/* The ceiling this host sets on a staged pageable copy, for keel-bench-cuda.
 *
 * The GPU plugin stages a pageable copy through a few pinned slots: host
 * threads copy a chunk of pageable memory into a slot (host to device), or
 * a slot into pageable memory (device to host), while the copy engine moves
 * the chunk before it, and a slot is refilled only once the engine is done
 * with it. The bound here moves the same bytes the same way (chunks of the
 * plugin's size cycling through as many pinned slots, each chunk's host
 * side split across the plugin's number of threads) with none of the
 * waits: the engine's copies are all queued at once and the threads never
 * wait for a slot, so the slots' contents are garbage but every byte
 * crosses the same memory the same number of times. Its wall time, to the
 * later of the two sides, bounds what a staged copy of those bytes can
 * reach on this host. Side 0 is the engine's copy of the same bytes from
 * or to one large pinned buffer, as the pageable rows' reference. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel.h"
#include "bench/bench_host_ceiling.h"
#include "bench/bench_cuda.h"

struct part {
    const host_ceiling_t *hc;
    int index;
};

/* Thread `index`'s share of every chunk, in order: the chunk's
 * index-th slice of `threads`, to or from the chunk's slot. */
static void *copy_share(void *arg)
{
    const struct part *p = arg;
    const host_ceiling_t *hc = p->hc;
    size_t per = hc->chunk / (size_t)hc->threads;
    for (size_t at = 0, c = 0; at < hc->bytes; at += hc->chunk, c++) {
        size_t n = hc->bytes - at < hc->chunk ? hc->bytes - at : hc->chunk;
        size_t off = (size_t)p->index * per;
        if (off >= n)
            continue;
        size_t len = p->index == hc->threads - 1 || off + per > n ? n - off : per;
        char *pg = (char *)hc->pageable + at + off;
        char *slot = (char *)hc->ring + (c % HOST_CEILING_SLOTS) * hc->chunk + off;
        if (hc->h2d)
            memcpy(slot, pg, len);
        else
            memcpy(pg, slot, len);
    }
    return NULL;
}

static void host_side(const host_ceiling_t *hc)
{
    pthread_t tid[HOST_CEILING_MAX_THREADS];
    struct part parts[HOST_CEILING_MAX_THREADS];
    int started = 0;
    for (int i = 0; i < hc->threads; i++)
        parts[i] = (struct part){hc, i};
    for (int i = 1; i < hc->threads; i++)
        if (pthread_create(&tid[i], NULL, copy_share, &parts[i]) == 0)
            started |= 1 << i;
        else
            copy_share(&parts[i]); /* no thread: copied here, the bound only gets lower */
    copy_share(&parts[0]);
    for (int i = 1; i < hc->threads; i++)
        if (started & (1 << i))
            pthread_join(tid[i], NULL);
}

static void engine_side(const host_ceiling_t *hc)
{
    for (size_t at = 0, c = 0; at < hc->bytes; at += hc->chunk, c++) {
        size_t n = hc->bytes - at < hc->chunk ? hc->bytes - at : hc->chunk;
        char *slot = (char *)hc->ring + (c % HOST_CEILING_SLOTS) * hc->chunk;
        char *dev = (char *)hc->dev + at;
        if (hc->h2d)
            CK_CUDA(cudaMemcpyAsync(dev, slot, n, cudaMemcpyHostToDevice, hc->s));
        else
            CK_CUDA(cudaMemcpyAsync(slot, dev, n, cudaMemcpyDeviceToHost, hc->s));
    }
}

double host_ceiling_measure(int bound, void *arg)
{
    const host_ceiling_t *hc = arg;
    CK_CUDA(cudaStreamSynchronize(hc->s));
    double t0 = now();
    if (bound) {
        engine_side(hc);
        host_side(hc);
    } else if (hc->h2d) {
        CK_CUDA(cudaMemcpyAsync(hc->dev, hc->pin, hc->bytes, cudaMemcpyHostToDevice, hc->s));
    } else {
        CK_CUDA(cudaMemcpyAsync(hc->pin, hc->dev, hc->bytes, cudaMemcpyDeviceToHost, hc->s));
    }
    CK_CUDA(cudaStreamSynchronize(hc->s));
    return (double)hc->bytes / (now() - t0) / 1e9;
}

/* The value in force of Keel's variable `name` (keel_env_var_value: the
 * name, else its alias) when it is a whole number in [lo, hi], else dflt,
 * as the plugin reads it. */
static long value_in_force(const char *name, long dflt, long lo, long hi)
{
    int n = 0;
    keel_env_var_count(&n);
    for (int i = 0; i < n; i++) {
        const char *var = NULL, *value = NULL;
        if (keel_env_var_get(i, &var, NULL) != KEEL_OK || strcmp(var, name) != 0)
            continue;
        if (keel_env_var_value(i, &value, NULL) == KEEL_OK && value && value[0]) {
            char *end;
            long v = strtol(value, &end, 10);
            if (*end == '\0' && v >= lo && v <= hi)
                return v;
        }
        break;
    }
    return dflt;
}

void host_ceiling_setup(host_ceiling_t *hc, int cores)
{
    /* the plugin's defaults and bounds (backends/gpu/gpu_staging.c) */
    int t = cores > 1 ? cores / 2 : 1;
    if (t > 8)
        t = 8;
    hc->threads = (int)value_in_force("KEEL_GPU_COPY_THREADS", t, 1, HOST_CEILING_MAX_THREADS);
    hc->chunk = (size_t)value_in_force("KEEL_GPU_STAGING_CHUNK_KB", 4096, 256, 256 << 10) << 10;
}
