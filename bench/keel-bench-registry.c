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
 *   random  the pairs come from all N. Once N outgrows the caches each
 *           lookup waits for memory, at a latency that itself grows with
 *           the memory a program spans (the TLB's reach, the cache levels),
 *           as libc's own memcpy of the same pointers shows. So this row
 *           counts trips to memory: beside each batch, a chain of dependent
 *           loads through a buffer as large as the memory the process has
 *           allocated gives the latency L at that size, and the target is
 *           at most 1.25 x (C + 2 L), C being the same row at N = 4096
 *           (indexes in the caches): the two pointers' lookups overlap, and
 *           each makes two dependent trips, its index slot, then the
 *           allocation's record. A lookup that walked a tree or a chain
 *           would make one trip per step and miss it.
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

#ifdef __GLIBC__
#include <malloc.h>
#endif

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


/* The bytes the process has taken from malloc: the registry's nodes and
 * indexes, the blocks themselves and the benchmark's own arrays. Without
 * glibc's mallinfo2, an estimate per block. */
static size_t heap_bytes(size_t live)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
    struct mallinfo2 m = mallinfo2();
    (void)live;
    return m.uordblks + m.hblkhd;
#else
    return live * 256;
#endif
}

/* A chain of dependent loads through the 64-byte lines of a buffer, in
 * random order. */
typedef struct chain {
    void **buf;
    void **at;
} chain_t;

static int chain_make(chain_t *c, size_t bytes)
{
    size_t lines = bytes / 64 < 1024 ? 1024 : bytes / 64;
    size_t *order = malloc(lines * sizeof *order);
    c->buf = aligned_alloc(64, lines * 64);
    if (!order || !c->buf) {
        free(order);
        free(c->buf);
        return -1;
    }
    for (size_t i = 0; i < lines; i++)
        order[i] = i;
    for (size_t i = lines - 1; i > 0; i--) {
        size_t j = next_rand() % (i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (size_t i = 0; i < lines; i++)
        c->buf[order[i] * 8] = &c->buf[order[(i + 1) % lines] * 8];
    c->at = &c->buf[order[0] * 8];
    free(order);
    return 0;
}

/* ns per load of a batch of CALLS loads along the chain. */
static double batch_chain(chain_t *c)
{
    void **p = c->at;
    double t0 = thread_now();
    for (int i = 0; i < CALLS; i++) {
        p = *p;
        __asm__ volatile("" : "+r"(p)); /* each load is kept, in order */
    }
    double t = thread_now() - t0;
    c->at = p;
    return t * 1e9 / CALLS;
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
    double one[2] = {0, 0};    /* hot pattern at N = 1 */
    double cached[2] = {0, 0}; /* random pattern at N = 4096: C */
    int fail = 0;
    printf("%-9s %-7s %-9s %9s %9s %9s %6s %-20s %s\n", "live", "pattern", "pointers", "keel ns", "libc ns",
           "memory ns", "ratio", "target", "result");
    static const int logs[] = {0, 12, 16, 18, 20};
    for (size_t li = 0; li < sizeof logs / sizeof logs[0]; li++) {
        if (logs[li] > max_log)
            break;
        size_t n = (size_t)1 << logs[li];
        while (live < n) {
            CHECK(keel_malloc(dev, 64, (void **)&blocks[live]));
            memset(blocks[live], (int)(live & 0xff), 64);
            live++;
        }
        chain_t chain;
        if (chain_make(&chain, heap_bytes(live)) != 0) {
            fprintf(stderr, "keel-bench-registry: no memory for the latency chain\n");
            return 3;
        }
        for (int random = 0; random < 2; random++) {
            char *hot[8];
            for (int h = 0; h < 8; h++)
                hot[h] = blocks[next_rand() % n];
            for (int interior = 0; interior < 2; interior++) {
                double tk[64], tl[64], tm[64];
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
                    tm[r] = batch_chain(&chain);
                }
                double k = median(tk, rounds), l = median(tl, rounds), m = median(tm, rounds);
                if (n == 1 && !random)
                    one[interior] = k;
                if (n == 4096 && random)
                    cached[interior] = k;
                char target[32] = "-", verdict[8] = "-", vs[16] = "-";
                if (!random || n > 4096) {
                    double ratio = random ? k / (cached[interior] + 2 * m) : k / one[interior];
                    double limit = random ? 1.25 : 1.5;
                    int ok = ratio <= limit;
                    fail |= !ok;
                    snprintf(vs, sizeof vs, "%.2f", ratio);
                    snprintf(target, sizeof target, random ? "<= 1.25 x (C + 2 L)" : "<= 1.5 x N=1");
                    snprintf(verdict, sizeof verdict, "%s", ok ? "pass" : "FAIL");
                }
                printf("%-9zu %-7s %-9s %9.1f %9.1f %9.1f %6s %-20s %s\n", n, random ? "random" : "hot",
                       interior ? "interior" : "start", k, l, m, vs, target, verdict);
            }
        }
        free(chain.buf);
    }
    for (size_t i = 0; i < live; i++)
        CHECK(keel_free(blocks[i]));
    free(blocks);
    free(dst);
    free(src);
    printf("(memory ns: L, one dependent load through as many bytes as the process allocated; "
           "C: the random row at N = 4096)\n");
    printf("keel-bench-registry: %s\n", fail ? "FAIL (a target was missed)" : "all targets met");
    return fail;
}
