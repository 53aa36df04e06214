/* SPDX-License-Identifier: MIT */
/* The backend fixture shared by the Check suites.
 *
 * A conformance test is written once and run on every device under test: the
 * devices of every usable backend (or of those KEEL_BACKEND selects), found
 * through the public API only, so that the same suite proves the CPU backend
 * on CI and the CUDA backend on a GPU machine. Tests run in the suite's own
 * process (CK_NOFORK unless CK_FORK is set): GPU runtimes do not survive a
 * fork after initialization. */
#ifndef KEEL_TESTS_FIXTURE_H
#define KEEL_TESTS_FIXTURE_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "keel.h"

#ifndef KT_BUILDDIR
#define KT_BUILDDIR "."
#endif

/* Exit code that makes Automake's harness report a skip. */
#define KT_SKIP 77

/* ---- devices under test ---- */

/* Number of devices under test (0 when none; kt_main then skips). */
int kt_device_count(void);
/* Finds the devices under test again, after keel_finalize made their
 * handles stale (it initializes Keel again). */
void kt_devices_refresh(void);
/* Device @p i of them. */
keel_device_t *kt_device(int i);
/* The current device: set by the loop-test prologue KT_DEVICE_TEST. */
extern keel_device_t *kt_dev;
/* Name of the per-device test running now, for the watchdog's message. */
extern const char *kt_current_test;
/* The name of a device's backend ("cpu"; "" for a handle Keel refuses),
 * valid until keel_finalize. */
const char *kt_backend_name(keel_device_t *dev);
/* Whether a device is of the CPU backend. */
int kt_is_cpu(keel_device_t *dev);
/* Another device of the same backend as @p dev, or NULL. */
keel_device_t *kt_other_device(keel_device_t *dev);
/* A device of another backend than @p dev's that is usable, or NULL. */
keel_device_t *kt_foreign_device(keel_device_t *dev);
/* Whether the run is the CPU multi-device one (KEEL_CPU_DEVICES set). */
int kt_cpu_devices_env(void);

/* Per-device test: declares the Check loop test and sets kt_dev. */
#define KT_DEVICE_TEST(name)                                                  \
    static void name##_body(keel_device_t *dev);                              \
    START_TEST(name)                                                          \
    {                                                                         \
        kt_dev = kt_device(_i);                                               \
        kt_current_test = #name;                                              \
        ck_assert_msg(kt_dev != NULL, "no device %d under test", _i);         \
        name##_body(kt_dev);                                                  \
    }                                                                         \
    END_TEST                                                                  \
    static void name##_body(keel_device_t *dev)

/* Adds a per-device test to a test case. */
#define kt_add_device_test(tc, name) tcase_add_loop_test((tc), (name), 0, kt_device_count())

/* ---- what a backend is expected not to support (tests/unsupported.c) ---- */

typedef enum kt_feature {
    KT_MANAGED_MEMORY,     /* keel_malloc_managed */
    KT_HOST_REGISTER,      /* keel_host_register */
    KT_GRAPHS,             /* keel_stream_begin_capture */
    KT_RUNTIME_COMPILE,    /* keel_module_compile, source compiled at load */
    KT_OCCUPANCY,          /* keel_kernel_max_active_blocks, keel_kernel_suggest_block_size */
    KT_DYNAMIC_SHARED,     /* keel_kernel_set_max_dynamic_shared */
    KT_KERNEL_PARAM_COUNT, /* KEEL_KERNEL_ATTR_NUM_ARGS of a vendor-source kernel */
    KT_FEATURE_COUNT
} kt_feature_t;

/* Checks a call's status against the table of expected NOT_SUPPORTED
 * answers: returns 1 when the backend of @p dev is expected to lack @p f and
 * @p st says so (the test should stop there); fails the test on an
 * unexpected NOT_SUPPORTED, or on any other status where NOT_SUPPORTED is
 * expected; returns 0 otherwise (the caller checks @p st as usual). */
int kt_unsupported(keel_device_t *dev, kt_feature_t f, keel_status_t st);
/* kt_unsupported's decision, without failing the test: STOP (expected
 * NOT_SUPPORTED), GO_ON (supported, as expected) or WRONG (@p msg says why). */
typedef enum kt_verdict { KT_VERDICT_GO_ON, KT_VERDICT_STOP, KT_VERDICT_WRONG } kt_verdict_t;
kt_verdict_t kt_unsupported_verdict(keel_device_t *dev, kt_feature_t f, keel_status_t st, char *msg, size_t size);
/* Why @p dev's backend lacks @p f, or NULL when it is expected to have it. */
const char *kt_expected_unsupported(keel_device_t *dev, kt_feature_t f);
const char *kt_feature_name(kt_feature_t f);

/* ---- assertions ---- */

const char *kt_where(void);

/* A call must succeed. */
#define KT_OK(call)                                                                              \
    do {                                                                                         \
        keel_status_t kt_s_ = (call);                                                            \
        ck_assert_msg(kt_s_ == KEEL_OK, "%s%s -> %s (%s)", kt_where(), #call, keel_status_name(kt_s_), \
                      keel_last_error());                                                        \
    } while (0)

/* A call must fail with @p expect, and leave a detail naming the failure. */
#define KT_FAIL(expect, call)                                                                    \
    do {                                                                                         \
        keel_clear_error();                                                                      \
        keel_status_t kt_s_ = (call);                                                            \
        ck_assert_msg(kt_s_ == (expect), "%s%s -> %s, expected %s (detail: %s)", kt_where(), #call, \
                      keel_status_name(kt_s_), keel_status_name(expect), keel_last_error());      \
        ck_assert_msg(keel_last_status() == (expect), "%s%s: keel_last_status() is %s, expected %s", \
                      kt_where(), #call, keel_status_name(keel_last_status()), keel_status_name(expect)); \
        ck_assert_msg(keel_last_error()[0] != '\0', "%s%s failed with an empty keel_last_error()", \
                      kt_where(), #call);                                                        \
    } while (0)

/* A query must answer KEEL_ERROR_NOT_READY, which is no failure: it leaves
 * the last error alone. */
#define KT_PENDING(call)                                                                         \
    do {                                                                                         \
        keel_clear_error();                                                                      \
        keel_status_t kt_s_ = (call);                                                            \
        ck_assert_msg(kt_s_ == KEEL_ERROR_NOT_READY, "%s%s -> %s, expected KEEL_ERROR_NOT_READY (%s)", \
                      kt_where(), #call, keel_status_name(kt_s_), keel_last_error());             \
        ck_assert_msg(keel_last_status() == KEEL_OK && keel_last_error()[0] == '\0',             \
                      "%s%s: NOT_READY set the last error (%s: %s)", kt_where(), #call,           \
                      keel_status_name(keel_last_status()), keel_last_error());                  \
    } while (0)

/* The last error's detail must contain @p needle. */
#define KT_DETAIL_HAS(needle)                                                                    \
    ck_assert_msg(strstr(keel_last_error(), (needle)) != NULL, "%sdetail \"%s\" lacks \"%s\"", kt_where(), \
                  keel_last_error(), (needle))

/* A value that must not be written by a failing call. */
#define KT_SENTINEL ((void *)(uintptr_t)0x5eed5eedu)

/* ---- random data and references ---- */

/* Seed of this run (from the time, or KEEL_TEST_SEED); printed by kt_main. */
unsigned long kt_seed(void);
/* Random uniform floats in [-1, 1) and bytes, from a per-thread generator. */
void kt_fill_random_f32(float *x, size_t n);
void kt_fill_random_bytes(void *p, size_t n);
uint64_t kt_rand64(void);
/* Fills with a byte pattern that no test writes (0xA5). */
#define KT_POISON_BYTE 0xA5
void kt_poison(void *p, size_t n);

/* Compare @p got with a float64 reference; returns the first bad index or -1. */
long kt_check_f32(const float *got, const double *ref, size_t n, double rtol, double atol);

/* ---- kernels every backend can offer ---- */

/* saxpy(int n, float a, const float *x, float *y): y[i] = a * x[i] + y[i],
 * one thread per element, i = blockIdx.x * blockDim.x + threadIdx.x.
 * On the CPU backend it is registered by pointer; on GPU backends compiled at
 * run time. Returns KEEL_OK, or the status why it is not available (then the
 * test skips the part that needs it). Released by kt_kernel_put. */
keel_status_t kt_saxpy_kernel(keel_device_t *dev, keel_kernel_t **kernel);
void kt_kernel_put(keel_kernel_t *kernel);
/* Launches saxpy over n elements with 64-thread blocks. */
keel_status_t kt_launch_saxpy(keel_kernel_t *k, keel_stream_t *s, int n, float a, const float *x, float *y);

/* ---- gates: a host function that holds a stream until released ---- */

typedef struct kt_gate kt_gate_t;
kt_gate_t *kt_gate_new(void);
/* Enqueues a host function on @p s that blocks until kt_gate_open. */
keel_status_t kt_gate_enqueue(kt_gate_t *g, keel_stream_t *s);
void kt_gate_open(kt_gate_t *g);
/* Opens @p g from another thread after @p ms milliseconds unless it is open
 * by then; kt_gate_free waits for that thread. For a test whose next call
 * may block until the stream runs (a tool such as compute-sanitizer makes
 * kernel launches synchronous): without it such a test would hang. */
int kt_gate_open_later(kt_gate_t *g, unsigned ms);
/* Whether @p g has been opened (by kt_gate_open or the timer). */
int kt_gate_is_open(kt_gate_t *g);
void kt_gate_free(kt_gate_t *g);

/* A test case whose teardown opens the gates a failed test left closed. */
TCase *kt_tcase_create(const char *name, int timeout);

/* Host function that sleeps a few milliseconds (to widen races, never timed). */
void kt_host_sleep(void *ms_as_ptr);

/* ---- failures found on threads a test starts ---- */

/* Check's assertions are not thread-safe: a test's own threads count their
 * failures here and keep the first message, and the test thread asserts
 * after joining them (KT_ASSERT_NO_THREAD_FAILURES). */
void kt_thread_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void kt_thread_failures_reset(void);
int kt_thread_failures(void);
const char *kt_thread_first_failure(void);

/* On such a thread: a call that must succeed, else a failure and `goto out`. */
#define KT_THREAD_TRY(call)                                                                                   \
    do {                                                                                                     \
        keel_status_t kt_s_ = (call);                                                                        \
        if (kt_s_ != KEEL_OK) {                                                                              \
            kt_thread_fail("%s:%d: %s -> %s (%s)", __FILE__, __LINE__, #call, keel_status_name(kt_s_),       \
                           keel_last_error());                                                               \
            goto out;                                                                                        \
        }                                                                                                    \
    } while (0)

#define KT_ASSERT_NO_THREAD_FAILURES(what)                                                                    \
    ck_assert_msg(kt_thread_failures() == 0, "%s%s: %d failure(s); first: %s", kt_where(), (what),            \
                  kt_thread_failures(), kt_thread_first_failure())

/* ---- child processes ---- */

typedef struct kt_child_result {
    int status;          /* exit code, or 128 + signal */
    char *out;           /* stdout, NUL-terminated, malloc'd */
    char *err;           /* stderr, NUL-terminated, malloc'd */
} kt_child_result_t;

/* Runs the env probe (tests/keel-env-probe) with @p argv (NULL-terminated,
 * without argv[0]), after unsetting every KEEL_* variable but those in
 * @p env ("NAME=value" strings, NULL-terminated) and KEEL_BACKEND_PATH when
 * @p keep_path. */
kt_child_result_t kt_run_probe(const char *const *env, int keep_path, const char *const *argv);
/* As kt_run_probe, for the program at @p path; a child that writes nothing
 * for @p timeout_ms is killed (status 124). */
kt_child_result_t kt_run_program(const char *path, const char *const *env, int keep_path, const char *const *argv,
                                 int timeout_ms);
void kt_child_free(kt_child_result_t *r);
/* The value after "<key> " on the first line of @p text starting with it; malloc'd, or NULL. */
char *kt_line_value(const char *text, const char *key);

/* ---- running a suite ---- */

/* Runs @p suite; when @p multi_device and the CPU backend was tested without
 * KEEL_CPU_DEVICES, runs this program again with KEEL_BACKEND=cpu and
 * KEEL_CPU_DEVICES=3. @p needs_devices: skip (77) when no device is usable. */
int kt_main(int argc, char **argv, Suite *suite, int needs_devices, int multi_device);

#endif /* KEEL_TESTS_FIXTURE_H */
