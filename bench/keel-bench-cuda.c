/* SPDX-License-Identifier: MIT */
/* keel-bench-cuda: Keel against raw CUDA, side by side in one process.
 *
 * Each measurement runs the raw CUDA form and the Keel form of the same work
 * in alternating order, several times, and reports the medians and their
 * ratio against its target. Times of host-side costs (launch,
 * allocation) are per call on the host clock; copies are bandwidths over a
 * host clock that includes the synchronization.
 *
 * Usage: keel-bench-cuda [--quick] [--pageable]
 *   --quick     fewer repetitions
 *   --pageable  only the pageable copies (to tune KEEL_CUDA_COPY_THREADS and
 *               KEEL_CUDA_STAGING_CHUNK_KB)
 * Exit 77 when no CUDA device is usable, 1 when a target is missed. */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "keel.h"

#include "bench/bench_util.h"

#define MIB (1024.0 * 1024.0)

static int reps = 15;

/* Two empty kernels (0 and 8 arguments) and a kernel that does a little work,
 * in PTX so the raw and the Keel side load the very same code. */
static const char ptx[] =
    ".version 7.8\n"
    ".target sm_80\n"
    ".address_size 64\n"
    ".visible .entry empty0()\n{\n\tret;\n}\n"
    ".visible .entry empty8(.param .u64 a0, .param .u64 a1, .param .u64 a2, .param .u64 a3,\n"
    "\t.param .u64 a4, .param .u64 a5, .param .u64 a6, .param .u64 a7)\n{\n\tret;\n}\n";

/* The driver API through the runtime, so the program starts (and says why
 * it skips) on a machine without the driver. */
static CUresult (*p_cuGetErrorName)(CUresult, const char **);
static CUresult (*p_cuModuleLoadData)(CUmodule *, const void *);
static CUresult (*p_cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
static CUresult (*p_cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, CUstream, void **, void **);
#define cuGetErrorName p_cuGetErrorName
#define cuModuleLoadData p_cuModuleLoadData
#define cuModuleGetFunction p_cuModuleGetFunction
#define cuLaunchKernel p_cuLaunchKernel

static void *driver_entry(const char *name)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion(name, &fn, CUDART_VERSION, cudaEnableDefault, &q) != cudaSuccess ||
        fn == NULL) {
        fprintf(stderr, "driver entry point %s not found\n", name);
        exit(1);
    }
    return fn;
}

#define CK(x)                                                                                       \
    do {                                                                                            \
        keel_status_t st_ = (x);                                                                    \
        if (st_ != KEEL_OK) {                                                                       \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, keel_last_error());          \
            exit(1);                                                                                \
        }                                                                                           \
    } while (0)
#define CU(x)                                                                                       \
    do {                                                                                            \
        CUresult r_ = (x);                                                                          \
        if (r_ != CUDA_SUCCESS) {                                                                   \
            const char *n_ = "?";                                                                   \
            cuGetErrorName(r_, &n_);                                                                \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, n_);                          \
            exit(1);                                                                                \
        }                                                                                           \
    } while (0)
#define CR(x)                                                                                       \
    do {                                                                                            \
        cudaError_t e_ = (x);                                                                       \
        if (e_ != cudaSuccess) {                                                                    \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorName(e_));        \
            exit(1);                                                                                \
        }                                                                                           \
    } while (0)

/* ---- the two sides ---- */

static keel_device_t *dev;
static keel_stream_t *ks;
static keel_kernel_t *kk0, *kk8, *kf0, *kf8;
static cudaStream_t rs;
static CUfunction rf0, rf8;
static void *argv8[8];
static unsigned long long argvals[8];

typedef double (*measure_fn)(int keel, void *arg);

/* Runs raw and Keel in alternating order; returns the medians. */
static void compare(measure_fn f, void *arg, double *raw, double *kl)
{
    double r[64], k[64];
    f(0, arg); /* warm-up */
    f(1, arg);
    for (int i = 0; i < reps; i++) {
        if (i % 2) {
            k[i] = f(1, arg);
            r[i] = f(0, arg);
        } else {
            r[i] = f(0, arg);
            k[i] = f(1, arg);
        }
    }
    *raw = median(r, reps);
    *kl = median(k, reps);
}

static void sync_both(void)
{
    CR(cudaStreamSynchronize(rs));
    CK(keel_stream_synchronize(ks));
}

/* ---- launches ---- */

static double launch_cost(int keel, void *arg)
{
    int nargs = (int)(long)arg;
    const int n = 1000;
    keel_dim3_t one = {1, 1, 1};
    sync_both();
    double t0 = now();
    if (keel) {
        keel_kernel_t *k = nargs >= 100 ? (nargs > 100 ? kf8 : kf0) : nargs ? kk8 : kk0;
        void **a = nargs % 100 ? argv8 : NULL;
        for (int i = 0; i < n; i++)
            keel_launch_kernel(k, one, one, 0, ks, a);
    } else {
        CUfunction f = nargs % 100 ? rf8 : rf0;
        void **a = nargs % 100 ? argv8 : NULL;
        for (int i = 0; i < n; i++)
            cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, (CUstream)rs, a, NULL);
    }
    double t = (now() - t0) / n;
    sync_both();
    return t * 1e6;
}

static double launch_sync(int keel, void *arg)
{
    (void)arg;
    const int n = 200;
    keel_dim3_t one = {1, 1, 1};
    sync_both();
    double t0 = now();
    for (int i = 0; i < n; i++) {
        if (keel) {
            keel_launch_kernel(kk0, one, one, 0, ks, NULL);
            keel_stream_synchronize(ks);
        } else {
            cuLaunchKernel(rf0, 1, 1, 1, 1, 1, 1, 0, (CUstream)rs, NULL, NULL);
            cudaStreamSynchronize(rs);
        }
    }
    return (now() - t0) / n * 1e6;
}

enum { GRAPH_KERNELS = 100, GRAPH_REPLAYS = 50 };
static keel_graph_exec_t *kexec;
static cudaGraphExec_t rexec;

static void build_graphs(void)
{
    keel_dim3_t one = {1, 1, 1};
    keel_graph_t *g;
    CK(keel_stream_begin_capture(ks));
    for (int i = 0; i < GRAPH_KERNELS; i++)
        CK(keel_launch_kernel(kk0, one, one, 0, ks, NULL));
    CK(keel_stream_end_capture(ks, &g));
    CK(keel_graph_instantiate(g, &kexec));
    CK(keel_graph_destroy(g));

    cudaGraph_t rg;
    CR(cudaStreamBeginCapture(rs, cudaStreamCaptureModeRelaxed));
    for (int i = 0; i < GRAPH_KERNELS; i++)
        CU(cuLaunchKernel(rf0, 1, 1, 1, 1, 1, 1, 0, (CUstream)rs, NULL, NULL));
    CR(cudaStreamEndCapture(rs, &rg));
    CR(cudaGraphInstantiate(&rexec, rg, 0));
    CR(cudaGraphDestroy(rg));
}

static double graph_replay(int keel, void *arg)
{
    (void)arg;
    sync_both();
    double t0 = now();
    for (int i = 0; i < GRAPH_REPLAYS; i++) {
        if (keel)
            keel_graph_launch(kexec, ks);
        else
            cudaGraphLaunch(rexec, rs);
    }
    sync_both();
    return (now() - t0) / (GRAPH_REPLAYS * GRAPH_KERNELS) * 1e6;
}

/* ---- copies ---- */

struct copy_case {
    void *kdst, *ksrc;     /* Keel allocations (or host memory) */
    void *rdst, *rsrc;     /* raw allocations (or host memory) */
    size_t bytes;
    int sync;              /* keel_memcpy / cudaMemcpy instead of the async forms */
    double traffic;        /* bytes counted per copy (2x for device-to-device) */
};

static double copy_bw(int keel, void *arg)
{
    struct copy_case *c = arg;
    const int n = c->bytes >= (64u << 20) ? 2 : 10;
    sync_both();
    double t0 = now();
    for (int i = 0; i < n; i++) {
        if (keel) {
            if (c->sync)
                CK(keel_memcpy(c->kdst, c->ksrc, c->bytes));
            else
                CK(keel_memcpy_async(c->kdst, c->ksrc, c->bytes, ks));
        } else {
            if (c->sync)
                CR(cudaMemcpy(c->rdst, c->rsrc, c->bytes, cudaMemcpyDefault));
            else
                CR(cudaMemcpyAsync(c->rdst, c->rsrc, c->bytes, cudaMemcpyDefault, rs));
        }
    }
    sync_both();
    double t = (now() - t0) / n;
    return c->traffic / t / 1e9;
}

/* ---- stream-ordered allocation ---- */

/* arg: the size in bytes; with its lowest bit set, every other pair asks
 * for 256 bytes more, so that Keel's reuse of the block the stream freed
 * last never applies (each allocation releases the kept block, then
 * allocates from the pool: the same two CUDA calls as the raw loop). */
static double alloc_free(int keel, void *arg)
{
    size_t bytes = (size_t)arg & ~(size_t)1;
    int alternate = (int)((size_t)arg & 1);
    const int n = 1000;
    sync_both();
    double t0 = now();
    for (int i = 0; i < n; i++) {
        void *p;
        size_t b = bytes + (alternate && (i & 1) ? 256 : 0);
        if (keel) {
            keel_malloc_async(ks, b, &p);
            keel_free_async(p, ks);
        } else {
            cudaMallocAsync(&p, b, rs);
            cudaFreeAsync(p, rs);
        }
    }
    double t = (now() - t0) / n;
    sync_both();
    return t * 1e6;
}

/* ---- the table ---- */

static int misses;

static void row(const char *op, const char *unit, double raw, double kl, int higher_better, double target)
{
    double ratio = kl / raw;
    int ok = higher_better ? ratio >= target : ratio <= target;
    if (target > 0 && !ok)
        misses++;
    char tgt[32] = "-";
    if (target > 0)
        snprintf(tgt, sizeof tgt, "%s %.2f", higher_better ? ">=" : "<=", target);
    printf("%-34s %10.3f %10.3f %-5s %7.3f  %-8s %s\n", op, raw, kl, unit, ratio, tgt,
           target > 0 ? (ok ? "ok" : "MISS") : "");
    fflush(stdout);
}

static void fill_random(void *p, size_t n, unsigned seed)
{
    unsigned long long x = seed * 0x9e3779b97f4a7c15ull + 1;
    unsigned long long *q = p;
    for (size_t i = 0; i < n / 8; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        q[i] = x;
    }
}

static void check_pageable(size_t bytes)
{
    /* The staged paths must move every byte: a round trip through the device. */
    unsigned char *a = malloc(bytes), *b = malloc(bytes);
    void *d;
    CK(keel_malloc(dev, bytes, &d));
    fill_random(a, bytes, 7);
    memset(b, 0xa5, bytes);
    CK(keel_memcpy(d, a, bytes));
    CK(keel_memcpy(b, d, bytes));
    if (memcmp(a, b, bytes) != 0) {
        fprintf(stderr, "pageable round trip of %zu bytes through the staging path is WRONG\n", bytes);
        misses++;
    } else {
        printf("check: pageable round trip of %.0f MiB through Keel staging is exact\n", bytes / MIB);
    }
    CK(keel_free(d));
    free(a);
    free(b);
}

int main(int argc, char **argv)
{
    int pageable_only = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            reps = 5;
        else if (strcmp(argv[i], "--pageable") == 0)
            pageable_only = 1;
    }
    keel_status_t st = keel_device_get("cuda", 0, &dev);
    if (st != KEEL_OK) {
        printf("SKIP: no usable CUDA device: %s\n", keel_last_error());
        return 77;
    }
    keel_device_properties_t props = {.struct_size = sizeof props};
    CK(keel_device_get_properties(dev, &props));
    keel_backend_t *be;
    keel_backend_info_t info = {.struct_size = sizeof info};
    CK(keel_device_get_backend(dev, &be));
    CK(keel_backend_get_info(be, &info));
    printf("device: %s (%s, %d SMs), backend: %s\n", props.name, props.architecture, props.compute_units,
           info.description);

    /* Raw side: the same device through the runtime and driver APIs. */
    CR(cudaSetDevice(0));
    *(void **)&p_cuGetErrorName = driver_entry("cuGetErrorName");
    *(void **)&p_cuModuleLoadData = driver_entry("cuModuleLoadData");
    *(void **)&p_cuModuleGetFunction = driver_entry("cuModuleGetFunction");
    *(void **)&p_cuLaunchKernel = driver_entry("cuLaunchKernel");
    CR(cudaFree(0));
    CR(cudaStreamCreateWithFlags(&rs, cudaStreamNonBlocking));
    CUmodule rmod;
    CU(cuModuleLoadData(&rmod, ptx));
    CU(cuModuleGetFunction(&rf0, rmod, "empty0"));
    CU(cuModuleGetFunction(&rf8, rmod, "empty8"));
    for (int i = 0; i < 8; i++) {
        argvals[i] = (unsigned long long)i;
        argv8[i] = &argvals[i];
    }

    /* Keel side. */
    CK(keel_stream_create(dev, 0, 0, &ks));
    keel_module_t *kmod;
    CK(keel_module_load_data(dev, ptx, sizeof ptx, &kmod));
    CK(keel_module_get_kernel(kmod, "empty0", &kk0));
    CK(keel_module_get_kernel(kmod, "empty8", &kk8));
    /* The same kernels launched as CUfunctions of the primary context (the
     * plugin's alternative launch path, chosen at lookup). */
    keel_module_t *kmod_f;
    setenv("KEEL_CUDA_LAUNCH", "function", 1);
    CK(keel_module_load_data(dev, ptx, sizeof ptx, &kmod_f));
    CK(keel_module_get_kernel(kmod_f, "empty0", &kf0));
    CK(keel_module_get_kernel(kmod_f, "empty8", &kf8));
    unsetenv("KEEL_CUDA_LAUNCH");

    printf("\n%-34s %10s %10s %-5s %7s  %-8s\n", "op", "raw", "keel", "unit", "keel/raw", "target");
    double r, k;
    if (pageable_only)
        goto copies;
    compare(launch_cost, (void *)0L, &r, &k);
    row("launch host cost, 0 args", "us", r, k, 0, 1.05);
    compare(launch_cost, (void *)8L, &r, &k);
    row("launch host cost, 8 args", "us", r, k, 0, 1.05);
    compare(launch_cost, (void *)100L, &r, &k);
    row("launch 0 args, CUfunction mode", "us", r, k, 0, 0);
    compare(launch_cost, (void *)108L, &r, &k);
    row("launch 8 args, CUfunction mode", "us", r, k, 0, 0);
    compare(launch_sync, NULL, &r, &k);
    row("launch + synchronize", "us", r, k, 0, 1.05);
    build_graphs();
    compare(graph_replay, NULL, &r, &k);
    row("graph replay, per kernel (100)", "us", r, k, 0, 1.05);

copies:;
    size_t pin_bytes = 256u << 20, d2d_bytes = 1024u << 20;
    void *kh, *kd, *kd2, *rh, *rd, *rd2;
    CK(keel_malloc_host(dev, pin_bytes, &kh));
    CK(keel_malloc(dev, d2d_bytes, &kd));
    CK(keel_malloc(dev, d2d_bytes, &kd2));
    CR(cudaMallocHost(&rh, pin_bytes));
    CR(cudaMalloc(&rd, d2d_bytes));
    CR(cudaMalloc(&rd2, d2d_bytes));
    fill_random(kh, pin_bytes, 1);
    fill_random(rh, pin_bytes, 1);
    CK(keel_memset(kd, 1, d2d_bytes));
    CK(keel_memset(kd2, 2, d2d_bytes));
    CR(cudaMemset(rd, 1, d2d_bytes));
    CR(cudaMemset(rd2, 2, d2d_bytes));

    if (pageable_only)
        goto pageable;
    struct copy_case h2d = {kd, kh, rd, rh, pin_bytes, 0, (double)pin_bytes};
    compare(copy_bw, &h2d, &r, &k);
    row("pinned H2D 256 MiB (async)", "GB/s", r, k, 1, 0.98);
    struct copy_case d2h = {kh, kd, rh, rd, pin_bytes, 0, (double)pin_bytes};
    compare(copy_bw, &d2h, &r, &k);
    row("pinned D2H 256 MiB (async)", "GB/s", r, k, 1, 0.98);
    struct copy_case d2d = {kd2, kd, rd2, rd, d2d_bytes, 0, 2.0 * d2d_bytes};
    compare(copy_bw, &d2d, &r, &k);
    row("D2D 1 GiB (async, read+write)", "GB/s", r, k, 1, 0.98);

pageable:;
    /* Pageable: the targets compare Keel's staged copy with the runtime's own. */
    size_t page_sizes[] = {64u << 20, 256u << 20};
    for (int i = 0; i < 2; i++) {
        size_t n = page_sizes[i];
        void *hp = malloc(n), *hp2 = malloc(n);
        fill_random(hp, n, 3);
        memset(hp2, 0, n);
        char label[64];
        struct copy_case ph2d = {kd, hp, rd, hp, n, 1, (double)n};
        compare(copy_bw, &ph2d, &r, &k);
        snprintf(label, sizeof label, "pageable H2D %zu MiB (memcpy)", n >> 20);
        row(label, "GB/s", r, k, 1, 2.0);
        struct copy_case pd2h = {hp2, kd, hp2, rd, n, 1, (double)n};
        compare(copy_bw, &pd2h, &r, &k);
        snprintf(label, sizeof label, "pageable D2H %zu MiB (memcpy)", n >> 20);
        row(label, "GB/s", r, k, 1, 0);
        free(hp);
        free(hp2);
    }

    if (pageable_only)
        goto checks;
    compare(alloc_free, (void *)(size_t)(1u << 20), &r, &k);
    row("malloc_async+free_async 1 MiB", "us", r, k, 0, 1.10);
    compare(alloc_free, (void *)(size_t)(64u << 20), &r, &k);
    row("malloc_async+free_async 64 MiB", "us", r, k, 0, 1.10);
    compare(alloc_free, (void *)(size_t)((1u << 20) | 1), &r, &k);
    row("  the same, sizes alternate (no reuse)", "us", r, k, 0, 0);

checks:
    printf("\n");
    check_pageable(64u << 20);
    check_pageable((64u << 20) + 12345);

    CK(keel_free(kh));
    CK(keel_free(kd));
    CK(keel_free(kd2));
    CR(cudaFreeHost(rh));
    CR(cudaFree(rd));
    CR(cudaFree(rd2));
    if (!pageable_only) {
        CK(keel_graph_exec_destroy(kexec));
        CR(cudaGraphExecDestroy(rexec));
    }
    CK(keel_module_unload(kmod));
    CK(keel_module_unload(kmod_f));
    CK(keel_stream_destroy(ks));
    CR(cudaStreamDestroy(rs));
    printf("%d target(s) missed\n", misses);
    return misses ? 1 : 0;
}
