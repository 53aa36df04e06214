/* keel-hip.so: the plugin's entry point and probe.
 *
 * Link policy: the plugin links libamdhip64 (runtime, module API and hiprtc
 * in one library). Where ROCm is not installed, dlopen of the plugin fails
 * and the core records "cannot load keel-hip.so: libamdhip64.so.5: cannot
 * open shared object file"; where it is installed but there is no AMD GPU or
 * no amdgpu kernel driver, probe says "no HIP device". */
#include <stdio.h>
#include "cuda_internal.h"
#include "cuda_shared.h"

const keel_host_api_t *keel__cuda_host;

/* Defined by the built-in operations (backends/hip/ops_hip.c), when built in. */
extern const void *keel__cuda_ops_table(void) __attribute__((weak, visibility("hidden")));

static char description[96];

static keel_status_t hip_probe(const keel_host_api_t *host, void **backend_ctx, int *device_count,
                               const char **desc)
{
    (void)host;
    keel_status_t env = keel__cuda_check_env();
    if (env != KEEL_OK)
        return env;
    int runtime = 0, driver = 0, count = 0;
    (void)gpuRuntimeGetVersion(&runtime);
    (void)gpuDriverGetVersion(&driver);
    gpuError_t err = gpuGetDeviceCount(&count);
    if (err == gpuErrorNoDevice || err == hipErrorNotInitialized || err == gpuErrorInsufficientDriver ||
        (err == gpuSuccess && count == 0)) {
        (void)gpuGetLastError();
        /* Without /dev/kfd (no amdgpu driver, or not visible in a container)
         * the runtime sees no device at all. */
        return keel__cuda_host->set_error(KEEL_ERROR_NO_DEVICE,
                                          "no HIP device (HIP runtime %d.%d: %s; an AMD GPU needs the amdgpu "
                                          "driver and access to /dev/kfd)",
                                          runtime / 10000000, runtime / 100000 % 100,
                                          err == gpuSuccess ? "0 devices" : gpuGetErrorName(err));
    }
    if (err != gpuSuccess)
        return keel__cuda_error(err, NULL, "hipGetDeviceCount");
    snprintf(description, sizeof description, "AMD HIP %d.%d, driver %d", runtime / 10000000,
             runtime / 100000 % 100, driver);
    *backend_ctx = NULL;
    *device_count = count;
    *desc = description;
    return KEEL_OK;
}

static void hip_shutdown(void *backend_ctx)
{
    (void)backend_ctx;
}

static keel_backend_plugin_t plugin = {
    .abi_version = KEEL_BACKEND_ABI_VERSION,
    .struct_size = sizeof(keel_backend_plugin_t),
    .name = KEEL_GPU_BACKEND_NAME,
    .probe = hip_probe,
    .shutdown = hip_shutdown,
    .device = &keel__cuda_device_vtable,
    .memory = &keel__cuda_memory_vtable,
    .stream = &keel__cuda_stream_vtable,
    .event = &keel__cuda_event_vtable,
    .kernel = &keel__cuda_kernel_vtable,
    .graph = &keel__cuda_graph_vtable,
};

__attribute__((visibility("default"))) const keel_backend_plugin_t *keel_backend_init(const keel_host_api_t *host);

const keel_backend_plugin_t *keel_backend_init(const keel_host_api_t *host)
{
    if (host == NULL || host->set_error == NULL)
        return NULL;
    keel__cuda_host = host;
    plugin.ops = keel__cuda_ops_table != NULL ? keel__cuda_ops_table() : NULL;
    return &plugin;
}
