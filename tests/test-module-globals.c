/* SPDX-License-Identifier: MIT */
/* Module globals (keel_module_get_global) on every device: constants
 * written with keel_memcpy and read by a kernel, a counter the kernel
 * writes, the bounds copies and memsets are held to, separate variables for
 * each module of the same code (also on two devices of a backend), the
 * refusals, and what unloading the module leaves of its variables. */
#include <stdlib.h>
#include <string.h>
#include "fixture.h"

enum { N = 5000, NCOEF = 16, BLOCK = 128 };

static const char poly_src[] =
    "keel_constant float coeffs[16];\n"
    "keel_global int counter;\n"
    "keel_global double scale = 2.5;\n"
    "\n"
    "keel_kernel void poly(int n, const float *x, float *y)\n"
    "{\n"
    "    int i = keel_global_x();\n"
    "    if (i < n) {\n"
    "        float xi = x[i], acc = 0.0f;\n"
    "        for (int k = 15; k >= 0; k--)\n"
    "            acc = acc * xi + coeffs[k];\n"
    "        y[i] = acc;\n"
    "        if (xi > 0.0f)\n"
    "            keel_atomic_add(&counter, 1);\n"
    "    }\n"
    "}\n";

static keel_module_t *build(keel_device_t *dev)
{
    keel_module_t *m = NULL;
    keel_status_t st = keel_module_build(dev, poly_src, "poly.kc", NULL, 0, &m);
    ck_assert_msg(st == KEEL_OK, "%sbuilding poly.kc: %s\n%s", kt_where(), keel_status_name(st), keel_last_error());
    return m;
}

static void *global_of(keel_module_t *m, const char *name, size_t want_bytes)
{
    void *p = KT_SENTINEL;
    size_t bytes = 0;
    KT_OK(keel_module_get_global(m, name, &p, &bytes));
    ck_assert_msg(p != KT_SENTINEL && p != NULL, "%s%s: no pointer", kt_where(), name);
    ck_assert_msg(bytes == want_bytes, "%s%s is %zu bytes, expected %zu", kt_where(), name, bytes, want_bytes);
    return p;
}

/* Runs poly over fresh random x with fresh coefficients written into the
 * module's constants and a random start in its counter; checks y against
 * a float64 reference and the counter against the count of positive x. */
static void run_and_check(keel_device_t *dev, keel_module_t *m, keel_stream_t *s)
{
    float *coeffs = global_of(m, "coeffs", NCOEF * sizeof(float));
    int *counter = global_of(m, "counter", sizeof(int));
    float host_c[NCOEF], *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    double *ref = malloc(N * sizeof(double));
    kt_fill_random_f32(host_c, NCOEF);
    kt_fill_random_f32(x, N);
    int start = (int)(kt_rand64() % 100000), positives = 0;
    for (int i = 0; i < N; i++) {
        double acc = 0.0;
        for (int k = NCOEF - 1; k >= 0; k--)
            acc = acc * x[i] + host_c[k];
        ref[i] = acc;
        positives += x[i] > 0.0f;
    }
    KT_OK(keel_memcpy(coeffs, host_c, sizeof host_c));
    KT_OK(keel_memcpy_async(counter, &start, sizeof start, s));
    float *dx = NULL, *dy = NULL;
    KT_OK(keel_malloc(dev, N * sizeof(float), (void **)&dx));
    KT_OK(keel_malloc(dev, N * sizeof(float), (void **)&dy));
    KT_OK(keel_memcpy(dx, x, N * sizeof(float)));
    KT_OK(keel_memset(dy, KT_POISON_BYTE, N * sizeof(float)));
    keel_kernel_t *k = NULL;
    KT_OK(keel_module_get_kernel(m, "poly", &k));
    keel_dim3_t grid = {(N + BLOCK - 1) / BLOCK, 1, 1}, block = {BLOCK, 1, 1};
    int n = N;
    KT_OK(KEEL_LAUNCH(k, grid, block, 0, s, n, (const float *)dx, dy));
    KT_OK(keel_stream_synchronize(s));
    KT_OK(keel_memcpy(y, dy, N * sizeof(float)));
    long bad = kt_check_f32(y, ref, N, 1e-5, 1e-5);
    ck_assert_msg(bad < 0, "%sy[%ld] = %g, expected %g", kt_where(), bad, bad < 0 ? 0.0 : (double)y[bad],
                  bad < 0 ? 0.0 : ref[bad]);
    int got = -1;
    KT_OK(keel_memcpy(&got, counter, sizeof got));
    ck_assert_msg(got == start + positives, "%scounter is %d, expected %d + %d", kt_where(), got, start, positives);
    float back[NCOEF];
    kt_poison(back, sizeof back);
    KT_OK(keel_memcpy(back, coeffs, sizeof back));
    ck_assert_msg(memcmp(back, host_c, sizeof back) == 0, "%sthe constants read back differ", kt_where());
    KT_OK(keel_free(dx));
    KT_OK(keel_free(dy));
    free(x);
    free(y);
    free(ref);
}

KT_DEVICE_TEST(globals_feed_a_kernel_within_their_bounds)
{
    keel_module_t *m = build(dev);
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    run_and_check(dev, m, s);
    run_and_check(dev, m, s); /* fresh data through the same variables */

    /* An initialized variable holds its initializer; the same name gives the same pointer. */
    double *scale = global_of(m, "scale", sizeof(double)), v = 0.0;
    KT_OK(keel_memcpy(&v, scale, sizeof v));
    ck_assert_msg(v == 2.5, "%sscale holds %g, not its initializer 2.5", kt_where(), v);
    void *again = NULL;
    KT_OK(keel_module_get_global(m, "scale", &again, NULL));
    ck_assert_msg(again == (void *)scale, "%sa second lookup gave %p, the first %p", kt_where(), again, (void *)scale);

    /* The registry knows each variable as device memory of the module's device. */
    float *coeffs = global_of(m, "coeffs", NCOEF * sizeof(float));
    int *counter = global_of(m, "counter", sizeof(int));
    keel_pointer_info_t info = {.struct_size = sizeof info};
    KT_OK(keel_pointer_get_info(coeffs + 5, &info));
    ck_assert_msg(info.kind == KEEL_MEMORY_DEVICE && info.device == dev && info.base == (void *)coeffs &&
                      info.size == NCOEF * sizeof(float) && info.offset == 5 * sizeof(float),
                  "%scoeffs + 5: kind %d, device %p, base %p, size %zu, offset %zu", kt_where(), info.kind,
                  (void *)info.device, info.base, info.size, info.offset);

    /* Copies and memsets are held to each variable's bounds. */
    float host[NCOEF + 1];
    kt_fill_random_f32(host, NCOEF + 1);
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_memcpy(coeffs, host, sizeof host));
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_memcpy(host, coeffs + 8, 9 * sizeof(float)));
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_memcpy_async(coeffs + 1, host, NCOEF * sizeof(float), s));
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_memset(counter, 0, 2 * sizeof(int)));
    KT_OK(keel_memset(counter, 0, sizeof(int)));
    int zero = -1;
    KT_OK(keel_memcpy(&zero, counter, sizeof zero));
    ck_assert_msg(zero == 0, "%scounter is %d after a memset to 0", kt_where(), zero);

    /* Device to device, between a variable and an allocation. */
    float *d = NULL, round[NCOEF];
    KT_OK(keel_malloc(dev, NCOEF * sizeof(float), (void **)&d));
    KT_OK(keel_memcpy(d, host, NCOEF * sizeof(float)));
    KT_OK(keel_memcpy(coeffs, d, NCOEF * sizeof(float)));
    KT_OK(keel_memcpy(round, coeffs, sizeof round));
    ck_assert_msg(memcmp(round, host, sizeof round) == 0, "%sa device copy into coeffs differs", kt_where());

    /* It is the module's: keel_free refuses it. */
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_free(coeffs));
    KT_DETAIL_HAS("keel_module_unload");
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_free_async(counter, s));

    /* Unloading takes the variables out of the registry. */
    KT_OK(keel_stream_synchronize(s));
    KT_OK(keel_module_unload(m));
    void *stale[] = {coeffs, counter, scale};
    for (int i = 0; i < 3; i++) {
        KT_OK(keel_pointer_get_info(stale[i], &info));
        ck_assert_msg(info.kind == KEEL_MEMORY_HOST && info.device == NULL,
                      "%svariable %d is still known after the unload (kind %d)", kt_where(), i, info.kind);
    }
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memset(counter, 0, sizeof(int)));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_free(coeffs));
    /* A copy through a stale pointer is refused, not run into memory the unload gave back. */
    int got = 12345;
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memcpy(&got, counter, sizeof got));
    KT_DETAIL_HAS("unload");
    ck_assert_msg(got == 12345, "%sa refused copy wrote its destination", kt_where());
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memcpy(coeffs, host, NCOEF * sizeof(float)));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memcpy_async(scale, host, sizeof(double), s));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memcpy(d, coeffs, NCOEF * sizeof(float)));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memset(coeffs + 2, 0, sizeof(float)));
    KT_DETAIL_HAS("keel_module_unload unloaded");
    /* More unloads than the core keeps backend modules for: the oldest go
     * at last, each module's variables still working until its own unload. */
    for (int i = 0; i < 6; i++) {
        keel_module_t *more = build(dev);
        run_and_check(dev, more, s);
        KT_OK(keel_module_unload(more));
    }
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_module_get_global(m, "coeffs", &again, NULL));
    KT_OK(keel_free(d));
    KT_OK(keel_stream_destroy(s));
}

/* A launch of a kernel whose parameter types are known refuses a pointer
 * argument into a freed block or an unloaded module's variable, naming the
 * argument, and runs nothing; the same launch with live buffers runs. */
KT_DEVICE_TEST(launch_refuses_stale_pointer_arguments)
{
    enum { SMALL = 1000 };
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    keel_module_t *gone = build(dev);
    int *stale_counter = global_of(gone, "counter", sizeof(int));
    KT_OK(keel_module_unload(gone));

    keel_module_t *m = build(dev);
    keel_kernel_t *k = NULL;
    KT_OK(keel_module_get_kernel(m, "poly", &k));
    float *dx = NULL, *dy = NULL, *freed = NULL;
    KT_OK(keel_malloc(dev, SMALL * sizeof(float), (void **)&dx));
    KT_OK(keel_malloc(dev, SMALL * sizeof(float), (void **)&dy));
    KT_OK(keel_malloc(dev, SMALL * sizeof(float), (void **)&freed));
    KT_OK(keel_free(freed));
    float x[SMALL], y[SMALL];
    kt_fill_random_f32(x, SMALL);
    KT_OK(keel_memcpy(dx, x, sizeof x));
    KT_OK(keel_memset(dy, KT_POISON_BYTE, sizeof y));
    keel_dim3_t grid = {(SMALL + BLOCK - 1) / BLOCK, 1, 1}, block = {BLOCK, 1, 1};
    int n = SMALL;

    KT_FAIL(KEEL_ERROR_INVALID_POINTER, KEEL_LAUNCH(k, grid, block, 0, s, n, (const float *)freed, dy));
    KT_DETAIL_HAS("argument 2");
    KT_DETAIL_HAS("x)");
    KT_DETAIL_HAS("which was freed");
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, KEEL_LAUNCH(k, grid, block, 0, s, n, (const float *)dx, freed + 10));
    KT_DETAIL_HAS("argument 3");
    KT_DETAIL_HAS("is inside");
    KT_FAIL(KEEL_ERROR_INVALID_POINTER,
            KEEL_LAUNCH(k, grid, block, 0, s, n, (const float *)dx, (float *)(void *)stale_counter));
    KT_DETAIL_HAS("argument 3");
    KT_DETAIL_HAS("keel_module_unload unloaded");
    void *args[] = {&n, &freed, &dy};
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_launch_kernel(k, grid, block, 0, s, args));
    KT_DETAIL_HAS("argument 2");
    KT_OK(keel_stream_synchronize(s));
    unsigned char back[sizeof y];
    KT_OK(keel_memcpy(back, dy, sizeof back));
    for (size_t i = 0; i < sizeof back; i++)
        ck_assert_msg(back[i] == KT_POISON_BYTE, "%sa refused launch wrote y (byte %zu)", kt_where(), i);

    /* The same kernel with live buffers runs and is right. */
    float *coeffs = global_of(m, "coeffs", NCOEF * sizeof(float));
    float c[NCOEF];
    kt_fill_random_f32(c, NCOEF);
    KT_OK(keel_memcpy(coeffs, c, sizeof c));
    KT_OK(KEEL_LAUNCH(k, grid, block, 0, s, n, (const float *)dx, dy));
    KT_OK(keel_stream_synchronize(s));
    KT_OK(keel_memcpy(y, dy, sizeof y));
    double ref[SMALL];
    for (int i = 0; i < SMALL; i++) {
        double acc = 0.0;
        for (int j = NCOEF - 1; j >= 0; j--)
            acc = acc * x[i] + c[j];
        ref[i] = acc;
    }
    long bad = kt_check_f32(y, ref, SMALL, 1e-5, 1e-5);
    ck_assert_msg(bad < 0, "%sy[%ld] = %g, expected %g", kt_where(), bad, bad < 0 ? 0.0 : (double)y[bad],
                  bad < 0 ? 0.0 : ref[bad]);
    KT_OK(keel_free(dx));
    KT_OK(keel_free(dy));
    KT_OK(keel_module_unload(m));
    KT_OK(keel_stream_destroy(s));
}

/* Writes @p value into the counter of m and reads it back. */
static void set_counter(keel_module_t *m, int value)
{
    int *c = global_of(m, "counter", sizeof(int)), back = -1;
    KT_OK(keel_memcpy(c, &value, sizeof value));
    KT_OK(keel_memcpy(&back, c, sizeof back));
    ck_assert_msg(back == value, "%scounter reads %d after writing %d", kt_where(), back, value);
}

static int get_counter(keel_module_t *m)
{
    int *c = global_of(m, "counter", sizeof(int)), v = -1;
    KT_OK(keel_memcpy(&v, c, sizeof v));
    return v;
}

KT_DEVICE_TEST(each_module_has_its_own_globals)
{
    keel_module_t *a = build(dev), *b = build(dev); /* the second from the compilation cache */
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    void *ca = global_of(a, "counter", sizeof(int)), *cb = global_of(b, "counter", sizeof(int));
    ck_assert_msg(ca != cb, "%stwo modules of one source share their counter at %p", kt_where(), ca);
    int vb = (int)(kt_rand64() % 100000) + 1;
    set_counter(b, vb);
    run_and_check(dev, a, s); /* writes a's constants and counter */
    ck_assert_msg(get_counter(b) == vb, "%sthe run of a's kernel changed b's counter to %d (was %d)", kt_where(),
                  get_counter(b), vb);
    run_and_check(dev, b, s);

    /* A module of the same code on another device of the backend. */
    keel_device_t *other = kt_other_device(dev);
    if (other) {
        keel_module_t *c = build(other);
        void *cc = global_of(c, "counter", sizeof(int));
        ck_assert_msg(cc != ca && cc != cb, "%sthe module on %s shares a counter with one on %s", kt_where(),
                      keel_device_name(other), keel_device_name(dev));
        keel_pointer_info_t info = {.struct_size = sizeof info};
        KT_OK(keel_pointer_get_info(cc, &info));
        ck_assert_msg(info.device == other, "%sthe counter of a module on %s belongs to %p", kt_where(),
                      keel_device_name(other), (void *)info.device);
        int va = get_counter(a);
        set_counter(c, va + 7);
        ck_assert_msg(get_counter(a) == va, "%swriting the other device's counter changed this one's", kt_where());
        keel_stream_t *so = NULL;
        KT_OK(keel_stream_create(other, 0, 0, &so));
        run_and_check(other, c, so);
        ck_assert_msg(get_counter(a) == va, "%sa run on the other device changed this one's counter", kt_where());
        KT_OK(keel_stream_destroy(so));
        KT_OK(keel_module_unload(c));
    }
    /* Unloading one leaves the other's variables alone. */
    KT_OK(keel_module_unload(a));
    keel_pointer_info_t info = {.struct_size = sizeof info};
    KT_OK(keel_pointer_get_info(cb, &info));
    ck_assert_msg(info.kind == KEEL_MEMORY_DEVICE && info.base == cb, "%sb's counter went with a", kt_where());
    run_and_check(dev, b, s);
    KT_OK(keel_module_unload(b));
    KT_OK(keel_stream_destroy(s));
}

KT_DEVICE_TEST(get_global_refuses_bad_input)
{
    keel_module_t *m = build(dev);
    void *p = KT_SENTINEL;
    size_t bytes = 12345;
    KT_FAIL(KEEL_ERROR_NOT_FOUND, keel_module_get_global(m, "no_such_variable", &p, &bytes));
    KT_DETAIL_HAS("no_such_variable");
    KT_DETAIL_HAS("module");
    KT_FAIL(KEEL_ERROR_NOT_FOUND, keel_module_get_global(m, "poly", &p, &bytes));
    KT_DETAIL_HAS("kernel");
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_module_get_global(NULL, "counter", &p, &bytes));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_module_get_global((keel_module_t *)dev, "counter", &p, &bytes));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_module_get_global(m, NULL, &p, &bytes));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_module_get_global(m, "", &p, &bytes));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_module_get_global(m, "counter", NULL, &bytes));
    ck_assert_msg(p == KT_SENTINEL && bytes == 12345, "%sa refused lookup wrote its outputs", kt_where());
    KT_OK(keel_module_unload(m));
}

/* CPU modules of C kernels: a global of default visibility is a variable;
 * a function, a const variable and another library's symbol are not. */
static const char cpu_src[] =
    "__attribute__((visibility(\"default\"))) long long total = 41;\n"
    "__attribute__((visibility(\"default\"))) const int table[4] = {1, 2, 3, 4};\n"
    "__attribute__((visibility(\"default\"))) int helper(int x) { return x + 1; }\n";

KT_DEVICE_TEST(cpu_module_globals_are_its_writable_objects)
{
    if (!kt_is_cpu(dev))
        return;
    keel_module_t *m = NULL;
    KT_OK(keel_module_compile(dev, cpu_src, "vars.c", NULL, 0, &m));
    long long *total = global_of(m, "total", sizeof(long long)), v = 0;
    KT_OK(keel_memcpy(&v, total, sizeof v));
    ck_assert_msg(v == 41, "%stotal holds %lld, not 41", kt_where(), v);
    void *p = KT_SENTINEL;
    KT_FAIL(KEEL_ERROR_NOT_FOUND, keel_module_get_global(m, "helper", &p, NULL));
    KT_DETAIL_HAS("function");
    KT_FAIL(KEEL_ERROR_NOT_SUPPORTED, keel_module_get_global(m, "table", &p, NULL));
    KT_DETAIL_HAS("read-only");
    KT_FAIL(KEEL_ERROR_NOT_FOUND, keel_module_get_global(m, "stdout", &p, NULL));
    ck_assert_msg(p == KT_SENTINEL, "%sa refused lookup wrote ptr", kt_where());
    KT_OK(keel_module_unload(m));

    /* keel_global stays visible whatever visibility the flags ask for. */
    const char *old = getenv("KEEL_CPU_CFLAGS");
    char *saved = old ? strdup(old) : NULL;
    setenv("KEEL_CPU_CFLAGS", "-O2 -fvisibility=hidden", 1);
    keel_status_t st = keel_module_build(dev, poly_src, "hidden.kc", NULL, 0, &m);
    if (saved)
        setenv("KEEL_CPU_CFLAGS", saved, 1);
    else
        unsetenv("KEEL_CPU_CFLAGS");
    free(saved);
    ck_assert_msg(st == KEEL_OK, "%sbuilding with -fvisibility=hidden: %s", kt_where(), keel_last_error());
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    run_and_check(dev, m, s);
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_module_unload(m));
}

static Suite *suite(void)
{
    Suite *s = suite_create("module-globals");
    TCase *tc = kt_tcase_create("module-globals", 120);
    kt_add_device_test(tc, globals_feed_a_kernel_within_their_bounds);
    kt_add_device_test(tc, each_module_has_its_own_globals);
    kt_add_device_test(tc, launch_refuses_stale_pointer_arguments);
    kt_add_device_test(tc, get_global_refuses_bad_input);
    kt_add_device_test(tc, cpu_module_globals_are_its_writable_objects);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return kt_main(argc, argv, suite(), 1, 1);
}
