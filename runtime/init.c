/* SPDX-License-Identifier: MIT */
/* keel_init: reads the environment once, sets up the backend table, and
 * selects the default device from KEEL_BACKEND and KEEL_DEVICE. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "runtime/internal.h"
#include "runtime/ops_fallback.h"

/* keel_init runs under init_lock until its verdict is final (init_done).
 * A failure that may pass (the host ran out of memory, or KEEL_FAULT made
 * something fail) is not final: the next call that needs keel_init runs it
 * again, as a GPU runtime's initialization may be retried. */
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int init_done;
static int init_transient;    /* this run's failure may pass */
/* Atomic: the fast path reads them beside a keel_finalize and a new run
 * (seq_cst loads are plain loads on the machines that matter). */
static _Atomic keel_status_t init_status;
static char init_detail[2048];
/* The environment's own verdict, apart from the selection's: a value that
 * cannot be parsed fails every path to a device, an explicit
 * keel_device_get as much as the default device; a selection that finds
 * no usable backend fails only the default device. */
static _Atomic keel_status_t env_status;
static char env_detail[2048];
static struct keel_device *_Atomic default_device;
/* Something was set up since the last teardown (a run of keel_init). */
static int init_ran;
/* The teardown at process exit has begun: Keel starts no more. */
static atomic_int exiting;
static int log_applied;
/* The process that ran keel_init: in a child of fork, Keel's threads are not
 * there, and nothing of the parent's may be waited for or joined. */
static pid_t init_pid;   /* a run again after a passing failure keeps the level the program set since */

#define MAX_PREFS KEEL__MAX_PREFS

/* Records the first environment or selection failure of keel_init. */
static void init_fail(keel_status_t st)
{
    if (init_status == KEEL_OK) {
        init_status = st;
        snprintf(init_detail, sizeof(init_detail), "%s", keel_last_error());
    }
}

/* Records the first invalid value in the environment (the error is set). */
static void env_fail(void)
{
    if (env_status == KEEL_OK) {
        env_status = KEEL_ERROR_INVALID_ENVIRONMENT;
        snprintf(env_detail, sizeof(env_detail), "%s", keel_last_error());
    }
    init_fail(KEEL_ERROR_INVALID_ENVIRONMENT);
}

static const char *const default_order[] = {"cuda", "hip", "cpu"};

/* Splits KEEL_BACKEND into the names to try, in order. Returns -1 (error set) on garbage. */
int keel__parse_backend_list(const char *value, char names[][32], int *count)
{
    char excluded[MAX_PREFS][32];
    int nex = 0, n = 0, pos = 0;
    const char *p = value;
    const char *form = "expected a comma-separated list of backend names in order of preference "
                       "(e.g. \"cuda,cpu\"), each optionally prefixed with ^ to exclude it";
    for (;;) {
        pos++;
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        int exclude = len > 0 && p[0] == '^';
        const char *name = p + exclude;
        size_t nlen = len - (size_t)exclude;
        if (nlen == 0 || nlen >= 32) {
            keel__set_error(KEEL_ERROR_INVALID_ENVIRONMENT, "KEEL_BACKEND=\"%s\": entry %d is %s; %s", value, pos,
                            nlen == 0 ? "empty" : "too long", form);
            return -1;
        }
        char lower[32];
        for (size_t i = 0; i < nlen; i++) {
            unsigned char c = (unsigned char)name[i];
            if (!isalnum(c) && c != '_') {
                keel__set_error(KEEL_ERROR_INVALID_ENVIRONMENT,
                                "KEEL_BACKEND=\"%s\": entry %d (\"%.*s\") has the character '%c'; %s", value, pos,
                                (int)len, p, c, form);
                return -1;
            }
            lower[i] = (char)tolower(c);
        }
        lower[nlen] = '\0';
        if (exclude) {
            if (nex < MAX_PREFS)
                snprintf(excluded[nex++], 32, "%s", lower);
        } else if (n < MAX_PREFS) {
            snprintf(names[n++], 32, "%s", lower);
        }
        if (!end)
            break;
        p = end + 1;
    }
    if (n == 0) /* only exclusions: they filter the default order */
        for (size_t i = 0; i < sizeof(default_order) / sizeof(default_order[0]); i++)
            snprintf(names[n++], 32, "%s", default_order[i]);
    int kept = 0;
    for (int i = 0; i < n; i++) {
        int drop = 0;
        for (int j = 0; j < nex; j++)
            drop |= strcmp(names[i], excluded[j]) == 0;
        if (!drop)
            memmove(names[kept++], names[i], 32);
    }
    if (kept == 0) {
        keel__set_error(KEEL_ERROR_INVALID_ENVIRONMENT, "KEEL_BACKEND=\"%s\" excludes every backend it names; %s",
                        value, form);
        return -1;
    }
    *count = kept;
    return 0;
}

static void select_default(const char *backend_env, char names[][32], int n, long device_index)
{
    char why[2048] = "";
    for (int i = 0; i < n; i++) {
        struct keel_backend *b = keel__backend_named(names[i]);
        size_t used = strlen(why);
        if (!b) {
            char known[512];
            keel__backend_names(known, sizeof(known));
            snprintf(why + used, sizeof(why) - used, "%s%s: unknown backend (known: %s)", used ? "; " : "", names[i],
                     known);
            continue;
        }
        keel__backend_loaded(b);
        if (!keel__backend_final(b)) {
            /* Out of memory, or a fault KEEL_FAULT injected: the backend is
             * tried again later, and selection does not pass over it to the
             * next one meanwhile. */
            char reason[sizeof b->reason];
            keel_status_t st = keel__backend_verdict(b, reason, sizeof reason);
            if (st != KEEL_OK) {
                keel__set_error(st, "backend %s: %s", b->name, reason);
                init_transient = 1;
                init_fail(st);
                return;
            }
        }
        if (b->status == KEEL_ERROR_INVALID_ENVIRONMENT) {
            /* A typo in a backend's own variable must not quietly select the
             * next backend. (That backend refuses its devices itself.) */
            keel__set_error(KEEL_ERROR_INVALID_ENVIRONMENT, "backend %s: %s", b->name, b->reason);
            init_fail(KEEL_ERROR_INVALID_ENVIRONMENT);
            return;
        }
        if (b->status != KEEL_OK) {
            snprintf(why + used, sizeof(why) - used, "%s%s: %s", used ? "; " : "", b->name, b->reason);
            continue;
        }
        if (device_index >= b->device_count) {
            keel__set_error(KEEL_ERROR_NO_DEVICE, "KEEL_DEVICE=%ld, but backend %s has %d device(s) (0..%d)",
                            device_index, b->name, b->device_count, b->device_count - 1);
            init_fail(KEEL_ERROR_NO_DEVICE);
            return;
        }
        default_device = &b->devices[device_index];
        keel__log(KEEL_LOG_INFO, "selected %s (%s)", b->devices[device_index].name, b->description);
        return;
    }
    keel__set_error(KEEL_ERROR_BACKEND_UNAVAILABLE,
                    "no usable backend for KEEL_BACKEND=\"%s\": %s", backend_env ? backend_env : "(unset: cuda,hip,cpu)",
                    why);
    init_fail(keel_last_status());
}

static void init_once_fn(void)
{
    char saved[2048];
    keel_status_t saved_status = keel_last_status();
    snprintf(saved, sizeof(saved), "%s", keel_last_error());

    /* Every variable of the core is checked here, before anything is
     * selected, whichever way the program goes on to pick its devices. */
    const char *log_env = getenv("KEEL_LOG");
    if (log_env && log_env[0]) {
        int level;
        if (keel__env_log(log_env, &level) == KEEL_OK) {
            if (!log_applied)
                keel_log_set_level((keel_log_level_t)level);
            log_applied = 1;
        } else {
            env_fail();
        }
    }
    /* Before the first allocation of Keel's that it may fail. */
    if (keel__fault_setup(getenv("KEEL_FAULT")) != KEEL_OK)
        env_fail();
    if (keel__loader_setup(getenv("KEEL_BACKEND_PATH")) != KEEL_OK) {
        if (keel_last_status() == KEEL_ERROR_INVALID_ENVIRONMENT) {
            env_fail();
        } else {
            init_transient = keel_last_status() == KEEL_ERROR_OUT_OF_MEMORY;
            init_fail(keel_last_status());
        }
    }

    const char *blas_env = getenv("KEEL_BLAS");
    int blas_mode = KEEL__BLAS_AUTO;
    if (blas_env && blas_env[0] && keel__env_blas(blas_env, &blas_mode) != KEEL_OK)
        env_fail();
    keel__blas_set_mode(blas_mode);

    long device_index = 0;
    const char *dev_env = getenv("KEEL_DEVICE");
    if (dev_env && dev_env[0] && keel__env_device(dev_env, &device_index) != KEEL_OK)
        env_fail();
    const char *backend_env = getenv("KEEL_BACKEND");
    char names[MAX_PREFS][32];
    int n = 0;
    if (backend_env && backend_env[0]) {
        if (keel__parse_backend_list(backend_env, names, &n) != 0)
            env_fail();
    } else {
        for (size_t i = 0; i < sizeof(default_order) / sizeof(default_order[0]); i++)
            snprintf(names[n++], 32, "%s", default_order[i]);
    }
    /* The CPU backend is built in and cheap to probe: probing it always makes
     * garbage in its variables an error even when another backend is chosen. */
    struct keel_backend *cpu = keel__backend_named("cpu");
    keel__backend_loaded(cpu);
    if (keel__backend_final(cpu) && cpu->status == KEEL_ERROR_INVALID_ENVIRONMENT) {
        keel__set_error(KEEL_ERROR_INVALID_ENVIRONMENT, "%s", cpu->reason);
        env_fail();
    }
    if (init_status == KEEL_OK)
        select_default(backend_env, names, n, device_index);
    if (init_status != KEEL_OK)
        keel__log(KEEL_LOG_ERROR, "%s", init_detail);
    keel__restore_error(saved_status, saved);
}

static void at_exit(void);

/* One run of keel_init; init_lock held. */
static void init_run(void)
{
    static int registered;
    if (!registered) {
        /* Registered before any plugin loads, so that the exit handlers a
         * vendor runtime registers when it starts run before this one. */
        registered = atexit(at_exit) == 0;
    }
    init_ran = 1;
    init_pid = getpid();
    init_status = env_status = KEEL_OK;
    init_detail[0] = env_detail[0] = '\0';
    init_transient = 0;
    default_device = NULL;
    init_once_fn();
    if (!(init_transient && init_status != KEEL_OK && env_status == KEEL_OK))
        atomic_store_explicit(&init_done, 1, memory_order_release);
    else
        keel__log(KEEL_LOG_INFO, "keel_init failed in a way that may pass; the next call tries again");
}

/* keel_init's verdict (of the environment alone with env_only), running it
 * first where it has not reached a final one; the error set on failure. */
static keel_status_t verdict(int env_only)
{
    keel_status_t st;
    if (KEEL__UNLIKELY(!atomic_load_explicit(&init_done, memory_order_acquire))) {
        char detail[sizeof init_detail];
        pthread_mutex_lock(&init_lock);
        if (atomic_load(&exiting)) {
            pthread_mutex_unlock(&init_lock);
            return keel__set_error(KEEL_ERROR_BACKEND_UNAVAILABLE,
                                   "Keel was shut down at process exit (an exit handler or a thread that outlived "
                                   "exit called it)");
        }
        if (!atomic_load_explicit(&init_done, memory_order_relaxed))
            init_run();
        st = env_only ? env_status : init_status;
        snprintf(detail, sizeof detail, "%s", env_only ? env_detail : init_detail);
        pthread_mutex_unlock(&init_lock);
        return st == KEEL_OK ? KEEL_OK : keel__set_error(st, "%s", detail);
    }
    st = env_only ? env_status : init_status;
    if (KEEL__UNLIKELY(st != KEEL_OK)) {
        /* The detail under the lock: a keel_finalize and a new run may be rewriting it. */
        char detail[sizeof init_detail];
        pthread_mutex_lock(&init_lock);
        snprintf(detail, sizeof detail, "%s", env_only ? env_detail : init_detail);
        pthread_mutex_unlock(&init_lock);
        return keel__set_error(st, "%s", detail);
    }
    return KEEL_OK;
}

keel_status_t keel__ensure_init(void)
{
    return verdict(0);
}

keel_status_t keel__ensure_env(void)
{
    return verdict(1);
}

keel_status_t keel_init(void)
{
    return keel__ensure_init();
}

keel_status_t keel_device_default(keel_device_t **device)
{
    KEEL__CHECK_OUT(device, "keel_device_default", "device");
    keel_status_t st = keel__ensure_init();
    if (st != KEEL_OK)
        return st;
    *device = default_device;
    return KEEL_OK;
}

/* init_lock held. */
static void forget(void)
{
    atomic_store(&init_done, 0);
    init_ran = 0;
    init_status = env_status = KEEL_OK;
    init_detail[0] = env_detail[0] = '\0';
    init_transient = 0;
    default_device = NULL;
    log_applied = 0;
}

keel_status_t keel_finalize(void)
{
    if (keel__cpu_thread_role() != 0)
        return keel__set_error(KEEL_ERROR_BUSY, "keel_finalize: called from a host function or a kernel that Keel "
                               "runs (it would wait for itself)");
    pthread_mutex_lock(&init_lock);
    if (init_ran && !atomic_load(&exiting)) {
        keel__teardown(getpid() == init_pid ? KEEL__TEARDOWN_FINALIZE : KEEL__TEARDOWN_FORKED);
        forget();
        keel__log(KEEL_LOG_INFO, "keel_finalize: everything released");
    }
    pthread_mutex_unlock(&init_lock);
    return KEEL_OK;
}

/* The teardown at exit. It runs on the thread that called exit, while the
 * others still run: a thread in keel_init (which holds the lock) is given a
 * second, then Keel leaves everything to the system. */
static void at_exit(void)
{
    atomic_store(&exiting, 1);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 1;
    if (pthread_mutex_timedlock(&init_lock, &until) != 0)
        return;
    /* A child of fork leaves the parent's objects to the system. */
    if (init_ran && getpid() == init_pid) {
        atomic_store(&init_done, 0);   /* every later way in takes the lock and is refused */
        if (keel__teardown(KEEL__TEARDOWN_EXIT) == 0)
            init_ran = 0;
    }
    pthread_mutex_unlock(&init_lock);
}
