/* Run-time compilation of CUDA C++ with NVRTC, and its on-disk cache.
 *
 * NVRTC is opened with dlopen on first use, so the plugin loads (and
 * everything but keel_module_compile works) where it is not installed. The
 * cache is keyed by a hash of everything that decides the output: source,
 * program name, options, target architecture and NVRTC version. A missing,
 * unreadable or corrupt cache entry is a miss, never an error. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cuda_internal.h"
#include "cuda_shared.h"


static struct {
    pthread_once_t once;
    void *dl;
    char why[512];
    int major, minor;
    nvrtcResult (*Version)(int *, int *);
    nvrtcResult (*CreateProgram)(nvrtcProgram *, const char *, const char *, int, const char *const *,
                                 const char *const *);
    nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetProgramLog)(nvrtcProgram, char *);
    nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetCUBIN)(nvrtcProgram, char *);
    nvrtcResult (*GetPTXSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetPTX)(nvrtcProgram, char *);
    nvrtcResult (*DestroyProgram)(nvrtcProgram *);
    const char *(*GetErrorString)(nvrtcResult);
    nvrtcResult (*GetNumSupportedArchs)(int *);
    nvrtcResult (*GetSupportedArchs)(int *);
} rtc = {.once = PTHREAD_ONCE_INIT};

static void rtc_open(void)
{
    const char *names[2] = {NULL, "libnvrtc.so"};
    char first[32];
    snprintf(first, sizeof first, "libnvrtc.so.%d", CUDART_VERSION / 1000);
    names[0] = first;
    for (size_t i = 0; i < 2 && rtc.dl == NULL; i++) {
        rtc.dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (rtc.dl == NULL && i == 0) {
            const char *e = dlerror();
            snprintf(rtc.why, sizeof rtc.why, "%s not found (%s)", first, e ? e : "dlopen failed");
        }
    }
    if (rtc.dl == NULL)
        return;
    struct {
        const char *name;
        void **slot;
        int optional;
    } syms[] = {
        {"nvrtcVersion", (void **)&rtc.Version, 0},
        {"nvrtcCreateProgram", (void **)&rtc.CreateProgram, 0},
        {"nvrtcCompileProgram", (void **)&rtc.CompileProgram, 0},
        {"nvrtcGetProgramLogSize", (void **)&rtc.GetProgramLogSize, 0},
        {"nvrtcGetProgramLog", (void **)&rtc.GetProgramLog, 0},
        {"nvrtcGetCUBINSize", (void **)&rtc.GetCUBINSize, 0},
        {"nvrtcGetCUBIN", (void **)&rtc.GetCUBIN, 0},
        {"nvrtcGetPTXSize", (void **)&rtc.GetPTXSize, 0},
        {"nvrtcGetPTX", (void **)&rtc.GetPTX, 0},
        {"nvrtcDestroyProgram", (void **)&rtc.DestroyProgram, 0},
        {"nvrtcGetErrorString", (void **)&rtc.GetErrorString, 0},
        {"nvrtcGetNumSupportedArchs", (void **)&rtc.GetNumSupportedArchs, 1},
        {"nvrtcGetSupportedArchs", (void **)&rtc.GetSupportedArchs, 1},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].slot = dlsym(rtc.dl, syms[i].name);
        if (*syms[i].slot == NULL && !syms[i].optional) {
            snprintf(rtc.why, sizeof rtc.why, "the NVRTC library has no %s", syms[i].name);
            dlclose(rtc.dl);
            rtc.dl = NULL;
            return;
        }
    }
    if (rtc.Version(&rtc.major, &rtc.minor) != NVRTC_SUCCESS)
        rtc.major = rtc.minor = 0;
}

/* ---- hashing: two independent 64-bit hashes over length-prefixed fields ---- */

typedef struct {
    uint64_t a, b;
} hash128_t;

static void hash_bytes(hash128_t *h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h->a = (h->a ^ p[i]) * 0x100000001b3ull;                       /* FNV-1a */
        h->b = (h->b + p[i] + 1) * 0x9e3779b97f4a7c15ull;               /* multiplicative, */
        h->b ^= h->b >> 29;                                            /* with a shift mix */
    }
}

static void hash_field(hash128_t *h, const void *data, size_t n)
{
    uint64_t len = n;
    hash_bytes(h, &len, sizeof len);
    hash_bytes(h, data, n);
}

static void hash_str(hash128_t *h, const char *s)
{
    hash_field(h, s != NULL ? s : "", s != NULL ? strlen(s) : 0);
}

/* ---- cache files ---- */

enum { CACHE_FORMAT = 1, KIND_CUBIN = 0, KIND_PTX = 1 };

struct cache_header {
    char magic[8];        /* "KEELRTC\0" */
    uint32_t format;
    uint32_t kind;
    uint64_t size;
    uint64_t key_a, key_b;
    uint64_t sum_a, sum_b; /* hash of the payload */
};

/* The cache directory, or 0 when caching is off (KEEL_CACHE_DIR set empty). */
static int cache_dir(char *buf, size_t size)
{
    const char *d = getenv("KEEL_CACHE_DIR");
    if (d != NULL)
        return d[0] != '\0' && (size_t)snprintf(buf, size, "%s", d) < size;
    const char *x = getenv("XDG_CACHE_HOME");
    if (x != NULL && x[0] == '/')
        return (size_t)snprintf(buf, size, "%s/keel", x) < size;
    const char *home = getenv("HOME");
    if (home != NULL && home[0] != '\0')
        return (size_t)snprintf(buf, size, "%s/.cache/keel", home) < size;
    return 0;
}

static void mkdir_p(const char *path)
{
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s", path) >= sizeof tmp)
        return;
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            (void)mkdir(tmp, 0700);
            *p = '/';
        }
    }
    (void)mkdir(tmp, 0700);
}

static void debug(const char *fmt, const char *a, const char *b)
{
    if (keel__cuda_host->log != NULL && keel__cuda_host->log_enabled != NULL &&
        keel__cuda_host->log_enabled(KEEL_LOG_DEBUG))
        keel__cuda_host->log(KEEL_LOG_DEBUG, fmt, a, b);
}

static int cache_read(const char *path, hash128_t key, void **image, size_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct cache_header h;
    void *buf = NULL;
    int ok = read(fd, &h, sizeof h) == (ssize_t)sizeof h && memcmp(h.magic, "KEELRTC", 8) == 0 &&
             h.format == CACHE_FORMAT && h.key_a == key.a && h.key_b == key.b && h.size > 0 &&
             h.size < ((uint64_t)1 << 31) && (buf = malloc(h.size + 1)) != NULL;
    if (ok) {
        size_t got = 0;
        while (got < h.size) {
            ssize_t r = read(fd, (char *)buf + got, h.size - got);
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        hash128_t sum = {0xcbf29ce484222325ull, 0x243f6a8885a308d3ull};
        hash_bytes(&sum, buf, got);
        ok = got == h.size && sum.a == h.sum_a && sum.b == h.sum_b;
    }
    close(fd);
    if (!ok) {
        free(buf);
        debug("keel_module_compile: ignoring cache entry %s%s", path, "");
        return 0;
    }
    ((char *)buf)[h.size] = '\0'; /* PTX must end in NUL; harmless for cubins */
    *image = buf;
    *size = h.size;
    return 1;
}

static void cache_write(const char *dir, const char *path, hash128_t key, int kind, const void *image, size_t size)
{
    mkdir_p(dir);
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%p", path, (long)getpid(), (void *)&tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        debug("keel_module_compile: cannot write the cache in %s: %s", dir, strerror(errno));
        return;
    }
    struct cache_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, "KEELRTC", 8);
    h.format = CACHE_FORMAT;
    h.kind = (uint32_t)kind;
    h.size = size;
    h.key_a = key.a;
    h.key_b = key.b;
    hash128_t sum = {0xcbf29ce484222325ull, 0x243f6a8885a308d3ull};
    hash_bytes(&sum, image, size);
    h.sum_a = sum.a;
    h.sum_b = sum.b;
    int ok = write(fd, &h, sizeof h) == (ssize_t)sizeof h && write(fd, image, size) == (ssize_t)size;
    ok = close(fd) == 0 && ok;
    /* rename is atomic: a concurrent reader sees the old entry or the new one. */
    if (!ok || rename(tmp, path) != 0)
        (void)unlink(tmp);
}

/* ---- compilation ---- */

static int has_arch_option(const char *const *options, int n, int *virtual_arch)
{
    for (int i = 0; i < n; i++) {
        const char *o = options[i];
        if (o == NULL)
            continue;
        const char *v = NULL;
        if (strncmp(o, "--gpu-architecture=", 19) == 0)
            v = o + 19;
        else if (strncmp(o, "-arch=", 6) == 0)
            v = o + 6;
        else if ((strcmp(o, "-arch") == 0 || strcmp(o, "--gpu-architecture") == 0) && i + 1 < n)
            v = options[i + 1];
        if (v != NULL) {
            *virtual_arch = strncmp(v, "compute_", 8) == 0;
            return 1;
        }
    }
    return 0;
}

/* The target for @p dev: its own sm_XY when NVRTC knows it, else PTX for the
 * newest architecture NVRTC knows (the driver compiles it for the device). */
static void pick_arch(const keel__cuda_device_t *dev, char *opt, size_t size, int *virtual_arch)
{
    int cc = dev->cc_major * 10 + dev->cc_minor, best = 0, exact = 0, n = 0;
    if (rtc.GetNumSupportedArchs != NULL && rtc.GetSupportedArchs != NULL &&
        rtc.GetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0 && n < 1024) {
        int archs[1024];
        if (rtc.GetSupportedArchs(archs) == NVRTC_SUCCESS) {
            for (int i = 0; i < n; i++) {
                if (archs[i] == cc)
                    exact = 1;
                if (archs[i] <= cc && archs[i] > best)
                    best = archs[i];
            }
        }
    } else {
        exact = 1;
    }
    if (exact || best == 0) {
        snprintf(opt, size, "--gpu-architecture=sm_%d", cc);
        *virtual_arch = 0;
    } else {
        snprintf(opt, size, "--gpu-architecture=compute_%d", best);
        *virtual_arch = 1;
    }
}

keel_status_t keel__cuda_nvrtc_compile(const keel__cuda_device_t *dev, const char *source, const char *name,
                                       const char *const *options, int num_options, void **image, size_t *size)
{
    const char *fn = "keel_module_compile";
    pthread_once(&rtc.once, rtc_open);
    if (rtc.dl == NULL)
        return keel__cuda_host->set_error(KEEL_ERROR_NOT_SUPPORTED, "%s: %s: run-time compilation needs NVRTC", fn,
                                          rtc.why);
    if (name == NULL || name[0] == '\0')
        name = "keel_program.cu";

    int virtual_arch = 0;
    char arch_opt[64] = "";
    if (!has_arch_option(options, num_options, &virtual_arch))
        pick_arch(dev, arch_opt, sizeof arch_opt, &virtual_arch);

    hash128_t key = {0xcbf29ce484222325ull, 0x243f6a8885a308d3ull};
    char ver[64];
    snprintf(ver, sizeof ver, "keel-nvrtc-%d %d.%d %s", CACHE_FORMAT, rtc.major, rtc.minor, dev->arch);
    hash_str(&key, ver);
    hash_str(&key, arch_opt);
    hash_str(&key, name);
    for (int i = 0; i < num_options; i++)
        hash_str(&key, options[i]);
    hash_str(&key, source);

    char dir[4096], path[4200];
    int cached = cache_dir(dir, sizeof dir);
    if (cached) {
        snprintf(path, sizeof path, "%s/nvrtc-%016" PRIx64 "%016" PRIx64 ".bin", dir, key.a, key.b);
        if (cache_read(path, key, image, size)) {
            debug("keel_module_compile: %s from the cache %s", name, path);
            return KEEL_OK;
        }
    }

    const char **opts = malloc(sizeof(char *) * (size_t)(num_options + 1));
    if (opts == NULL)
        return keel__cuda_host->set_error(KEEL_ERROR_OUT_OF_MEMORY, "%s: no host memory", fn);
    int nopts = 0;
    for (int i = 0; i < num_options; i++)
        if (options[i] != NULL)
            opts[nopts++] = options[i];
    if (arch_opt[0])
        opts[nopts++] = arch_opt;

    nvrtcProgram prog = NULL;
    nvrtcResult r = rtc.CreateProgram(&prog, source, name, 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) {
        free(opts);
        return keel__cuda_host->set_error(r == NVRTC_ERROR_OUT_OF_MEMORY ? KEEL_ERROR_OUT_OF_MEMORY
                                                                         : KEEL_ERROR_COMPILE_FAILED,
                                          "%s: nvrtcCreateProgram: %s", fn, rtc.GetErrorString(r));
    }
    r = rtc.CompileProgram(prog, nopts, opts);
    free(opts);
    if (r != NVRTC_SUCCESS) {
        size_t log_size = 0;
        char *log = NULL;
        if (rtc.GetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 0 &&
            (log = malloc(log_size + 1)) != NULL && rtc.GetProgramLog(prog, log) == NVRTC_SUCCESS)
            log[log_size] = '\0';
        else if (log != NULL)
            log[0] = '\0';
        keel_status_t st = keel__cuda_host->set_error(KEEL_ERROR_COMPILE_FAILED, "%s: %s: %s: %s", fn, name,
                                                      rtc.GetErrorString(r), log != NULL ? log : "");
        free(log);
        rtc.DestroyProgram(&prog);
        return st;
    }
    size_t n = 0;
    r = virtual_arch ? rtc.GetPTXSize(prog, &n) : rtc.GetCUBINSize(prog, &n);
    char *out = r == NVRTC_SUCCESS ? malloc(n + 1) : NULL;
    if (out != NULL)
        r = virtual_arch ? rtc.GetPTX(prog, out) : rtc.GetCUBIN(prog, out);
    rtc.DestroyProgram(&prog);
    if (r != NVRTC_SUCCESS || out == NULL) {
        free(out);
        return keel__cuda_host->set_error(out == NULL && r == NVRTC_SUCCESS ? KEEL_ERROR_OUT_OF_MEMORY
                                                                            : KEEL_ERROR_COMPILE_FAILED,
                                          "%s: %s: reading the compiled code: %s", fn, name, rtc.GetErrorString(r));
    }
    out[n] = '\0';
    if (cached)
        cache_write(dir, path, key, virtual_arch ? KIND_PTX : KIND_CUBIN, out, n);
    *image = out;
    *size = n;
    return KEEL_OK;
}
