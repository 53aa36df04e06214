/* SPDX-License-Identifier: MIT */
/* keel-errors: how Keel reports errors, and that it carries on after them.
 *
 * Every fallible call returns a keel_status_t (KEEL_OK is 0), as CUDA calls
 * return a cudaError_t. keel_status_name() gives the code's name,
 * keel_status_string() a short description, and keel_last_error() the
 * detail of the last failed call on this thread: what was wrong, with the
 * values involved (the compiler's log for a build). A refused call changes
 * nothing: it writes no out-parameter and no memory, and no error is sticky,
 * so the program goes on with the same device, stream and memory.
 *
 * The program makes each mistake on purpose, prints what Keel says, checks
 * that the code is the documented one, and then does real work with the
 * same objects and verifies it. Errors a kernel itself hits while it runs
 * come back from a later synchronize, as in CUDA. */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#define EXAMPLE_NAME "keel-errors"
#include "example.h"

enum { N = 1000 };

static const char *good_source =
    "keel_kernel void square_plus_one(int n, float *x)\n"
    "{\n"
    "    int i = keel_global_x();\n"
    "    if (i < n)\n"
    "        x[i] = x[i] * x[i] + 1.0f;\n"
    "}\n";

static const char *bad_source = /* y is not declared */
    "keel_kernel void square_plus_one(int n, float *x)\n"
    "{\n"
    "    int i = keel_global_x();\n"
    "    if (i < n)\n"
    "        x[i] = x[i] * y[i] + 1.0f;\n"
    "}\n";

static int mismatches;

/* Print what a refused call reported; count it when it is not @p want. */
static void report(const char *what, keel_status_t got, keel_status_t want)
{
    printf("%s\n  -> %s (%s)\n  -> %s\n\n", what, keel_status_name(got), keel_status_string(got), keel_last_error());
    if (got != want || keel_last_status() != got || !*keel_last_error()) {
        fprintf(stderr, "keel-errors: %s gave %s, expected %s with a detail\n", what, keel_status_name(got),
                keel_status_name(want));
        mismatches++;
    }
    keel_clear_error(); /* forget it: the next report shows only its own */
}

int main(void)
{
    keel_device_t *dev;
    keel_stream_t *s;
    keel_device_properties_t props = {0};
    props.struct_size = sizeof props;
    CHECK(keel_device_default(&dev));
    CHECK(keel_device_get_properties(dev, &props));
    CHECK(keel_stream_create(dev, KEEL_STREAM_DEFAULT, 0, &s));

    float hx[N], hy[N], big[2 * N] = {0};
    uint64_t seed = example_seed(), rng = seed;
    example_fill(hx, N, -2, 2, &rng);
    float *d;
    CHECK(keel_malloc(dev, N * sizeof(float), (void **)&d));
    CHECK(keel_memcpy(d, hx, sizeof hx));

    /* 1. Bad pointers: Keel knows every allocation it made. */
    int local;
    report("keel_free(&local): memory Keel did not allocate", keel_free(&local), KEEL_ERROR_INVALID_POINTER);
    report("keel_memcpy(d, NULL, 4)", keel_memcpy(d, NULL, 4), KEEL_ERROR_INVALID_POINTER);

    /* 2. A copy past the end of an allocation is refused before it reaches
     *    the device, and writes nothing: d still holds hx. */
    report("keel_memcpy(d, big, 2 * N floats) into an allocation of N floats", keel_memcpy(d, big, sizeof big),
           KEEL_ERROR_OUT_OF_RANGE);

    /* 3. A kernel that does not compile: the detail is the compiler's log,
     *    its messages naming the source ("square.kc") and the line. */
    keel_module_t *mod = NULL;
    report("keel_module_build(bad source)", keel_module_build(dev, bad_source, "square.kc", NULL, 0, &mod),
           KEEL_ERROR_COMPILE_FAILED);
    if (mod) {
        fprintf(stderr, "keel-errors: a failed build wrote its out-parameter\n");
        mismatches++;
    }

    /* 4. Invalid launches, refused before anything is enqueued. KEEL_LAUNCH
     *    checks the arguments against the kernel's parameters. */
    keel_kernel_t *kern;
    CHECK(keel_module_build(dev, good_source, "square.kc", NULL, 0, &mod));
    CHECK(keel_module_get_kernel(mod, "square_plus_one", &kern));
    size_t n_wrong = N; /* the kernel takes an int */
    report("KEEL_LAUNCH(kern, ..., (size_t)n, d): an argument of the wrong size",
           KEEL_LAUNCH(kern, example_grid(N), example_block(), 0, s, n_wrong, d), KEEL_ERROR_INVALID_ARGUMENT);
    keel_dim3_t no_blocks = {0, 1, 1};
    report("KEEL_LAUNCH with a grid of 0 blocks", KEEL_LAUNCH(kern, no_blocks, example_block(), 0, s, (int)N, d),
           KEEL_ERROR_INVALID_ARGUMENT);
    keel_dim3_t too_big = {(unsigned)props.max_threads_per_block + 1, 1, 1};
    report("KEEL_LAUNCH with a block past the device's max_threads_per_block",
           KEEL_LAUNCH(kern, example_grid(N), too_big, 0, s, (int)N, d), KEEL_ERROR_INVALID_ARGUMENT);

    /* 5. Still usable: the same stream, memory and kernel do real work. */
    CHECK(KEEL_LAUNCH(kern, example_grid(N), example_block(), 0, s, (int)N, d));
    CHECK(keel_memcpy_async(hy, d, sizeof hy, s));
    CHECK(keel_stream_synchronize(s));
    size_t bad = 0;
    for (int i = 0; i < N; i++) {
        double ref = (double)hx[i] * hx[i] + 1.0;
        if (!(fabs(hy[i] - ref) <= 2 * (double)FLT_EPSILON * ref))
            bad++;
    }
    CHECK(keel_free(d));
    CHECK(keel_module_unload(mod));
    CHECK(keel_stream_destroy(s));
    if (bad || mismatches) {
        fprintf(stderr, "keel-errors: FAILED: %d errors not as documented, %zu of %d results wrong (seed %llu)\n",
                mismatches, bad, N, (unsigned long long)seed);
        return 1;
    }
    printf("keel-errors: every error reported as documented; afterwards %d results on %s verified\n", N,
           keel_device_name(dev));
    return 0;
}
