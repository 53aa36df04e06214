/* SPDX-License-Identifier: MIT */
/* keel_module_compile on the CPU: C source (the CPU form of a portable
 * kernel, or CPU kernels written with KEEL_CPU_KERNEL_EXPORT) built into a
 * shared object by the system C compiler, kept in the compilation cache and
 * opened with dlopen.
 *
 * The compiler is KEEL_CPU_CC (default: the compiler configure found) with
 * KEEL_CPU_CFLAGS (default: optimize for this machine's vector unit); the
 * words are split at white space, without a shell. The cache key holds the
 * source, its name, the options, the compiler's identity (the resolved file,
 * its size and time, so that a hit runs no compiler) and the host CPU (its
 * model and feature flags: -march=native code is for this CPU only). */
#include "config.h" /* KEEL_CPU_CC_DEFAULT: configure's CC */

#include <dirent.h>
#include <dlfcn.h>
#include <stddef.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/cpu/cpu_internal.h"
#include "runtime/spawn.h"
#include "keel/kernel_lang.h"

/* The CPU form of the kernel language declares its own copies of the launch
 * context and the kernel descriptor (a kernel source includes no other Keel
 * header); they must be the ABI's layouts. */
#define SAME_FIELD(a, b, f) (offsetof(a, f) == offsetof(b, f) && sizeof(((a *)0)->f) == sizeof(((b *)0)->f))
_Static_assert(sizeof(keel__block_t) == sizeof(keel_cpu_kernel_ctx_t) &&
                   SAME_FIELD(keel__block_t, keel_cpu_kernel_ctx_t, grid_dim) &&
                   SAME_FIELD(keel__block_t, keel_cpu_kernel_ctx_t, block_dim) &&
                   SAME_FIELD(keel__block_t, keel_cpu_kernel_ctx_t, block_idx) &&
                   SAME_FIELD(keel__block_t, keel_cpu_kernel_ctx_t, shared_mem) &&
                   SAME_FIELD(keel__block_t, keel_cpu_kernel_ctx_t, shared_bytes),
               "keel__block_t (keel/kernel_lang.h) must be keel_cpu_kernel_ctx_t");
_Static_assert(sizeof(keel__kernel_desc_t) == sizeof(keel_cpu_kernel_desc_t) &&
                   SAME_FIELD(keel__kernel_desc_t, keel_cpu_kernel_desc_t, abi_version) &&
                   SAME_FIELD(keel__kernel_desc_t, keel_cpu_kernel_desc_t, name) &&
                   SAME_FIELD(keel__kernel_desc_t, keel_cpu_kernel_desc_t, fn) &&
                   SAME_FIELD(keel__kernel_desc_t, keel_cpu_kernel_desc_t, num_args) &&
                   SAME_FIELD(keel__kernel_desc_t, keel_cpu_kernel_desc_t, arg_sizes) && KEEL_CPU_KERNEL_ABI == 1,
               "keel__kernel_desc_t (keel/kernel_lang.h) must be keel_cpu_kernel_desc_t");

#ifndef KEEL_CPU_CC_DEFAULT
#define KEEL_CPU_CC_DEFAULT "cc"
#endif
#define KEEL_CPU_CFLAGS_DEFAULT "-O3 -march=native -fno-math-errno -fno-trapping-math"
#define CPU_CC_MAX_WORDS 64
#define CPU_LOG_MAX (64 * 1024)

static const char *fn_name = "keel_module_compile";

/* glibc's vector math library on x86_64: with it linked, and
 * KEEL_CPU_LIBMVEC defined for keel/kernel_lang.h, a kernel's calls to
 * tanhf(), expf() and the like vectorize. Used when the running system has
 * it (the development link comes with libm's, which every kernel links). */
static int use_libmvec;
static pthread_once_t libmvec_once = PTHREAD_ONCE_INIT;

static void find_libmvec(void)
{
#if defined(__x86_64__) && defined(__GLIBC__)
    void *h = dlopen("libmvec.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (h) {
        use_libmvec = 1;
        dlclose(h);
    }
#endif
}

/* The host CPU's model and feature flags, read once. */
static char cpu_id[2048];
static pthread_once_t cpu_id_once = PTHREAD_ONCE_INIT;

static void read_cpu_id(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    size_t w = 0;
    if (f) {
        char line[4096];
        int have_model = 0, have_flags = 0;
        while (fgets(line, sizeof line, f) && !(have_model && have_flags)) {
            int model = strncmp(line, "model name", 10) == 0, flags = strncmp(line, "flags", 5) == 0;
            if ((model && !have_model) || (flags && !have_flags)) {
                int k = snprintf(cpu_id + w, sizeof cpu_id - w, "%s", line);
                if (k > 0 && (size_t)k < sizeof cpu_id - w)
                    w += (size_t)k;
                have_model |= model;
                have_flags |= flags;
            }
        }
        fclose(f);
    }
    if (w == 0)
        snprintf(cpu_id, sizeof cpu_id, "unknown cpu");
}

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return 0;
    size_t n = strlen(text), done = 0;
    while (done < n) {
        ssize_t r = write(fd, text + done, n - done);
        if (r <= 0)
            break;
        done += (size_t)r;
    }
    return close(fd) == 0 && done == n;
}

/* Removes the build directory and what it holds (no subdirectories). */
static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char p[4400 + 256];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            (void)unlink(p);
        }
        closedir(d);
    }
    (void)rmdir(dir);
}

typedef struct cpu_build {
    char cc_buf[4096], flags_buf[4096];
    char *cc[CPU_CC_MAX_WORDS], *flags[CPU_CC_MAX_WORDS];
    int ncc, nflags;
    char compiler[4096];
    struct stat compiler_st;
    char dir[4200], src[4300], out[4300], cached[4300], kept_src[4300];
    char *argv[2 * CPU_CC_MAX_WORDS + KEEL_MAX_KERNEL_ARGS + 16];
    char log[CPU_LOG_MAX];
    char cmd[8192];
} cpu_build_t;

/* Splits the compiler's command and flags into b's words. */
static keel_status_t split_compiler(cpu_build_t *b, const char *cc, const char *flags, const char *fn)
{
    b->ncc = keel__split_words(cc, b->cc_buf, sizeof b->cc_buf, b->cc, CPU_CC_MAX_WORDS);
    b->nflags = keel__split_words(flags, b->flags_buf, sizeof b->flags_buf, b->flags, CPU_CC_MAX_WORDS);
    if (b->ncc <= 0)
        return CPU_ERR(KEEL_ERROR_INVALID_ENVIRONMENT, "%s: KEEL_CPU_CC='%s' names no compiler", fn, cc);
    if (b->nflags < 0)
        return CPU_ERR(KEEL_ERROR_INVALID_ENVIRONMENT, "%s: KEEL_CPU_CFLAGS has more than %d words", fn,
                       CPU_CC_MAX_WORDS);
    return KEEL_OK;
}

keel_status_t keel__cpu_compiler_check(const char *name, const char *value)
{
    cpu_build_t *b = keel__malloc(sizeof *b);
    if (!b)
        return CPU_ERR(KEEL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
    int is_cc = strcmp(name, "KEEL_CPU_CC") == 0;
    keel_status_t st = split_compiler(b, is_cc ? value : KEEL_CPU_CC_DEFAULT, is_cc ? KEEL_CPU_CFLAGS_DEFAULT : value,
                                      name);
    free(b);
    return st;
}

/* Reads KEEL_CPU_CC and KEEL_CPU_CFLAGS and finds the compiler. */
static keel_status_t find_compiler(cpu_build_t *b)
{
    const char *cc = getenv("KEEL_CPU_CC"), *flags = getenv("KEEL_CPU_CFLAGS");
    int from_env = cc && cc[0];
    if (!from_env)
        cc = KEEL_CPU_CC_DEFAULT;
    if (!flags || !flags[0])
        flags = KEEL_CPU_CFLAGS_DEFAULT;
    keel_status_t st = split_compiler(b, cc, flags, fn_name);
    if (st != KEEL_OK)
        return st;
    if (!keel__find_program(b->cc[0], b->compiler, sizeof b->compiler, &b->compiler_st))
        return CPU_ERR(KEEL_ERROR_COMPILE_FAILED,
                       "%s: no C compiler: '%s' (%s) is not an executable %s; the CPU backend compiles kernels with "
                       "the system C compiler: install one, or set KEEL_CPU_CC to its name or path",
                       fn_name, b->cc[0], from_env ? "KEEL_CPU_CC" : "the compiler configure found",
                       strchr(b->cc[0], '/') ? "file" : "on PATH");
    b->cc[0] = b->compiler;
    return KEEL_OK;
}

static void build_key(const cpu_build_t *b, const char *source, const char *name, const char *const *options,
                      int num_options, uint64_t key[2])
{
    pthread_once(&cpu_id_once, read_cpu_id);
    keel__hash_init(key);
    keel__hash_str(key, "keel-cpu-compile 1");
    keel__hash_str(key, b->compiler);
    keel__hash_field(key, &b->compiler_st.st_size, sizeof b->compiler_st.st_size);
    keel__hash_field(key, &b->compiler_st.st_mtim, sizeof b->compiler_st.st_mtim);
    for (int i = 1; i < b->ncc; i++)
        keel__hash_str(key, b->cc[i]);
    keel__hash_str(key, "--flags");
    for (int i = 0; i < b->nflags; i++)
        keel__hash_str(key, b->flags[i]);
    pthread_once(&libmvec_once, find_libmvec);
    keel__hash_str(key, use_libmvec ? "--libmvec" : "--no-libmvec");
    keel__hash_str(key, "--options");
    for (int i = 0; i < num_options; i++)
        keel__hash_str(key, options[i]);
    keel__hash_str(key, cpu_id);
    keel__hash_str(key, name);
    keel__hash_str(key, source);
}

/* dlopen of a file that is loaded already gives back the same handle, and
 * with it the same globals: two modules of one file (on two CPU devices,
 * or two builds of one source that the cache answers with one shared
 * object) would share their keel_global variables, where two GPU modules
 * each have their own. Such a second module maps a copy of the file. The
 * lock makes the check and the open one step for concurrent loads. */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;

static void *open_copy(const char *path, char *why, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(why, cap, "reading it for a copy of its own: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    if (st.st_size <= 0) { /* keel__elf_check saw its headers: it changed meanwhile */
        snprintf(why, cap, "reading it for a copy of its own: it is empty now");
        close(fd);
        return NULL;
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        snprintf(why, cap, "reading it for a copy of its own: %s", strerror(errno));
        return NULL;
    }
    keel__image_file_t f;
    void *dl = NULL;
    if (keel__image_file_open(&f, map, (size_t)st.st_size, why, cap) == 0) {
        if (!(dl = dlopen(f.path, RTLD_NOW | RTLD_LOCAL))) {
            const char *e = dlerror();
            snprintf(why, cap, "%s", e ? e : "dlopen failed");
        }
        keel__image_file_close(&f);
    }
    munmap(map, (size_t)st.st_size);
    return dl;
}

/* Opens the shared object at @p path as a CPU module. */
keel_status_t keel__cpu_module_open(cpu_device_t *d, const char *path, const char *fn, void **module_ctx)
{
    if (strlen(path) >= sizeof(((cpu_module_t *)0)->path))
        return CPU_ERR(KEEL_ERROR_INVALID_ARGUMENT, "%s: the path is too long", fn);
    /* A file cut short (a module copied in part, a cache entry of a full
     * disk) would be mapped past its end, and dlopen's first touch of those
     * pages is a SIGBUS: check it as the plugin loader does. */
    char bad[512];
    if (keel__elf_check(path, bad, sizeof bad) != 0)
        return CPU_ERR(KEEL_ERROR_COMPILE_FAILED, "%s: %s is not a loadable CPU module (a shared object of C kernels): %s",
                       fn, path, bad);
    cpu_module_t *m = keel__calloc(1, sizeof *m);
    if (!m)
        return CPU_ERR(KEEL_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
    if (KEEL__FAULT(KEEL_FAULT_PLUGIN_LOAD)) {
        free(m);
        return keel__fault_fail(KEEL_ERROR_COMPILE_FAILED, "%s: %s is not a loadable CPU module: dlopen failed", fn,
                                path);
    }
    char why[1024] = "";
    pthread_mutex_lock(&open_lock);
    void *loaded = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (loaded) {
        dlclose(loaded);
        m->dl = open_copy(path, why, sizeof why);
    } else if (!(m->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
        const char *e = dlerror();
        snprintf(why, sizeof why, "%s", e ? e : "dlopen failed");
    }
    pthread_mutex_unlock(&open_lock);
    if (!m->dl) {
        free(m);
        return CPU_ERR(KEEL_ERROR_COMPILE_FAILED,
                       "%s: %s is not a loadable CPU module (a shared object of C kernels): %s", fn, path, why);
    }
    m->dev = d;
    snprintf(m->path, sizeof m->path, "%s", path);
    *module_ctx = m;
    return KEEL_OK;
}

static keel_status_t compile_into(cpu_build_t *b, const char *source, const char *name, const char *const *options,
                                  int num_options)
{
    if (!write_file(b->src, source))
        return CPU_ERR(KEEL_ERROR_COMPILE_FAILED, "%s: %s: cannot write %s: %s", fn_name, name, b->src,
                       strerror(errno));
    int n = 0;
    for (int i = 0; i < b->ncc; i++)
        b->argv[n++] = b->cc[i];
    b->argv[n++] = "-std=gnu11";
    b->argv[n++] = "-fPIC";
    b->argv[n++] = "-shared";
    for (int i = 0; i < b->nflags; i++)
        b->argv[n++] = b->flags[i];
    if (use_libmvec)
        b->argv[n++] = "-DKEEL_CPU_LIBMVEC=1";
    for (int i = 0; i < num_options && n < (int)(sizeof b->argv / sizeof b->argv[0]) - 8; i++)
        b->argv[n++] = (char *)options[i];
    b->argv[n++] = "-o";
    b->argv[n++] = b->out;
    b->argv[n++] = b->src;
    if (use_libmvec)
        b->argv[n++] = "-lmvec";
    b->argv[n++] = "-lm";
    b->argv[n] = NULL;
    keel__join_words(b->argv, n, b->cmd, sizeof b->cmd);
    keel__log(KEEL_LOG_DEBUG, "%s: cpu: compiling %s: %s", fn_name, name, b->cmd);
    if (KEEL__FAULT(KEEL_FAULT_COMPILE))
        return keel__fault_fail(KEEL_ERROR_COMPILE_FAILED, "%s: %s: cannot run %s", fn_name, name, b->argv[0]);
    int rc = keel__run_capture(b->argv, b->log, sizeof b->log);
    if (rc < 0)
        return CPU_ERR(KEEL_ERROR_COMPILE_FAILED, "%s: %s: %s (set KEEL_CPU_CC to a working C compiler)", fn_name,
                       name, b->log);
    if (rc != 0)
        return CPU_ERR(KEEL_ERROR_COMPILE_FAILED, "%s: %s: the C compiler failed (exit status %d):\n%s", fn_name,
                       name, rc, b->log);
    if (b->log[0])
        keel__log(KEEL_LOG_DEBUG, "%s: cpu: %s: the compiler said:\n%s", fn_name, name, b->log);
    return KEEL_OK;
}

keel_status_t keel__cpu_module_compile(void *device_ctx, const char *source, const char *name,
                                       const char *const *options, int num_options, void **module_ctx)
{
    cpu_device_t *d = device_ctx;
    cpu_build_t *b = keel__calloc(1, sizeof *b);
    if (!b)
        return CPU_ERR(KEEL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn_name);
    keel_status_t st = find_compiler(b);
    if (st != KEEL_OK)
        goto out;
    uint64_t key[2];
    build_key(b, source, name, options, num_options, key);
    int cached = keel__cache_path("cpu", key, ".so", b->cached, sizeof b->cached) &&
                 keel__cache_path("cpu", key, ".c", b->kept_src, sizeof b->kept_src);
    if (cached && access(b->cached, R_OK) == 0) {
        st = keel__cpu_module_open(d, b->cached, fn_name, module_ctx);
        if (st == KEEL_OK) {
            keel__log(KEEL_LOG_DEBUG, "%s: cpu: %s from the cache %s (source %s)", fn_name, name, b->cached,
                      b->kept_src);
            goto out;
        }
        keel__log(KEEL_LOG_DEBUG, "%s: cpu: ignoring the cache entry %s: %s", fn_name, b->cached, keel_last_error());
    }
    /* Build in a fresh directory beside the cache (or in TMPDIR without one),
     * so concurrent builds never share a file. */
    char base[4096];
    if (!keel__cache_dir(base, sizeof base) || access(base, W_OK) != 0) {
        const char *t = getenv("TMPDIR");
        snprintf(base, sizeof base, "%s", t && t[0] ? t : "/tmp");
        cached = 0;
    }
    snprintf(b->dir, sizeof b->dir, "%s/keel-build-XXXXXX", base);
    if (!mkdtemp(b->dir)) {
        st = CPU_ERR(KEEL_ERROR_COMPILE_FAILED, "%s: %s: cannot make a build directory in %s: %s", fn_name, name,
                     base, strerror(errno));
        goto out;
    }
    snprintf(b->src, sizeof b->src, "%s/kernel.c", b->dir);
    snprintf(b->out, sizeof b->out, "%s/kernel.so", b->dir);
    st = compile_into(b, source, name, options, num_options);
    if (st == KEEL_OK && cached && keel__cache_install(b->out, b->cached)) {
        if (rename(b->src, b->kept_src) == 0)
            keel__log(KEEL_LOG_DEBUG, "%s: cpu: %s: generated source %s, module %s", fn_name, name, b->kept_src,
                      b->cached);
        st = keel__cpu_module_open(d, b->cached, fn_name, module_ctx);
    } else if (st == KEEL_OK) {
        /* No cache: open it where it is; the mapping outlives the file. */
        st = keel__cpu_module_open(d, b->out, fn_name, module_ctx);
    }
    if (!cached && keel__log_enabled(KEEL_LOG_DEBUG))
        keel__log(KEEL_LOG_DEBUG, "%s: cpu: %s: no cache; the generated source stays in %s", fn_name, name, b->src);
    else
        remove_dir(b->dir);
out:
    free(b);
    return st;
}
