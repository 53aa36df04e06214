/* SPDX-License-Identifier: MIT */
/* test-fault: KEEL_FAULT's sweep. tests/keel-fault-probe, a small
 * application (see its comment), runs in a child process once per
 * injection point: with KEEL_FAULT=site:N for N = 1, 2, 3, ... until three
 * runs in a row see no injected fault (the number of calls of a site
 * varies by a few from run to run: small work runs on the calling thread
 * when its stream happens to be idle). Every run must end with the probe
 * done: each failing step failed cleanly and its retry succeeded. A signal
 * is a crash, a silent child is killed as a hang, and in the sanitizer
 * build LeakSanitizer fails the run on a leak; the probe's last steps
 * allocate the whole of the device's memory cap, so a block a failure lost
 * fails the run in every build.
 *
 * Then each site fails on every call from the first (site:1+) and from a
 * later one, and some calls at random (site:p=P:seed=S): the probe may stop
 * at a step whose retry failed too, but cleanly. Runs on the CPU backend,
 * which is where every site but vendor-call is (vendor-call is in the GPU
 * plugins; the sweep finds no point of it here and says so); on a GPU
 * machine KEEL_TEST_FAULT_BACKEND=cuda (or hip) runs the probe there, and
 * KEEL_TEST_FAULT_SITES=vendor-call sweeps the plugin's calls alone
 * (scripts/gpu-run.sh run fault). Under TSan the sweep tries every 5th N
 * only (see stride). */
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "fixture.h"

#define PROBE KT_BUILDDIR "/tests/keel-fault-probe"
/* keel-cc's module file of examples/aot, which the probe loads. */
#define MODULE_FILE KT_BUILDDIR "/examples/aot/scale.keelmod"
/* At most this many N per site: far more than any site has (about 80 for
 * host-alloc), so that reaching it means a loop, not growth. */
#define MAX_N 1000
/* A run that writes nothing for this long is a hang. */
#define RUN_TIMEOUT_MS 60000

enum { PROBE_DONE = 0, PROBE_UNCLEAN = 2, PROBE_RETRY_FAILED = 3 };

/* The sweep tries every stride-th N. 1 (every point) but under TSan, whose
 * child processes take about a second each: there every 5th, which keeps
 * the suite well inside its watchdog. KEEL_TEST_FAULT_STRIDE overrides. */
static int stride = 1;

/* The backend the probe runs on: the CPU, or KEEL_TEST_FAULT_BACKEND (on a
 * GPU machine, "cuda" or "hip": there the vendor-call sweep finds the GPU
 * plugin's calls). KEEL_TEST_FAULT_SITES, a comma-separated list, limits
 * the sweeps and the many-failure runs to those sites. */
static const char *backend = "cpu";
static int on_cpu = 1; /* backend is "cpu" */
static const char *only_sites;

static int site_wanted(const char *site)
{
    if (only_sites == NULL || only_sites[0] == '\0')
        return 1;
    size_t n = strlen(site);
    for (const char *p = only_sites; (p = strstr(p, site)) != NULL; p += n)
        if ((p == only_sites || p[-1] == ',') && (p[n] == '\0' || p[n] == ','))
            return 1;
    return 0;
}

static char cache_dir[4096];

/* A cache directory of this run's own, filled by the first probe, so the
 * portable kernel is compiled once and not at every run; the compile
 * site's sweep turns it off (KEEL_CACHE_DIR=""). */
static const char *cache(void)
{
    if (!cache_dir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(cache_dir, sizeof cache_dir, "%s/keel-test-fault-XXXXXX", t && t[0] ? t : "/tmp");
        ck_assert_msg(mkdtemp(cache_dir) != NULL, "mkdtemp %s", cache_dir);
    }
    return cache_dir;
}

static void remove_cache(void)
{
    if (cache_dir[0]) {
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "test-fault: could not remove %s\n", cache_dir);
    }
}

typedef struct run {
    kt_child_result_t r;
    int faults;       /* "faults <n>" of the probe, -1 if it printed none */
    char spec[128];
} run_t;

static run_t run_probe(const char *site, const char *spec, int cached)
{
    run_t run;
    char fault[160], cache_env[4200];
    snprintf(run.spec, sizeof run.spec, "%s", spec ? spec : "(none)");
    snprintf(fault, sizeof fault, "KEEL_FAULT=%s", spec ? spec : "");
    snprintf(cache_env, sizeof cache_env, "KEEL_CACHE_DIR=%s", cached ? cache() : "");
    char backend_env[64];
    snprintf(backend_env, sizeof backend_env, "KEEL_BACKEND=%s", backend);
    /* On the CPU, a memory cap the probe fills at the end (a lost block
     * fails it); a GPU has its own memory, and no cap is set there. */
    const char *env[] = {fault, cache_env, backend_env, "KEEL_CPU_THREADS=2", "KEEL_CPU_MEMORY_LIMIT=16M", NULL};
    if (!on_cpu)
        env[3] = NULL;
    const char *argv[] = {site, MODULE_FILE, NULL};
    run.r = kt_run_program(PROBE, env, 1, argv, RUN_TIMEOUT_MS);
    run.faults = -1;
    char *v = kt_line_value(run.r.out, "faults");
    if (v) {
        run.faults = atoi(v);
        free(v);
    }
    return run;
}

static const char *how_it_ended(int status)
{
    switch (status) {
    case PROBE_DONE: return "done";
    case PROBE_UNCLEAN: return "an unclean failure";
    case PROBE_RETRY_FAILED: return "a retry that failed";
    case 124: return "a hang (killed)";
    case 126: return "no probe to run";
    default: return status > 128 ? "a crash (signal)" : "an unexpected exit status";
    }
}

/* The run ended as one of the statuses allowed; else the test fails with its output. */
static void expect_end(run_t *run, int allow_retry_failed)
{
    int st = run->r.status;
    int ok = st == PROBE_DONE || (allow_retry_failed && st == PROBE_RETRY_FAILED);
    ck_assert_msg(ok && run->faults >= 0, "KEEL_FAULT=%s: the probe ended with %s (status %d%s%d)\n--- stdout\n%s--- stderr\n%s",
                  run->spec, how_it_ended(st), st, st > 128 ? ", signal " : ", ", st > 128 ? st - 128 : 0,
                  run->r.out ? run->r.out : "", run->r.err ? run->r.err : "");
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- the baseline ---- */

START_TEST(probe_runs_clean_without_faults)
{
    run_t run = run_probe("none", NULL, 1);
    expect_end(&run, 0);
    ck_assert_msg(run.faults == 0, "no KEEL_FAULT, and the probe saw %d faults:\n%s", run.faults, run.r.out);
    ck_assert_msg(strstr(run.r.out, "step ") == NULL, "a step failed without KEEL_FAULT:\n%s", run.r.out);
    kt_child_free(&run.r);
    /* Armed for a site the probe never reaches: nothing fails (on the
     * CPU, where no vendor runtime is called). */
    if (on_cpu) {
        run = run_probe("none", "vendor-call:1", 1);
        expect_end(&run, 0);
        ck_assert_int_eq(run.faults, 0);
        kt_child_free(&run.r);
    }
}
END_TEST

/* ---- the sweep ---- */

static void sweep(const char *site, int cached, int expect_points)
{
    if (!site_wanted(site)) {
        printf("test-fault: %-15s not swept (KEEL_TEST_FAULT_SITES=%s)\n", site, only_sites);
        return;
    }
    double t0 = now();
    int points = 0, zero_in_a_row = 0, last = 0, runs = 0, n;
    for (n = 1; n <= MAX_N && zero_in_a_row < 3; n += stride) {
        char spec[64];
        snprintf(spec, sizeof spec, "%s:%d", site, n);
        run_t run = run_probe(site, spec, cached);
        runs++;
        expect_end(&run, 0);
        if (run.faults > 0) {
            /* The fault the log names is the one asked for. */
            char want[80];
            snprintf(want, sizeof want, "fault %s\n", spec);
            ck_assert_msg(strstr(run.r.out, want) != NULL, "KEEL_FAULT=%s: the probe saw %d faults, none of them %s:\n%s",
                          spec, run.faults, spec, run.r.out);
            ck_assert_msg(run.faults == 1, "KEEL_FAULT=%s fails one call, and the probe saw %d faults:\n%s", spec,
                          run.faults, run.r.out);
            points++;
            last = n;
            zero_in_a_row = 0;
        } else {
            zero_in_a_row++;
        }
        kt_child_free(&run.r);
    }
    ck_assert_msg(zero_in_a_row >= 3, "%s: still injecting at N = %d (the sweep's limit)", site, MAX_N);
    printf("test-fault: %-15s %3d injection points%s (the last at N = %d; %d runs, %.1f s)\n", site, points,
           stride > 1 ? " tried" : "", last, runs, now() - t0);
    fflush(stdout);
    if (expect_points)
        ck_assert_msg(points > 0, "%s: no injection point: the probe never reaches the site", site);
}

START_TEST(sweep_host_alloc) { sweep("host-alloc", 1, 1); }
END_TEST
START_TEST(sweep_device_alloc) { sweep("device-alloc", 1, 1); }
END_TEST
START_TEST(sweep_thread_create) { sweep("thread-create", 1, 1); }
END_TEST
START_TEST(sweep_plugin_load)
{
    /* The fake plugins of tests/plugins are on KEEL_BACKEND_PATH: the
     * probe's listing of the backends loads each. */
    sweep("plugin-load", 1, 1);
}
END_TEST
START_TEST(sweep_stream_enqueue) { sweep("stream-enqueue", 1, 1); }
END_TEST
START_TEST(sweep_compile)
{
    /* The CPU backend's compiler: a GPU backend compiles with its vendor's
     * (vendor-call). */
    sweep("compile", 0, on_cpu);
}
END_TEST
START_TEST(sweep_vendor_call)
{
    /* The CPU backend calls no GPU vendor runtime: no point there; a GPU
     * backend's plugin has many. */
    sweep("vendor-call", 1, !on_cpu);
}
END_TEST

/* ---- many failures ---- */

static const char *const sites[] = {"host-alloc", "device-alloc", "thread-create", "plugin-load", "stream-enqueue",
                                    "compile", "vendor-call"};

/* The sites of the many-failure runs: vendor-call only where a GPU plugin
 * runs. */
static size_t many_sites(void)
{
    return sizeof sites / sizeof sites[0] - (on_cpu ? 1 : 0);
}

START_TEST(every_call_from_n_fails_cleanly)
{
    static const int from[] = {1, 20, 3};
    for (size_t i = 0; i < many_sites(); i++) {
        if (!site_wanted(sites[i]))
            continue;
        for (size_t j = 0; j < (stride > 1 ? 2 : sizeof from / sizeof from[0]); j++) {
            char spec[64];
            snprintf(spec, sizeof spec, "%s:%d+", sites[i], from[j]);
            run_t run = run_probe(sites[i], spec, strcmp(sites[i], "compile") != 0);
            expect_end(&run, 1);
            kt_child_free(&run.r);
        }
    }
}
END_TEST

START_TEST(random_calls_fail_cleanly)
{
    for (int seed = 1; seed <= (stride > 1 ? 2 : 4); seed++)
        for (size_t i = 0; i < many_sites(); i++) {
            if (!site_wanted(sites[i]))
                continue;
            char spec[64];
            snprintf(spec, sizeof spec, "%s:p=%s:seed=%d", sites[i], strcmp(sites[i], "host-alloc") == 0 ? "0.03" : "0.2",
                     seed);
            run_t run = run_probe(sites[i], spec, strcmp(sites[i], "compile") != 0);
            expect_end(&run, 1);
            kt_child_free(&run.r);
        }
}
END_TEST

/* The lines "fault <site>:<call>" of a run. */
static char *fault_lines(const char *out)
{
    size_t cap = strlen(out) + 1, len = 0;
    char *lines = malloc(cap);
    lines[0] = '\0';
    for (const char *p = out; p && *p;) {
        const char *end = strchr(p, '\n');
        size_t n = end ? (size_t)(end - p) + 1 : strlen(p);
        if (strncmp(p, "fault ", 6) == 0) {
            memcpy(lines + len, p, n);
            len += n;
            lines[len] = '\0';
        }
        p = end ? end + 1 : NULL;
    }
    return lines;
}

/* Device allocations are all made by the probe's own thread, in program
 * order: the same seed fails the same calls. */
START_TEST(a_seed_repeats_its_faults)
{
    if (!site_wanted("device-alloc"))
        return;
    run_t a = run_probe("device-alloc", "device-alloc:p=0.5:seed=11", 1);
    run_t b = run_probe("device-alloc", "device-alloc:p=0.5:seed=11", 1);
    run_t c = run_probe("device-alloc", "device-alloc:p=0.5:seed=12", 1);
    expect_end(&a, 1);
    expect_end(&b, 1);
    expect_end(&c, 1);
    char *fa = fault_lines(a.r.out), *fb = fault_lines(b.r.out), *fc = fault_lines(c.r.out);
    ck_assert_msg(fa[0] != '\0', "p=0.5 failed no device allocation:\n%s", a.r.out);
    ck_assert_msg(strcmp(fa, fb) == 0, "seed 11 twice failed different calls:\n%s---\n%s", fa, fb);
    ck_assert_msg(strcmp(fa, fc) != 0, "seeds 11 and 12 failed the same calls:\n%s", fa);
    free(fa);
    free(fb);
    free(fc);
    kt_child_free(&a.r);
    kt_child_free(&b.r);
    kt_child_free(&c.r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fault");
    TCase *tc = kt_tcase_create("baseline", 120);
    tcase_add_test(tc, probe_runs_clean_without_faults);
    suite_add_tcase(s, tc);
    tc = kt_tcase_create("sweep", 600);
    tcase_add_test(tc, sweep_host_alloc);
    tcase_add_test(tc, sweep_device_alloc);
    tcase_add_test(tc, sweep_thread_create);
    tcase_add_test(tc, sweep_plugin_load);
    tcase_add_test(tc, sweep_stream_enqueue);
    tcase_add_test(tc, sweep_compile);
    tcase_add_test(tc, sweep_vendor_call);
    suite_add_tcase(s, tc);
    tc = kt_tcase_create("many", 600);
    tcase_add_test(tc, every_call_from_n_fails_cleanly);
    tcase_add_test(tc, random_calls_fail_cleanly);
    tcase_add_test(tc, a_seed_repeats_its_faults);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
#if defined(__SANITIZE_THREAD__)
    stride = 5;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
    stride = 5;
#endif
#endif
    const char *b = getenv("KEEL_TEST_FAULT_BACKEND");
    if (b && b[0])
        backend = b;
    on_cpu = strcmp(backend, "cpu") == 0;
    only_sites = getenv("KEEL_TEST_FAULT_SITES");
    if (!on_cpu || (only_sites && only_sites[0]))
        printf("test-fault: the probe runs on %s; sites: %s\n", backend, only_sites && only_sites[0] ? only_sites : "all");
    const char *st = getenv("KEEL_TEST_FAULT_STRIDE");
    if (st && atoi(st) > 0)
        stride = atoi(st);
    if (stride > 1)
        printf("test-fault: the sweep tries every %d%s N (KEEL_TEST_FAULT_STRIDE)\n", stride,
               stride == 2 ? "nd" : stride == 3 ? "rd" : "th");
    int rc = kt_main(argc, argv, suite(), 0, 0);
    remove_cache();
    return rc;
}
