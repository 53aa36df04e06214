/* SPDX-License-Identifier: MIT */
/* The plugin's entry point, shared by keel-cuda.so and keel-hip.so: the
 * plugin table over the vtables of the GPU sources, and the probe and
 * shutdown of the vendor's plugin file (backends/cuda/cuda_plugin.c,
 * backends/hip/hip_plugin.c); fault injection's hooks. */
#include "gpu_internal.h"

#include <stddef.h>

const keel_host_api_t *keel__gpu_host;
unsigned keel__gpu_fault_armed;
_Thread_local int keel__gpu_fault_pending;

int keel__gpu_fault(int site)
{
    if (!keel__gpu_host->fault(site))
        return 0;
    if (site == KEEL_FAULT_VENDOR_CALL)
        keel__gpu_fault_pending = 1;
    return 1;
}

keel_status_t keel__gpu_fault_report(const char *keel_fn, const char *what)
{
    keel__gpu_fault_pending = 0;
    return keel__gpu_host->set_error(KEEL_ERROR_BACKEND, "%s%s%s: injected failure (KEEL_FAULT vendor-call)",
                                     keel_fn ? keel_fn : "", keel_fn ? ": " : "",
                                     what && what[0] ? what : "a " KEEL_GPU_VENDOR " runtime call");
}

/* Defined by the built-in operations (gpu_ops.c), when built in. */
extern const void *keel__gpu_ops_table(void) __attribute__((weak, visibility("hidden")));

static keel_backend_plugin_t plugin = {
    .abi_version = KEEL_BACKEND_ABI_VERSION,
    .struct_size = sizeof(keel_backend_plugin_t),
    .name = KEEL_GPU_BACKEND_NAME,
    .probe = keel__gpu_probe,
    .shutdown = keel__gpu_shutdown,
    .device = &keel__gpu_device_vtable,
    .memory = &keel__gpu_memory_vtable,
    .stream = &keel__gpu_stream_vtable,
    .event = &keel__gpu_event_vtable,
    .kernel = &keel__gpu_kernel_vtable,
    .graph = &keel__gpu_graph_vtable,
    .env = keel__gpu_env_table,
};

__attribute__((visibility("default"))) const keel_backend_plugin_t *keel_backend_init(const keel_host_api_t *host);

const keel_backend_plugin_t *keel_backend_init(const keel_host_api_t *host)
{
    if (host == NULL || host->set_error == NULL)
        return NULL;
    keel__gpu_host = host;
    /* Loaded after keel_init armed KEEL_FAULT; a core without it offers none. */
    if (host->struct_size >= offsetof(keel_host_api_t, fault) + sizeof host->fault && host->fault_armed &&
        host->fault)
        keel__gpu_fault_armed = *host->fault_armed;
    plugin.ops = keel__gpu_ops_table != NULL ? keel__gpu_ops_table() : NULL;
    return &plugin;
}
