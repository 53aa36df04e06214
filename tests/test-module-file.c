/* SPDX-License-Identifier: MIT */
/* test-module-file: the ahead-of-time path of the portable kernel language.
 * keel-cc (the one just built, tools/keel-cc) compiles a kernel file written
 * by the test into module files, and keel_module_load_file reads them on
 * every device under test: the device's own code, the source compiled at
 * load time where the file has no code for the device, the signatures that
 * check launches, and damaged or foreign files refused with a message.
 * The keel-cc case checks the tool itself: its options, its output, and its
 * errors, which name the user's file and line. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "runtime/module_file.h"

#define KEEL_CC KT_BUILDDIR "/tools/keel-cc"

extern char **environ;

/* Two kernels, a thread kernel and a block kernel with shared memory and
 * barriers. KT_OFFSET comes from keel-cc's -D, so a source compiled at load
 * time shows whether the file kept it. */
static const char kernel_source[] =
    "/* kernels of test-module-file */\n"
    "#ifndef KT_OFFSET\n"
    "#error KT_OFFSET is given by keel-cc -D\n"
    "#endif\n"
    "keel_kernel void axpby(int n, float a, const float *x, float b, float *y)\n"
    "{\n"
    "    int i = keel_global_x();\n"
    "    if (i < n)\n"
    "        y[i] = a * x[i] + b * y[i] + KT_OFFSET;\n"
    "}\n"
    "\n"
    "keel_block_kernel void block_sums(int n, const float *x, float *sums)\n"
    "{\n"
    "    keel_shared float part[128];\n"
    "    keel_threads {\n"
    "        int i = keel_global_x();\n"
    "        part[keel_thread_x()] = i < n ? x[i] : 0.0f;\n"
    "    }\n"
    "    for (int s = keel_block_dim_x() / 2; s > 0; s /= 2) {\n"
    "        keel_barrier();\n"
    "        keel_threads {\n"
    "            if (keel_thread_x() < s)\n"
    "                part[keel_thread_x()] += part[keel_thread_x() + s];\n"
    "        }\n"
    "    }\n"
    "    keel_barrier();\n"
    "    keel_threads {\n"
    "        if (keel_thread_x() == 0)\n"
    "            sums[keel_block_x()] = part[0];\n"
    "    }\n"
    "}\n";

/* ---- a temporary directory, removed at exit by the process that made it ---- */

static char tmp_dir[512];
static pid_t tmp_owner;

static void remove_tmp_dir(void)
{
    if (!tmp_dir[0] || getpid() != tmp_owner)
        return;
    DIR *d = opendir(tmp_dir);
    if (d) {
        struct dirent *e;
        char p[1024];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(p, sizeof p, "%s/%s", tmp_dir, e->d_name);
                unlink(p);
            }
        }
        closedir(d);
    }
    rmdir(tmp_dir);
}

/* The path of @p leaf in the temporary directory (a static buffer of 8). */
static const char *tmp_path(const char *leaf)
{
    static char bufs[8][1024];
    static int next;
    if (!tmp_dir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(tmp_dir, sizeof tmp_dir, "%s/keel-test-modfile-XXXXXX", t && t[0] ? t : "/tmp");
        ck_assert_msg(mkdtemp(tmp_dir) != NULL, "mkdtemp %s: %s", tmp_dir, strerror(errno));
        tmp_owner = getpid();
        atexit(remove_tmp_dir);
    }
    char *p = bufs[next++ % 8];
    snprintf(p, sizeof bufs[0], "%s/%s", tmp_dir, leaf);
    return p;
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "fopen %s: %s", path, strerror(errno));
    ck_assert_msg(fwrite(data, 1, n, f) == n && fclose(f) == 0, "writing %s", path);
}

static char *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "fopen %s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    ck_assert(buf != NULL);
    ck_assert_msg(fread(buf, 1, (size_t)n, f) == (size_t)n, "reading %s", path);
    fclose(f);
    buf[n] = '\0';
    *size = (size_t)n;
    return buf;
}

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* ---- running keel-cc ---- */

typedef struct cc_result {
    int status;
    char log[65536];   /* its standard output and error */
} cc_result_t;

/* Runs keel-cc with @p args (NULL-terminated) and the variables of @p env
 * ("NAME=value", NULL-terminated; they replace the inherited ones). */
static void run_cc(const char *const *env, const char *const *args, cc_result_t *r)
{
    const char *argv[64];
    int n = 0;
    argv[n++] = KEEL_CC;
    for (int i = 0; args[i]; i++)
        argv[n++] = args[i];
    argv[n] = NULL;

    size_t ne = 0;
    while (environ[ne])
        ne++;
    const char **envp = calloc(ne + 16, sizeof *envp);
    size_t k = 0;
    for (size_t i = 0; i < ne; i++) {
        int replaced = 0;
        for (int j = 0; env && env[j]; j++) {
            size_t len = strcspn(env[j], "=");
            replaced |= strncmp(environ[i], env[j], len) == 0 && environ[i][len] == '=';
        }
        if (!replaced)
            envp[k++] = environ[i];
    }
    for (int j = 0; env && env[j]; j++)
        envp[k++] = env[j];

    const char *log_path = tmp_path("keel-cc.log");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    int rc = posix_spawn(&pid, KEEL_CC, &fa, NULL, (char *const *)argv, (char *const *)envp);
    posix_spawn_file_actions_destroy(&fa);
    free(envp);
    ck_assert_msg(rc == 0, "cannot run %s: %s", KEEL_CC, strerror(rc));
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    size_t size;
    char *log = read_file(log_path, &size);
    snprintf(r->log, sizeof r->log, "%s", log);
    free(log);
}

/* Runs keel-cc, which must succeed. */
static void cc_ok(const char *const *env, const char *const *args)
{
    static cc_result_t r;
    run_cc(env, args, &r);
    ck_assert_msg(r.status == 0, "keel-cc %s ... exited %d:\n%s", args[0], r.status, r.log);
}

static const char *kernel_file(void)
{
    const char *p = tmp_path("kernels.kc");
    if (!file_exists(p))
        write_file(p, kernel_source, strlen(kernel_source));
    return p;
}

static const char *backend_of(keel_device_t *dev)
{
    keel_backend_t *be;
    keel_backend_info_t info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    KT_OK(keel_device_get_backend(dev, &be));
    KT_OK(keel_backend_get_info(be, &info));
    return info.name;
}

/* A module file of the test's kernels, built once per name: "code" holds
 * the code of @p dev's backend (nvcc or hipcc is required where configure
 * found it), "source" no code at all; @p offset is KT_OFFSET. */
static const char *module_for(keel_device_t *dev, const char *what, const char *offset)
{
    static char built[32][64];
    static int nbuilt;
    const char *backend = backend_of(dev);
    char name[64], define[64];
    snprintf(name, sizeof name, "%s-%s-%s.keelmod", what, backend, offset);
    const char *out = tmp_path(name);
    for (int i = 0; i < nbuilt; i++)
        if (strcmp(built[i], name) == 0)
            return out;
    snprintf(define, sizeof define, "-DKT_OFFSET=%s", offset);
    const char *args[16];
    int n = 0;
    args[n++] = define;
    if (strcmp(what, "source") == 0) {
        args[n++] = "--no-cpu";
        args[n++] = "--no-cuda";
        args[n++] = "--no-hip";
    } else {
        int cuda = strcmp(backend, "cuda") == 0, hip = strcmp(backend, "hip") == 0;
#ifdef KT_NVCC
        args[n++] = cuda ? "--cuda" : "--no-cuda";
#else
        args[n++] = cuda ? "--cuda-arch=sm_80,sm_90,compute_90" : "--no-cuda";
#endif
#ifdef KT_HIPCC
        args[n++] = hip ? "--hip" : "--no-hip";
#else
        args[n++] = hip ? "--hip-arch=gfx90a,gfx1030" : "--no-hip";
#endif
    }
    args[n++] = "-o";
    args[n++] = out;
    args[n++] = kernel_file();
    args[n] = NULL;
    cc_ok(NULL, args);
    if (nbuilt < 32)
        snprintf(built[nbuilt++], sizeof built[0], "%s", name);
    return out;
}

/* ---- reading and writing module files ---- */

typedef struct modfile {
    char *data;
    size_t size;
    keel__modfile_header_t *h;
    keel__modfile_entry_t *e;
} modfile_t;

static void modfile_read(const char *path, modfile_t *m)
{
    m->data = read_file(path, &m->size);
    ck_assert_msg(m->size >= sizeof *m->h, "%s: %zu bytes", path, m->size);
    m->h = (keel__modfile_header_t *)m->data;
    m->e = (keel__modfile_entry_t *)(m->data + sizeof *m->h);
    ck_assert_msg(memcmp(m->h->magic, KEEL__MODFILE_MAGIC, 8) == 0 && m->h->version == KEEL__MODFILE_VERSION &&
                      m->h->count > 0 && m->size >= sizeof *m->h + m->h->count * sizeof *m->e,
                  "%s is not a module file", path);
}

static const keel__modfile_entry_t *modfile_find(const modfile_t *m, const char *kind)
{
    for (uint32_t i = 0; i < m->h->count; i++)
        if (strcmp(m->e[i].kind, kind) == 0)
            return &m->e[i];
    return NULL;
}

typedef struct part {
    const char *kind, *target;
    const void *data;
    size_t size;
} part_t;

/* Writes a module file of @p n parts, as keel-cc lays one out. */
static void modfile_write(const char *path, const part_t *parts, int n)
{
    size_t at = sizeof(keel__modfile_header_t) + (size_t)n * sizeof(keel__modfile_entry_t);
    size_t total = at;
    for (int i = 0; i < n; i++)
        total += parts[i].size;
    char *buf = calloc(1, total);
    keel__modfile_header_t *h = (keel__modfile_header_t *)buf;
    keel__modfile_entry_t *e = (keel__modfile_entry_t *)(buf + sizeof *h);
    memcpy(h->magic, KEEL__MODFILE_MAGIC, 8);
    h->version = KEEL__MODFILE_VERSION;
    h->count = (uint32_t)n;
    for (int i = 0; i < n; i++) {
        snprintf(e[i].kind, sizeof e[i].kind, "%s", parts[i].kind);
        snprintf(e[i].target, sizeof e[i].target, "%s", parts[i].target);
        e[i].offset = at;
        e[i].size = parts[i].size;
        memcpy(buf + at, parts[i].data, parts[i].size);
        at += parts[i].size;
    }
    write_file(path, buf, total);
    free(buf);
}

static const char *machine(void)
{
    static struct utsname u;
    ck_assert(uname(&u) == 0);
    return u.machine;
}

/* ---- running the kernels ---- */

/* y = a*x + b*y + offset and block sums on random data, each against a
 * float64 reference, through the kernels of @p module. */
static void check_kernels(keel_device_t *dev, keel_module_t *module, double offset)
{
    enum { N = 10007, BLOCK = 128 };
    const int nblocks = (N + BLOCK - 1) / BLOCK;
    keel_kernel_t *axpby, *block_sums;
    KT_OK(keel_module_get_kernel(module, "axpby", &axpby));
    KT_OK(keel_module_get_kernel(module, "block_sums", &block_sums));
    keel_stream_t *s;
    KT_OK(keel_stream_create(dev, KEEL_STREAM_DEFAULT, 0, &s));
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *got = malloc(N * sizeof *got);
    double *ref = malloc(N * sizeof *ref);
    kt_fill_random_f32(x, N);
    kt_fill_random_f32(y, N);
    float a = x[0] * 3.0f, b = y[1] - 0.5f;
    void *dx, *dy, *dsums;
    KT_OK(keel_malloc(dev, N * sizeof(float), &dx));
    KT_OK(keel_malloc(dev, N * sizeof(float), &dy));
    KT_OK(keel_malloc(dev, nblocks * sizeof(float), &dsums));
    KT_OK(keel_memcpy_async(dx, x, N * sizeof(float), s));
    KT_OK(keel_memcpy_async(dy, y, N * sizeof(float), s));
    kt_poison(got, N * sizeof *got);
    KT_OK(keel_memcpy_async(dsums, got, nblocks * sizeof(float), s));

    keel_dim3_t grid = {nblocks, 1, 1}, block = {BLOCK, 1, 1};
    int n = N;
    KT_OK(KEEL_LAUNCH(axpby, grid, block, 0, s, n, a, (const float *)dx, b, (float *)dy));
    KT_OK(KEEL_LAUNCH(block_sums, grid, block, 0, s, n, (const float *)dx, (float *)dsums));
    KT_OK(keel_memcpy_async(got, dy, N * sizeof(float), s));
    KT_OK(keel_stream_synchronize(s));
    for (int i = 0; i < N; i++)
        ref[i] = (double)a * x[i] + (double)b * y[i] + offset;
    long bad = kt_check_f32(got, ref, N, 1e-5, 1e-6);
    ck_assert_msg(bad < 0, "%saxpby: y[%ld] = %.9g, expected %.9g", kt_where(), bad, bad < 0 ? 0.0 : got[bad],
                  bad < 0 ? 0.0 : ref[bad]);

    kt_poison(got, N * sizeof *got);
    KT_OK(keel_memcpy_async(got, dsums, nblocks * sizeof(float), s));
    KT_OK(keel_stream_synchronize(s));
    for (int b2 = 0; b2 < nblocks; b2++) {
        ref[b2] = 0.0;
        for (int i = b2 * BLOCK; i < (b2 + 1) * BLOCK && i < N; i++)
            ref[b2] += x[i];
    }
    bad = kt_check_f32(got, ref, nblocks, 1e-5, 1e-5);
    ck_assert_msg(bad < 0, "%sblock_sums: sums[%ld] = %.9g, expected %.9g", kt_where(), bad,
                  bad < 0 ? 0.0 : got[bad], bad < 0 ? 0.0 : ref[bad]);

    KT_OK(keel_free(dx));
    KT_OK(keel_free(dy));
    KT_OK(keel_free(dsums));
    KT_OK(keel_stream_destroy(s));
    free(x);
    free(y);
    free(got);
    free(ref);
}

static keel_module_t *load_ok(keel_device_t *dev, const char *path)
{
    keel_module_t *m = NULL;
    KT_OK(keel_module_load_file(dev, path, &m));
    return m;
}

/* A load that must fail with @p expect, leaving the out-parameter alone. */
static void load_fails(keel_device_t *dev, const char *path, keel_status_t expect, const char *why)
{
    keel_module_t *m = KT_SENTINEL;
    keel_clear_error();
    keel_status_t st = keel_module_load_file(dev, path, &m);
    ck_assert_msg(st == expect, "%s%s: keel_module_load_file -> %s, expected %s (detail: %s)", kt_where(), why,
                  keel_status_name(st), keel_status_name(expect), keel_last_error());
    ck_assert_msg(m == KT_SENTINEL, "%s%s: a failed load wrote its module", kt_where(), why);
    ck_assert_msg(keel_last_error()[0] != '\0', "%s%s: no detail", kt_where(), why);
    ck_assert_msg(strstr(keel_last_error(), path) != NULL, "%s%s: detail \"%s\" does not name the file",
                  kt_where(), why, keel_last_error());
}

/* ---- loading on every device ---- */

KT_DEVICE_TEST(module_file_runs_on_device)
{
    keel_module_t *m = load_ok(dev, module_for(dev, "code", "0.5f"));
    check_kernels(dev, m, 0.5);
    KT_OK(keel_module_unload(m));
}

KT_DEVICE_TEST(module_file_signatures_check_launches)
{
    keel_module_t *m = load_ok(dev, module_for(dev, "code", "0.5f"));
    keel_kernel_t *k;
    KT_OK(keel_module_get_kernel(m, "axpby", &k));
    keel_stream_t *s;
    KT_OK(keel_stream_create(dev, KEEL_STREAM_DEFAULT, 0, &s));
    void *y;
    KT_OK(keel_malloc(dev, 64 * sizeof(float), &y));
    keel_dim3_t grid = {1, 1, 1}, block = {64, 1, 1};
    int n = 64;
    float a = 1.0f, b = 2.0f;
    double wide_a = 1.0;
    /* The file's table of kernels knows axpby takes five arguments ... */
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, KEEL_LAUNCH(k, grid, block, 0, s, n, a, (const float *)y, b));
    KT_DETAIL_HAS("axpby");
    KT_DETAIL_HAS("takes 5 arguments");
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT,
            KEEL_LAUNCH(k, grid, block, 0, s, n, a, (const float *)y, b, (float *)y, n));
    /* ... and their sizes: a double where a float is declared. */
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, KEEL_LAUNCH(k, grid, block, 0, s, n, wide_a, (const float *)y, b, (float *)y));
    KT_DETAIL_HAS("float a");
    KT_OK(keel_stream_synchronize(s));
    KT_OK(keel_free(y));
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_module_unload(m));
}

/* The CPU code in the file runs without a C compiler: a broken KEEL_CPU_CC
 * fails any build, so a load that succeeds used the file's shared object. */
KT_DEVICE_TEST(module_file_cpu_code_needs_no_compiler)
{
    if (!kt_is_cpu(dev))
        return;
    const char *path = module_for(dev, "code", "0.5f");
    const char *old = getenv("KEEL_CPU_CC");
    char *saved = old ? strdup(old) : NULL;
    setenv("KEEL_CPU_CC", "/nonexistent/keel-test-cc", 1);
    keel_module_t *m = NULL;
    keel_status_t st = keel_module_load_file(dev, path, &m);
    char detail[1024];
    snprintf(detail, sizeof detail, "%s", keel_last_error());
    if (saved)
        setenv("KEEL_CPU_CC", saved, 1);
    else
        unsetenv("KEEL_CPU_CC");
    free(saved);
    ck_assert_msg(st == KEEL_OK, "%sload with no C compiler -> %s (%s)", kt_where(), keel_status_name(st), detail);
    check_kernels(dev, m, 0.5);
    KT_OK(keel_module_unload(m));
}

KT_DEVICE_TEST(module_file_source_compiles_at_load)
{
    /* No code for any backend: the device compiles the stored source, with
     * the -D that keel-cc was given (the kernel file fails without it). */
    keel_module_t *m = NULL;
    keel_status_t st = keel_module_load_file(dev, module_for(dev, "source", "0.25f"), &m);
    if (kt_unsupported(dev, KT_RUNTIME_COMPILE, st)) {
        return;
    }
    ck_assert_msg(st == KEEL_OK, "%s%s (%s)", kt_where(), keel_status_name(st), keel_last_error());
    check_kernels(dev, m, 0.25);
    KT_OK(keel_module_unload(m));
}

/* Two module files with kernels of the same names, loaded at once, each run
 * their own code. */
KT_DEVICE_TEST(module_files_keep_their_own_code)
{
    keel_module_t *m1 = load_ok(dev, module_for(dev, "code", "1.0f"));
    keel_module_t *m2 = load_ok(dev, module_for(dev, "code", "2.0f"));
    keel_module_t *m3 = load_ok(dev, module_for(dev, "code", "1.0f"));
    check_kernels(dev, m2, 2.0);
    check_kernels(dev, m1, 1.0);
    check_kernels(dev, m3, 1.0);
    KT_OK(keel_module_unload(m1));
    KT_OK(keel_module_unload(m3));
    keel_module_t *m4 = load_ok(dev, module_for(dev, "code", "3.0f"));
    check_kernels(dev, m4, 3.0);
    check_kernels(dev, m2, 2.0);
    KT_OK(keel_module_unload(m2));
    KT_OK(keel_module_unload(m4));
}

KT_DEVICE_TEST(module_file_damaged_is_refused)
{
    modfile_t mf;
    modfile_read(module_for(dev, "code", "0.5f"), &mf);
    const char *path = tmp_path("damaged.keelmod");
    char *copy = malloc(mf.size);
    keel__modfile_header_t *h = (keel__modfile_header_t *)copy;
    keel__modfile_entry_t *e = (keel__modfile_entry_t *)(copy + sizeof *h);
    uint32_t last = mf.h->count - 1;
    char why[128];

    /* Truncated: in the header, in the entries, in the last payload. */
    const size_t cuts[] = {8, sizeof *h - 1, sizeof *h, sizeof *h + sizeof *e / 2,
                           sizeof *h + mf.h->count * sizeof *e - 1,
                           (size_t)mf.e[last].offset + (size_t)mf.e[last].size / 2, mf.size - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        write_file(path, mf.data, cuts[i]);
        snprintf(why, sizeof why, "truncated to %zu of %zu bytes", cuts[i], mf.size);
        load_fails(dev, path, KEEL_ERROR_COMPILE_FAILED, why);
    }

    /* One field wrong at a time. */
    for (int c = 0; c < 9; c++) {
        memcpy(copy, mf.data, mf.size);
        switch (c) {
        case 0: h->version = KEEL__MODFILE_VERSION + 1; snprintf(why, sizeof why, "version %u", h->version); break;
        case 1: h->version = 0; snprintf(why, sizeof why, "version 0"); break;
        case 2: h->count = 0; snprintf(why, sizeof why, "no entries"); break;
        case 3: h->count = 100000; snprintf(why, sizeof why, "100000 entries"); break;
        case 4: e[last].offset = mf.size + 64; snprintf(why, sizeof why, "an entry's offset past the end"); break;
        case 5: e[0].size = UINT64_MAX - 8; snprintf(why, sizeof why, "an entry's size past the end"); break;
        case 6: memset(e[0].kind, 'x', sizeof e[0].kind); snprintf(why, sizeof why, "a kind without its NUL"); break;
        case 7: {
            const keel__modfile_entry_t *sig = modfile_find(&mf, "signatures");
            ck_assert(sig != NULL);
            memset(copy + sig->offset, '\t', (size_t)sig->size);
            snprintf(why, sizeof why, "an unreadable table of kernels");
            break;
        }
        case 8: {
            const keel__modfile_entry_t *sig = modfile_find(&mf, "signatures");
            memcpy(e[sig - mf.e].kind, "nosignatures", 13);
            snprintf(why, sizeof why, "no table of kernels");
            break;
        }
        }
        write_file(path, copy, mf.size);
        load_fails(dev, path, KEEL_ERROR_COMPILE_FAILED, why);
        if (c == 0)
            KT_DETAIL_HAS("version");
    }
    free(copy);
    free(mf.data);
}

/* A file with code for other machines only, and no source. */
KT_DEVICE_TEST(module_file_without_code_for_device_is_not_found)
{
    modfile_t mf;
    modfile_read(module_for(dev, "code", "0.5f"), &mf);
    const keel__modfile_entry_t *sig = modfile_find(&mf, "signatures");
    ck_assert(sig != NULL);
    static const char other_code[] = "code for a machine that is not this one";
    part_t parts[] = {
        {"signatures", "", mf.data + sig->offset, (size_t)sig->size},
        {"cpu", "no-such-machine", other_code, sizeof other_code},
        {"notes", "", other_code, sizeof other_code},
    };
    const char *path = tmp_path("foreign.keelmod");
    modfile_write(path, parts, 3);
    load_fails(dev, path, KEEL_ERROR_NOT_FOUND, "no code and no source");
    KT_DETAIL_HAS("no code");
    free(mf.data);
}

/* Code for this device that does not load (damaged, or not for this model)
 * gives way to the source; without a source the load fails. */
KT_DEVICE_TEST(module_file_code_that_does_not_load)
{
    modfile_t mf;
    modfile_read(module_for(dev, "code", "0.75f"), &mf);
    const keel__modfile_entry_t *sig = modfile_find(&mf, "signatures"), *src = modfile_find(&mf, "source");
    ck_assert(sig != NULL && src != NULL);
    const char *backend = backend_of(dev);
    /* Bytes no loader takes: PTX that does not parse, and no ELF object. */
    static const char junk[] = ".version 7.8\n.target sm_80\n.address_size 64\n.visible .entry x( { oops\n";
    part_t parts[] = {
        {"signatures", "", mf.data + sig->offset, (size_t)sig->size},
        {backend, strcmp(backend, "cpu") == 0 ? machine() : "", junk, sizeof junk},
        {"source", "", mf.data + src->offset, (size_t)src->size},
    };
    const char *path = tmp_path("junk-code.keelmod");
    modfile_write(path, parts, 2);
    load_fails(dev, path, KEEL_ERROR_COMPILE_FAILED, "code that does not load, no source");

    modfile_write(path, parts, 3);
    keel_module_t *m = NULL;
    keel_status_t st = keel_module_load_file(dev, path, &m);
    if (kt_unsupported(dev, KT_RUNTIME_COMPILE, st)) {
        free(mf.data);
        return;
    }
    ck_assert_msg(st == KEEL_OK, "%s%s (%s)", kt_where(), keel_status_name(st), keel_last_error());
    check_kernels(dev, m, 0.75);
    KT_OK(keel_module_unload(m));
    free(mf.data);
}

#ifdef KT_NVCC
/* A fatbin without code or PTX for this GPU (cubins of another generation
 * only) gives way to the source, compiled by NVRTC. */
KT_DEVICE_TEST(module_file_fatbin_for_other_gpus)
{
    if (strcmp(backend_of(dev), "cuda") != 0)
        return;
    keel_device_properties_t props;
    memset(&props, 0, sizeof props);
    props.struct_size = sizeof props;
    KT_OK(keel_device_get_properties(dev, &props));
    const char *arch = props.compute_capability_major == 8 ? "--cuda-arch=sm_90" : "--cuda-arch=sm_80";
    const char *out = tmp_path("other-gpus.keelmod");
    cc_ok(NULL, (const char *const[]){"-DKT_OFFSET=1.5f", "--no-cpu", "--no-hip", "--cuda", arch, "-o", out,
                                      kernel_file(), NULL});
    keel_module_t *m = load_ok(dev, out);
    check_kernels(dev, m, 1.5);
    KT_OK(keel_module_unload(m));
}
#endif

/* ---- keel-cc ---- */

START_TEST(keel_cc_writes_the_parts)
{
    /* The default output name, and what the file holds. */
    const char *kc = tmp_path("parts.kc"), *out = tmp_path("parts.keelmod");
    static const char src[] = "keel_kernel void copy(int n, const float *x, float *y)\n"
                              "{\n    int i = keel_global_x();\n    if (i < n)\n        y[i] = x[i];\n}\n";
    write_file(kc, src, strlen(src));
    unlink(out);
    cc_ok(NULL, (const char *const[]){"--no-cuda", "--no-hip", kc, NULL});
    modfile_t mf;
    modfile_read(out, &mf);
    ck_assert_uint_eq(mf.h->count, 3);
    const keel__modfile_entry_t *sig = modfile_find(&mf, "signatures"), *s = modfile_find(&mf, "source"),
                                *cpu = modfile_find(&mf, "cpu");
    ck_assert_msg(sig && s && cpu, "entries: signatures %p, source %p, cpu %p", (void *)sig, (void *)s, (void *)cpu);
    for (uint32_t i = 0; i < mf.h->count; i++)
        ck_assert_msg(mf.e[i].offset % 8 == 0 && mf.e[i].offset + mf.e[i].size <= mf.size,
                      "entry %u at %llu, %llu bytes, in %zu", i, (unsigned long long)mf.e[i].offset,
                      (unsigned long long)mf.e[i].size, mf.size);
    /* Without -D the source is kept as given. */
    ck_assert_uint_eq(s->size, strlen(src));
    ck_assert(memcmp(mf.data + s->offset, src, strlen(src)) == 0);
    ck_assert_str_eq(cpu->target, machine());
    ck_assert(memcmp(mf.data + cpu->offset, "\177ELF", 4) == 0);
    ck_assert_msg(strncmp(mf.data + sig->offset, "copy\t0\t1\t0,0,0\t3\t", 17) == 0, "signatures: %.*s",
                  (int)sig->size, mf.data + sig->offset);
    free(mf.data);

    /* -o, and no CPU code. */
    out = tmp_path("parts-nocpu.keelmod");
    cc_ok(NULL, (const char *const[]){"--no-cpu", "--no-cuda", "--no-hip", "-o", out, kc, NULL});
    modfile_read(out, &mf);
    ck_assert_uint_eq(mf.h->count, 2);
    ck_assert(modfile_find(&mf, "cpu") == NULL);
    free(mf.data);
}
END_TEST

START_TEST(keel_cc_errors_name_the_users_line)
{
    const char *kc = tmp_path("bad.kc"), *out = tmp_path("bad.keelmod");
    static const char src[] = "/* line 1 */\n"
                              "keel_kernel void bad(int n, float *y)\n"
                              "{\n"
                              "    y[keel_global_x()] = not_declared_anywhere;\n"
                              "}\n";
    write_file(kc, src, strlen(src));
    unlink(out);
    cc_result_t *r = malloc(sizeof *r);
    run_cc(NULL, (const char *const[]){"--no-cuda", "--no-hip", "-o", out, kc, NULL}, r);
    ck_assert_msg(r->status == 1, "keel-cc on a wrong kernel exited %d:\n%s", r->status, r->log);
    char where[1100];
    snprintf(where, sizeof where, "%s:4:", kc);
    ck_assert_msg(strstr(r->log, where) != NULL, "the C compiler's log does not name %s:\n%s", where, r->log);
    ck_assert_msg(strstr(r->log, "not_declared_anywhere") != NULL, "log:\n%s", r->log);
    ck_assert_msg(!file_exists(out), "a failed keel-cc wrote %s", out);
#ifdef KT_NVCC
    run_cc(NULL, (const char *const[]){"--no-cpu", "--cuda", "--no-hip", "-o", out, kc, NULL}, r);
    ck_assert_msg(r->status == 1, "keel-cc --cuda on a wrong kernel exited %d:\n%s", r->status, r->log);
    snprintf(where, sizeof where, "%s(4)", kc);
    ck_assert_msg(strstr(r->log, where) != NULL, "nvcc's log does not name %s:\n%s", where, r->log);
    ck_assert_msg(!file_exists(out), "a failed keel-cc wrote %s", out);
#endif
    /* The translator's own errors: a kernel must return void. */
    static const char src2[] = "\n\nkeel_kernel int nope(int n)\n{\n    return n;\n}\n";
    write_file(kc, src2, strlen(src2));
    run_cc(NULL, (const char *const[]){"--no-cuda", "--no-hip", "-o", out, kc, NULL}, r);
    ck_assert_msg(r->status == 1, "exited %d:\n%s", r->status, r->log);
    snprintf(where, sizeof where, "%s:3:", kc);
    ck_assert_msg(strstr(r->log, where) != NULL && strstr(r->log, "void") != NULL, "log:\n%s", r->log);
    ck_assert(!file_exists(out));
    /* A missing input. */
    run_cc(NULL, (const char *const[]){"--no-cuda", "--no-hip", tmp_path("missing.kc"), NULL}, r);
    ck_assert_msg(r->status == 1 && strstr(r->log, "missing.kc") != NULL, "exited %d:\n%s", r->status, r->log);
    /* No temporary output left behind. */
    DIR *d = opendir(tmp_dir);
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        ck_assert_msg(strstr(de->d_name, ".tmp-") == NULL, "keel-cc left %s", de->d_name);
    closedir(d);
    free(r);
}
END_TEST

START_TEST(keel_cc_options)
{
    cc_result_t *r = malloc(sizeof *r);
    run_cc(NULL, (const char *const[]){"--help", NULL}, r);
    ck_assert_msg(r->status == 0 && strstr(r->log, "Usage: keel-cc") && strstr(r->log, "--cuda-arch"), "%d:\n%s",
                  r->status, r->log);
    run_cc(NULL, (const char *const[]){"--version", NULL}, r);
    ck_assert_msg(r->status == 0 && strncmp(r->log, "keel-cc (Keel) ", 15) == 0, "%d:\n%s", r->status, r->log);
    const char *bad[][4] = {{NULL}, {"--frobnicate", "x.kc", NULL}, {"a.kc", "b.kc", NULL}, {"-o", NULL},
                            {"-D", NULL}, {"--cuda-arch", NULL}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        run_cc(NULL, bad[i], r);
        ck_assert_msg(r->status == 2 && strstr(r->log, "keel-cc: "), "keel-cc %s: exited %d:\n%s",
                      bad[i][0] ? bad[i][0] : "(nothing)", r->status, r->log);
    }
    const char *kc = kernel_file(), *out = tmp_path("opts.keelmod");
    run_cc(NULL, (const char *const[]){"-DKT_OFFSET=1", "--no-cpu", "--cuda", "--cuda-arch", "sm90", "-o", out, kc,
                                       NULL},
           r);
    ck_assert_msg(r->status == 2 && strstr(r->log, "sm90"), "a bad --cuda-arch: %d:\n%s", r->status, r->log);
    run_cc(NULL, (const char *const[]){"-DKT_OFFSET=1", "--hip-arch=gfx90a,,gfx1030", "-o", out, kc, NULL}, r);
    ck_assert_msg(r->status == 2 && strstr(r->log, "--hip-arch"), "a bad --hip-arch: %d:\n%s", r->status, r->log);
    ck_assert(!file_exists(out));
    /* -D, -U and -I in both spellings; the stored source gets the macros. */
    unlink(out);
    cc_ok(NULL, (const char *const[]){"-D", "KT_OFFSET=(1.0f)", "-UKT_UNUSED", "-DKT_FLAG", "-I", tmp_dir,
                                      "-I/nonexistent", "--no-cuda", "--no-hip", "-v", "-o", out, kc, NULL});
    modfile_t mf;
    modfile_read(out, &mf);
    const keel__modfile_entry_t *s = modfile_find(&mf, "source");
    ck_assert(s != NULL);
    char *text = strndup(mf.data + s->offset, (size_t)s->size);
    ck_assert_msg(strstr(text, "#define KT_OFFSET (1.0f)\n#undef KT_UNUSED\n#define KT_FLAG 1\n#line 1 \"") == text,
                  "stored source:\n%s", text);
    ck_assert(strstr(text, kernel_source) != NULL);
    free(text);
    free(mf.data);
    free(r);
}
END_TEST

START_TEST(keel_cc_missing_gpu_compilers)
{
    cc_result_t *r = malloc(sizeof *r);
    const char *kc = kernel_file(), *out = tmp_path("nogpu.keelmod");
    const char *const env[] = {"NVCC=/nonexistent/nvcc", "HIPCC=/nonexistent/hipcc", NULL};
    /* Not asked for: a note each, and the file without them. */
    run_cc(env, (const char *const[]){"-DKT_OFFSET=0", "-o", out, kc, NULL}, r);
    ck_assert_msg(r->status == 0, "%d:\n%s", r->status, r->log);
    ck_assert_msg(strstr(r->log, "note:") && strstr(r->log, "CUDA") && strstr(r->log, "HIP") &&
                      strstr(r->log, "/nonexistent/nvcc"),
                  "log:\n%s", r->log);
    modfile_t mf;
    modfile_read(out, &mf);
    ck_assert(modfile_find(&mf, "cuda") == NULL && modfile_find(&mf, "hip") == NULL && modfile_find(&mf, "cpu"));
    free(mf.data);
    /* Asked for: an error, and no file. */
    unlink(out);
    run_cc(env, (const char *const[]){"-DKT_OFFSET=0", "--cuda", "-o", out, kc, NULL}, r);
    ck_assert_msg(r->status == 1 && strstr(r->log, "--cuda"), "%d:\n%s", r->status, r->log);
    ck_assert(!file_exists(out));
    run_cc(env, (const char *const[]){"-DKT_OFFSET=0", "--hip", "-o", out, kc, NULL}, r);
    ck_assert_msg(r->status == 1 && strstr(r->log, "--hip"), "%d:\n%s", r->status, r->log);
    ck_assert(!file_exists(out));
    /* No C compiler: an error unless the CPU code is left out. */
    const char *const env2[] = {"NVCC=/nonexistent/nvcc", "HIPCC=/nonexistent/hipcc", "KEEL_CPU_CC=/nonexistent/cc",
                                NULL};
    run_cc(env2, (const char *const[]){"-DKT_OFFSET=0", "-o", out, kc, NULL}, r);
    ck_assert_msg(r->status == 1 && strstr(r->log, "KEEL_CPU_CC"), "%d:\n%s", r->status, r->log);
    ck_assert(!file_exists(out));
    cc_ok(env2, (const char *const[]){"-DKT_OFFSET=0", "--no-cpu", "-o", out, kc, NULL});
    free(r);
}
END_TEST

#ifdef KT_NVCC
START_TEST(keel_cc_cuda_fatbin)
{
    const char *kc = kernel_file(), *out = tmp_path("cuda.keelmod");
    cc_ok(NULL, (const char *const[]){"-DKT_OFFSET=0", "--no-cpu", "--no-hip", "--cuda", "--cuda-arch=sm_90,compute_90",
                                      "-o", out, kc, NULL});
    modfile_t mf;
    modfile_read(out, &mf);
    const keel__modfile_entry_t *c = modfile_find(&mf, "cuda");
    ck_assert(c != NULL);
    ck_assert_str_eq(c->target, "sm_90,compute_90");
    static const unsigned char fatbin_magic[4] = {0x50, 0xed, 0x55, 0xba};
    ck_assert_msg(memcmp(mf.data + c->offset, fatbin_magic, 4) == 0, "the cuda entry is no fatbin");
    free(mf.data);
}
END_TEST
#endif

#ifdef KT_HIPCC
START_TEST(keel_cc_hip_bundle)
{
    const char *kc = kernel_file(), *out = tmp_path("hip.keelmod");
    cc_ok(NULL, (const char *const[]){"-DKT_OFFSET=0", "--no-cpu", "--no-cuda", "--hip", "--hip-arch=gfx90a", "-o",
                                      out, kc, NULL});
    modfile_t mf;
    modfile_read(out, &mf);
    const keel__modfile_entry_t *c = modfile_find(&mf, "hip");
    ck_assert(c != NULL);
    ck_assert_str_eq(c->target, "gfx90a");
    ck_assert_msg(c->size > 24 && memcmp(mf.data + c->offset, "__CLANG_OFFLOAD_BUNDLE__", 24) == 0,
                  "the hip entry is no code object bundle");
    free(mf.data);
}
END_TEST
#endif

static Suite *suite(void)
{
    Suite *s = suite_create("module-file");
    TCase *tc = kt_tcase_create("devices", 600);
    kt_add_device_test(tc, module_file_runs_on_device);
    kt_add_device_test(tc, module_file_signatures_check_launches);
    kt_add_device_test(tc, module_file_cpu_code_needs_no_compiler);
    kt_add_device_test(tc, module_file_source_compiles_at_load);
    kt_add_device_test(tc, module_files_keep_their_own_code);
    kt_add_device_test(tc, module_file_damaged_is_refused);
    kt_add_device_test(tc, module_file_without_code_for_device_is_not_found);
    kt_add_device_test(tc, module_file_code_that_does_not_load);
#ifdef KT_NVCC
    kt_add_device_test(tc, module_file_fatbin_for_other_gpus);
#endif
    suite_add_tcase(s, tc);
    TCase *cc = kt_tcase_create("keel-cc", 600);
    tcase_add_test(cc, keel_cc_writes_the_parts);
    tcase_add_test(cc, keel_cc_errors_name_the_users_line);
    tcase_add_test(cc, keel_cc_options);
    tcase_add_test(cc, keel_cc_missing_gpu_compilers);
#ifdef KT_NVCC
    tcase_add_test(cc, keel_cc_cuda_fatbin);
#endif
#ifdef KT_HIPCC
    tcase_add_test(cc, keel_cc_hip_bundle);
#endif
    suite_add_tcase(s, cc);
    return s;
}

int main(int argc, char **argv)
{
    return kt_main(argc, argv, suite(), 1, 1);
}
