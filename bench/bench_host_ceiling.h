/* SPDX-License-Identifier: MIT */
/* The ceiling this host sets on a staged pageable copy (bench_host_ceiling.c),
 * for keel-bench-cuda. */
#ifndef KEEL_BENCH_HOST_CEILING_H
#define KEEL_BENCH_HOST_CEILING_H

#include <cuda_runtime.h>
#include <stddef.h>

#define HOST_CEILING_MAX_THREADS 16
#define HOST_CEILING_SLOTS 4 /* the plugin's staging slots */

typedef struct host_ceiling {
    int h2d;        /* direction: host to device (1) or device to host (0) */
    size_t bytes;   /* of the copy */
    int threads;    /* host threads copying (host_ceiling_setup) */
    size_t chunk;   /* bytes a slot (host_ceiling_setup) */
    void *pageable; /* malloc'ed, `bytes` */
    void *pin;      /* pinned, `bytes`: the pinned copy alone */
    void *ring;     /* pinned, HOST_CEILING_SLOTS * chunk: the slots */
    void *dev;      /* device memory, `bytes` */
    cudaStream_t s;
} host_ceiling_t;

/* Sets hc->threads and hc->chunk to what the GPU plugin uses for a staged
 * copy: the values in force of KEEL_GPU_COPY_THREADS and
 * KEEL_GPU_STAGING_CHUNK_KB (keel_env_var_value: their aliases too), else
 * half the host's `cores` at most 8, and 4 MiB. Called once the plugin is
 * loaded. */
void host_ceiling_setup(host_ceiling_t *hc, int cores);

/* GB/s of the engine's pinned copy of hc->bytes alone (bound 0), or of the
 * staged copy's traffic without its waits (bound 1). For compare() of
 * keel-bench-cuda. */
double host_ceiling_measure(int bound, void *arg);

#endif /* KEEL_BENCH_HOST_CEILING_H */
