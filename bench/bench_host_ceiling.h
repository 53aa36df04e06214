/* SPDX-License-Identifier: MIT */
/* The ceiling this host sets on a staged pageable copy (bench_host_ceiling.c),
 * for keel-bench-cuda. */
#ifndef KEEL_BENCH_HOST_CEILING_H
#define KEEL_BENCH_HOST_CEILING_H

#include <cuda_runtime.h>
#include <stddef.h>

#define HOST_CEILING_MAX_THREADS 16

typedef struct host_ceiling {
    int h2d;        /* direction: host to device (1) or device to host (0) */
    size_t bytes;   /* of each buffer */
    int threads;    /* host threads copying (host_ceiling_threads) */
    void *pageable; /* malloc'ed */
    void *pin;      /* pinned: the threads' side */
    void *pin2;     /* pinned: the engine's side while the threads copy */
    void *dev;      /* device memory */
    cudaStream_t s;
} host_ceiling_t;

/* GB/s of the engine's pinned copy alone (bound 0), or of the threads'
 * copy and the engine's running at once, timed to the later of the two
 * (bound 1). For compare() of keel-bench-cuda. */
double host_ceiling_measure(int bound, void *arg);

/* The copy threads the GPU plugin uses for a staged copy: the value in force
 * of KEEL_GPU_COPY_THREADS (keel_env_var_value: its alias too), else half the
 * host's `cores`, at most 8. Asked once the plugin is loaded. */
int host_ceiling_threads(int cores);

#endif /* KEEL_BENCH_HOST_CEILING_H */
