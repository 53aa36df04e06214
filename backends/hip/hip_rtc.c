/* SPDX-License-Identifier: MIT */
/* Run-time compilation for keel-hip.so through hiprtc (part of libamdhip64
 * in ROCm 5.2): the source is compiled for the device's full target name
 * ("gfx90a:sramecc+:xnack-"), so the code object matches the GPU's mode.
 * On HIP's NVIDIA platform hiprtc is NVRTC, and hiprtcGetCode gives PTX: the
 * target is the virtual architecture compute_XY of the device's compute
 * capability (the newest NVRTC knows at or below it), which the driver
 * compiles for the GPU when the module is loaded.
 * Code objects go into the core's compilation cache, keyed by the source,
 * its name, the options, the target name and the HIP runtime version. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hip_internal.h"


#ifndef KEEL_HAVE_HIPRTC
/* configure found no hiprtc to link (config/keel_hip.m4). */
keel_status_t keel__hip_rtc_compile(const keel__gpu_device_t *dev, const char *source, const char *name,
                                    const char *const *options, int num_options, void **image, size_t *size)
{
    (void)dev, (void)source, (void)name, (void)options, (void)num_options, (void)image, (void)size;
    return keel__gpu_host->set_error(KEEL_ERROR_NOT_SUPPORTED,
                                      "keel_module_compile: this keel-hip was built without hiprtc (ROCm's run-time "
                                      "compiler); load a code object built with hipcc --genco instead");
}
#else
#include <hip/hiprtc.h>

enum { MAX_OPTIONS = 64 };

static keel_status_t rtc_fail(hiprtcProgram prog, hiprtcResult res, const char *name)
{
    size_t n = 0;
    char *log = NULL;
    if (prog != NULL && hiprtcGetProgramLogSize(prog, &n) == HIPRTC_SUCCESS && n > 1 && (log = malloc(n)) != NULL &&
        hiprtcGetProgramLog(prog, log) != HIPRTC_SUCCESS)
        log[0] = '\0';
    keel_status_t st = res == HIPRTC_ERROR_OUT_OF_MEMORY ? KEEL_ERROR_OUT_OF_MEMORY
                       : res == HIPRTC_ERROR_INVALID_OPTION || res == HIPRTC_ERROR_INVALID_INPUT
                           ? KEEL_ERROR_INVALID_ARGUMENT
                           : KEEL_ERROR_COMPILE_FAILED;
    st = keel__gpu_host->set_error(st, "keel_module_compile: hiprtc: %s compiling '%s'%s%s", hiprtcGetErrorString(res),
                                    name, log != NULL && log[0] ? "; log: " : "", log != NULL ? log : "");
    free(log);
    return st;
}

#ifdef __HIP_PLATFORM_NVIDIA__
/* --gpu-architecture=compute_XY for @p dev: its own compute capability, or
 * where NVRTC does not know it, the newest architecture below it NVRTC knows. */
static void nv_arch(const keel__gpu_device_t *dev, char *opt, size_t size)
{
    int cc = dev->cc_major * 10 + dev->cc_minor, best = cc, n = 0;
    int archs[256];
    if (nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0 && n <= (int)(sizeof archs / sizeof archs[0]) &&
        nvrtcGetSupportedArchs(archs) == NVRTC_SUCCESS) {
        best = 0;
        for (int i = 0; i < n; i++)
            if (archs[i] <= cc && archs[i] > best)
                best = archs[i];
        if (best == 0)
            best = cc;   /* older than every target: NVRTC says so */
    }
    snprintf(opt, size, "--gpu-architecture=compute_%d", best);
}
#endif

keel_status_t keel__hip_rtc_compile(const keel__gpu_device_t *dev, const char *source, const char *name,
                                    const char *const *options, int num_options, void **image, size_t *size)
{
    if (num_options < 0 || num_options > MAX_OPTIONS - 1)
        return keel__gpu_host->set_error(KEEL_ERROR_INVALID_ARGUMENT,
                                          "keel_module_compile: %d options (at most %d)", num_options,
                                          MAX_OPTIONS - 1);
    char arch[300];
#ifdef __HIP_PLATFORM_NVIDIA__
    nv_arch(dev, arch, sizeof arch);
#else
    hipDeviceProp_t prop;
    memset(&prop, 0, sizeof prop);
    gpuError_t err = hipGetDeviceProperties(&prop, dev->ordinal);
    if (err != gpuSuccess)
        return keel__gpu_error(err, "keel_module_compile", "hipGetDeviceProperties");
    prop.gcnArchName[sizeof prop.gcnArchName - 1] = '\0';
    snprintf(arch, sizeof arch, "--gpu-architecture=%s", prop.gcnArchName);
#endif
    const char *opts[MAX_OPTIONS];
    opts[0] = arch;
    for (int i = 0; i < num_options; i++)
        opts[i + 1] = options[i];
    if (name == NULL || name[0] == '\0')
        name = "keel_module.hip";
    const keel_host_api_t *host = keel__gpu_host;
    int cached = host->struct_size >= offsetof(keel_host_api_t, cache_store) + sizeof host->cache_store &&
                 host->cache_load && host->cache_store && host->hash_init && host->hash_field;
    uint64_t key[2] = {0, 0};
    if (cached) {
        int runtime = 0;
        (void)hipRuntimeGetVersion(&runtime);
        host->hash_init(key);
        host->hash_field(key, &runtime, sizeof runtime);
        for (int i = 0; i < num_options + 1; i++)
            host->hash_field(key, opts[i], strlen(opts[i]));
        host->hash_field(key, name, strlen(name));
        host->hash_field(key, source, strlen(source));
        if (host->cache_load("hiprtc", key, image, size))
            return KEEL_OK;
    }
    hiprtcProgram prog = NULL;
    hiprtcResult res = hiprtcCreateProgram(&prog, source, name, 0, NULL, NULL);
    if (res != HIPRTC_SUCCESS)
        return rtc_fail(NULL, res, name);
    res = hiprtcCompileProgram(prog, num_options + 1, opts);
    size_t n = 0;
    char *code = NULL;
    if (res == HIPRTC_SUCCESS)
        res = hiprtcGetCodeSize(prog, &n);
    if (res == HIPRTC_SUCCESS && (code = malloc(n ? n : 1)) == NULL)
        res = HIPRTC_ERROR_OUT_OF_MEMORY;
    if (res == HIPRTC_SUCCESS)
        res = hiprtcGetCode(prog, code);
    if (res != HIPRTC_SUCCESS) {
        keel_status_t st = rtc_fail(prog, res, name);
        free(code);
        (void)hiprtcDestroyProgram(&prog);
        return st;
    }
    (void)hiprtcDestroyProgram(&prog);
    if (cached)
        host->cache_store("hiprtc", key, code, n);
    *image = code;
    *size = n;
    return KEEL_OK;
}
#endif /* KEEL_HAVE_HIPRTC */
