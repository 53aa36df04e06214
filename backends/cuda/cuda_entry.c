/* The plugin's entry point, shared by keel-cuda.so and keel-hip.so: the
 * plugin table over the vtables of the shared sources, and the probe and
 * shutdown of the vendor's plugin file (cuda_plugin.c, backends/hip/hip_plugin.c). */
#include "cuda_internal.h"

const keel_host_api_t *keel__cuda_host;

/* Defined by the built-in operations (ops_cuda.c, backends/hip/ops_hip.c), when built in. */
extern const void *keel__cuda_ops_table(void) __attribute__((weak, visibility("hidden")));

static keel_backend_plugin_t plugin = {
    .abi_version = KEEL_BACKEND_ABI_VERSION,
    .struct_size = sizeof(keel_backend_plugin_t),
    .name = KEEL_GPU_BACKEND_NAME,
    .probe = keel__gpu_probe,
    .shutdown = keel__gpu_shutdown,
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
