/* SPDX-License-Identifier: MIT */
/* keel-bench-cuda: Keel against raw CUDA, side by side in one process.
 *
 * Each measurement runs the raw CUDA form and the Keel form of the same
 * work in alternating order (the order swaps every pair), 15 pairs (5 with
 * --quick), and reports the medians of each side and the median of the
 * pairs' ratios keel / raw, with their smallest and largest, against its
 * target. Host-side costs (launch, allocation) are per call on the host
 * clock; copies are bandwidths over a host clock that includes the
 * synchronization. Rows and targets:
 *   launch host cost (0 and 8 arguments), launch + synchronize, graph
 *     replay per kernel: at most 1.05 of cuLaunchKernel / cudaGraphLaunch;
 *   a small call: keel_binary_vec adding 1k floats against keel_launch_kernel
 *     of the same add compiled by NVRTC (keel_module_compile): at most 1.10;
 *     against cuLaunchKernel of the same add in PTX: shown, no target;
 *   pinned H2D, D2H (256 MiB) and D2D (1 GiB) copies: at least 0.98 of
 *     cudaMemcpyAsync;
 *   pageable H2D and D2H (64 and 256 MiB of malloc'ed memory) through
 *     keel_memcpy against pinned bandwidth (cudaMemcpyAsync from
 *     cudaMallocHost memory) measured in the same run: at least 0.85;
 *     against cudaMemcpy from the same pageable memory: shown, no target;
 *   small pageable copies (4 KiB, 64 KiB, both directions) against
 *     cudaMemcpy from the same pageable memory: at least 1/1.1 of its
 *     bandwidth. keel_memcpy returns when the copy is done; cudaMemcpy
 *     from pageable memory to the device returns once the source is in the
 *     driver's own buffer, before the transfer ends (CUDA's "API
 *     synchronization behavior"), so host to device the target is against
 *     cudaMemcpy followed by a synchronize of its stream, and the row
 *     against cudaMemcpy alone is shown without one;
 *   keel_malloc_async + keel_free_async against cudaMallocAsync +
 *     cudaFreeAsync: at most 1.10 where the freed block is reused (1 and
 *     64 MiB), at most 1.05 where it cannot be (512 MiB, above the reuse
 *     limit; and sizes that change every call).
 * Before the timings, the pageable staging path and the small call's three
 * forms are checked on random data (a wrong result is a WRONG row).
 *
 * Usage: keel-bench-cuda [--quick] [--pageable | --alloc]
 *   --quick     fewer repetitions
 *   --pageable  only the pageable copies (to tune KEEL_GPU_COPY_THREADS and
 *               KEEL_GPU_STAGING_CHUNK_KB)
 *   --alloc     only the stream-ordered allocation rows
 * Exit status: 0 every target met, 1 a target missed or a result wrong,
 * 3 an error, 77 no usable CUDA device. The last lines are one summary line
 * per row (bench/bench_summary.h). */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "keel.h"

#include "bench/bench_summary.h"
#include "bench/bench_cuda.h"

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
    "\t.param .u64 a4, .param .u64 a5, .param .u64 a6, .param .u64 a7)\n{\n\tret;\n}\n"
    ".visible .entry vadd(.param .u64 pa, .param .u64 pb, .param .u64 py, .param .u32 pn)\n{\n"
    "\t.reg .pred %p;\n\t.reg .b32 %r<6>;\n\t.reg .b64 %rd<8>;\n\t.reg .f32 %f<4>;\n"
    "\tld.param.u64 %rd1, [pa];\n\tld.param.u64 %rd2, [pb];\n\tld.param.u64 %rd3, [py];\n"
    "\tld.param.u32 %r1, [pn];\n\tmov.u32 %r2, %ctaid.x;\n\tmov.u32 %r3, %ntid.x;\n\tmov.u32 %r4, %tid.x;\n"
    "\tmad.lo.s32 %r5, %r2, %r3, %r4;\n\tsetp.ge.s32 %p, %r5, %r1;\n\t@%p bra DONE;\n"
    "\tmul.wide.s32 %rd4, %r5, 4;\n\tcvta.to.global.u64 %rd1, %rd1;\n\tcvta.to.global.u64 %rd2, %rd2;\n"
    "\tcvta.to.global.u64 %rd3, %rd3;\n\tadd.s64 %rd5, %rd1, %rd4;\n\tadd.s64 %rd6, %rd2, %rd4;\n"
    "\tadd.s64 %rd7, %rd3, %rd4;\n\tld.global.f32 %f1, [%rd5];\n\tld.global.f32 %f2, [%rd6];\n"
    "\tadd.f32 %f3, %f1, %f2;\n\tst.global.f32 [%rd7], %f3;\nDONE:\n\tret;\n}\n";

/* The same add in CUDA C, for NVRTC through keel_module_compile. */
static const char vadd_cu[] =
    "extern \"C\" __global__ void vadd(const float *a, const float *b, float *y, int n)\n"
    "{\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n)\n"
    "        y[i] = a[i] + b[i];\n"
    "}\n";

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
        exit(3);
    }
    return fn;
}

#define CU(x)                                                                                       \
    do {                                                                                            \
        CUresult r_ = (x);                                                                          \
        if (r_ != CUDA_SUCCESS) {                                                                   \
            const char *n_ = "?";                                                                   \
            cuGetErrorName(r_, &n_);                                                                \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, n_);                          \
            exit(3);                                                                                \
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

/* The medians of each side and of the pairs' ratios keel / raw, with the
 * smallest and largest ratio. */
typedef struct {
    double raw, kl, ratio, lo, hi;
} cmp_t;

/* Runs raw and Keel in alternating order. */
static cmp_t compare(measure_fn f, void *arg)
{
    double r[64], k[64], q[64];
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
        q[i] = k[i] / r[i];
    }
    cmp_t c;
    c.raw = median(r, reps);
    c.kl = median(k, reps);
    c.ratio = median(q, reps);
    c.lo = q[0]; /* median() sorted them */
    c.hi = q[reps - 1];
    return c;
}

static void sync_both(void)
{
    CK_CUDA(cudaStreamSynchronize(rs));
    CHECK(keel_stream_synchronize(ks));
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
    CHECK(keel_stream_begin_capture(ks));
    for (int i = 0; i < GRAPH_KERNELS; i++)
        CHECK(keel_launch_kernel(kk0, one, one, 0, ks, NULL));
    CHECK(keel_stream_end_capture(ks, &g));
    CHECK(keel_graph_instantiate(g, &kexec));
    CHECK(keel_graph_destroy(g));

    cudaGraph_t rg;
    CK_CUDA(cudaStreamBeginCapture(rs, cudaStreamCaptureModeRelaxed));
    for (int i = 0; i < GRAPH_KERNELS; i++)
        CU(cuLaunchKernel(rf0, 1, 1, 1, 1, 1, 1, 0, (CUstream)rs, NULL, NULL));
    CK_CUDA(cudaStreamEndCapture(rs, &rg));
    CK_CUDA(cudaGraphInstantiate(&rexec, rg, 0));
    CK_CUDA(cudaGraphDestroy(rg));
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

/* ---- a small call: a built-in op against a launch of the same work ---- */

enum { SMALL_N = 1024, SMALL_BLOCK = 256 };

struct small_call {
    float *a, *b, *y;        /* Keel allocations of SMALL_N floats */
    keel_kernel_t *nvrtc;    /* vadd compiled by NVRTC (keel_module_compile) */
    CUfunction raw;          /* vadd in PTX, for cuLaunchKernel */
    int against_raw;         /* the other side: 0 keel_launch_kernel, 1 cuLaunchKernel */
};

static void small_launch(struct small_call *c, int how)
{
    int n = SMALL_N;
    void *args[] = {&c->a, &c->b, &c->y, &n};
    keel_dim3_t grid = {SMALL_N / SMALL_BLOCK, 1, 1}, block = {SMALL_BLOCK, 1, 1};
    if (how == 0)
        CHECK(keel_binary_vec(ks, KEEL_BINARY_ADD, KEEL_F32, SMALL_N, c->a, c->b, c->y));
    else if (how == 1)
        CHECK(keel_launch_kernel(c->nvrtc, grid, block, 0, ks, args));
    else
        CU(cuLaunchKernel(c->raw, SMALL_N / SMALL_BLOCK, 1, 1, SMALL_BLOCK, 1, 1, 0, (CUstream)rs, args, NULL));
}

/* Host cost per call in microseconds: keel = keel_binary_vec, raw = the launch. */
static double small_cost(int keel, void *arg)
{
    struct small_call *c = arg;
    const int n = 1000;
    int how = keel ? 0 : c->against_raw ? 2 : 1;
    sync_both();
    double t0 = now();
    for (int i = 0; i < n; i++)
        small_launch(c, how);
    double t = (now() - t0) / n;
    sync_both();
    return t * 1e6;
}

static void fill_random(void *p, size_t n, unsigned seed);

/* Each of the three forms adds fresh random vectors exactly (y poisoned first). */
static int check_small(struct small_call *c)
{
    float ha[SMALL_N], hb[SMALL_N], hy[SMALL_N];
    unsigned long long ra[SMALL_N], rb[SMALL_N];
    static const char *const form[] = {"keel_binary_vec", "keel_launch_kernel (NVRTC)", "cuLaunchKernel (PTX)"};
    int ok = 1;
    for (int how = 0; how < 3; how++) {
        fill_random(ra, sizeof ra, 11 + 2 * how);
        fill_random(rb, sizeof rb, 12 + 2 * how);
        for (int i = 0; i < SMALL_N; i++) { /* 24 random bits each, scaled into [-1, 1): exact floats */
            ha[i] = (float)(ra[i] >> 40) * 0x1p-23f - 1.0f;
            hb[i] = (float)(rb[i] >> 40) * 0x1p-23f - 1.0f;
        }
        CHECK(keel_memcpy(c->a, ha, sizeof ha));
        CHECK(keel_memcpy(c->b, hb, sizeof hb));
        CHECK(keel_memset(c->y, 0xff, sizeof hy));
        small_launch(c, how);
        sync_both();
        CHECK(keel_memcpy(hy, c->y, sizeof hy));
        int bad = 0;
        for (int i = 0; i < SMALL_N; i++)
            bad += !(hy[i] == ha[i] + hb[i]);
        printf("check: the add of %d floats by %s: %s\n", SMALL_N, form[how], bad ? "WRONG" : "exact");
        ok &= bad == 0;
    }
    return ok;
}

/* ---- copies ---- */

struct copy_case {
    void *kdst, *ksrc;     /* Keel's side: Keel allocations or host memory */
    void *rdst, *rsrc;     /* the raw side: CUDA allocations or host memory */
    size_t bytes;
    int keel_sync;         /* keel_memcpy instead of keel_memcpy_async */
    int raw_sync;          /* cudaMemcpy instead of cudaMemcpyAsync; 2: and a synchronize of its stream */
    double traffic;        /* bytes counted per copy (2x for device-to-device) */
};

static double copy_bw(int keel, void *arg)
{
    struct copy_case *c = arg;
    const int n = c->bytes >= (64u << 20) ? 2 : c->bytes >= (1u << 20) ? 10 : 200;
    sync_both();
    double t0 = now();
    for (int i = 0; i < n; i++) {
        if (keel) {
            if (c->keel_sync)
                CHECK(keel_memcpy(c->kdst, c->ksrc, c->bytes));
            else
                CHECK(keel_memcpy_async(c->kdst, c->ksrc, c->bytes, ks));
        } else {
            if (c->raw_sync) {
                CK_CUDA(cudaMemcpy(c->rdst, c->rsrc, c->bytes, cudaMemcpyDefault));
                if (c->raw_sync == 2)
                    CK_CUDA(cudaStreamSynchronize(0));
            }
            else
                CK_CUDA(cudaMemcpyAsync(c->rdst, c->rsrc, c->bytes, cudaMemcpyDefault, rs));
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
            CHECK(keel_malloc_async(ks, b, &p));
            CHECK(keel_free_async(p, ks));
        } else {
            CK_CUDA(cudaMallocAsync(&p, b, rs));
            CK_CUDA(cudaFreeAsync(p, rs));
        }
    }
    double t = (now() - t0) / n;
    sync_both();
    return t * 1e6;
}

/* ---- the table ---- */

/* Prints one row and records it. raw and keel are the two sides' medians;
 * the ratio is the median of the pairs' keel / raw. */
static void row(const char *op, const char *unit, cmp_t c, int higher_better, double target)
{
    int v = bench_judge(c.ratio, higher_better, target);
    char tgt[32] = "-";
    if (target > 0)
        snprintf(tgt, sizeof tgt, "%s %.3g", higher_better ? ">=" : "<=", target);
    printf("%-44s %10.3f %10.3f %-5s %7.3f [%.3f..%.3f]  %-8s %s\n", op, c.raw, c.kl, unit, c.ratio, c.lo, c.hi, tgt,
           target > 0 ? bench_verdict_name(v) : "");
    fflush(stdout);
    bench_record(op, c.ratio, c.lo, c.hi, higher_better, target, v);
}

/* The stream-ordered allocation rows. */
static void alloc_rows(void)
{
    cmp_t c = compare(alloc_free, (void *)(size_t)(1u << 20));
    row("malloc_async+free_async 1 MiB (reused)", "us", c, 0, 1.10);
    c = compare(alloc_free, (void *)(size_t)(64u << 20));
    row("malloc_async+free_async 64 MiB (reused)", "us", c, 0, 1.10);
    c = compare(alloc_free, (void *)(size_t)(512u << 20));
    row("malloc_async+free_async 512 MiB (no reuse)", "us", c, 0, 1.05);
    c = compare(alloc_free, (void *)(size_t)((1u << 20) | 1));
    row("malloc_async+free_async 1 MiB, sizes alternate", "us", c, 0, 1.05);
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
    if (!a || !b) {
        fprintf(stderr, "no host memory for the pageable check\n");
        exit(3);
    }
    CHECK(keel_malloc(dev, bytes, &d));
    fill_random(a, bytes, 7);
    memset(b, 0xa5, bytes);
    CHECK(keel_memcpy(d, a, bytes));
    CHECK(keel_memcpy(b, d, bytes));
    char name[80];
    snprintf(name, sizeof name, "pageable round trip of %zu bytes", bytes);
    if (memcmp(a, b, bytes) != 0) {
        printf("check: %s through the staging path is WRONG\n", name);
        bench_record(name, NAN, NAN, NAN, 1, 0, BENCH_WRONG);
    } else {
        printf("check: %s through Keel's staging is exact\n", name);
    }
    CHECK(keel_free(d));
    free(a);
    free(b);
}

int main(int argc, char **argv)
{
    int pageable_only = 0, alloc_only = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            reps = 5;
        } else if (strcmp(argv[i], "--pageable") == 0) {
            pageable_only = 1;
        } else if (strcmp(argv[i], "--alloc") == 0) {
            alloc_only = 1;
        } else {
            fprintf(stderr, "usage: %s [--quick] [--pageable | --alloc]\n", argv[0]);
            return 3;
        }
    }
    double t_start = now();
    keel_status_t st = keel_device_get("cuda", 0, &dev);
    if (st != KEEL_OK) {
        printf("SKIP: no usable CUDA device: %s\n", keel_last_error());
        return 77;
    }
    keel_device_properties_t props = {.struct_size = sizeof props};
    CHECK(keel_device_get_properties(dev, &props));
    keel_backend_t *be;
    keel_backend_info_t info = {.struct_size = sizeof info};
    CHECK(keel_device_get_backend(dev, &be));
    CHECK(keel_backend_get_info(be, &info));
    printf("device: %s (%s, %d SMs), backend: %s\n", props.name, props.architecture, props.compute_units,
           info.description);

    /* Raw side: the same device through the runtime and driver APIs. */
    CK_CUDA(cudaSetDevice(0));
    *(void **)&p_cuGetErrorName = driver_entry("cuGetErrorName");
    *(void **)&p_cuModuleLoadData = driver_entry("cuModuleLoadData");
    *(void **)&p_cuModuleGetFunction = driver_entry("cuModuleGetFunction");
    *(void **)&p_cuLaunchKernel = driver_entry("cuLaunchKernel");
    CK_CUDA(cudaFree(0));
    CK_CUDA(cudaStreamCreateWithFlags(&rs, cudaStreamNonBlocking));
    CUmodule rmod;
    CU(cuModuleLoadData(&rmod, ptx));
    CU(cuModuleGetFunction(&rf0, rmod, "empty0"));
    CU(cuModuleGetFunction(&rf8, rmod, "empty8"));
    for (int i = 0; i < 8; i++) {
        argvals[i] = (unsigned long long)i;
        argv8[i] = &argvals[i];
    }

    /* Keel side. */
    CHECK(keel_stream_create(dev, 0, 0, &ks));
    keel_module_t *kmod;
    CHECK(keel_module_load_data(dev, ptx, sizeof ptx, &kmod));
    CHECK(keel_module_get_kernel(kmod, "empty0", &kk0));
    CHECK(keel_module_get_kernel(kmod, "empty8", &kk8));
    keel_module_t *kvadd;
    CHECK(keel_module_compile(dev, vadd_cu, "vadd.cu", NULL, 0, &kvadd));
    /* The same kernels launched as CUfunctions of the primary context (the
     * plugin's alternative launch path, chosen at lookup). */
    keel_module_t *kmod_f;
    setenv("KEEL_CUDA_LAUNCH", "function", 1);
    CHECK(keel_module_load_data(dev, ptx, sizeof ptx, &kmod_f));
    CHECK(keel_module_get_kernel(kmod_f, "empty0", &kf0));
    CHECK(keel_module_get_kernel(kmod_f, "empty8", &kf8));
    unsetenv("KEEL_CUDA_LAUNCH");

    printf("\n%-44s %10s %10s %-5s %7s %-15s %-8s\n", "op", "raw", "keel", "unit", "keel/raw", "[min..max]", "target");
    cmp_t c;
    if (alloc_only) {
        /* Other live blocks, as in the whole run (the registry then parks
         * a freed stream-ordered block instead of dropping its entry). */
        void *held[3];
        for (int i = 0; i < 3; i++)
            CHECK(keel_malloc(dev, 1u << 20, &held[i]));
        alloc_rows();
        for (int i = 0; i < 3; i++)
            CHECK(keel_free(held[i]));
        goto done;
    }
    if (pageable_only)
        goto copies;
    c = compare(launch_cost, (void *)0L);
    row("launch host cost, 0 args", "us", c, 0, 1.05);
    c = compare(launch_cost, (void *)8L);
    row("launch host cost, 8 args", "us", c, 0, 1.05);
    c = compare(launch_cost, (void *)100L);
    row("launch 0 args, CUfunction mode", "us", c, 0, 0);
    c = compare(launch_cost, (void *)108L);
    row("launch 8 args, CUfunction mode", "us", c, 0, 0);
    c = compare(launch_sync, NULL);
    row("launch + synchronize", "us", c, 0, 1.05);
    build_graphs();
    c = compare(graph_replay, NULL);
    row("graph replay, per kernel (100)", "us", c, 0, 1.05);

    /* A small call: raw = the launch of the same add (NVRTC through Keel,
     * or PTX through cuLaunchKernel), keel = keel_binary_vec. */
    struct small_call sc = {0};
    CHECK(keel_malloc(dev, SMALL_N * sizeof(float), (void **)&sc.a));
    CHECK(keel_malloc(dev, SMALL_N * sizeof(float), (void **)&sc.b));
    CHECK(keel_malloc(dev, SMALL_N * sizeof(float), (void **)&sc.y));
    CHECK(keel_module_get_kernel(kvadd, "vadd", &sc.nvrtc));
    CU(cuModuleGetFunction(&sc.raw, rmod, "vadd"));
    if (check_small(&sc)) {
        c = compare(small_cost, &sc);
        row("add 1k f32: keel_binary_vec / NVRTC launch", "us", c, 0, 1.10);
        sc.against_raw = 1;
        c = compare(small_cost, &sc);
        row("add 1k f32: keel_binary_vec / cuLaunchKernel", "us", c, 0, 0);
    } else {
        bench_record("add 1k f32: keel_binary_vec / NVRTC launch", NAN, NAN, NAN, 0, 1.10, BENCH_WRONG);
    }
    CHECK(keel_free(sc.a));
    CHECK(keel_free(sc.b));
    CHECK(keel_free(sc.y));

copies:;
    size_t pin_bytes = 256u << 20, d2d_bytes = 1024u << 20;
    void *kh, *kd, *kd2, *rh, *rd, *rd2;
    CHECK(keel_malloc_host(dev, pin_bytes, &kh));
    CHECK(keel_malloc(dev, d2d_bytes, &kd));
    CHECK(keel_malloc(dev, d2d_bytes, &kd2));
    CK_CUDA(cudaMallocHost(&rh, pin_bytes));
    CK_CUDA(cudaMalloc(&rd, d2d_bytes));
    CK_CUDA(cudaMalloc(&rd2, d2d_bytes));
    fill_random(kh, pin_bytes, 1);
    fill_random(rh, pin_bytes, 1);
    CHECK(keel_memcpy(kd, kh, pin_bytes)); /* random bytes on the device too (copies do not depend on them) */
    CK_CUDA(cudaMemcpy(rd, rh, pin_bytes, cudaMemcpyHostToDevice));

    if (!pageable_only) {
        struct copy_case h2d = {kd, kh, rd, rh, pin_bytes, 0, 0, (double)pin_bytes};
        c = compare(copy_bw, &h2d);
        row("pinned H2D 256 MiB (async)", "GB/s", c, 1, 0.98);
        struct copy_case d2h = {kh, kd, rh, rd, pin_bytes, 0, 0, (double)pin_bytes};
        c = compare(copy_bw, &d2h);
        row("pinned D2H 256 MiB (async)", "GB/s", c, 1, 0.98);
        struct copy_case d2d = {kd2, kd, rd2, rd, d2d_bytes, 0, 0, 2.0 * d2d_bytes};
        c = compare(copy_bw, &d2d);
        row("D2D 1 GiB (async, read+write)", "GB/s", c, 1, 0.98);
    }

    /* Pageable (malloc'ed) memory through keel_memcpy, against the pinned
     * bandwidth of the same direction and size (the ceiling of a staged
     * copy) and against the runtime's own pageable copy; the staging path
     * checked exact first. */
    check_pageable(64u << 20);
    check_pageable((64u << 20) + 12345);
    static const size_t page_sizes[] = {64u << 20, 256u << 20};
    for (int i = 0; i < 2; i++) {
        size_t n = page_sizes[i];
        void *hp = malloc(n), *hp2 = malloc(n);
        if (!hp || !hp2) {
            fprintf(stderr, "no host memory for the pageable copies\n");
            return 3;
        }
        fill_random(hp, n, 3);
        fill_random(hp2, n, 4);
        char label[80];
        struct copy_case ph2d_pin = {kd, hp, rd, rh, n, 1, 0, (double)n};
        c = compare(copy_bw, &ph2d_pin);
        snprintf(label, sizeof label, "pageable H2D %zu MiB vs pinned", n >> 20);
        row(label, "GB/s", c, 1, 0.85);
        struct copy_case pd2h_pin = {hp2, kd, rh, rd, n, 1, 0, (double)n};
        c = compare(copy_bw, &pd2h_pin);
        snprintf(label, sizeof label, "pageable D2H %zu MiB vs pinned", n >> 20);
        row(label, "GB/s", c, 1, 0.85);
        struct copy_case ph2d = {kd, hp, rd, hp, n, 1, 1, (double)n};
        c = compare(copy_bw, &ph2d);
        snprintf(label, sizeof label, "pageable H2D %zu MiB vs cudaMemcpy", n >> 20);
        row(label, "GB/s", c, 1, 0);
        struct copy_case pd2h = {hp2, kd, hp2, rd, n, 1, 1, (double)n};
        c = compare(copy_bw, &pd2h);
        snprintf(label, sizeof label, "pageable D2H %zu MiB vs cudaMemcpy", n >> 20);
        row(label, "GB/s", c, 1, 0);
        free(hp);
        free(hp2);
    }
    /* Small pageable copies: host to device the driver's path, device to
     * host the stream's pinned buffer; no slower than the driver's copy. */
    static const size_t small_sizes[] = {4u << 10, 64u << 10};
    for (int i = 0; i < 2; i++) {
        size_t n = small_sizes[i];
        void *hp = malloc(n), *hp2 = malloc(n);
        if (!hp || !hp2) {
            fprintf(stderr, "no host memory for the pageable copies\n");
            return 3;
        }
        fill_random(hp, n, 5);
        fill_random(hp2, n, 6);
        char label[80];
        struct copy_case h = {kd, hp, rd, hp, n, 1, 2, (double)n};
        c = compare(copy_bw, &h);
        snprintf(label, sizeof label, "pageable H2D %zu KiB vs cudaMemcpy+sync", n >> 10);
        row(label, "GB/s", c, 1, 1 / 1.1);
        h.raw_sync = 1;
        c = compare(copy_bw, &h);
        snprintf(label, sizeof label, "pageable H2D %zu KiB vs cudaMemcpy", n >> 10);
        row(label, "GB/s", c, 1, 0);
        struct copy_case d = {hp2, kd, hp2, rd, n, 1, 1, (double)n};
        c = compare(copy_bw, &d);
        snprintf(label, sizeof label, "pageable D2H %zu KiB vs cudaMemcpy", n >> 10);
        row(label, "GB/s", c, 1, 1 / 1.1);
        free(hp);
        free(hp2);
    }

    if (!pageable_only)
        alloc_rows();

    CHECK(keel_free(kh));
    CHECK(keel_free(kd));
    CHECK(keel_free(kd2));
    CK_CUDA(cudaFreeHost(rh));
    CK_CUDA(cudaFree(rd));
    CK_CUDA(cudaFree(rd2));
    if (!pageable_only) {
        CHECK(keel_graph_exec_destroy(kexec));
        CK_CUDA(cudaGraphExecDestroy(rexec));
    }
done:
    CHECK(keel_module_unload(kmod));
    CHECK(keel_module_unload(kmod_f));
    CHECK(keel_module_unload(kvadd));
    CHECK(keel_stream_destroy(ks));
    CK_CUDA(cudaStreamDestroy(rs));
    bench_print_summary("ratio = keel / raw: times (us) at most, bandwidths (GB/s) at least the target", now() - t_start);
    return bench_exit_status();
}
