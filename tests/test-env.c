/* SPDX-License-Identifier: MIT */
/* test-env: KEEL_BACKEND, KEEL_DEVICE, KEEL_BACKEND_PATH, KEEL_LOG,
 * KEEL_CPU_DEVICES, KEEL_CPU_MEMORY_LIMIT, KEEL_CPU_THREADS, KEEL_CPU_CHECK and KEEL_FAULT. Keel reads its
 * environment once per process, so every setting runs in a fresh child
 * (tests/keel-env-probe, see its comment for the commands and output).
 * This process never calls Keel. */
#include <stdlib.h>
#include "config.h"
#include "fixture.h"

#define ENV(...) ((const char *const[]){__VA_ARGS__, NULL})
#define CMDS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NOENV ((const char *const[]){NULL})

typedef struct {
    kt_child_result_t r;
    char what[512];
} probe_t;

static probe_t run(const char *const *env, const char *const *cmds)
{
    probe_t p;
    p.what[0] = '\0';
    for (int i = 0; env[i]; i++) {
        size_t len = strlen(p.what);
        snprintf(p.what + len, sizeof p.what - len, "%s%s", i ? " " : "", env[i]);
    }
    if (p.what[0] == '\0')
        snprintf(p.what, sizeof p.what, "(no KEEL_ variables)");
    p.r = kt_run_probe(env, 1, cmds);
    ck_assert_msg(p.r.status == 0, "probe with %s exited %d; stderr: %s", p.what, p.r.status, p.r.err ? p.r.err : "");
    return p;
}

static void done(probe_t *p)
{
    kt_child_free(&p->r);
}

/* The status name a command printed. */
static char *status_of(probe_t *p, const char *cmd)
{
    char *v = kt_line_value(p->r.out, cmd);
    ck_assert_msg(v != NULL, "[%s] no output for %s; stdout:\n%s", p->what, cmd, p->r.out);
    char *sp = strchr(v, ' ');
    if (sp)
        *sp = '\0';
    return v;
}

/* What a command printed after its status. */
static char *detail_of(probe_t *p, const char *cmd)
{
    char *v = kt_line_value(p->r.out, cmd);
    ck_assert_msg(v != NULL, "[%s] no output for %s; stdout:\n%s", p->what, cmd, p->r.out);
    char *sp = strchr(v, ' ');
    char *d = strdup(sp ? sp + 1 : "");
    free(v);
    return d;
}

#define EXPECT_STATUS(p, cmd, want)                                                                         \
    do {                                                                                                    \
        char *s_ = status_of(&(p), (cmd));                                                                  \
        char *d_ = detail_of(&(p), (cmd));                                                                  \
        ck_assert_msg(strcmp(s_, (want)) == 0, "[%s] %s -> %s %s, expected %s", (p).what, (cmd), s_, d_, (want)); \
        free(s_);                                                                                           \
        free(d_);                                                                                           \
    } while (0)

#define EXPECT_DETAIL_HAS(p, cmd, needle)                                                                \
    do {                                                                                                 \
        char *d_ = detail_of(&(p), (cmd));                                                               \
        ck_assert_msg(strstr(d_, (needle)) != NULL, "[%s] %s said \"%s\", which lacks \"%s\"", (p).what, \
                      (cmd), d_, (needle));                                                              \
        free(d_);                                                                                        \
    } while (0)

/* Whether backend @p name is usable, from the probe's "backends" listing; its reason in @p reason. */
static int usable_in(probe_t *p, const char *name, char *reason, size_t reason_size)
{
    char key[64];
    snprintf(key, sizeof key, "backend:%s", name);
    char *v = kt_line_value(p->r.out, key);
    if (v == NULL) {
        if (reason)
            snprintf(reason, reason_size, "(not listed)");
        return 0;
    }
    int usable = strstr(v, "usable=1") != NULL;
    if (reason) {
        const char *r = strstr(v, "reason=");
        snprintf(reason, reason_size, "%s", r ? r + 7 : "");
    }
    free(v);
    return usable;
}

/* The device the default order cuda,hip,cpu picks, judged from the listing. */
static const char *expected_default(probe_t *p, const char *const *order, int n)
{
    for (int i = 0; i < n; i++)
        if (usable_in(p, order[i], NULL, 0))
            return order[i];
    return NULL;
}

START_TEST(unset_backend_picks_the_first_usable_of_cuda_hip_cpu)
{
    probe_t p = run(NOENV, CMDS("init", "backends", "default", "roundtrip:cpu", "find:bogus", "get:cpu:9"));
    EXPECT_STATUS(p, "init", "OK");
    static const char *const order[] = {"cuda", "hip", "cpu"};
    const char *want = expected_default(&p, order, 3);
    ck_assert_ptr_nonnull(want);
    char dev[64];
    snprintf(dev, sizeof dev, "%s:0", want);
    EXPECT_STATUS(p, "default", "OK");
    EXPECT_DETAIL_HAS(p, "default", dev);
    EXPECT_STATUS(p, "roundtrip:cpu", "OK");
    /* Keel prints nothing unless asked. */
    ck_assert_msg(p.r.err[0] == '\0', "Keel wrote to stderr without KEEL_LOG: %s", p.r.err);
    done(&p);
    /* Empty counts as unset. */
    p = run(ENV("KEEL_BACKEND=", "KEEL_DEVICE=", "KEEL_LOG="), CMDS("init", "default"));
    EXPECT_STATUS(p, "init", "OK");
    EXPECT_DETAIL_HAS(p, "default", dev);
    done(&p);
}
END_TEST

START_TEST(backend_cpu_selects_the_cpu_in_any_case)
{
    const char *values[] = {"KEEL_BACKEND=cpu", "KEEL_BACKEND=CPU", "KEEL_BACKEND=^cuda,^hip", "KEEL_BACKEND=cpu,cuda"};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        probe_t p = run(ENV(values[i]), CMDS("init", "default", "roundtrip:cpu"));
        EXPECT_STATUS(p, "init", "OK");
        EXPECT_STATUS(p, "default", "OK");
        EXPECT_DETAIL_HAS(p, "default", "cpu:0");
        EXPECT_STATUS(p, "roundtrip:cpu", "OK");
        done(&p);
    }
}
END_TEST

START_TEST(backend_list_falls_through_in_order)
{
    probe_t list = run(NOENV, CMDS("backends"));
    const char *want = usable_in(&list, "cuda", NULL, 0) ? "cuda:0" : "cpu:0";
    const char *want_hip_first = usable_in(&list, "hip", NULL, 0) ? "hip:0" : want;
    done(&list);
    probe_t p = run(ENV("KEEL_BACKEND=cuda,cpu"), CMDS("init", "default"));
    EXPECT_STATUS(p, "init", "OK");
    EXPECT_DETAIL_HAS(p, "default", want);
    done(&p);
    p = run(ENV("KEEL_BACKEND=hip,cuda,cpu"), CMDS("init", "default"));
    EXPECT_STATUS(p, "init", "OK");
    EXPECT_DETAIL_HAS(p, "default", want_hip_first);
    done(&p);
    /* An unknown name in a list is skipped like an unusable one. */
    p = run(ENV("KEEL_BACKEND=bogus,cpu"), CMDS("init", "default"));
    EXPECT_STATUS(p, "init", "OK");
    EXPECT_DETAIL_HAS(p, "default", "cpu:0");
    done(&p);
}
END_TEST

/* KEEL_BACKEND=cuda (or hip) where it cannot be used: an error with the
 * reason, never a silent switch to the CPU. */
START_TEST(single_unusable_backend_is_an_error_with_its_reason)
{
    probe_t list = run(NOENV, CMDS("backends"));
    const char *names[] = {"cuda", "hip"};
    int tested = 0;
    for (int i = 0; i < 2; i++) {
        char reason[512];
        if (usable_in(&list, names[i], reason, sizeof reason))
            continue;
        tested++;
        char env[64];
        snprintf(env, sizeof env, "KEEL_BACKEND=%s", names[i]);
        probe_t p = run(ENV(env), CMDS("init", "default", "count", "backends", "get:cpu:0"));
        EXPECT_STATUS(p, "init", "KEEL_ERROR_BACKEND_UNAVAILABLE");
        EXPECT_DETAIL_HAS(p, "init", names[i]);
        /* The reason keel_backend_get_info gives is in the detail. */
        char head[40];
        snprintf(head, sizeof head, "%.39s", reason);
        EXPECT_DETAIL_HAS(p, "init", head);
        EXPECT_STATUS(p, "default", "KEEL_ERROR_BACKEND_UNAVAILABLE");
        EXPECT_STATUS(p, "count", "OK");
        EXPECT_STATUS(p, "backends", "OK");
        ck_assert_msg(usable_in(&p, "cpu", NULL, 0), "cpu not listed as usable after the failure");
        done(&p);
    }
    done(&list);
    if (tested == 0)
        printf("single_unusable_backend_is_an_error_with_its_reason: cuda and hip are both usable here\n");
}
END_TEST

START_TEST(unknown_backend_lists_the_valid_names)
{
    probe_t p = run(ENV("KEEL_BACKEND=bogus"), CMDS("init", "default", "count"));
    EXPECT_STATUS(p, "init", "KEEL_ERROR_BACKEND_UNAVAILABLE");
    EXPECT_DETAIL_HAS(p, "init", "bogus");
    EXPECT_DETAIL_HAS(p, "init", "cpu");
    EXPECT_DETAIL_HAS(p, "init", "cuda");
    EXPECT_DETAIL_HAS(p, "init", "hip");
    EXPECT_STATUS(p, "default", "KEEL_ERROR_BACKEND_UNAVAILABLE");
    EXPECT_STATUS(p, "count", "OK");
    ck_assert_msg(p.r.err[0] == '\0', "Keel wrote to stderr without KEEL_LOG: %s", p.r.err);
    done(&p);
}
END_TEST

START_TEST(malformed_backend_lists_are_invalid_environment)
{
    const char *values[] = {"cpu,,", ",cpu", "cpu,", "^", "cu da", "cpu;true", "../cpu", "cpu,^cpu", "c*"};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        char env[64];
        snprintf(env, sizeof env, "KEEL_BACKEND=%s", values[i]);
        probe_t p = run(ENV(env), CMDS("init", "default", "count", "backends"));
        EXPECT_STATUS(p, "init", "KEEL_ERROR_INVALID_ENVIRONMENT");
        EXPECT_DETAIL_HAS(p, "init", "KEEL_BACKEND");
        EXPECT_DETAIL_HAS(p, "init", values[i]);
        EXPECT_STATUS(p, "default", "KEEL_ERROR_INVALID_ENVIRONMENT");
        /* Listing still works, so tools can report. */
        EXPECT_STATUS(p, "count", "OK");
        EXPECT_STATUS(p, "backends", "OK");
        done(&p);
    }
}
END_TEST

START_TEST(device_index_selects_the_default_device)
{
    probe_t p = run(ENV("KEEL_BACKEND=cpu", "KEEL_CPU_DEVICES=3", "KEEL_DEVICE=2"), CMDS("init", "default"));
    EXPECT_STATUS(p, "init", "OK");
    EXPECT_DETAIL_HAS(p, "default", "cpu:2");
    done(&p);
    p = run(ENV("KEEL_BACKEND=cpu", "KEEL_DEVICE=0"), CMDS("init", "default"));
    EXPECT_DETAIL_HAS(p, "default", "cpu:0");
    done(&p);
}
END_TEST

START_TEST(device_index_past_the_devices_is_no_device)
{
    probe_t p = run(ENV("KEEL_BACKEND=cpu", "KEEL_DEVICE=5"), CMDS("init", "default", "get:cpu:0"));
    EXPECT_STATUS(p, "default", "KEEL_ERROR_NO_DEVICE");
    EXPECT_DETAIL_HAS(p, "default", "KEEL_DEVICE");
    EXPECT_DETAIL_HAS(p, "default", "5");
    EXPECT_STATUS(p, "init", "KEEL_ERROR_NO_DEVICE");
    /* Explicit selection is not affected. */
    EXPECT_STATUS(p, "get:cpu:0", "OK");
    done(&p);
}
END_TEST

START_TEST(malformed_device_index_is_invalid_environment)
{
    const char *values[] = {"abc", "-1", "+1", "1x", " 1", "0x1", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        char env[64];
        snprintf(env, sizeof env, "KEEL_DEVICE=%s", values[i]);
        probe_t p = run(ENV("KEEL_BACKEND=cpu", env), CMDS("init", "default", "count"));
        EXPECT_STATUS(p, "init", "KEEL_ERROR_INVALID_ENVIRONMENT");
        EXPECT_DETAIL_HAS(p, "init", "KEEL_DEVICE");
        EXPECT_STATUS(p, "default", "KEEL_ERROR_INVALID_ENVIRONMENT");
        EXPECT_STATUS(p, "count", "OK");
        done(&p);
    }
}
END_TEST

START_TEST(malformed_log_level_is_invalid_environment)
{
    const char *values[] = {"loud", "infos", "5", "info,debug"};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        char env[64];
        snprintf(env, sizeof env, "KEEL_LOG=%s", values[i]);
        probe_t p = run(ENV(env), CMDS("init", "count"));
        EXPECT_STATUS(p, "init", "KEEL_ERROR_INVALID_ENVIRONMENT");
        EXPECT_DETAIL_HAS(p, "init", "KEEL_LOG");
        EXPECT_DETAIL_HAS(p, "init", values[i]);
        EXPECT_STATUS(p, "count", "OK");
        done(&p);
    }
}
END_TEST

START_TEST(log_levels_are_read_from_the_environment)
{
    const struct { const char *env; const char *level; } cases[] = {
        {"KEEL_LOG=none", "0"}, {"KEEL_LOG=error", "1"}, {"KEEL_LOG=warn", "2"}, {"KEEL_LOG=warning", "2"},
        {"KEEL_LOG=info", "3"}, {"KEEL_LOG=debug", "4"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        probe_t p = run(ENV(cases[i].env, "KEEL_BACKEND=cpu"), CMDS("init", "loglevel"));
        EXPECT_STATUS(p, "init", "OK");
        char *lv = detail_of(&p, "loglevel");
        ck_assert_msg(strcmp(lv, cases[i].level) == 0, "%s gives level %s, expected %s", cases[i].env, lv,
                      cases[i].level);
        free(lv);
        done(&p);
    }
}
END_TEST

/* KEEL_LOG=info says why each GPU backend was skipped, on stderr. */
START_TEST(log_info_explains_skipped_backends_on_stderr)
{
    probe_t list = run(NOENV, CMDS("backends"));
    probe_t p = run(ENV("KEEL_LOG=info"), CMDS("init", "default"));
    EXPECT_STATUS(p, "init", "OK");
    ck_assert_msg(p.r.err[0] != '\0', "KEEL_LOG=info printed nothing");
    /* Each GPU backend tried before the selected one says why it was skipped. */
    const char *names[] = {"cuda", "hip"};
    for (int i = 0; i < 2; i++) {
        char reason[512];
        if (usable_in(&list, names[i], reason, sizeof reason))
            break;
        ck_assert_msg(strstr(p.r.err, names[i]) != NULL, "KEEL_LOG=info does not mention %s:\n%s", names[i], p.r.err);
        char head[40];
        snprintf(head, sizeof head, "%.39s", reason);
        ck_assert_msg(strstr(p.r.err, head) != NULL, "KEEL_LOG=info does not give %s's reason \"%s\":\n%s", names[i],
                      reason, p.r.err);
    }
    /* Nothing on stdout but the probe's own lines. */
    ck_assert_msg(strstr(p.r.out, "cuda") == NULL || strstr(p.r.out, "default OK cuda") != NULL,
                  "log lines went to stdout:\n%s", p.r.out);
    done(&p);
    done(&list);
    /* KEEL_LOG=error: a normal start prints nothing. */
    p = run(ENV("KEEL_LOG=error", "KEEL_BACKEND=cpu"), CMDS("init", "default", "roundtrip:cpu"));
    ck_assert_msg(p.r.err[0] == '\0', "KEEL_LOG=error printed on a normal start: %s", p.r.err);
    done(&p);
}
END_TEST

/* keel_log_set_level takes effect at once: at debug every error detail is logged. */
START_TEST(log_level_set_at_run_time_logs_error_details)
{
    probe_t p = run(ENV("KEEL_BACKEND=cpu"), CMDS("init", "find:quiet_one", "debug", "find:loud_one"));
    EXPECT_STATUS(p, "find:loud_one", "KEEL_ERROR_NOT_FOUND");
    ck_assert_msg(strstr(p.r.err, "loud_one") != NULL, "at debug, the error detail was not logged:\n%s", p.r.err);
    ck_assert_msg(strstr(p.r.err, "quiet_one") == NULL, "before debug, an error detail was logged:\n%s", p.r.err);
    done(&p);
}
END_TEST

START_TEST(log_callback_receives_the_lines_instead_of_stderr)
{
    probe_t p = run(ENV("KEEL_LOG=info"), CMDS("logcb", "init", "default"));
    EXPECT_STATUS(p, "init", "OK");
    ck_assert_msg(strstr(p.r.out, "\ncb 3 ") != NULL || strncmp(p.r.out, "cb 3 ", 5) == 0,
                  "the callback got no info line:\n%s", p.r.out);
    ck_assert_msg(p.r.err[0] == '\0', "with a callback, Keel still wrote to stderr: %s", p.r.err);
    done(&p);
    /* NULL restores stderr. */
    p = run(ENV("KEEL_LOG=info"), CMDS("logcb", "nocb", "init"));
    EXPECT_STATUS(p, "init", "OK");
    ck_assert_msg(strstr(p.r.out, "cb ") == NULL, "the removed callback still got lines:\n%s", p.r.out);
    ck_assert_msg(p.r.err[0] != '\0', "after keel_log_set_callback(NULL), nothing reached stderr");
    done(&p);
}
END_TEST

START_TEST(cpu_devices_sets_the_device_count)
{
    probe_t p = run(ENV("KEEL_BACKEND=cpu", "KEEL_CPU_DEVICES=3"),
                    CMDS("init", "get:cpu:0", "get:cpu:2", "get:cpu:3", "backends"));
    EXPECT_STATUS(p, "init", "OK");
    EXPECT_STATUS(p, "get:cpu:2", "OK");
    EXPECT_DETAIL_HAS(p, "get:cpu:2", "cpu:2");
    EXPECT_STATUS(p, "get:cpu:3", "KEEL_ERROR_NO_DEVICE");
    char *v = kt_line_value(p.r.out, "backend:cpu");
    ck_assert_msg(v && strstr(v, "devices=3"), "cpu backend: %s", v ? v : "(missing)");
    free(v);
    done(&p);
    p = run(ENV("KEEL_BACKEND=cpu", "KEEL_CPU_DEVICES=64"), CMDS("init", "get:cpu:63"));
    EXPECT_STATUS(p, "get:cpu:63", "OK");
    done(&p);
}
END_TEST

/* The variable's name of a "NAME=value" setting. */
static void var_name(const char *setting, char *name, size_t size)
{
    snprintf(name, size, "%.*s", (int)(strchr(setting, '=') - setting), setting);
}

START_TEST(malformed_cpu_variables_are_invalid_environment)
{
    const char *values[] = {"KEEL_CPU_DEVICES=0", "KEEL_CPU_DEVICES=65", "KEEL_CPU_DEVICES=abc",
                            "KEEL_CPU_DEVICES=-1", "KEEL_CPU_MEMORY_LIMIT=0", "KEEL_CPU_MEMORY_LIMIT=-5",
                            "KEEL_CPU_MEMORY_LIMIT=12X", "KEEL_CPU_MEMORY_LIMIT=abc", "KEEL_CPU_MEMORY_LIMIT=1MB",
                            "KEEL_CPU_MEMORY_LIMIT=99999999999999999999", "KEEL_CPU_MEMORY_LIMIT=99999999999G",
                            "KEEL_CPU_THREADS=0", "KEEL_CPU_THREADS=abc", "KEEL_CPU_THREADS=1025",
                            "KEEL_CPU_CHECK=2", "KEEL_CPU_CHECK=yes", "KEEL_CPU_CHECK=-1"};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        char name[64];
        var_name(values[i], name, sizeof name);
        /* Checked whichever backend is selected: also with the CPU excluded. */
        const char *backends[] = {"KEEL_BACKEND=cpu", "KEEL_BACKEND=^cpu"};
        for (int b = 0; b < 2; b++) {
            probe_t p = run(ENV(backends[b], values[i]), CMDS("init", "count"));
            EXPECT_STATUS(p, "init", "KEEL_ERROR_INVALID_ENVIRONMENT");
            EXPECT_DETAIL_HAS(p, "init", name);
            EXPECT_STATUS(p, "count", "OK");
            done(&p);
        }
    }
}
END_TEST

/* The CUDA plugin checks its own variables at probe, before it looks for a
 * driver, so garbage in them is an error naming the variable on any machine
 * where the plugin is built, with or without a GPU. */
START_TEST(malformed_cuda_variables_are_invalid_environment)
{
    probe_t p = run(NOENV, CMDS("backends"));
    char *info = kt_line_value(p.r.out, "backend:cuda");
    /* loaded: "path=<dir>/keel-cuda.so reason=..."; not built: no path, and
     * the reason says "plugin keel-cuda.so not found" */
    int built = info != NULL && strstr(info, "/keel-cuda.so reason=") != NULL;
    free(info);
    done(&p);
    if (!built) {
        printf("keel-cuda.so is not built here: the CUDA plugin's variables were not checked\n");
        return;
    }
    /* the GPU names and the older CUDA names they still answer to */
    const char *values[] = {"KEEL_CUDA_LAUNCH=kernels",     "KEEL_CUDA_HOST_FUNCS=both",  "KEEL_CUDA_COPY_THREADS=0",
                            "KEEL_CUDA_COPY_THREADS=17",    "KEEL_CUDA_STAGING_CHUNK_KB=1x", "KEEL_CUDA_LT_ALGO=8",
                            "KEEL_CUDA_LT_ALGO=-1",         "KEEL_CUDA_LT_ALGO=fast",     "KEEL_CUDA_LT_ALGO=3 ",
                            "KEEL_GPU_HOST_FUNCS=both",     "KEEL_GPU_COPY_THREADS=17",   "KEEL_GPU_STAGING_CHUNK_KB=255"};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        char name[64];
        var_name(values[i], name, sizeof name);
        p = run(ENV("KEEL_BACKEND=cuda", values[i]), CMDS("init", "get:cuda:0"));
        EXPECT_STATUS(p, "init", "KEEL_ERROR_INVALID_ENVIRONMENT");
        EXPECT_DETAIL_HAS(p, "init", name);
        /* Asked for explicitly, the backend says the same. */
        EXPECT_STATUS(p, "get:cuda:0", "KEEL_ERROR_INVALID_ENVIRONMENT");
        EXPECT_DETAIL_HAS(p, "get:cuda:0", name);
        done(&p);
    }
    /* the accepted forms, in any case, get past the check (to "no device"
     * on a machine without a GPU) */
    const char *fine[] = {"KEEL_CUDA_LT_ALGO=tune", "KEEL_CUDA_LT_ALGO=0",      "KEEL_CUDA_LT_ALGO=7",
                          "KEEL_CUDA_LT_ALGO=TUNE", "KEEL_CUDA_LAUNCH=Function", "KEEL_CUDA_HOST_FUNCS=CUDA",
                          "KEEL_GPU_HOST_FUNCS=cuda", "KEEL_GPU_COPY_THREADS=16", "KEEL_GPU_STAGING_CHUNK_KB=256"};
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
        p = run(ENV("KEEL_BACKEND=cuda", fine[i]), CMDS("init"));
        char *st = status_of(&p, "init");
        ck_assert_msg(strcmp(st, "KEEL_ERROR_INVALID_ENVIRONMENT") != 0, "[%s] init refused an accepted value",
                      p.what);
        free(st);
        done(&p);
    }
}
END_TEST

/* A block that keel_free_async keeps on its stream for reuse counts against
 * the cap until it is released: an allocation that would fail because of it
 * releases the kept blocks and succeeds. With 2 MiB blocks under a 3 MiB
 * cap, the second allocation fails unless the first block went back. */
START_TEST(blocks_kept_for_reuse_give_way_to_other_allocations)
{
    probe_t p = run(ENV("KEEL_BACKEND=cpu", "KEEL_CPU_MEMORY_LIMIT=3M"),
                    CMDS("reuse:cpu:0:2097152", "alloc:cpu:0:3145728"));
    EXPECT_STATUS(p, "reuse:cpu:0:2097152", "OK");
    /* Destroying the streams gave every block back: the whole cap is free. */
    EXPECT_STATUS(p, "alloc:cpu:0:3145728", "OK");
    done(&p);
}
END_TEST

START_TEST(cpu_memory_limit_caps_each_device_and_is_recoverable)
{
    probe_t p = run(ENV("KEEL_BACKEND=cpu", "KEEL_CPU_DEVICES=2", "KEEL_CPU_MEMORY_LIMIT=64M"),
                    CMDS("init", "props:cpu:0", "meminfo:cpu:0", "alloc:cpu:0:50000000", "alloc:cpu:0:20000000",
                         "alloc:cpu:0:10000000", "meminfo:cpu:0", "alloc:cpu:1:60000000"));
    EXPECT_STATUS(p, "init", "OK");
    EXPECT_DETAIL_HAS(p, "props:cpu:0", "total=67108864");
    EXPECT_DETAIL_HAS(p, "meminfo:cpu:0", "total=67108864");
    EXPECT_STATUS(p, "alloc:cpu:0:50000000", "OK");
    EXPECT_STATUS(p, "alloc:cpu:0:20000000", "KEEL_ERROR_OUT_OF_MEMORY");
    EXPECT_DETAIL_HAS(p, "alloc:cpu:0:20000000", "20000000");
    EXPECT_STATUS(p, "alloc:cpu:0:10000000", "OK");
    /* Each device has its own cap. */
    EXPECT_STATUS(p, "alloc:cpu:1:60000000", "OK");
    /* The second meminfo line: 60e6 bytes of 64 MiB in use. */
    const char *second = strstr(p.r.out, "meminfo:cpu:0");
    second = second ? strstr(second + 1, "meminfo:cpu:0") : NULL;
    ck_assert_ptr_nonnull(second);
    size_t f = 0, t = 0;
    ck_assert_int_eq(sscanf(second, "meminfo:cpu:0 OK free=%zu total=%zu", &f, &t), 2);
    ck_assert_msg(t == 67108864 && f <= t - 60000000, "after 60e6 bytes: free %zu of %zu", f, t);
    done(&p);
    const struct { const char *env; const char *total; } forms[] = {
        {"KEEL_CPU_MEMORY_LIMIT=1048576", "total=1048576"}, {"KEEL_CPU_MEMORY_LIMIT=2k", "total=2048"},
        {"KEEL_CPU_MEMORY_LIMIT=1G", "total=1073741824"}, {"KEEL_CPU_MEMORY_LIMIT=3m", "total=3145728"}};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        p = run(ENV("KEEL_BACKEND=cpu", forms[i].env), CMDS("init", "meminfo:cpu:0"));
        EXPECT_STATUS(p, "init", "OK");
        EXPECT_DETAIL_HAS(p, "meminfo:cpu:0", forms[i].total);
        done(&p);
    }
}
END_TEST

START_TEST(cpu_threads_one_still_works)
{
    probe_t p = run(ENV("KEEL_BACKEND=cpu", "KEEL_CPU_THREADS=1"), CMDS("init", "roundtrip:cpu"));
    EXPECT_STATUS(p, "init", "OK");
    EXPECT_STATUS(p, "roundtrip:cpu", "OK");
    done(&p);
}
END_TEST

START_TEST(backend_path_with_a_missing_directory_is_invalid_environment)
{
    probe_t p = run(ENV("KEEL_BACKEND_PATH=/nonexistent/keel-plugins"), CMDS("init", "count"));
    EXPECT_STATUS(p, "init", "KEEL_ERROR_INVALID_ENVIRONMENT");
    EXPECT_DETAIL_HAS(p, "init", "KEEL_BACKEND_PATH");
    EXPECT_DETAIL_HAS(p, "init", "/nonexistent/keel-plugins");
    EXPECT_STATUS(p, "count", "OK");
    done(&p);
    /* Existing directories without plugins are fine. */
    p = run(ENV("KEEL_BACKEND_PATH=/tmp:/", "KEEL_BACKEND=cpu"), CMDS("init", "default"));
    EXPECT_STATUS(p, "init", "OK");
    done(&p);
}
END_TEST

/* A program that picks its device itself (keel_device_get) is held to the
 * environment as one that takes the default device: an invalid value fails
 * every way to a device, before and after keel_init, and still lets the
 * backends be listed. A selection that finds nothing usable is not an
 * environment error: the explicit way to the CPU stays open. */
START_TEST(explicit_device_selection_checks_the_environment_too)
{
    const char *values[] = {"KEEL_DEVICE=abc",          "KEEL_BACKEND=cuda, cpu",
                            "KEEL_BACKEND=cpu,,",       "KEEL_BACKEND_PATH=/nonexistent/keel-plugins",
                            "KEEL_LOG=loud",            "KEEL_CPU_THREADS=0",
                            "KEEL_CPU_MEMORY_LIMIT=1MB", "KEEL_CPU_CHECK=on",
                            "KEEL_BLAS=fast"};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        char name[64];
        var_name(values[i], name, sizeof name);
        probe_t p = run(ENV(values[i]), CMDS("get:cpu:0", "alloc:cpu:0:64", "init", "get:cpu:0", "roundtrip:cpu",
                                             "count", "backends"));
        EXPECT_STATUS(p, "get:cpu:0", "KEEL_ERROR_INVALID_ENVIRONMENT");
        EXPECT_DETAIL_HAS(p, "get:cpu:0", name);
        EXPECT_STATUS(p, "alloc:cpu:0:64", "KEEL_ERROR_INVALID_ENVIRONMENT");
        EXPECT_STATUS(p, "init", "KEEL_ERROR_INVALID_ENVIRONMENT");
        EXPECT_DETAIL_HAS(p, "init", name);
        EXPECT_STATUS(p, "roundtrip:cpu", "KEEL_ERROR_INVALID_ENVIRONMENT");
        EXPECT_STATUS(p, "count", "OK");
        EXPECT_STATUS(p, "backends", "OK");
        /* get:cpu:0 ran before keel_init and after it: both lines refuse. */
        int refused = 0;
        static const char want[] = "get:cpu:0 KEEL_ERROR_INVALID_ENVIRONMENT ";
        for (const char *l = p.r.out; l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
            refused += strncmp(l, want, sizeof want - 1) == 0;
        ck_assert_msg(refused == 2, "[%s] get:cpu:0 refused %d of 2 times:\n%s", p.what, refused, p.r.out);
        done(&p);
    }
    /* Selection failures leave explicit selection alone. */
    const char *fine[] = {"KEEL_BACKEND=bogus", "KEEL_DEVICE=7"};
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
        probe_t p = run(ENV(fine[i]), CMDS("get:cpu:0", "roundtrip:cpu", "init"));
        EXPECT_STATUS(p, "get:cpu:0", "OK");
        EXPECT_STATUS(p, "roundtrip:cpu", "OK");
        char *st = status_of(&p, "init");
        ck_assert_msg(strcmp(st, "OK") != 0 && strcmp(st, "KEEL_ERROR_INVALID_ENVIRONMENT") != 0,
                      "[%s] init -> %s, expected a selection error", p.what, st);
        free(st);
        done(&p);
    }
}
END_TEST

/* KEEL_BLAS picks what runs keel_gemm, keel_gemv and keel_dense: the
 * vendor library where it is usable (auto), Keel's portable kernels
 * (fallback), or the vendor library alone (vendor: without one the calls
 * are refused, not run on Keel's kernels). Each GEMM is checked against a
 * float64 reference by the probe. */
START_TEST(blas_choice_comes_from_the_environment)
{
#ifdef HAVE_OPENBLAS
    const char *vendor_kind = "kind=1 OpenBLAS";
#else
    const char *vendor_kind = "kind=2 Keel's portable kernels (Keel was built without OpenBLAS)";
#endif
    const char *autos[] = {"KEEL_BLAS=", "KEEL_BLAS=auto", "KEEL_BLAS=AUTO"};
    for (size_t i = 0; i < sizeof autos / sizeof autos[0]; i++) {
        probe_t p = run(ENV(autos[i]), CMDS("init", "blas:cpu", "gemm:cpu"));
        EXPECT_STATUS(p, "init", "OK");
        EXPECT_STATUS(p, "blas:cpu", "OK");
        EXPECT_DETAIL_HAS(p, "blas:cpu", vendor_kind);
        EXPECT_STATUS(p, "gemm:cpu", "OK");
        done(&p);
    }
    const char *fallbacks[] = {"KEEL_BLAS=fallback", "KEEL_BLAS=Fallback"};
    for (size_t i = 0; i < sizeof fallbacks / sizeof fallbacks[0]; i++) {
        probe_t p = run(ENV(fallbacks[i], "KEEL_LOG=info"), CMDS("blas:cpu", "gemm:cpu"));
        EXPECT_DETAIL_HAS(p, "blas:cpu", "kind=2 Keel's portable kernels (KEEL_BLAS=fallback)");
        EXPECT_STATUS(p, "gemm:cpu", "OK");
        ck_assert_msg(strstr(p.r.err, "cpu:0: keel_gemm, keel_gemv and keel_dense run on Keel's portable kernels"),
                      "[%s] KEEL_LOG=info does not say what runs the GEMM:\n%s", p.what, p.r.err);
        done(&p);
    }
    probe_t p = run(ENV("KEEL_BLAS=vendor"), CMDS("init", "blas:cpu", "gemm:cpu"));
    EXPECT_STATUS(p, "init", "OK");
#ifdef HAVE_OPENBLAS
    EXPECT_DETAIL_HAS(p, "blas:cpu", "kind=1 OpenBLAS");
    EXPECT_STATUS(p, "gemm:cpu", "OK");
#else
    EXPECT_DETAIL_HAS(p, "blas:cpu", "kind=0 none: Keel was built without OpenBLAS");
    EXPECT_STATUS(p, "gemm:cpu", "KEEL_ERROR_NOT_SUPPORTED");
    EXPECT_DETAIL_HAS(p, "gemm:cpu", "KEEL_BLAS=vendor");
#endif
    done(&p);
}
END_TEST

START_TEST(malformed_blas_choice_is_invalid_environment)
{
    const char *values[] = {"KEEL_BLAS=openblas", "KEEL_BLAS=fallback,vendor", "KEEL_BLAS= fallback",
                            "KEEL_BLAS=1", "KEEL_BLAS=fall"};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        probe_t p = run(ENV("KEEL_BACKEND=cpu", values[i]), CMDS("init", "get:cpu:0", "count"));
        EXPECT_STATUS(p, "init", "KEEL_ERROR_INVALID_ENVIRONMENT");
        EXPECT_DETAIL_HAS(p, "init", "KEEL_BLAS");
        EXPECT_DETAIL_HAS(p, "init", "auto");
        EXPECT_DETAIL_HAS(p, "init", "fallback");
        EXPECT_DETAIL_HAS(p, "init", "vendor");
        EXPECT_STATUS(p, "get:cpu:0", "KEEL_ERROR_INVALID_ENVIRONMENT");
        EXPECT_STATUS(p, "count", "OK");
        done(&p);
    }
}
END_TEST

/* KEEL_FAULT's syntax is checked as strictly as the other variables'. */
START_TEST(malformed_fault_specs_are_invalid_environment)
{
    const char *values[] = {"KEEL_FAULT=host-alloc", "KEEL_FAULT=host-alloc:", "KEEL_FAULT=host-alloc:0",
                            "KEEL_FAULT=host-alloc:-1", "KEEL_FAULT=host-alloc:1x", "KEEL_FAULT=host-alloc:+",
                            "KEEL_FAULT=host-alloc:1++", "KEEL_FAULT=malloc:1", "KEEL_FAULT=:1",
                            "KEEL_FAULT=host-alloc:1,", "KEEL_FAULT=,host-alloc:1", "KEEL_FAULT=host-alloc: 1",
                            "KEEL_FAULT=host-alloc:p=", "KEEL_FAULT=host-alloc:p=1.5", "KEEL_FAULT=host-alloc:p=-0.1",
                            "KEEL_FAULT=host-alloc:p=0.1:seed=", "KEEL_FAULT=host-alloc:p=0.1:seed=x",
                            "KEEL_FAULT=host-alloc:p=0.1:sed=1", "KEEL_FAULT=host-alloc:3:seed=1",
                            "KEEL_FAULT=host-alloc:99999999999999999999"};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        probe_t p = run(ENV("KEEL_BACKEND=cpu", values[i]), CMDS("init", "get:cpu:0", "count"));
        EXPECT_STATUS(p, "init", "KEEL_ERROR_INVALID_ENVIRONMENT");
        EXPECT_DETAIL_HAS(p, "init", "KEEL_FAULT");
        EXPECT_DETAIL_HAS(p, "init", "host-alloc, device-alloc, thread-create");
        EXPECT_STATUS(p, "get:cpu:0", "KEEL_ERROR_INVALID_ENVIRONMENT");
        EXPECT_STATUS(p, "count", "OK");
        done(&p);
    }
    const char *good[] = {"KEEL_FAULT=host-alloc:1000000", "KEEL_FAULT=DEVICE-ALLOC:2+", "KEEL_FAULT=compile:p=0.5",
                          "KEEL_FAULT=stream-enqueue:p=1:seed=7,thread-create:3", "KEEL_FAULT=vendor-call:p=.25",
                          "KEEL_FAULT=plugin-load:P=0:SEED=18446744073709551615", "KEEL_FAULT="};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        probe_t p = run(ENV("KEEL_BACKEND=cpu", good[i]), CMDS("init"));
        EXPECT_STATUS(p, "init", "OK");
        done(&p);
    }
}
END_TEST

/* An armed site fails the call it names, once: the failure says it was
 * injected, the log says which call, and the next call works. */
START_TEST(fault_fails_the_nth_call_once_and_logs_it)
{
    probe_t p = run(ENV("KEEL_BACKEND=cpu", "KEEL_LOG=warn", "KEEL_FAULT=device-alloc:2"),
                    CMDS("alloc:cpu:0:64", "alloc:cpu:0:128", "alloc:cpu:0:256"));
    EXPECT_STATUS(p, "alloc:cpu:0:64", "OK");
    EXPECT_STATUS(p, "alloc:cpu:0:128", "KEEL_ERROR_OUT_OF_MEMORY");
    EXPECT_DETAIL_HAS(p, "alloc:cpu:0:128", "injected failure (KEEL_FAULT device-alloc:2)");
    EXPECT_STATUS(p, "alloc:cpu:0:256", "OK");
    ck_assert_msg(strstr(p.r.err, "keel[warn]: KEEL_FAULT: call 2 of device-alloc fails (injected)") != NULL,
                  "no log line of the injected fault:\n%s", p.r.err);
    done(&p);
    /* N+: every call from the Nth. */
    p = run(ENV("KEEL_BACKEND=cpu", "KEEL_FAULT=device-alloc:2+"),
            CMDS("alloc:cpu:0:64", "alloc:cpu:0:128", "alloc:cpu:0:256"));
    EXPECT_STATUS(p, "alloc:cpu:0:64", "OK");
    EXPECT_STATUS(p, "alloc:cpu:0:128", "KEEL_ERROR_OUT_OF_MEMORY");
    EXPECT_STATUS(p, "alloc:cpu:0:256", "KEEL_ERROR_OUT_OF_MEMORY");
    done(&p);
}
END_TEST

/* Words in the environment match without regard to case in every variable
 * (docs/environment.md): KEEL_LOG as much as KEEL_BACKEND. */
START_TEST(words_in_any_case_are_accepted)
{
    const struct { const char *env; const char *level; } cases[] = {
        {"KEEL_LOG=INFO", "3"}, {"KEEL_LOG=Debug", "4"}, {"KEEL_LOG=WARNING", "2"}, {"KEEL_LOG=NONE", "0"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        probe_t p = run(ENV(cases[i].env, "KEEL_BACKEND=CPU"), CMDS("init", "loglevel", "default"));
        EXPECT_STATUS(p, "init", "OK");
        EXPECT_DETAIL_HAS(p, "default", "cpu:0");
        char *lv = detail_of(&p, "loglevel");
        ck_assert_msg(strcmp(lv, cases[i].level) == 0, "%s gives level %s, expected %s", cases[i].env, lv,
                      cases[i].level);
        free(lv);
        done(&p);
    }
    /* A program that only picks its device explicitly logs as asked. */
    probe_t p = run(ENV("KEEL_LOG=INFO"), CMDS("get:cpu:0", "roundtrip:cpu"));
    EXPECT_STATUS(p, "get:cpu:0", "OK");
    ck_assert_msg(strstr(p.r.err, "keel[info]: ") != NULL && strstr(p.r.err, "cpu") != NULL,
                  "KEEL_LOG=INFO and keel_device_get(\"cpu\", 0) logged nothing:\n%s", p.r.err);
    done(&p);
}
END_TEST

/* The first initialization, from many threads at once, gives every thread
 * the same answer (and, under TSan, no race). */
START_TEST(first_init_from_many_threads_agrees)
{
    probe_t p = run(ENV("KEEL_BACKEND=cpu", "KEEL_CPU_DEVICES=2", "KEEL_DEVICE=1"), CMDS("pinit"));
    EXPECT_STATUS(p, "pinit", "OK");
    EXPECT_DETAIL_HAS(p, "pinit", "8 cpu:1");
    done(&p);
    p = run(ENV("KEEL_BACKEND=bogus"), CMDS("pinit"));
    EXPECT_STATUS(p, "pinit", "KEEL_ERROR_BACKEND_UNAVAILABLE");
    EXPECT_DETAIL_HAS(p, "pinit", "8 ");
    EXPECT_DETAIL_HAS(p, "pinit", "bogus");
    done(&p);
    p = run(ENV("KEEL_LOG=loud"), CMDS("pinit"));
    EXPECT_STATUS(p, "pinit", "KEEL_ERROR_INVALID_ENVIRONMENT");
    EXPECT_DETAIL_HAS(p, "pinit", "8 ");
    done(&p);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("env");
    TCase *tc = kt_tcase_create("backend", 120);
    tcase_add_test(tc, unset_backend_picks_the_first_usable_of_cuda_hip_cpu);
    tcase_add_test(tc, backend_cpu_selects_the_cpu_in_any_case);
    tcase_add_test(tc, backend_list_falls_through_in_order);
    tcase_add_test(tc, single_unusable_backend_is_an_error_with_its_reason);
    tcase_add_test(tc, unknown_backend_lists_the_valid_names);
    tcase_add_test(tc, malformed_backend_lists_are_invalid_environment);
    tcase_add_test(tc, backend_path_with_a_missing_directory_is_invalid_environment);
    tcase_add_test(tc, first_init_from_many_threads_agrees);
    tcase_add_test(tc, explicit_device_selection_checks_the_environment_too);
    tcase_add_test(tc, words_in_any_case_are_accepted);
    tcase_add_test(tc, malformed_fault_specs_are_invalid_environment);
    tcase_add_test(tc, blas_choice_comes_from_the_environment);
    tcase_add_test(tc, malformed_blas_choice_is_invalid_environment);
    tcase_add_test(tc, fault_fails_the_nth_call_once_and_logs_it);
    suite_add_tcase(s, tc);
    TCase *td = kt_tcase_create("device", 120);
    tcase_add_test(td, device_index_selects_the_default_device);
    tcase_add_test(td, device_index_past_the_devices_is_no_device);
    tcase_add_test(td, malformed_device_index_is_invalid_environment);
    suite_add_tcase(s, td);
    TCase *tl = kt_tcase_create("log", 120);
    tcase_add_test(tl, malformed_log_level_is_invalid_environment);
    tcase_add_test(tl, log_levels_are_read_from_the_environment);
    tcase_add_test(tl, log_info_explains_skipped_backends_on_stderr);
    tcase_add_test(tl, log_callback_receives_the_lines_instead_of_stderr);
    tcase_add_test(tl, log_level_set_at_run_time_logs_error_details);
    suite_add_tcase(s, tl);
    TCase *tcpu = kt_tcase_create("cpu", 120);
    tcase_add_test(tcpu, cpu_devices_sets_the_device_count);
    tcase_add_test(tcpu, malformed_cpu_variables_are_invalid_environment);
    tcase_add_test(tcpu, cpu_memory_limit_caps_each_device_and_is_recoverable);
    tcase_add_test(tcpu, blocks_kept_for_reuse_give_way_to_other_allocations);
    tcase_add_test(tcpu, cpu_threads_one_still_works);
    suite_add_tcase(s, tcpu);
    TCase *tcuda = kt_tcase_create("cuda", 120);
    tcase_add_test(tcuda, malformed_cuda_variables_are_invalid_environment);
    suite_add_tcase(s, tcuda);
    return s;
}

int main(int argc, char **argv)
{
    return kt_main(argc, argv, suite(), 0, 0);
}
