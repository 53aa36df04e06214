/* SPDX-License-Identifier: MIT */
/* keel-demo: one round trip through Keel on the device it selects by itself
 * (KEEL_BACKEND / KEEL_DEVICE, default cuda,hip,cpu): allocate, copy to the
 * device, launch saxpy, synchronize, copy back, check against the host, free.
 *
 * The kernel is written once, in Keel's kernel language (kernels.h), and
 * built for the device at run time. The per-backend forms stay available:
 *   --native        cpu: saxpy from kernels.c registered by pointer;
 *                   cuda/hip: the CUDA C source in kernels.h
 *   --module FILE   a module file: a shared object of CPU kernels, a cubin,
 *                   or a module file made by keel-cc
 *
 * Exit status: 0 when the result matched, 1 on any Keel error or mismatch. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <keel.h>

#include "kernels.h"

#define EXAMPLE_NAME "keel-demo"
#include "example.h" /* CHECK: on failure, say which call failed, with Keel's detail, and leave */

/* Reproducible inputs (--seed), from example_uniform's xorshift generator. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: keel-demo [-n COUNT] [--native | --module FILE] [--seed N]\n"
            "\n"
            "Runs y = a*x + y on COUNT floats (default 1000000) on Keel's default device\n"
            "and checks the result on the host. Choose the device with KEEL_BACKEND and\n"
            "KEEL_DEVICE. The kernel is one portable source built for the device;\n"
            "--native uses the backend's own form instead (a C function registered on\n"
            "the CPU, CUDA C on a GPU), and --module loads it from a file (for example\n"
            "examples/.libs/demo-kernels.so, built by make check).\n");
}

int main(int argc, char **argv)
{
    size_t n = 1000000;
    const char *module_path = NULL;
    int native = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
            char *end;
            unsigned long long v = strtoull(argv[++i], &end, 10);
            if (*end != '\0' || v == 0) {
                fprintf(stderr, "keel-demo: -n needs a positive count, not '%s'\n", argv[i]);
                return 1;
            }
            n = (size_t)v;
        } else if (strcmp(argv[i], "--native") == 0) {
            native = 1;
        } else if (strcmp(argv[i], "--module") == 0 && i + 1 < argc) {
            module_path = argv[++i];
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            rng_state = strtoull(argv[++i], NULL, 0) | 1;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 1;
        }
    }

    /* Environment errors (a bad KEEL_BACKEND, say) surface here, with the reason. */
    CHECK(keel_init());

    keel_device_t *dev = NULL;
    CHECK(keel_device_default(&dev));
    keel_device_properties_t props;
    memset(&props, 0, sizeof props);
    props.struct_size = sizeof props;
    CHECK(keel_device_get_properties(dev, &props));
    printf("keel-demo: Keel %s, device %s (%s, %s)\n", keel_version_string(), keel_device_name(dev), props.name,
           props.architecture);

    const size_t bytes = n * sizeof(float);
    float *hx = malloc(bytes), *hy = malloc(bytes), *out = malloc(bytes);
    if (hx == NULL || hy == NULL || out == NULL) {
        fprintf(stderr, "keel-demo: out of host memory for %zu floats\n", n);
        return 1;
    }
    const float a = 2.5f;
    for (size_t i = 0; i < n; i++) {
        hx[i] = example_uniform(&rng_state);
        hy[i] = example_uniform(&rng_state);
        out[i] = NAN; /* poison: an element the device never wrote cannot pass */
    }

    /* The kernel, from the form this backend takes. */
    keel_kernel_t *kernel = NULL;
    keel_module_t *module = NULL;
    int registered = 0, portable = 0;
    const char *how = NULL;
    if (!native && module_path == NULL) {
        CHECK(keel_module_build(dev, KEEL_DEMO_PORTABLE_SOURCE, "saxpy.kc", NULL, 0, &module));
        CHECK(keel_module_get_kernel(module, "saxpy", &kernel));
        portable = 1;
        how = "portable kernel built for this device";
    } else if (props.type == KEEL_DEVICE_TYPE_CPU && module_path == NULL) {
        CHECK(keel_kernel_register_cpu(dev, &keel_cpu_kernel_saxpy, &kernel));
        registered = 1;
        how = "CPU kernel registered by pointer";
    } else if (module_path != NULL) {
        CHECK(keel_module_load_file(dev, module_path, &module));
        CHECK(keel_module_get_kernel(module, "saxpy", &kernel));
        how = "kernel loaded from a module file";
    } else {
        keel_status_t st = keel_module_compile(dev, KEEL_DEMO_GPU_SOURCE, "saxpy.cu", NULL, 0, &module);
        if (st == KEEL_ERROR_NOT_SUPPORTED) {
            printf("keel-demo: skipped the launch: %s has no run-time compiler (%s)\n", props.backend,
                   keel_last_error());
        } else {
            CHECK(st);
            CHECK(keel_module_get_kernel(module, "saxpy", &kernel));
            how = "kernel compiled at run time from CUDA C";
        }
    }

    keel_stream_t *stream = NULL;
    keel_event_t *start = NULL, *stop = NULL;
    CHECK(keel_stream_create(dev, KEEL_STREAM_DEFAULT, 0, &stream));
    CHECK(keel_event_create(dev, KEEL_EVENT_DEFAULT, &start));
    CHECK(keel_event_create(dev, KEEL_EVENT_DEFAULT, &stop));

    /* Allocate; the registry now knows these pointers, their size and kind. */
    void *dx = NULL, *dy = NULL;
    CHECK(keel_malloc(dev, bytes, &dx));
    CHECK(keel_malloc(dev, bytes, &dy));
    keel_pointer_info_t pinfo;
    memset(&pinfo, 0, sizeof pinfo);
    pinfo.struct_size = sizeof pinfo;
    CHECK(keel_pointer_get_info(dy, &pinfo));
    printf("keel-demo: allocated 2 x %zu bytes of %s memory on %s\n", pinfo.size,
           pinfo.kind == KEEL_MEMORY_DEVICE ? "device" : "other", keel_device_name(pinfo.device));

    /* Copy in, launch, copy out: all ordered on one stream, nothing waits yet.
     * The host buffers are pageable, so they stay untouched until the
     * synchronize below. */
    CHECK(keel_memcpy_async(dx, hx, bytes, stream));
    CHECK(keel_memcpy_async(dy, hy, bytes, stream));
    if (kernel != NULL) {
        keel_dim3_t block = {256, 1, 1};
        keel_dim3_t grid = {(unsigned)((n + block.x - 1) / block.x), 1, 1};
        CHECK(keel_event_record(start, stream));
        if (portable) {
            /* Checked against the kernel's parameters: n must be an int here. */
            if (n > 2147483647u) {
                fprintf(stderr, "keel-demo: -n %zu is past the portable kernel's int count\n", n);
                return 1;
            }
            CHECK(KEEL_LAUNCH(kernel, grid, block, 0, stream, (int)n, a, (const float *)dx, (float *)dy));
        } else {
            void *args[] = {&n, (void *)&a, &dx, &dy};
            CHECK(keel_launch_kernel(kernel, grid, block, 0, stream, args));
        }
        CHECK(keel_event_record(stop, stream));
        printf("keel-demo: launched saxpy (%s), grid %u x block %u, on %s\n", how, grid.x, block.x,
               keel_device_name(dev));
    }
    CHECK(keel_memcpy_async(out, dy, bytes, stream));
    CHECK(keel_stream_synchronize(stream));
    if (kernel != NULL) {
        float ms = 0.0f;
        CHECK(keel_event_elapsed_time(start, stop, &ms));
        printf("keel-demo: kernel time %.3f ms for %zu elements\n", ms, n);
    }

    /* Check every element against a float64 reference. */
    size_t bad = 0, first_bad = 0;
    double max_err = 0.0;
    for (size_t i = 0; i < n; i++) {
        double ref = kernel != NULL ? (double)a * hx[i] + hy[i] : hy[i];
        double err = fabs((double)out[i] - ref);
        if (!(err <= 1e-6 * (1.0 + fabs(ref)))) { /* NaN fails too */
            if (bad++ == 0)
                first_bad = i;
        }
        if (err > max_err)
            max_err = err;
    }

    CHECK(keel_free(dx));
    CHECK(keel_free(dy));
    CHECK(keel_event_destroy(start));
    CHECK(keel_event_destroy(stop));
    CHECK(keel_stream_destroy(stream));
    if (registered)
        CHECK(keel_kernel_release(kernel));
    if (module != NULL)
        CHECK(keel_module_unload(module));

    if (bad != 0) {
        fprintf(stderr, "keel-demo: FAILED: %zu of %zu elements wrong; first at %zu: got %.9g, expected %.9g\n",
                bad, n, first_bad, out[first_bad],
                kernel != NULL ? (double)a * hx[first_bad] + hy[first_bad] : hy[first_bad]);
        return 1;
    }
    printf("keel-demo: %s: %zu elements verified against the host (max error %.2g); freed everything\n",
           kernel != NULL ? "saxpy OK" : "copies OK", n, max_err);
    free(hx);
    free(hy);
    free(out);
    return 0;
}
