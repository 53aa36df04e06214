/* SPDX-License-Identifier: MIT */
/* keel-hip.so: the probe (the entry point is backends/gpu/gpu_entry.c).
 *
 * Link policy: the plugin links libamdhip64 (runtime, module API and hiprtc
 * in one library). Where ROCm is not installed, dlopen of the plugin fails
 * and the core records "cannot load keel-hip.so: libamdhip64.so.5: cannot
 * open shared object file"; where it is installed but there is no AMD GPU or
 * no amdgpu kernel driver, probe says "no HIP device".
 *
 * On HIP's NVIDIA platform the plugin links the CUDA runtime statically
 * (hip_nv_driver.c reaches the driver API through it): it loads without an
 * NVIDIA driver, and probe says "no HIP device: no NVIDIA driver". The
 * version numbers there are CUDA's (1000 major + 10 minor), not HIP's
 * (10000000 major + 100000 minor + patch). */
#include <stdio.h>
#include <unistd.h>
#include "hip_internal.h"


#ifdef __HIP_PLATFORM_NVIDIA__
#define VERSION_MAJOR(v) ((v) / 1000)
#define VERSION_MINOR(v) ((v) % 1000 / 10)
#else
#define VERSION_MAJOR(v) ((v) / 10000000)
#define VERSION_MINOR(v) ((v) / 100000 % 100)
#endif

static char description[128];

#ifdef __HIP_PLATFORM_NVIDIA__
/* Why there is no usable device, after hipGetDeviceCount answered @p err
 * (or 0 devices). Without a driver, the runtime reports driver version 0. */
static keel_status_t no_device(gpuError_t err, int runtime, int driver)
{
    if (driver == 0)
        return keel__gpu_host->set_error(KEEL_ERROR_BACKEND_UNAVAILABLE,
                                          "no HIP device: no NVIDIA driver (HIP's NVIDIA platform, CUDA runtime "
                                          "%d.%d: %s)",
                                          VERSION_MAJOR(runtime), VERSION_MINOR(runtime),
                                          err == gpuSuccess ? "0 devices" : gpuGetErrorName(err));
    if (err == gpuErrorInsufficientDriver)
        return keel__gpu_host->set_error(KEEL_ERROR_BACKEND_UNAVAILABLE,
                                          "no HIP device: the NVIDIA driver supports CUDA %d.%d, older than the "
                                          "CUDA %d.%d runtime keel-hip was built with: update the driver",
                                          VERSION_MAJOR(driver), VERSION_MINOR(driver), VERSION_MAJOR(runtime),
                                          VERSION_MINOR(runtime));
    return keel__gpu_host->set_error(KEEL_ERROR_NO_DEVICE,
                                      "no HIP device: no NVIDIA GPU (HIP's NVIDIA platform, CUDA runtime %d.%d, "
                                      "driver %d.%d: %s)",
                                      VERSION_MAJOR(runtime), VERSION_MINOR(runtime), VERSION_MAJOR(driver),
                                      VERSION_MINOR(driver), err == gpuSuccess ? "0 devices" : gpuGetErrorName(err));
}
#endif

keel_status_t keel__gpu_probe(const keel_host_api_t *host, void **backend_ctx, int *device_count,
                               const char **desc)
{
    (void)host;
    keel_status_t env = keel__gpu_check_env();
    if (env != KEEL_OK)
        return env;
#ifndef __HIP_PLATFORM_NVIDIA__
    /* The amdgpu driver's compute interface: without it the runtime finds no
     * device either, but only after starting up; say it plainly instead. */
    if (access("/dev/kfd", R_OK | W_OK) != 0)
        return keel__gpu_host->set_error(KEEL_ERROR_NO_DEVICE,
                                          "no HIP device: /dev/kfd is missing or not accessible (no amdgpu kernel "
                                          "driver, or not visible in this container)");
#endif
    int runtime = 0, driver = 0, count = 0;
    (void)gpuRuntimeGetVersion(&runtime);
    (void)gpuDriverGetVersion(&driver);
    gpuError_t err = gpuGetDeviceCount(&count);
    if (err == gpuErrorNoDevice || err == hipErrorNotInitialized || err == gpuErrorInsufficientDriver ||
        (err == gpuSuccess && count == 0)) {
        (void)gpuGetLastError();
#ifdef __HIP_PLATFORM_NVIDIA__
        return no_device(err, runtime, driver);
#else
        /* Without /dev/kfd (no amdgpu driver, or not visible in a container)
         * the runtime sees no device at all. */
        return keel__gpu_host->set_error(KEEL_ERROR_NO_DEVICE,
                                          "no HIP device (HIP runtime %d.%d: %s; an AMD GPU needs the amdgpu "
                                          "driver and access to /dev/kfd)",
                                          VERSION_MAJOR(runtime), VERSION_MINOR(runtime),
                                          err == gpuSuccess ? "0 devices" : gpuGetErrorName(err));
#endif
    }
    if (err != gpuSuccess)
        return keel__gpu_error(err, NULL, "hipGetDeviceCount");
#ifdef __HIP_PLATFORM_NVIDIA__
    keel_status_t st = keel__hip_nv_driver_load();
    if (st != KEEL_OK)
        return st;
    snprintf(description, sizeof description, "HIP on NVIDIA (CUDA runtime %d.%d, driver %d.%d)",
             VERSION_MAJOR(runtime), VERSION_MINOR(runtime), VERSION_MAJOR(driver), VERSION_MINOR(driver));
#else
    snprintf(description, sizeof description, "AMD HIP %d.%d, driver %d", VERSION_MAJOR(runtime),
             VERSION_MINOR(runtime), driver);
#endif
    *backend_ctx = NULL;
    *device_count = count;
    *desc = description;
    return KEEL_OK;
}

void keel__gpu_shutdown(void *backend_ctx)
{
    (void)backend_ctx;
}
