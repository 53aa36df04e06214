/* SPDX-License-Identifier: MIT */
/* What every benchmark of Keel needs: a monotonic clock, the median of
 * a set of timings, and the check of a Keel call. Header-only, for the
 * benchmark programs alone. */
#ifndef KEEL_BENCH_UTIL_H
#define KEEL_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "keel.h"

/* A Keel call that fails stops the benchmark with exit status 3 (an error,
 * not a missed target), naming the call, its status and the detail. */
#define CHECK(call)                                                                                            \
    do {                                                                                                       \
        keel_status_t s_ = (call);                                                                             \
        if (s_ != KEEL_OK) {                                                                                   \
            fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call, keel_status_name(s_),  \
                    keel_last_error());                                                                        \
            exit(3);                                                                                           \
        }                                                                                                      \
    } while (0)

/* Seconds on CLOCK_MONOTONIC. */
static inline double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[0..n), which it sorts. */
static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif /* KEEL_BENCH_UTIL_H */
