/* SPDX-License-Identifier: MIT */
/* keel-bench-registry: the cost of a call's pointer checks as the number of
 * live allocations grows.
 *
 * Every Keel call finds its pointers in the allocation registry. This holds
 * N live allocations of 64 bytes on the CPU backend (N = 1 up to 2^20) and
 * times a 4-byte keel_memcpy between two of them, at their start and at an
 * interior address, against libc's memcpy of the same pointers in the same
 * order, in alternating batches (times are the thread's CPU time: the copies
 * run in the calling thread). Two patterns:
 *   hot     the pairs come from 8 blocks picked at random among the N, as a
 *           program that holds many buffers but works on a few: target at
 *           most 1.5 times the cost with one live allocation;
 *   random  the pairs come from all N: once N outgrows the caches every
 *           lookup waits for memory, so the cost rises to a plateau set by
 *           the memory's latency; target at most 1.5 times the cost at
 *           N = 2^16 for every larger N (no growth with N past the caches).
 * Prints one row per N, pattern and pointer (measured, target, pass/fail)
 * and exits 1 on a miss (3 on an error).
 *
 *   keel-bench-registry [--quick]      --quick: N up to 2^16, fewer rounds
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench_util.h"
#include "keel.h"

#define CALLS 4096 /* calls per timed batch */

/* The calling thread's CPU time, in seconds: the copies run in the calling
 * thread, and other processes on a shared machine do not count. */
static double thread_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t rng = 0x9E3779B97F4A7C15u;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}


/* ns per call of a batch of CALLS copies between the given pointers. */
static double batch_keel(char **dst, char **src)
{
    double t0 = thread_now();
    for (int i = 0; i < CALLS; i++)
        CHECK(keel_memcpy(dst[i], src[i], 4));
    return (thread_now() - t0) * 1e9 / CALLS;
}

static double batch_libc(char **dst, char **src)
{
    double t0 = thread_now();
    for (int i = 0; i < CALLS; i++) {
        memcpy(dst[i], src[i], 4);
        __asm__ volatile("" ::: "memory");
    }
    return (thread_now() - t0) * 1e9 / CALLS;
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    int max_log = quick ? 16 : 20, rounds = quick ? 15 : 41;
    setenv("KEEL_BACKEND", "cpu", 1);
    keel_device_t *dev = NULL;
    CHECK(keel_device_get("cpu", 0, &dev));
    size_t cap = (size_t)1 << max_log;
    char **blocks = malloc(cap * sizeof *blocks);
    char **dst = malloc(CALLS * sizeof *dst), **src = malloc(CALLS * sizeof *src);
    if (!blocks || !dst || !src)
        return 2;
    size_t live = 0;
    double base_cost[2] = {0, 0};
    int fail = 0;
    printf("%-9s %-7s %-9s %10s %10s %7s %-16s %s\n", "live", "pattern", "pointers", "keel ns", "libc ns", "ratio",
           "target", "result");
    static const int logs[] = {0, 12, 16, 18, 20};
    double plateau[2] = {0, 0}; /* random pattern at N = 2^16 */
    for (size_t li = 0; li < sizeof logs / sizeof logs[0]; li++) {
        if (logs[li] > max_log)
            break;
        size_t n = (size_t)1 << logs[li];
        while (live < n) {
            CHECK(keel_malloc(dev, 64, (void **)&blocks[live]));
            memset(blocks[live], (int)(live & 0xff), 64);
            live++;
        }
        for (int random = 0; random < 2; random++) {
            char *hot[8];
            for (int h = 0; h < 8; h++)
                hot[h] = blocks[next_rand() % n];
            for (int interior = 0; interior < 2; interior++) {
                double tk[64], tl[64];
                for (int r = 0; r < rounds; r++) {
                    for (int i = 0; i < CALLS; i++) {
                        char *d = random ? blocks[next_rand() % n] : hot[next_rand() % 8];
                        char *c = random ? blocks[next_rand() % n] : hot[next_rand() % 8];
                        dst[i] = d + (interior ? 16 : 0);
                        src[i] = c + (interior ? 40 : 0);
                    }
                    /* alternate which side runs first */
                    if (r & 1) {
                        tl[r] = batch_libc(dst, src);
                        tk[r] = batch_keel(dst, src);
                    } else {
                        tk[r] = batch_keel(dst, src);
                        tl[r] = batch_libc(dst, src);
                    }
                }
                double k = median(tk, rounds), l = median(tl, rounds);
                if (n == 1 && !random)
                    base_cost[interior] = k;
                if (logs[li] == 16 && random)
                    plateau[interior] = k;
                double ref = random ? plateau[interior] : base_cost[interior];
                char target[32] = "-", verdict[8] = "-", vs[16] = "-";
                if (!random || logs[li] >= 16) {
                    double ratio = k / ref;
                    int ok = ratio <= 1.5;
                    fail |= !ok;
                    snprintf(vs, sizeof vs, "%.2f", ratio);
                    snprintf(target, sizeof target, random ? "<= 1.5 x N=2^16" : "<= 1.5 x N=1");
                    snprintf(verdict, sizeof verdict, "%s", ok ? "pass" : "FAIL");
                }
                printf("%-9zu %-7s %-9s %10.1f %10.1f %7s %-16s %s\n", n, random ? "random" : "hot",
                       interior ? "interior" : "start", k, l, vs, target, verdict);
            }
        }
    }
    for (size_t i = 0; i < live; i++)
        CHECK(keel_free(blocks[i]));
    free(blocks);
    free(dst);
    free(src);
    printf("keel-bench-registry: %s\n", fail ? "FAIL (a target was missed)" : "all targets met");
    return fail;
}
