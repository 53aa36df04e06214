/* SPDX-License-Identifier: MIT */
/* keel-env-probe: a child process for test-env and test-loader. Keel reads
 * its environment once per process, so every environment setting is tried in
 * a fresh probe. Each argument is a command; each prints one line per result
 * on stdout, starting with the command word and the status name:
 *
 *   init                       "init <STATUS> <detail>"
 *   count                      "count <STATUS> <n>"
 *   backends                   "backend:<name> usable=<0|1> status=<STATUS> devices=<n> abi=<n>
 *                                path=<path|(null)> reason=<reason>" per backend, then "backends OK <n>"
 *   default                    "default <STATUS> <device name | detail>"
 *   desc:<name>                "desc:<name> <STATUS> <the backend's description | detail>"
 *   envvars                    "env:<name> <description>" per variable keel_env_var_get lists,
 *                              then "envvars <STATUS> <n>"
 *   find:<name>                "find:<name> <STATUS> <detail>"
 *   get:<backend>:<i>          "get:<backend>:<i> <STATUS> <device name | detail>"
 *   alloc:<backend>:<i>:<n>    "alloc:... <STATUS> <detail>"  (the memory is kept until exit)
 *   reuse:<backend>:<i>:<n>    keel_malloc_async of n bytes on a new stream, keel_free_async (the stream
 *                              keeps the block for reuse), then keel_malloc of n bytes and
 *                              keel_malloc_async of n bytes on another stream: "reuse:... <STATUS> <detail>"
 *                              (the first failure; all memory is freed again)
 *   meminfo:<backend>:<i>      "meminfo:... <STATUS> free=<n> total=<n>"
 *   props:<backend>:<i>        "props:... <STATUS> total=<n> name=<name>"
 *   loglevel                   "loglevel OK <n>"
 *   logcb                      installs a log callback that prints "cb <level> <message>"
 *   nocb                       removes it again (lines go back to stderr)
 *   debug                      keel_log_set_level(KEEL_LOG_DEBUG)
 *   cross:<b1>:<b2>            copies between memory of device 0 of b1 and of b2: "cross:... <STATUS> <detail>"
 *   roundtrip:<backend>        allocates, copies in and out, checks: "roundtrip:... <STATUS> <detail>"
 *   peer:<b1>:<b2>             "peer:... <STATUS> <can_access>"
 *   blas:<backend>             keel_device_get_blas_info of device 0: "blas:... <STATUS> kind=<n> <text>"
 *   gemm:<backend>             a 5 x 3 x 7 f32 GEMM on device 0 of fresh random data, checked against a
 *                              float64 reference: "gemm:... <STATUS> <detail>" (MISMATCH when wrong)
 *   pinit                      8 threads call keel_init and keel_device_default at once:
 *                              "pinit <STATUS of thread 0> <n threads that agree with it> <device or detail>"
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "keel.h"

static void print_status(const char *cmd, keel_status_t s, const char *ok_text)
{
    if (s == KEEL_OK)
        printf("%s OK %s\n", cmd, ok_text ? ok_text : "");
    else
        printf("%s %s %s\n", cmd, keel_status_name(s), keel_last_error());
    fflush(stdout);
}

static void log_cb(keel_log_level_t level, const char *message, void *user_data)
{
    (void)user_data;
    printf("cb %d %s\n", (int)level, message);
    fflush(stdout);
}

struct pinit {
    pthread_barrier_t *barrier;
    keel_status_t init, def;
    keel_device_t *dev;
    char detail[256];
};

static void *pinit_thread(void *p)
{
    struct pinit *t = p;
    pthread_barrier_wait(t->barrier);
    t->init = keel_init();
    t->def = keel_device_default(&t->dev);
    snprintf(t->detail, sizeof t->detail, "%s", t->init != KEEL_OK ? keel_last_error() : "");
    return NULL;
}

/* Parses "<backend>:<index>" at @p spec into a device. */
static keel_status_t device_of(const char *spec, keel_device_t **dev)
{
    char name[64];
    int idx = 0;
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    if (len >= sizeof name)
        len = sizeof name - 1;
    memcpy(name, spec, len);
    name[len] = '\0';
    if (colon)
        idx = atoi(colon + 1);
    return keel_device_get(name, idx, dev);
}

/* The "reuse" command: a block kept for reuse on one stream must not make
 * another allocation of the device run out of memory, synchronous or
 * stream-ordered on another stream. */
static keel_status_t reuse_then_alloc(keel_device_t *dev, size_t n)
{
    keel_stream_t *s = NULL, *s2 = NULL;
    void *p = NULL, *q = NULL, *r = NULL;
    keel_status_t st = keel_stream_create(dev, 0, 0, &s);
    if (st == KEEL_OK)
        st = keel_stream_create(dev, 0, 0, &s2);
    if (st == KEEL_OK)
        st = keel_malloc_async(s, n, &p);
    if (st == KEEL_OK)
        st = keel_free_async(p, s); /* s keeps the block */
    if (st == KEEL_OK)
        st = keel_malloc(dev, n, &q);
    if (st == KEEL_OK)
        st = keel_free(q);
    if (st == KEEL_OK)
        st = keel_malloc_async(s, n, &p);
    if (st == KEEL_OK)
        st = keel_free_async(p, s); /* kept again */
    if (st == KEEL_OK)
        st = keel_malloc_async(s2, n, &r);
    if (st == KEEL_OK)
        st = keel_free_async(r, s2);
    keel_status_t st2 = s2 ? keel_stream_destroy(s2) : KEEL_OK;
    keel_status_t st3 = s ? keel_stream_destroy(s) : KEEL_OK;
    return st != KEEL_OK ? st : st2 != KEEL_OK ? st2 : st3;
}

int main(int argc, char **argv)
{
    char buf[512];
    for (int a = 1; a < argc; a++) {
        const char *cmd = argv[a];
        if (strcmp(cmd, "init") == 0) {
            print_status(cmd, keel_init(), "");
        } else if (strcmp(cmd, "count") == 0) {
            int n = -1;
            keel_status_t s = keel_backend_count(&n);
            snprintf(buf, sizeof buf, "%d", n);
            print_status(cmd, s, buf);
        } else if (strcmp(cmd, "backends") == 0) {
            int n = 0;
            keel_status_t s = keel_backend_count(&n);
            for (int i = 0; s == KEEL_OK && i < n; i++) {
                keel_backend_t *be = NULL;
                keel_backend_info_t info;
                memset(&info, 0, sizeof info);
                info.struct_size = sizeof info;
                s = keel_backend_get(i, &be);
                if (s == KEEL_OK)
                    s = keel_backend_get_info(be, &info);
                if (s != KEEL_OK)
                    break;
                printf("backend:%s usable=%d status=%s devices=%d abi=%d path=%s reason=%s\n", info.name,
                       info.usable, keel_status_name(info.status), info.device_count, info.abi_version,
                       info.plugin_path ? info.plugin_path : "(null)", info.reason ? info.reason : "(null)");
            }
            snprintf(buf, sizeof buf, "%d", n);
            print_status(cmd, s, buf);
        } else if (strncmp(cmd, "desc:", 5) == 0) {
            keel_backend_t *be = NULL;
            keel_backend_info_t info;
            memset(&info, 0, sizeof info);
            info.struct_size = sizeof info;
            keel_status_t s = keel_backend_find(cmd + 5, &be);
            if (s == KEEL_OK)
                s = keel_backend_get_info(be, &info);
            print_status(cmd, s, s == KEEL_OK && info.description ? info.description : keel_last_error());
        } else if (strcmp(cmd, "envvars") == 0) {
            int n = 0;
            keel_status_t s = keel_env_var_count(&n);
            for (int i = 0; s == KEEL_OK && i < n; i++) {
                const char *name = NULL, *d = NULL;
                s = keel_env_var_get(i, &name, &d);
                if (s == KEEL_OK)
                    printf("env:%s %s\n", name, d);
            }
            snprintf(buf, sizeof buf, "%d", n);
            print_status(cmd, s, buf);
        } else if (strcmp(cmd, "default") == 0) {
            keel_device_t *dev = NULL;
            keel_status_t s = keel_device_default(&dev);
            print_status(cmd, s, s == KEEL_OK ? keel_device_name(dev) : NULL);
        } else if (strncmp(cmd, "find:", 5) == 0) {
            keel_backend_t *be = NULL;
            print_status(cmd, keel_backend_find(cmd + 5, &be), "");
        } else if (strncmp(cmd, "get:", 4) == 0) {
            keel_device_t *dev = NULL;
            keel_status_t s = device_of(cmd + 4, &dev);
            print_status(cmd, s, s == KEEL_OK ? keel_device_name(dev) : NULL);
        } else if (strncmp(cmd, "alloc:", 6) == 0) {
            keel_device_t *dev = NULL;
            const char *last = strrchr(cmd, ':');
            char spec[128];
            snprintf(spec, sizeof spec, "%.*s", (int)(last - (cmd + 6)), cmd + 6);
            keel_status_t s = device_of(spec, &dev);
            void *p = NULL;
            if (s == KEEL_OK)
                s = keel_malloc(dev, strtoull(last + 1, NULL, 10), &p);
            print_status(cmd, s, "");
        } else if (strncmp(cmd, "reuse:", 6) == 0) {
            keel_device_t *dev = NULL;
            const char *last = strrchr(cmd, ':');
            char spec[128];
            snprintf(spec, sizeof spec, "%.*s", (int)(last - (cmd + 6)), cmd + 6);
            keel_status_t s = device_of(spec, &dev);
            if (s == KEEL_OK)
                s = reuse_then_alloc(dev, strtoull(last + 1, NULL, 10));
            print_status(cmd, s, "");
        } else if (strncmp(cmd, "meminfo:", 8) == 0) {
            keel_device_t *dev = NULL;
            size_t f = 0, t = 0;
            keel_status_t s = device_of(cmd + 8, &dev);
            if (s == KEEL_OK)
                s = keel_device_memory_info(dev, &f, &t);
            snprintf(buf, sizeof buf, "free=%zu total=%zu", f, t);
            print_status(cmd, s, buf);
        } else if (strncmp(cmd, "props:", 6) == 0) {
            keel_device_t *dev = NULL;
            keel_device_properties_t p;
            memset(&p, 0, sizeof p);
            p.struct_size = sizeof p;
            keel_status_t s = device_of(cmd + 6, &dev);
            if (s == KEEL_OK)
                s = keel_device_get_properties(dev, &p);
            snprintf(buf, sizeof buf, "total=%zu name=%s", p.total_memory, p.name);
            print_status(cmd, s, buf);
        } else if (strcmp(cmd, "loglevel") == 0) {
            snprintf(buf, sizeof buf, "%d", (int)keel_log_get_level());
            print_status(cmd, KEEL_OK, buf);
        } else if (strcmp(cmd, "logcb") == 0) {
            keel_log_set_callback(log_cb, NULL);
        } else if (strcmp(cmd, "debug") == 0) {
            keel_log_set_level(KEEL_LOG_DEBUG);
        } else if (strcmp(cmd, "nocb") == 0) {
            keel_log_set_callback(NULL, NULL);
        } else if (strncmp(cmd, "cross:", 6) == 0 || strncmp(cmd, "peer:", 5) == 0) {
            char b1[64], b2[64];
            const char *rest = strchr(cmd, ':') + 1;
            if (sscanf(rest, "%63[^:]:%63s", b1, b2) != 2) {
                printf("%s BAD_COMMAND\n", cmd);
                continue;
            }
            keel_device_t *d1 = NULL, *d2 = NULL;
            keel_status_t s = keel_device_get(b1, 0, &d1);
            if (s == KEEL_OK)
                s = keel_device_get(b2, 0, &d2);
            if (s == KEEL_OK && cmd[0] == 'p') {
                int can = -1;
                s = keel_device_can_access_peer(d1, d2, &can);
                snprintf(buf, sizeof buf, "%d", can);
                print_status(cmd, s, buf);
                continue;
            }
            void *p1 = NULL, *p2 = NULL;
            if (s == KEEL_OK)
                s = keel_malloc(d1, 256, &p1);
            if (s == KEEL_OK)
                s = keel_malloc(d2, 256, &p2);
            if (s == KEEL_OK)
                s = keel_memcpy(p2, p1, 256);
            print_status(cmd, s, "");
            keel_free(p1);
            keel_free(p2);
        } else if (strncmp(cmd, "roundtrip:", 10) == 0) {
            keel_device_t *dev = NULL;
            keel_stream_t *st = NULL;
            unsigned char in[1000], out[1000];
            for (int i = 0; i < 1000; i++)
                in[i] = (unsigned char)(i * 7 + 3), out[i] = 0xA5;
            void *d = NULL;
            keel_status_t s = keel_device_get(cmd + 10, 0, &dev);
            if (s == KEEL_OK)
                s = keel_malloc(dev, sizeof in, &d);
            if (s == KEEL_OK)
                s = keel_memcpy(d, in, sizeof in);
            if (s == KEEL_OK)
                s = keel_stream_create(dev, 0, 0, &st);
            if (s == KEEL_OK)
                s = keel_memcpy_async(out, d, sizeof out, st);
            if (s == KEEL_OK)
                s = keel_stream_synchronize(st);
            if (s == KEEL_OK && memcmp(in, out, sizeof in) != 0) {
                printf("%s MISMATCH the data came back wrong\n", cmd);
                continue;
            }
            if (st)
                keel_stream_destroy(st);
            keel_free(d);
            print_status(cmd, s, "");
        } else if (strncmp(cmd, "blas:", 5) == 0) {
            keel_device_t *dev = NULL;
            keel_blas_kind_t kind = KEEL_BLAS_NONE;
            char text[300] = "";
            keel_status_t s = keel_device_get(cmd + 5, 0, &dev);
            if (s == KEEL_OK)
                s = keel_device_get_blas_info(dev, &kind, text, sizeof text);
            snprintf(buf, sizeof buf, "kind=%d %s", (int)kind, text);
            print_status(cmd, s, buf);
        } else if (strncmp(cmd, "gemm:", 5) == 0) {
            enum { M = 5, N = 3, K = 7 };
            float ha[M * K], hb[K * N], hc[M * N];
            unsigned long long r = (unsigned long long)getpid() * 0x9e3779b97f4a7c15ull + 1;
            for (int i = 0; i < M * K + K * N; i++) {
                r = r * 6364136223846793005ull + 1442695040888963407ull;
                float v = (float)((double)(r >> 11) * 0x1p-53 * 2.0 - 1.0);
                if (i < M * K)
                    ha[i] = v;
                else
                    hb[i - M * K] = v;
            }
            keel_device_t *dev = NULL;
            keel_stream_t *st = NULL;
            void *da = NULL, *db = NULL, *dc = NULL;
            keel_status_t s = keel_device_get(cmd + 5, 0, &dev);
            if (s == KEEL_OK)
                s = keel_device_default_stream(dev, &st);
            if (s == KEEL_OK && (s = keel_malloc(dev, sizeof ha, &da)) == KEEL_OK &&
                (s = keel_malloc(dev, sizeof hb, &db)) == KEEL_OK && (s = keel_malloc(dev, sizeof hc, &dc)) == KEEL_OK &&
                (s = keel_memcpy(da, ha, sizeof ha)) == KEEL_OK && (s = keel_memcpy(db, hb, sizeof hb)) == KEEL_OK) {
                keel_gemm_params_t p;
                memset(&p, 0, sizeof p);
                p.struct_size = sizeof p;
                p.m = M, p.n = N, p.k = K, p.alpha = 1.0;
                p.a_type = p.b_type = p.c_type = KEEL_F32;
                p.a = da, p.lda = K, p.b = db, p.ldb = N, p.c = dc, p.ldc = N;
                s = keel_gemm(st, &p);
                if (s == KEEL_OK)
                    s = keel_memcpy(hc, dc, sizeof hc);
            }
            int bad = -1;
            for (int i = 0; s == KEEL_OK && i < M && bad < 0; i++)
                for (int j = 0; j < N; j++) {
                    double ref = 0;
                    for (int l = 0; l < K; l++)
                        ref += (double)ha[i * K + l] * hb[l * N + j];
                    if (!(fabs(hc[i * N + j] - ref) <= 1e-5))
                        bad = i * N + j;
                }
            keel_free(da);
            keel_free(db);
            keel_free(dc);
            if (bad >= 0) {
                printf("%s MISMATCH C[%d] = %g\n", cmd, bad, hc[bad]);
                fflush(stdout);
                continue;
            }
            print_status(cmd, s, "");
        } else if (strcmp(cmd, "pinit") == 0) {
            enum { N = 8 };
            pthread_barrier_t barrier;
            pthread_barrier_init(&barrier, NULL, N);
            struct pinit t[N];
            pthread_t th[N];
            memset(t, 0, sizeof t);
            for (int i = 0; i < N; i++) {
                t[i].barrier = &barrier;
                pthread_create(&th[i], NULL, pinit_thread, &t[i]);
            }
            for (int i = 0; i < N; i++)
                pthread_join(th[i], NULL);
            pthread_barrier_destroy(&barrier);
            int agree = 0;
            for (int i = 0; i < N; i++)
                agree += t[i].init == t[0].init && t[i].def == t[0].def && t[i].dev == t[0].dev &&
                         strcmp(t[i].detail, t[0].detail) == 0;
            printf("pinit %s %d %s\n", t[0].init == KEEL_OK ? "OK" : keel_status_name(t[0].init), agree,
                   t[0].init == KEEL_OK && t[0].def == KEEL_OK ? keel_device_name(t[0].dev) : t[0].detail);
        } else {
            printf("%s BAD_COMMAND\n", cmd);
        }
    }
    return 0;
}
