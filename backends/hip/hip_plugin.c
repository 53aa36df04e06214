/* SPDX-License-Identifier: MIT */
/* keel-hip.so: the probe (the entry point is backends/gpu/gpu_entry.c).
 *
 * Link policy: the plugin links libamdhip64 (runtime, module API and hiprtc
 * in one library). Where ROCm is not installed, dlopen of the plugin fails
 * and the core records "cannot load keel-hip.so: libamdhip64.so.5: cannot
 * open shared object file"; where it is installed but there is no AMD GPU or
 * no amdgpu kernel driver, probe says "no HIP device". */
#include <stdio.h>
#include <unistd.h>
#include "backends/gpu/gpu_internal.h"

static char description[96];

keel_status_t keel__gpu_probe(const keel_host_api_t *host, void **backend_ctx, int *device_count,
                               const char **desc)
{
    (void)host;
    keel_status_t env = keel__gpu_check_env();
    if (env != KEEL_OK)
        return env;
    /* The amdgpu driver's compute interface: without it the runtime finds no
     * device either, but only after starting up; say it plainly instead. */
    if (access("/dev/kfd", R_OK | W_OK) != 0)
        return keel__gpu_host->set_error(KEEL_ERROR_NO_DEVICE,
                                         "no HIP device: /dev/kfd is missing or not accessible (no amdgpu kernel "
                                         "driver, or not visible in this container)");
    int runtime = 0, driver = 0, count = 0;
    (void)gpuRuntimeGetVersion(&runtime);
    (void)gpuDriverGetVersion(&driver);
    gpuError_t err = gpuGetDeviceCount(&count);
    if (err == gpuErrorNoDevice || err == hipErrorNotInitialized || err == gpuErrorInsufficientDriver ||
        (err == gpuSuccess && count == 0)) {
        (void)gpuGetLastError();
        /* Without /dev/kfd (no amdgpu driver, or not visible in a container)
         * the runtime sees no device at all. */
        return keel__gpu_host->set_error(KEEL_ERROR_NO_DEVICE,
                                         "no HIP device (HIP runtime %d.%d: %s; an AMD GPU needs the amdgpu "
                                         "driver and access to /dev/kfd)",
                                         runtime / 10000000, runtime / 100000 % 100,
                                         err == gpuSuccess ? "0 devices" : gpuGetErrorName(err));
    }
    if (err != gpuSuccess)
        return keel__gpu_error(err, NULL, "hipGetDeviceCount");
    snprintf(description, sizeof description, "AMD HIP %d.%d, driver %d", runtime / 10000000,
             runtime / 100000 % 100, driver);
    *backend_ctx = NULL;
    *device_count = count;
    *desc = description;
    return KEEL_OK;
}

void keel__gpu_shutdown(void *backend_ctx)
{
    (void)backend_ctx;
}
