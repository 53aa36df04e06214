/* SPDX-License-Identifier: MIT */
/* keel-cuda.so: the probe (the entry point is backends/gpu/gpu_entry.c).
 *
 * Link policy: the CUDA runtime is linked statically and the driver API is
 * reached through cudaGetDriverEntryPointByVersion, so nothing here needs
 * libcuda.so.1 at load time. Probe looks for the driver itself and says
 * plainly when it is missing, instead of the plugin failing to dlopen. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "cuda_internal.h"

static char description[160];
static void *driver_dl;

/* The kernel module's version ("580.159.03"), or "" where /proc does not say. */
static void read_kernel_driver_version(char *buf, size_t size)
{
    buf[0] = '\0';
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (f == NULL)
        return;
    char line[512];
    /* "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ..." */
    if (fgets(line, sizeof line, f) != NULL) {
        const char *p = strstr(line, "Kernel Module");
        for (; p != NULL && *p != '\0'; p++) {
            if (p[0] >= '0' && p[0] <= '9' && (p[-1] == ' ' || p[-1] == '\t')) {
                size_t n = strspn(p, "0123456789.");
                if (n > 2 && memchr(p, '.', n) != NULL) {
                    if (n >= size)
                        n = size - 1;
                    memcpy(buf, p, n);
                    buf[n] = '\0';
                    break;
                }
            }
        }
    }
    fclose(f);
}

keel_status_t keel__gpu_probe(const keel_host_api_t *host, void **backend_ctx, int *device_count,
                               const char **desc)
{
    (void)host;
    /* The runtime would find out too, but only as "insufficient driver";
     * looking first gives the user the actual reason. */
    if (driver_dl == NULL) {
        driver_dl = dlopen(KEEL_GPU_DRIVER_LIBRARY, RTLD_NOW | RTLD_LOCAL);
        if (driver_dl == NULL) {
            const char *why = dlerror();
            return keel__gpu_host->set_error(KEEL_ERROR_BACKEND_UNAVAILABLE,
                                             KEEL_GPU_DRIVER_LIBRARY " not found: no NVIDIA driver (%s)",
                                             why != NULL ? why : "dlopen failed");
        }
    }
    int runtime = 0, driver = 0;
    (void)gpuRuntimeGetVersion(&runtime);
    cudaError_t err = gpuDriverGetVersion(&driver);
    if (err != cudaSuccess)
        return keel__gpu_error(err, NULL, "cudaDriverGetVersion");
    int count = 0;
    err = gpuGetDeviceCount(&count);
    if (err == cudaErrorNoDevice || (err == cudaSuccess && count == 0)) {
        (void)cudaGetLastError();
        return keel__gpu_host->set_error(KEEL_ERROR_NO_DEVICE, "no CUDA device (driver %d.%d)", driver / 1000,
                                         driver % 1000 / 10);
    }
    if (err == cudaErrorInsufficientDriver) {
        (void)cudaGetLastError();
        return keel__gpu_host->set_error(KEEL_ERROR_BACKEND_UNAVAILABLE,
                                         "the NVIDIA driver supports CUDA %d.%d, older than the CUDA %d.%d runtime "
                                         "keel-cuda was built with: update the driver",
                                         driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
    }
    if (err != cudaSuccess)
        return keel__gpu_error(err, NULL, "cudaGetDeviceCount");
    keel_status_t st = keel__cuda_driver_load();
    if (st != KEEL_OK)
        return st;

    char kmod[64];
    read_kernel_driver_version(kmod, sizeof kmod);
    snprintf(description, sizeof description, "CUDA %d.%d, driver %d.%d%s%s%s", runtime / 1000,
             runtime % 1000 / 10, driver / 1000, driver % 1000 / 10, kmod[0] ? " (" : "", kmod,
             kmod[0] ? ")" : "");
    *backend_ctx = NULL;
    *device_count = count;
    *desc = description;
    return KEEL_OK;
}

void keel__gpu_shutdown(void *backend_ctx)
{
    (void)backend_ctx;
    /* The driver library stays open: the statically linked runtime keeps
     * using it until the process ends. */
}
