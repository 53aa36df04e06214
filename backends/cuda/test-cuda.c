/* SPDX-License-Identifier: MIT */
/* CUDA-specific tests of keel-cuda.so, beyond the conformance suites of
 * tests/: NVRTC and its disk cache, modules from PTX in memory and in files,
 * attributes and occupancy, graphs, events across streams, pageable copies
 * through staging and the stream's pinned buffer, copies with another
 * library's device memory, peer copies, out-of-memory recovery and the error texts.
 * Skips (77) when the CUDA backend is not usable. Runs in one process
 * (CK_NOFORK): a CUDA context does not survive a fork. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>
#include <dlfcn.h>
#include "keel.h"

#define OK(call)                                                                                           \
    do {                                                                                                   \
        keel_status_t s_ = (call);                                                                         \
        ck_assert_msg(s_ == KEEL_OK, "%s -> %s (%s)", #call, keel_status_name(s_), keel_last_error());     \
    } while (0)
#define FAILS(expect, call)                                                                                \
    do {                                                                                                   \
        keel_status_t s_ = (call);                                                                         \
        ck_assert_msg(s_ == (expect), "%s -> %s, expected %s (%s)", #call, keel_status_name(s_),           \
                      keel_status_name(expect), keel_last_error());                                        \
    } while (0)
#define DETAIL_HAS(needle)                                                                                 \
    ck_assert_msg(strstr(keel_last_error(), (needle)) != NULL, "detail \"%s\" lacks \"%s\"", keel_last_error(), \
                  (needle))

#define KT_SENTINEL_INIT ((void *)(uintptr_t)0x5eed5eedu)

static keel_device_t *dev;
static keel_stream_t *s1, *s2;

static const char ptx[] =
    ".version 7.8\n.target sm_80\n.address_size 64\n"
    ".visible .entry empty0()\n{\n\tret;\n}\n"
    ".visible .entry fill_u32(.param .u64 p, .param .u32 v, .param .u32 n)\n{\n"
    "\t.reg .b32 %r<6>;\n\t.reg .b64 %rd<4>;\n\t.reg .pred %p1;\n"
    "\tld.param.u64 %rd1, [p];\n\tld.param.u32 %r1, [v];\n\tld.param.u32 %r2, [n];\n"
    "\tmov.u32 %r3, %ctaid.x;\n\tmov.u32 %r4, %ntid.x;\n\tmov.u32 %r5, %tid.x;\n"
    "\tmad.lo.u32 %r3, %r3, %r4, %r5;\n\tsetp.ge.u32 %p1, %r3, %r2;\n\t@%p1 ret;\n"
    "\tcvta.to.global.u64 %rd2, %rd1;\n\tmul.wide.u32 %rd3, %r3, 4;\n\tadd.u64 %rd2, %rd2, %rd3;\n"
    "\tst.global.u32 [%rd2], %r1;\n\tret;\n}\n";

static const char saxpy_src[] =
    "extern \"C\" __global__ void saxpy(int n, float a, const float *x, float *y)\n"
    "{\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n"
    "extern \"C\" __global__ void big_shared(float *out)\n"
    "{\n"
    "    extern __shared__ float sm[];\n"
    "    sm[threadIdx.x] = threadIdx.x;\n"
    "    __syncthreads();\n"
    "    out[threadIdx.x] = sm[blockDim.x - 1 - threadIdx.x];\n"
    "}\n";

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static void fill_bytes(void *p, size_t n)
{
    unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        c[i] = (unsigned char)(rnd() >> 24);
}
static float rndf(void)
{
    return (float)((double)(rnd() >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static char cache_dir[256];

static void setup(void)
{
    OK(keel_device_get("cuda", 0, &dev));
    OK(keel_stream_create(dev, 0, 0, &s1));
    OK(keel_stream_create(dev, 0, 0, &s2));
}

static void teardown(void)
{
    OK(keel_stream_destroy(s1));
    OK(keel_stream_destroy(s2));
}

/* ---- device ---- */

START_TEST(test_properties)
{
    keel_device_properties_t p;
    memset(&p, 0xff, sizeof p);
    p.struct_size = sizeof p;
    OK(keel_device_get_properties(dev, &p));
    ck_assert_str_eq(p.vendor, "NVIDIA");
    ck_assert_str_eq(p.backend, "cuda");
    ck_assert(strncmp(p.architecture, "sm_", 3) == 0);
    ck_assert(p.name[0] != '\0');
    ck_assert_int_eq(p.type, KEEL_DEVICE_TYPE_GPU);
    ck_assert_int_eq(p.warp_size, 32);
    ck_assert(p.compute_units > 0 && p.max_threads_per_block >= 1024);
    ck_assert(p.total_memory > 0 && p.free_memory <= p.total_memory);
    ck_assert(p.shared_memory_per_block >= 48 * 1024);
    ck_assert(p.compute_capability_major >= 7);
    ck_assert(p.unified_addressing == 1);
    ck_assert(p.stream_ordered_alloc == 1);
    ck_assert(p.max_grid_dim[0] > 65535);
    keel_backend_t *b;
    keel_backend_info_t info = {.struct_size = sizeof info};
    OK(keel_device_get_backend(dev, &b));
    OK(keel_backend_get_info(b, &info));
    ck_assert_msg(strncmp(info.description, "CUDA ", 5) == 0 && strstr(info.description, "driver") != NULL,
                  "description \"%s\"", info.description);
    int least, greatest;
    OK(keel_device_stream_priority_range(dev, &least, &greatest));
    ck_assert(greatest <= least);
    keel_stream_t *hi;
    OK(keel_stream_create(dev, 0, greatest, &hi));
    OK(keel_stream_destroy(hi));
}
END_TEST

/* ---- memory ---- */

START_TEST(test_copies_every_direction)
{
    const size_t n = 3 * 1024 * 1024 + 13; /* over the staging threshold, odd */
    unsigned char *h = malloc(n), *back = malloc(n);
    void *d, *d2, *pin, *man;
    fill_bytes(h, n);
    OK(keel_malloc(dev, n, &d));
    OK(keel_malloc(dev, n, &d2));
    OK(keel_malloc_host(dev, n, &pin));
    OK(keel_malloc_managed(dev, n, &man));
    OK(keel_memcpy(d, h, n));                      /* pageable -> device (staged) */
    OK(keel_memcpy_async(d2, d, n, s1));           /* device -> device */
    OK(keel_memcpy_async(pin, d2, n, s1));         /* device -> pinned */
    OK(keel_memcpy_async(man, pin, n, s1));        /* pinned -> managed */
    OK(keel_stream_synchronize(s1));
    ck_assert(memcmp(man, h, n) == 0);
    memset(back, 0, n);
    OK(keel_memcpy(back, d2, n));                  /* device -> pageable (staged) */
    ck_assert(memcmp(back, h, n) == 0);
    OK(keel_memset_async(d, 0x5a, n, s1));
    OK(keel_memcpy_async(back, d, n, s1));         /* async device -> pageable (staged, waits) */
    OK(keel_stream_synchronize(s1));
    for (size_t i = 0; i < n; i += 4099)
        ck_assert_int_eq(back[i], 0x5a);
    OK(keel_free(d));
    OK(keel_free(d2));
    OK(keel_free(pin));
    OK(keel_free(man));
    free(h);
    free(back);
}
END_TEST

START_TEST(test_pageable_sizes)
{
    /* Under 2 MiB a read-back goes through the stream's pinned buffer,
     * which grows by powers of two from 64 KiB: sizes that make it grow.
     * From 2 MiB the copy is staged in 4 MiB chunks through four slots:
     * sizes that end inside the first chunk, a later one, and past the
     * slots' first round. */
    size_t sizes[] = {1,
                      3,
                      4096,
                      65536 + 5,
                      700001,
                      (1u << 20) + 1,
                      (2u << 20) - 1,
                      2u << 20,
                      (2u << 20) + 4097,
                      (5u << 20) + 3,
                      (9u << 20) + 65537,
                      (17u << 20) + 7,
                      (33u << 20) + 7};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        unsigned char *a = malloc(n), *b = malloc(n), *orig = malloc(n);
        void *d;
        fill_bytes(a, n);
        memcpy(orig, a, n);
        memset(b, 0xa5, n);
        OK(keel_malloc(dev, n, &d));
        OK(keel_memcpy_async(d, a, n, s1));
        /* The pageable source may be reused as soon as the async call returned. */
        memset(a, 0, n);
        OK(keel_memcpy_async(b, d, n, s1));
        OK(keel_stream_synchronize(s1));
        ck_assert_msg(memcmp(orig, b, n) == 0, "size %zu", n);
        free(orig);
        OK(keel_free(d));
        free(a);
        free(b);
    }
}
END_TEST

/* Device memory of another library (cudaMalloc through the runtime's own
 * library here) is memory Keel does not know, and Keel reads it as host
 * memory; a copy to or from it must still go through the driver, which
 * knows it, and never through a host memcpy (a fault): small and large. */
START_TEST(test_copies_with_foreign_device_memory)
{
    void *rt = dlopen("libcudart.so", RTLD_NOW | RTLD_LOCAL);
    if (rt == NULL) {
        fprintf(stderr, "test-cuda: no libcudart.so to allocate foreign memory with (%s); skipped\n", dlerror());
        return;
    }
    int (*rt_malloc)(void **, size_t) = (int (*)(void **, size_t))dlsym(rt, "cudaMalloc");
    int (*rt_free)(void *) = (int (*)(void *))dlsym(rt, "cudaFree");
    int (*rt_memcpy)(void *, const void *, size_t, int) =
        (int (*)(void *, const void *, size_t, int))dlsym(rt, "cudaMemcpy");
    ck_assert_msg(rt_malloc && rt_free && rt_memcpy, "libcudart.so without cudaMalloc, cudaFree or cudaMemcpy");
    size_t sizes[] = {4096, (4u << 20) + 3};
    for (size_t k = 0; k < 2; k++) {
        size_t n = sizes[k];
        unsigned char *a = malloc(n), *b = malloc(n);
        void *d = NULL, *d2 = NULL, *f = NULL;
        ck_assert(a && b);
        fill_bytes(a, n);
        ck_assert_int_eq(rt_malloc(&f, n), 0);
        OK(keel_malloc(dev, n, &d));
        OK(keel_malloc(dev, n, &d2));
        OK(keel_memcpy(d, a, n));
        OK(keel_memcpy(f, d, n)); /* to the foreign memory */
        memset(b, 0, n);
        ck_assert_int_eq(rt_memcpy(b, f, n, 2 /* cudaMemcpyDeviceToHost */), 0);
        ck_assert_msg(memcmp(a, b, n) == 0, "%zu bytes into foreign device memory", n);
        OK(keel_memcpy(d2, f, n)); /* and back from it */
        memset(b, 0, n);
        OK(keel_memcpy(b, d2, n));
        ck_assert_msg(memcmp(a, b, n) == 0, "%zu bytes out of foreign device memory", n);
        OK(keel_free(d));
        OK(keel_free(d2));
        ck_assert_int_eq(rt_free(f), 0);
        free(a);
        free(b);
    }
    dlclose(rt);
}
END_TEST

START_TEST(test_out_of_memory_recovers)
{
    size_t free_b, total;
    OK(keel_device_memory_info(dev, &free_b, &total));
    void *p = KT_SENTINEL_INIT;
    FAILS(KEEL_ERROR_OUT_OF_MEMORY, keel_malloc(dev, total * 2, &p));
    DETAIL_HAS("cudaErrorMemoryAllocation");
    ck_assert(p == KT_SENTINEL_INIT);
    OK(keel_malloc(dev, 1 << 20, &p));
    OK(keel_free(p));
    FAILS(KEEL_ERROR_OUT_OF_MEMORY, keel_malloc_async(s1, total * 2, &p));
    OK(keel_malloc_async(s1, 1 << 20, &p));
    OK(keel_memset_async(p, 0, 1 << 20, s1));
    OK(keel_free_async(p, s1));
    OK(keel_stream_synchronize(s1));
}
END_TEST

START_TEST(test_async_alloc_reuse)
{
    /* A steady loop: the pool keeps its memory, so this is fast and stable. */
    size_t f0, f1, total;
    void *p;
    OK(keel_malloc_async(s1, 8 << 20, &p));
    OK(keel_free_async(p, s1));
    OK(keel_stream_synchronize(s1));
    OK(keel_device_memory_info(dev, &f0, &total));
    for (int i = 0; i < 1000; i++) {
        OK(keel_malloc_async(s1, 8 << 20, &p));
        OK(keel_free_async(p, s1));
    }
    OK(keel_stream_synchronize(s1));
    OK(keel_device_memory_info(dev, &f1, &total));
    ck_assert_msg(f1 + (64u << 20) >= f0, "free memory fell from %zu to %zu", f0, f1);
}
END_TEST

/* ---- modules and kernels ---- */

START_TEST(test_module_ptx)
{
    keel_module_t *m;
    keel_kernel_t *fill, *empty;
    OK(keel_module_load_data(dev, ptx, sizeof ptx, &m));
    OK(keel_module_get_kernel(m, "fill_u32", &fill));
    OK(keel_module_get_kernel(m, "empty0", &empty));
    FAILS(KEEL_ERROR_NOT_FOUND, keel_module_get_kernel(m, "nope", &fill));
    OK(keel_module_get_kernel(m, "fill_u32", &fill));
    int v;
    OK(keel_kernel_get_attribute(fill, KEEL_KERNEL_ATTR_NUM_ARGS, &v));
    ck_assert_int_eq(v, 3);
    OK(keel_kernel_get_attribute(empty, KEEL_KERNEL_ATTR_NUM_ARGS, &v));
    ck_assert_int_eq(v, 0);
    OK(keel_kernel_get_attribute(fill, KEEL_KERNEL_ATTR_MAX_THREADS_PER_BLOCK, &v));
    ck_assert(v >= 256);
    OK(keel_kernel_get_attribute(fill, KEEL_KERNEL_ATTR_NUM_REGS, &v));
    ck_assert(v > 0);
    int blocks = 0;
    OK(keel_kernel_max_active_blocks(fill, 256, 0, &blocks));
    ck_assert(blocks > 0);

    const unsigned n = 100003;
    uint32_t *h = malloc(n * 4);
    void *d;
    OK(keel_malloc(dev, n * 4, &d));
    OK(keel_memset(d, 0xa5, n * 4));
    uint32_t val = (uint32_t)rnd();
    void *args[] = {&d, &val, (void *)&n};
    OK(keel_launch_kernel(fill, (keel_dim3_t){(n + 255) / 256, 1, 1}, (keel_dim3_t){256, 1, 1}, 0, s1, args));
    OK(keel_launch_kernel(empty, (keel_dim3_t){1, 1, 1}, (keel_dim3_t){1, 1, 1}, 0, s1, NULL));
    OK(keel_stream_synchronize(s1));
    OK(keel_memcpy(h, d, n * 4));
    for (unsigned i = 0; i < n; i++)
        ck_assert_uint_eq(h[i], val);
    /* A block too large (refused by the core against the device's limits,
     * or by CUDA), and dynamic shared memory past what the kernel may use:
     * CUDA's error, named, with the Keel call. */
    FAILS(KEEL_ERROR_INVALID_ARGUMENT,
          keel_launch_kernel(fill, (keel_dim3_t){1, 1, 1}, (keel_dim3_t){4096, 1, 1}, 0, s1, args));
    DETAIL_HAS("keel_launch_kernel");
    FAILS(KEEL_ERROR_INVALID_ARGUMENT,
          keel_launch_kernel(fill, (keel_dim3_t){1, 1, 1}, (keel_dim3_t){32, 1, 1}, 1u << 30, s1, args));
    DETAIL_HAS("keel_launch_kernel: CUDA_ERROR_INVALID_VALUE");
    OK(keel_stream_synchronize(s1));
    OK(keel_free(d));
    OK(keel_module_unload(m));
    free(h);

    /* The same from a file, and the errors of missing and broken images. */
    char path[] = "/tmp/keel-test-cuda-XXXXXX.ptx";
    int fd = mkstemps(path, 4);
    ck_assert(fd >= 0);
    ck_assert(write(fd, ptx, sizeof ptx - 1) == (ssize_t)(sizeof ptx - 1));
    close(fd);
    OK(keel_module_load_file(dev, path, &m));
    OK(keel_module_get_kernel(m, "fill_u32", &fill));
    OK(keel_module_unload(m));
    unlink(path);
    FAILS(KEEL_ERROR_NOT_FOUND, keel_module_load_file(dev, "/nonexistent/keel.cubin", &m));
    static const char garbage[] = ".version 7.8\n.target sm_80\n.address_size 64\n.visible .entry x( { oops\n";
    FAILS(KEEL_ERROR_COMPILE_FAILED, keel_module_load_data(dev, garbage, sizeof garbage, &m));
}
END_TEST

static int count_cache_files(void)
{
    DIR *d = opendir(cache_dir);
    if (d == NULL)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strncmp(e->d_name, "nvrtc-", 6) == 0 && strstr(e->d_name, ".tmp.") == NULL;
    closedir(d);
    return n;
}

static void run_saxpy(keel_module_t *m)
{
    keel_kernel_t *k;
    OK(keel_module_get_kernel(m, "saxpy", &k));
    int n = 50001;
    float a = rndf();
    float *x = malloc(n * 4), *y = malloc(n * 4), *out = malloc(n * 4);
    for (int i = 0; i < n; i++) {
        x[i] = rndf();
        y[i] = rndf();
    }
    void *dx, *dy;
    OK(keel_malloc(dev, n * 4, &dx));
    OK(keel_malloc(dev, n * 4, &dy));
    OK(keel_memcpy(dx, x, n * 4));
    OK(keel_memcpy(dy, y, n * 4));
    void *args[] = {&n, &a, &dx, &dy};
    OK(keel_launch_kernel(k, (keel_dim3_t){(n + 127) / 128, 1, 1}, (keel_dim3_t){128, 1, 1}, 0, s1, args));
    OK(keel_stream_synchronize(s1));
    OK(keel_memcpy(out, dy, n * 4));
    for (int i = 0; i < n; i++) {
        double ref = (double)a * x[i] + y[i];
        ck_assert_msg(out[i] - ref < 1e-5 && ref - out[i] < 1e-5, "saxpy[%d] = %g, expected %g", i, out[i], ref);
    }
    OK(keel_free(dx));
    OK(keel_free(dy));
    free(x);
    free(y);
    free(out);
}

START_TEST(test_nvrtc_and_cache)
{
    snprintf(cache_dir, sizeof cache_dir, "/tmp/keel-test-cache-%ld", (long)getpid());
    setenv("KEEL_CACHE_DIR", cache_dir, 1);
    const char *opts[] = {"-default-device", "--use_fast_math"};
    char src[sizeof saxpy_src + 64];
    snprintf(src, sizeof src, "%s// %llu\n", saxpy_src, (unsigned long long)rnd()); /* fresh: a miss */
    keel_module_t *m;
    OK(keel_module_compile(dev, src, "saxpy.cu", opts, 1, &m));
    ck_assert_int_eq(count_cache_files(), 1);
    run_saxpy(m);
    OK(keel_module_unload(m));
    OK(keel_module_compile(dev, src, "saxpy.cu", opts, 1, &m)); /* a hit */
    ck_assert_int_eq(count_cache_files(), 1);
    run_saxpy(m);
    OK(keel_module_unload(m));
    OK(keel_module_compile(dev, src, "saxpy.cu", opts, 2, &m)); /* other options: another entry */
    ck_assert_int_eq(count_cache_files(), 2);
    OK(keel_module_unload(m));

    /* Corrupt every entry: compiling must still work, and mend the cache. */
    DIR *d = opendir(cache_dir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "nvrtc-", 6) != 0)
            continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", cache_dir, e->d_name);
        FILE *f = fopen(p, "r+");
        ck_assert(f != NULL);
        fseek(f, 80, SEEK_SET);
        fputs("garbage garbage garbage", f);
        fclose(f);
    }
    closedir(d);
    OK(keel_module_compile(dev, src, "saxpy.cu", opts, 1, &m));
    run_saxpy(m);
    OK(keel_module_unload(m));

    /* An unusable cache directory is no error either. */
    setenv("KEEL_CACHE_DIR", "/proc/keel-no-such-dir", 1);
    OK(keel_module_compile(dev, src, "saxpy.cu", opts, 1, &m));
    OK(keel_module_unload(m));

    /* Compile errors come back with NVRTC's log. */
    FAILS(KEEL_ERROR_COMPILE_FAILED,
          keel_module_compile(dev, "extern \"C\" __global__ void k() { undeclared_thing = 1; }", "bad.cu", NULL, 0,
                              &m));
    DETAIL_HAS("undeclared_thing");
    DETAIL_HAS("bad.cu");
    setenv("KEEL_CACHE_DIR", cache_dir, 1);
}
END_TEST

START_TEST(test_dynamic_shared)
{
    keel_module_t *m;
    keel_kernel_t *k;
    OK(keel_module_compile(dev, saxpy_src, "shared.cu", NULL, 0, &m));
    OK(keel_module_get_kernel(m, "big_shared", &k));
    keel_device_properties_t p = {.struct_size = sizeof p};
    OK(keel_device_get_properties(dev, &p));
    size_t big = 96 * 1024;
    if (p.shared_memory_per_block >= big) {
        OK(keel_kernel_set_max_dynamic_shared(k, big));
        int v;
        OK(keel_kernel_get_attribute(k, KEEL_KERNEL_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES, &v));
        ck_assert_int_eq(v, (int)big);
        void *d;
        OK(keel_malloc(dev, 256 * 4, &d));
        void *args[] = {&d};
        OK(keel_launch_kernel(k, (keel_dim3_t){1, 1, 1}, (keel_dim3_t){256, 1, 1}, big, s1, args));
        OK(keel_stream_synchronize(s1));
        float h[256];
        OK(keel_memcpy(h, d, sizeof h));
        for (int i = 0; i < 256; i++)
            ck_assert(h[i] == (float)(255 - i));
        OK(keel_free(d));
    }
    ck_assert(keel_kernel_set_max_dynamic_shared(k, p.shared_memory_per_block + 4096) != KEEL_OK);
    OK(keel_module_unload(m));
}
END_TEST

/* ---- streams, events, graphs ---- */

static void bump(void *p)
{
    int *v = p;
    (*v)++;
}

START_TEST(test_events_across_streams)
{
    keel_module_t *m;
    keel_kernel_t *fill;
    OK(keel_module_load_data(dev, ptx, sizeof ptx, &m));
    OK(keel_module_get_kernel(m, "fill_u32", &fill));
    const unsigned n = 1 << 22;
    void *d, *d2;
    OK(keel_malloc(dev, n * 4, &d));
    OK(keel_malloc(dev, n * 4, &d2));
    keel_event_t *a, *b, *done, *notime;
    OK(keel_event_create(dev, 0, &a));
    OK(keel_event_create(dev, 0, &b));
    OK(keel_event_create(dev, KEEL_EVENT_BLOCKING_SYNC, &done));
    OK(keel_event_create(dev, KEEL_EVENT_DISABLE_TIMING, &notime));
    uint32_t val = 0x1234567;
    void *args[] = {&d, &val, (void *)&n};
    OK(keel_event_record(a, s1));
    for (int i = 0; i < 20; i++)
        OK(keel_launch_kernel(fill, (keel_dim3_t){n / 256, 1, 1}, (keel_dim3_t){256, 1, 1}, 0, s1, args));
    OK(keel_event_record(b, s1));
    OK(keel_stream_wait_event(s2, b));
    OK(keel_memcpy_async(d2, d, n * 4, s2));
    int calls = 0;
    OK(keel_stream_launch_host_func(s2, bump, &calls));
    OK(keel_event_record(done, s2));
    OK(keel_event_synchronize(done));
    ck_assert_int_eq(calls, 1);
    OK(keel_event_query(done));
    float ms = -1;
    OK(keel_event_elapsed_time(a, b, &ms));
    ck_assert(ms > 0.0f);
    FAILS(KEEL_ERROR_INVALID_ARGUMENT, keel_event_elapsed_time(a, notime, &ms));
    uint32_t *h = malloc(n * 4);
    OK(keel_memcpy(h, d2, n * 4));
    for (unsigned i = 0; i < n; i += 97)
        ck_assert_uint_eq(h[i], val);
    free(h);
    OK(keel_event_destroy(a));
    OK(keel_event_destroy(b));
    OK(keel_event_destroy(done));
    OK(keel_event_destroy(notime));
    OK(keel_free(d));
    OK(keel_free(d2));
    OK(keel_module_unload(m));
}
END_TEST

START_TEST(test_graph_replay)
{
    keel_module_t *m;
    keel_kernel_t *fill;
    OK(keel_module_load_data(dev, ptx, sizeof ptx, &m));
    OK(keel_module_get_kernel(m, "fill_u32", &fill));
    const unsigned n = 4096;
    void *d, *pin;
    OK(keel_malloc(dev, n * 4, &d));
    OK(keel_malloc_host(dev, n * 4, &pin));
    uint32_t val = 7;
    void *args[] = {&d, &val, (void *)&n};
    int calls = 0;
    keel_graph_t *g;
    keel_graph_exec_t *x;
    OK(keel_stream_begin_capture(s1));
    int cap = 0;
    OK(keel_stream_is_capturing(s1, &cap));
    ck_assert_int_eq(cap, 1);
    OK(keel_memset_async(d, 0, n * 4, s1));
    OK(keel_launch_kernel(fill, (keel_dim3_t){n / 256, 1, 1}, (keel_dim3_t){256, 1, 1}, 0, s1, args));
    OK(keel_memcpy_async(pin, d, n * 4, s1));
    OK(keel_stream_launch_host_func(s1, bump, &calls));
    OK(keel_stream_end_capture(s1, &g));
    ck_assert_int_eq(calls, 0);
    OK(keel_graph_instantiate(g, &x));
    OK(keel_graph_destroy(g));
    for (int r = 0; r < 3; r++) {
        memset(pin, 0, n * 4);
        val = 100 + r; /* captured by value at capture time: the graph keeps 7 */
        OK(keel_graph_launch(x, r % 2 ? s2 : s1));
        OK(keel_stream_synchronize(r % 2 ? s2 : s1));
        for (unsigned i = 0; i < n; i++)
            ck_assert_uint_eq(((uint32_t *)pin)[i], 7);
    }
    ck_assert_int_eq(calls, 3);
    OK(keel_graph_exec_destroy(x));
    OK(keel_free(d));
    OK(keel_free(pin));
    OK(keel_module_unload(m));
}
END_TEST

START_TEST(test_peer_copies)
{
    keel_device_t *other;
    if (keel_device_get("cuda", 1, &other) != KEEL_OK) {
        printf("test_peer_copies: one CUDA device only, peer copies not tested\n");
        return;
    }
    int can = -1;
    OK(keel_device_can_access_peer(dev, other, &can));
    ck_assert(can == 0 || can == 1);
    const size_t n = 16u << 20;
    unsigned char *h = malloc(n), *back = malloc(n);
    fill_bytes(h, n);
    void *a, *b;
    OK(keel_malloc(dev, n, &a));
    OK(keel_malloc(other, n, &b));
    OK(keel_memcpy(a, h, n));
    OK(keel_memcpy_async(b, a, n, s1));
    OK(keel_stream_synchronize(s1));
    OK(keel_memcpy(back, b, n));
    ck_assert(memcmp(h, back, n) == 0);
    /* An event of one device, waited on by a stream of the other. */
    keel_stream_t *os;
    keel_event_t *e;
    OK(keel_stream_create(other, 0, 0, &os));
    OK(keel_event_create(dev, 0, &e));
    OK(keel_memset_async(a, 3, n, s1));
    OK(keel_event_record(e, s1));
    OK(keel_stream_wait_event(os, e));
    OK(keel_memcpy_async(b, a, n, os));
    OK(keel_stream_synchronize(os));
    OK(keel_memcpy(back, b, n));
    for (size_t i = 0; i < n; i += 4093)
        ck_assert_int_eq(back[i], 3);
    OK(keel_event_destroy(e));
    OK(keel_stream_destroy(os));
    OK(keel_free(a));
    OK(keel_free(b));
    free(h);
    free(back);
}
END_TEST

int main(void)
{
    keel_device_t *probe;
    if (keel_device_get("cuda", 0, &probe) != KEEL_OK) {
        printf("SKIP: the CUDA backend is not usable: %s\n", keel_last_error());
        return 77;
    }
    Suite *s = suite_create("cuda");
    TCase *tc = tcase_create("cuda");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_properties);
    tcase_add_test(tc, test_copies_every_direction);
    tcase_add_test(tc, test_pageable_sizes);
    tcase_add_test(tc, test_copies_with_foreign_device_memory);
    tcase_add_test(tc, test_out_of_memory_recovers);
    tcase_add_test(tc, test_async_alloc_reuse);
    tcase_add_test(tc, test_module_ptx);
    tcase_add_test(tc, test_nvrtc_and_cache);
    tcase_add_test(tc, test_dynamic_shared);
    tcase_add_test(tc, test_events_across_streams);
    tcase_add_test(tc, test_graph_replay);
    tcase_add_test(tc, test_peer_copies);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
