/* SPDX-License-Identifier: MIT */
/* Run-time compilation of CUDA C++ with NVRTC, cached on disk.
 *
 * NVRTC is opened with dlopen on first use, so the plugin loads (and
 * everything but keel_module_compile works) where it is not installed. The
 * cache is the core's (every backend shares it), keyed by a hash of
 * everything that decides the output: source, program name, options, target
 * architecture and NVRTC version. A missing, unreadable or corrupt cache
 * entry is a miss, never an error. */
#include <dlfcn.h>
#include <nvrtc.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_internal.h"


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

/* ---- the cache (the core's, shared by every backend) ---- */

static int have_cache(void)
{
    const keel_host_api_t *h = keel__gpu_host;
    return h->struct_size >= offsetof(keel_host_api_t, cache_store) + sizeof h->cache_store && h->cache_load &&
           h->cache_store && h->hash_init && h->hash_field;
}

static void key_str(uint64_t key[2], const char *s)
{
    keel__gpu_host->hash_field(key, s != NULL ? s : "", s != NULL ? strlen(s) : 0);
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
static void pick_arch(const keel__gpu_device_t *dev, char *opt, size_t size, int *virtual_arch)
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

keel_status_t keel__cuda_nvrtc_compile(const keel__gpu_device_t *dev, const char *source, const char *name,
                                       const char *const *options, int num_options, void **image, size_t *size)
{
    const char *fn = "keel_module_compile";
    pthread_once(&rtc.once, rtc_open);
    if (rtc.dl == NULL)
        return keel__gpu_host->set_error(KEEL_ERROR_NOT_SUPPORTED, "%s: %s: run-time compilation needs NVRTC", fn,
                                         rtc.why);
    if (name == NULL || name[0] == '\0')
        name = "keel_program.cu";

    int virtual_arch = 0;
    char arch_opt[64] = "";
    if (!has_arch_option(options, num_options, &virtual_arch))
        pick_arch(dev, arch_opt, sizeof arch_opt, &virtual_arch);

    /* The key: everything that decides the output. */
    uint64_t key[2] = {0, 0};
    int cached = have_cache();
    if (cached) {
        char ver[64];
        snprintf(ver, sizeof ver, "keel-nvrtc-1 %d.%d %s", rtc.major, rtc.minor, dev->arch);
        keel__gpu_host->hash_init(key);
        key_str(key, ver);
        key_str(key, arch_opt);
        key_str(key, name);
        for (int i = 0; i < num_options; i++)
            key_str(key, options[i]);
        key_str(key, source);
        if (keel__gpu_host->cache_load("nvrtc", key, image, size)) {
            if (keel__gpu_host->log_enabled(KEEL_LOG_DEBUG))
                keel__gpu_host->log(KEEL_LOG_DEBUG, "keel_module_compile: %s from the cache", name);
            return KEEL_OK;
        }
    }

    const char **opts = malloc(sizeof(char *) * (size_t)(num_options + 1));
    if (opts == NULL)
        return keel__gpu_host->set_error(KEEL_ERROR_OUT_OF_MEMORY, "%s: no host memory", fn);
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
        return keel__gpu_host->set_error(r == NVRTC_ERROR_OUT_OF_MEMORY ? KEEL_ERROR_OUT_OF_MEMORY
                                                                         : KEEL_ERROR_COMPILE_FAILED,
                                         "%s: nvrtcCreateProgram: %s", fn, rtc.GetErrorString(r));
    }
    if (keel__gpu_host->log_enabled(KEEL_LOG_DEBUG)) {
        char line[2048];
        size_t w = (size_t)snprintf(line, sizeof line, "keel_module_compile: NVRTC %d.%d compiling %s:", rtc.major,
                                    rtc.minor, name);
        for (int i = 0; i < nopts && w < sizeof line; i++)
            w += (size_t)snprintf(line + w, sizeof line - w, " %s", opts[i]);
        keel__gpu_host->log(KEEL_LOG_DEBUG, "%s", line);
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
        keel_status_t st = keel__gpu_host->set_error(KEEL_ERROR_COMPILE_FAILED, "%s: %s: %s: %s", fn, name,
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
        return keel__gpu_host->set_error(out == NULL && r == NVRTC_SUCCESS ? KEEL_ERROR_OUT_OF_MEMORY
                                                                            : KEEL_ERROR_COMPILE_FAILED,
                                         "%s: %s: reading the compiled code: %s", fn, name, rtc.GetErrorString(r));
    }
    out[n] = '\0';
    if (cached)
        keel__gpu_host->cache_store("nvrtc", key, out, n);
    *image = out;
    *size = n;
    return KEEL_OK;
}
