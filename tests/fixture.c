/* SPDX-License-Identifier: MIT */
/* The backend fixture and helpers shared by the Check suites (see fixture.h). */
#include "fixture.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define KT_MAX_DEVICES 64

static keel_device_t *devices[KT_MAX_DEVICES];
static int ndevices = -1;
keel_device_t *kt_dev;

/* ---- KEEL_BACKEND as the fixture reads it: the named backends (all when
 * none is named), minus the ^excluded ones. Malformed values are the core's
 * business (test-env); here they simply select nothing. ---- */
static int backend_selected(const char *name)
{
    const char *env = getenv("KEEL_BACKEND");
    if (env == NULL || env[0] == '\0')
        return strncmp(name, "fake", 4) != 0; /* the loader's fakes are not conformance targets */
    int any_positive = 0, named = 0, excluded = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", env);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (tok[0] == '^') {
            if (strcmp(tok + 1, name) == 0)
                excluded = 1;
        } else {
            any_positive = 1;
            if (strcmp(tok, name) == 0)
                named = 1;
        }
    }
    if (excluded)
        return 0;
    if (any_positive)
        return named;
    return strncmp(name, "fake", 4) != 0;
}

static void enumerate(void)
{
    if (ndevices >= 0)
        return;
    ndevices = 0;
    int nb = 0;
    if (keel_backend_count(&nb) != KEEL_OK)
        return;
    for (int b = 0; b < nb; b++) {
        keel_backend_t *be = NULL;
        keel_backend_info_t info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        if (keel_backend_get(b, &be) != KEEL_OK || keel_backend_get_info(be, &info) != KEEL_OK)
            continue;
        if (!info.usable || !backend_selected(info.name))
            continue;
        for (int d = 0; d < info.device_count && ndevices < KT_MAX_DEVICES; d++) {
            keel_device_t *dev = NULL;
            if (keel_backend_get_device(be, d, &dev) == KEEL_OK)
                devices[ndevices++] = dev;
        }
    }
}

void kt_devices_refresh(void)
{
    ndevices = -1;
    kt_dev = NULL;
    enumerate();
}

int kt_device_count(void)
{
    enumerate();
    return ndevices;
}

keel_device_t *kt_device(int i)
{
    enumerate();
    return i >= 0 && i < ndevices ? devices[i] : NULL;
}

static int same_backend(keel_device_t *a, keel_device_t *b)
{
    keel_backend_t *ba = NULL, *bb = NULL;
    if (keel_device_get_backend(a, &ba) != KEEL_OK || keel_device_get_backend(b, &bb) != KEEL_OK)
        return 0;
    return ba == bb;
}

const char *kt_backend_name(keel_device_t *dev)
{
    keel_backend_t *b = NULL;
    keel_backend_info_t info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (keel_device_get_backend(dev, &b) != KEEL_OK || keel_backend_get_info(b, &info) != KEEL_OK)
        return "";
    return info.name;
}

int kt_is_cpu(keel_device_t *dev)
{
    keel_backend_t *be = NULL, *cpu = NULL;
    if (keel_device_get_backend(dev, &be) != KEEL_OK || keel_backend_find("cpu", &cpu) != KEEL_OK)
        return 0;
    return be == cpu;
}

keel_device_t *kt_other_device(keel_device_t *dev)
{
    keel_backend_t *be = NULL;
    int idx = -1;
    if (keel_device_get_backend(dev, &be) != KEEL_OK || keel_device_get_index(dev, &idx) != KEEL_OK)
        return NULL;
    keel_backend_info_t info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (keel_backend_get_info(be, &info) != KEEL_OK || info.device_count < 2)
        return NULL;
    keel_device_t *other = NULL;
    if (keel_backend_get_device(be, idx == 0 ? 1 : 0, &other) != KEEL_OK)
        return NULL;
    return other;
}

keel_device_t *kt_foreign_device(keel_device_t *dev)
{
    int nb = 0;
    if (keel_backend_count(&nb) != KEEL_OK)
        return NULL;
    for (int b = 0; b < nb; b++) {
        keel_backend_t *be = NULL;
        keel_device_t *d = NULL;
        if (keel_backend_get(b, &be) == KEEL_OK && keel_backend_get_device(be, 0, &d) == KEEL_OK &&
            !same_backend(d, dev))
            return d;
    }
    return NULL;
}

int kt_cpu_devices_env(void)
{
    const char *v = getenv("KEEL_CPU_DEVICES");
    return v != NULL && v[0] != '\0';
}

const char *kt_where(void)
{
    static __thread char buf[96];
    if (kt_dev == NULL)
        return "";
    snprintf(buf, sizeof buf, "[%s seed %lu] ", keel_device_name(kt_dev), kt_seed());
    return buf;
}

/* ---- random data ---- */

static unsigned long seed;

unsigned long kt_seed(void)
{
    return seed;
}

static _Atomic unsigned long thread_counter;
static __thread uint64_t rng_state;
static __thread int rng_ready;

uint64_t kt_rand64(void)
{
    if (!rng_ready) {
        /* Each thread gets its own stream of the same seed, so a failure repeats with the seed. */
        rng_state = seed * 0x9E3779B97F4A7C15ull + (thread_counter++ + 1) * 0xD1B54A32D192ED03ull;
        rng_ready = 1;
    }
    /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void kt_fill_random_f32(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v;
        do
            v = (float)((double)(kt_rand64() >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        while (v == 0.0f); /* never zeros: a missed write must not look right */
        x[i] = v;
    }
}

void kt_fill_random_bytes(void *p, size_t n)
{
    unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        unsigned char v = (unsigned char)kt_rand64();
        b[i] = v == KT_POISON_BYTE ? 0x5A : v; /* never the poison byte */
    }
}

void kt_poison(void *p, size_t n)
{
    memset(p, KT_POISON_BYTE, n);
}

long kt_check_f32(const float *got, const double *ref, size_t n, double rtol, double atol)
{
    for (size_t i = 0; i < n; i++) {
        double g = got[i];
        if (!(fabs(g - ref[i]) <= atol + rtol * fabs(ref[i])))
            return (long)i;
    }
    return -1;
}

/* ---- kernels ---- */

#include "cpu_saxpy.h"

static const char saxpy_gpu_source[] =
    "extern \"C\" __global__ void saxpy(int n, float a, const float *x, float *y)\n"
    "{\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n";

struct module_entry {
    keel_kernel_t *kernel;
    keel_module_t *module;
    struct module_entry *next;
};
static struct module_entry *modules;
static pthread_mutex_t modules_lock = PTHREAD_MUTEX_INITIALIZER;

keel_status_t kt_saxpy_kernel(keel_device_t *dev, keel_kernel_t **kernel)
{
    if (kt_is_cpu(dev))
        return keel_kernel_register_cpu(dev, &saxpy_desc, kernel);
    keel_module_t *m = NULL;
    keel_status_t s = keel_module_compile(dev, saxpy_gpu_source, "saxpy.cu", NULL, 0, &m);
    if (s != KEEL_OK)
        return s;
    s = keel_module_get_kernel(m, "saxpy", kernel);
    if (s != KEEL_OK) {
        keel_module_unload(m);
        return s;
    }
    struct module_entry *e = malloc(sizeof *e);
    e->kernel = *kernel;
    e->module = m;
    pthread_mutex_lock(&modules_lock);
    e->next = modules;
    modules = e;
    pthread_mutex_unlock(&modules_lock);
    return KEEL_OK;
}

void kt_kernel_put(keel_kernel_t *kernel)
{
    if (kernel == NULL)
        return;
    pthread_mutex_lock(&modules_lock);
    for (struct module_entry **p = &modules; *p; p = &(*p)->next) {
        if ((*p)->kernel == kernel) {
            struct module_entry *e = *p;
            *p = e->next;
            pthread_mutex_unlock(&modules_lock);
            keel_module_unload(e->module);
            free(e);
            return;
        }
    }
    pthread_mutex_unlock(&modules_lock);
    keel_kernel_release(kernel);
}

keel_status_t kt_launch_saxpy(keel_kernel_t *k, keel_stream_t *s, int n, float a, const float *x, float *y)
{
    void *args[] = {&n, &a, &x, &y};
    keel_dim3_t block = {64, 1, 1};
    keel_dim3_t grid = {(unsigned)((n + 63) / 64), 1, 1};
    return keel_launch_kernel(k, grid, block, 0, s, args);
}

/* ---- failures found on threads a test starts ---- */

static atomic_int thread_failures;
static pthread_mutex_t thread_msg_lock = PTHREAD_MUTEX_INITIALIZER;
static char thread_first_msg[1024];

void kt_thread_fail(const char *fmt, ...)
{
    if (atomic_fetch_add(&thread_failures, 1) == 0) {
        pthread_mutex_lock(&thread_msg_lock);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(thread_first_msg, sizeof thread_first_msg, fmt, ap);
        va_end(ap);
        pthread_mutex_unlock(&thread_msg_lock);
    }
}

void kt_thread_failures_reset(void)
{
    pthread_mutex_lock(&thread_msg_lock);
    atomic_store(&thread_failures, 0);
    thread_first_msg[0] = '\0';
    pthread_mutex_unlock(&thread_msg_lock);
}

int kt_thread_failures(void)
{
    return atomic_load(&thread_failures);
}

/* Read after the threads are joined. */
const char *kt_thread_first_failure(void)
{
    return thread_first_msg;
}

/* ---- gates ---- */

struct kt_gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int open;
    int timed;       /* a timer thread (kt_gate_open_later) is to be joined */
    unsigned ms;
    pthread_t timer;
    struct kt_gate *next;
};

/* Gates not yet freed: a test that fails between closing and opening a gate
 * (Check longjmps out of it) would leave its stream blocked and hang every
 * later test, so the teardown opens them all. */
static kt_gate_t *live_gates;
static pthread_mutex_t gates_lock = PTHREAD_MUTEX_INITIALIZER;

kt_gate_t *kt_gate_new(void)
{
    kt_gate_t *g = calloc(1, sizeof *g);
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->cond, NULL);
    pthread_mutex_lock(&gates_lock);
    g->next = live_gates;
    live_gates = g;
    pthread_mutex_unlock(&gates_lock);
    return g;
}

static void open_all_gates(void)
{
    pthread_mutex_lock(&gates_lock);
    for (kt_gate_t *g = live_gates; g; g = g->next)
        kt_gate_open(g);
    /* Left allocated: a stream may still be inside gate_wait. */
    live_gates = NULL;
    pthread_mutex_unlock(&gates_lock);
}

static void teardown(void)
{
    open_all_gates();
    /* Let work that a failed test left behind finish before the next test. */
    for (int i = 0; i < ndevices; i++)
        keel_device_synchronize(devices[i]);
    kt_dev = NULL;
}

TCase *kt_tcase_create(const char *name, int timeout)
{
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_set_timeout(tc, timeout);
    return tc;
}

static void gate_wait(void *p)
{
    kt_gate_t *g = p;
    pthread_mutex_lock(&g->lock);
    while (!g->open)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

keel_status_t kt_gate_enqueue(kt_gate_t *g, keel_stream_t *s)
{
    return keel_stream_launch_host_func(s, gate_wait, g);
}

void kt_gate_open(kt_gate_t *g)
{
    pthread_mutex_lock(&g->lock);
    g->open = 1;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

static void *gate_timer(void *p)
{
    kt_gate_t *g = p;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += g->ms / 1000;
    until.tv_nsec += (long)(g->ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&g->lock);
    while (!g->open && pthread_cond_timedwait(&g->cond, &g->lock, &until) != ETIMEDOUT)
        ;
    g->open = 1;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

int kt_gate_open_later(kt_gate_t *g, unsigned ms)
{
    g->ms = ms;
    if (pthread_create(&g->timer, NULL, gate_timer, g) != 0)
        return -1;
    g->timed = 1;
    return 0;
}

int kt_gate_is_open(kt_gate_t *g)
{
    pthread_mutex_lock(&g->lock);
    int open = g->open;
    pthread_mutex_unlock(&g->lock);
    return open;
}

void kt_gate_free(kt_gate_t *g)
{
    if (g == NULL)
        return;
    if (g->timed) {
        kt_gate_open(g); /* the timer thread returns at once */
        pthread_join(g->timer, NULL);
        g->timed = 0;
    }
    int found = 0;
    pthread_mutex_lock(&gates_lock);
    for (kt_gate_t **p = &live_gates; *p; p = &(*p)->next) {
        if (*p == g) {
            *p = g->next;
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&gates_lock);
    if (!found)
        return; /* opened by a teardown: may still be in use */
    pthread_mutex_destroy(&g->lock);
    pthread_cond_destroy(&g->cond);
    free(g);
}

void kt_host_sleep(void *ms_as_ptr)
{
    long ms = (long)(intptr_t)ms_as_ptr;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ---- child processes ---- */

static char *read_all_two(int fd_out, int fd_err, char **err_text, pid_t pid, int timeout_ms, int *timed_out)
{
    size_t cap[2] = {4096, 4096}, len[2] = {0, 0};
    char *buf[2] = {malloc(cap[0]), malloc(cap[1])};
    struct pollfd p[2] = {{fd_out, POLLIN, 0}, {fd_err, POLLIN, 0}};
    int open_fds = 2;
    *timed_out = 0;
    while (open_fds > 0) {
        int r = poll(p, 2, timeout_ms);
        if (r == 0) {
            *timed_out = 1;
            kill(pid, SIGKILL);
            break;
        }
        if (r < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        for (int i = 0; i < 2; i++) {
            if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (cap[i] - len[i] < 1024) {
                cap[i] *= 2;
                buf[i] = realloc(buf[i], cap[i]);
            }
            ssize_t n = read(p[i].fd, buf[i] + len[i], cap[i] - len[i] - 1);
            if (n > 0) {
                len[i] += (size_t)n;
            } else if (n == 0 || errno != EINTR) {
                close(p[i].fd);
                p[i].fd = -1;
                open_fds--;
            }
        }
    }
    for (int i = 0; i < 2; i++) {
        if (p[i].fd >= 0)
            close(p[i].fd);
        buf[i][len[i]] = '\0';
    }
    *err_text = buf[1];
    return buf[0];
}

kt_child_result_t kt_run_probe(const char *const *env, int keep_path, const char *const *argv)
{
    const char *probe = KT_BUILDDIR "/tests/keel-env-probe";
    const char *override = getenv("KEEL_TEST_PROBE");
    if (override != NULL && override[0] != '\0')
        probe = override;
    return kt_run_program(probe, env, keep_path, argv, 60000);
}

kt_child_result_t kt_run_program(const char *probe, const char *const *env, int keep_path, const char *const *argv,
                                 int timeout_ms)
{
    kt_child_result_t res = {-1, NULL, NULL};

    size_t nenv = 0, nextra = 0, nargs = 0;
    while (environ[nenv])
        nenv++;
    while (env && env[nextra])
        nextra++;
    while (argv && argv[nargs])
        nargs++;
    char **envp = calloc(nenv + nextra + 1, sizeof *envp);
    size_t k = 0;
    for (size_t i = 0; i < nenv; i++) {
        if (strncmp(environ[i], "KEEL_", 5) == 0 &&
            !(keep_path && strncmp(environ[i], "KEEL_BACKEND_PATH=", 18) == 0) &&
            strncmp(environ[i], "KEEL_TEST_", 10) != 0)
            continue;
        envp[k++] = environ[i];
    }
    for (size_t i = 0; i < nextra; i++)
        envp[k++] = (char *)env[i];
    char **args = calloc(nargs + 2, sizeof *args);
    args[0] = (char *)probe;
    for (size_t i = 0; i < nargs; i++)
        args[i + 1] = (char *)argv[i];

    int po[2], pe[2];
    if (pipe(po) != 0 || pipe(pe) != 0) {
        free(envp);
        free(args);
        return res;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[0]);
        close(po[1]);
        close(pe[0]);
        close(pe[1]);
        execve(probe, args, envp);
        fprintf(stderr, "exec %s: %s\n", probe, strerror(errno));
        _exit(126);
    }
    close(po[1]);
    close(pe[1]);
    free(envp);
    free(args);
    if (pid < 0) {
        close(po[0]);
        close(pe[0]);
        return res;
    }
    int timed_out = 0;
    res.out = read_all_two(po[0], pe[0], &res.err, pid, timeout_ms, &timed_out);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    res.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (timed_out)
        res.status = 124;
    return res;
}

void kt_child_free(kt_child_result_t *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

char *kt_line_value(const char *text, const char *key)
{
    size_t klen = strlen(key);
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len >= klen && strncmp(line, key, klen) == 0 && (len == klen || line[klen] == ' ')) {
            const char *v = line + klen + (len > klen ? 1 : 0);
            size_t vlen = len - (size_t)(v - line);
            char *out = malloc(vlen + 1);
            memcpy(out, v, vlen);
            out[vlen] = '\0';
            return out;
        }
        line = end ? end + 1 : NULL;
    }
    return NULL;
}

/* ---- main ---- */

static int run_again_with_cpu_devices(char **argv)
{
    printf("=== %s: again with KEEL_BACKEND=cpu KEEL_CPU_DEVICES=3 ===\n", argv[0]);
    fflush(stdout);
    fflush(stderr);
    /* The environment is built before fork: Keel's threads are running, so the
     * child may only call async-signal-safe functions before exec. */
    size_t n = 0;
    while (environ[n])
        n++;
    char **envp = calloc(n + 4, sizeof *envp);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "KEEL_BACKEND=", 13) != 0 && strncmp(environ[i], "KEEL_CPU_DEVICES=", 17) != 0 &&
            strncmp(environ[i], "KEEL_TEST_SEED=", 15) != 0 && strncmp(environ[i], "KEEL_DEVICE=", 12) != 0)
            envp[k++] = environ[i];
    char seedbuf[48];
    snprintf(seedbuf, sizeof seedbuf, "KEEL_TEST_SEED=%lu", seed);
    envp[k++] = "KEEL_BACKEND=cpu";
    envp[k++] = "KEEL_CPU_DEVICES=3";
    envp[k++] = seedbuf;
    pid_t pid = fork();
    if (pid == 0) {
        execve("/proc/self/exe", argv, envp);
        _exit(126);
    }
    free(envp);
    if (pid < 0)
        return 99;
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 99;
}

const char *kt_current_test = "(none yet)";

/* A thread, not alarm(): Check installs its own SIGALRM handler, which
 * kills the process group without a word. */
static void *watchdog(void *p)
{
    unsigned secs = (unsigned)(uintptr_t)p;
    struct timespec ts = {(time_t)secs, 0};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    fflush(stdout);
    fprintf(stderr, "\nFAIL: the suite hung for %u s (watchdog; KEEL_TEST_TIMEOUT); the per-device test "
            "running or last started: %s on %s\n", secs, kt_current_test, kt_dev ? keel_device_name(kt_dev) : "-");
    _exit(1);
    return NULL;
}

int kt_main(int argc, char **argv, Suite *suite, int needs_devices, int multi_device)
{
    /* Check's timeouts need fork mode; without it a hang must still end the
     * run. KEEL_TEST_TIMEOUT (seconds; 0: none) stretches it for slow sanitizer builds. */
    const char *to = getenv("KEEL_TEST_TIMEOUT");
    pthread_t wd;
    if (!(to && strcmp(to, "0") == 0) && pthread_create(&wd, NULL, watchdog, (void *)(uintptr_t)(to && *to ? (unsigned)atoi(to) : 300)) == 0)
        pthread_detach(wd);

    (void)argc;
    /* Line-buffered even into a log file, so a hang or a crash keeps what came before. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *s = getenv("KEEL_TEST_SEED");
    seed = s && *s ? strtoul(s, NULL, 10) : (unsigned long)time(NULL) ^ ((unsigned long)getpid() << 16);
    printf("%s: random seed %lu (set KEEL_TEST_SEED to repeat)\n", argv[0], seed);

    int cpu_tested = 0;
    if (needs_devices) {
        keel_status_t st = keel_init();
        if (st != KEEL_OK)
            printf("%s: keel_init: %s (%s)\n", argv[0], keel_status_name(st), keel_last_error());
        int n = kt_device_count();
        if (n == 0) {
            printf("%s: SKIP: no usable device%s%s\n", argv[0],
                   getenv("KEEL_BACKEND") ? " among KEEL_BACKEND=" : "",
                   getenv("KEEL_BACKEND") ? getenv("KEEL_BACKEND") : "");
            srunner_free(srunner_create(suite));
            return KT_SKIP;
        }
        for (int i = 0; i < n; i++) {
            printf("%s: testing %s\n", argv[0], keel_device_name(kt_device(i)));
            cpu_tested |= kt_is_cpu(kt_device(i));
        }
    }
    SRunner *sr = srunner_create(suite);
    if (getenv("CK_FORK") == NULL)
        srunner_set_fork_status(sr, CK_NOFORK);
    /* Each result as it happens: if a failed test leads to a crash later,
     * the failure is already in the log. */
    if (getenv("CK_LOG_FILE_NAME") == NULL)
        srunner_set_log(sr, "-");
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (failed)
        printf("%s: %d test(s) failed; random seed was %lu\n", argv[0], failed, seed);
    int rc = failed ? 1 : 0;
    if (multi_device && cpu_tested && !kt_cpu_devices_env()) {
        int rc2 = run_again_with_cpu_devices(argv);
        if (rc2 != 0 && rc2 != KT_SKIP)
            rc = 1;
    }
    return rc;
}
