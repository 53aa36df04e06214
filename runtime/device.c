/* SPDX-License-Identifier: MIT */
/* Public backend and device queries. */
#include <stdio.h>
#include <string.h>
#include "runtime/internal.h"

/* Backend listing works even when keel_init failed on the environment. */
static void setup(void)
{
    (void)keel__ensure_init();
}

keel_status_t keel_backend_count(int *count)
{
    KEEL__CHECK_OUT(count, "keel_backend_count", "count");
    setup();
    *count = keel__backend_count();
    return KEEL_OK;
}

keel_status_t keel_backend_search_path(const char **path, int *count)
{
    KEEL__CHECK_OUT(path, "keel_backend_search_path", "path");
    setup();
    int n = 0;
    const char *p = keel__loader_search_path(&n);
    if (n == 0)
        return keel__set_error(KEEL_ERROR_OUT_OF_MEMORY,
                               "keel_backend_search_path: the plugin directories could not be set up "
                               "(out of host memory at initialization)");
    *path = p;
    if (count)
        *count = n;
    return KEEL_OK;
}

keel_status_t keel_backend_get(int index, keel_backend_t **backend)
{
    KEEL__CHECK_OUT(backend, "keel_backend_get", "backend");
    setup();
    struct keel_backend *b = keel__backend_at(index);
    if (!b)
        return keel__set_error(KEEL_ERROR_OUT_OF_RANGE, "keel_backend_get: index %d is not in [0, %d)", index,
                               keel__backend_count());
    *backend = b;
    return KEEL_OK;
}

keel_status_t keel_backend_find(const char *name, keel_backend_t **backend)
{
    KEEL__CHECK_OUT(backend, "keel_backend_find", "backend");
    if (!name)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "keel_backend_find: name is NULL");
    setup();
    struct keel_backend *b = keel__backend_named(name);
    if (!b) {
        char known[512];
        keel__backend_names(known, sizeof(known));
        return keel__set_error(KEEL_ERROR_NOT_FOUND, "keel_backend_find: no backend named \"%s\" (known: %s)", name,
                               known);
    }
    *backend = b;
    return KEEL_OK;
}

keel_status_t keel_backend_get_info(keel_backend_t *backend, keel_backend_info_t *info)
{
    KEEL__CHECK_HANDLE(backend, KEEL__MAGIC_BACKEND, "keel_backend_get_info", "backend");
    KEEL__CHECK_OUT(info, "keel_backend_get_info", "info");
    if (info->struct_size < offsetof(keel_backend_info_t, name) + sizeof(info->name))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT,
                               "keel_backend_get_info: info->struct_size is %zu; set it to sizeof(keel_backend_info_t)",
                               info->struct_size);
    struct keel_backend *b = keel__backend_loaded(backend);
    keel_backend_info_t full = {
        .struct_size = info->struct_size,
        .name = b->name,
        .description = b->status == KEEL_OK ? b->description : "",
        .plugin_path = b->plugin_path[0] ? b->plugin_path : NULL,
        .usable = b->status == KEEL_OK,
        .status = b->status,
        .reason = b->reason,
        .device_count = b->device_count,
        .abi_version = b->abi_version,
    };
    size_t n = info->struct_size < sizeof(full) ? info->struct_size : sizeof(full);
    memcpy(info, &full, n);
    return KEEL_OK;
}

keel_status_t keel_backend_get_device(keel_backend_t *backend, int index, keel_device_t **device)
{
    KEEL__CHECK_HANDLE(backend, KEEL__MAGIC_BACKEND, "keel_backend_get_device", "backend");
    KEEL__CHECK_OUT(device, "keel_backend_get_device", "device");
    /* The way to every device: an environment keel_init refused is refused
     * here too, so that a program picking its device explicitly does not
     * run on with a setting it asked for ignored. */
    keel_status_t st = keel__ensure_env();
    if (st != KEEL_OK)
        return keel__prefix_error(st, "keel_backend_get_device");
    struct keel_backend *b = backend;
    char reason[sizeof b->reason];
    keel_status_t bst = keel__backend_verdict(b, reason, sizeof reason);
    if (bst == KEEL_ERROR_INVALID_ENVIRONMENT)
        return keel__set_error(KEEL_ERROR_INVALID_ENVIRONMENT, "keel_backend_get_device: backend %s: %s", b->name,
                               reason);
    if (bst != KEEL_OK && !keel__backend_final(b)) /* out of memory, or KEEL_FAULT: a later call tries again */
        return keel__set_error(bst, "keel_backend_get_device: backend %s: %s", b->name, reason);
    if (bst != KEEL_OK)
        return keel__set_error(KEEL_ERROR_BACKEND_UNAVAILABLE, "keel_backend_get_device: backend %s is not usable: %s",
                               b->name, reason);
    if (index < 0 || index >= b->device_count)
        return keel__set_error(KEEL_ERROR_NO_DEVICE, "keel_backend_get_device: backend %s has %d device(s); index %d",
                               b->name, b->device_count, index);
    *device = &b->devices[index];
    return KEEL_OK;
}

keel_status_t keel_device_count(const char *backend_name, int *count)
{
    KEEL__CHECK_OUT(count, "keel_device_count", "count");
    keel_backend_t *b = NULL;
    keel_status_t st;
    if (backend_name) {
        st = keel_backend_find(backend_name, &b);
    } else {
        keel_device_t *dev = NULL;
        st = keel_device_default(&dev);
        if (st == KEEL_OK)
            st = keel_device_get_backend(dev, &b);
    }
    if (st != KEEL_OK)
        return keel__prefix_error(st, "keel_device_count");
    keel_backend_info_t info = {.struct_size = sizeof info};
    if ((st = keel_backend_get_info(b, &info)) != KEEL_OK)
        return keel__prefix_error(st, "keel_device_count");
    *count = info.usable ? info.device_count : 0;
    return KEEL_OK;
}

keel_status_t keel_device_get(const char *backend_name, int index, keel_device_t **device)
{
    keel_backend_t *b;
    keel_status_t st = keel_backend_find(backend_name, &b);
    if (st != KEEL_OK)
        return st;
    return keel_backend_get_device(b, index, device);
}

/* Slots in the order devices open; the first KEEL__REACH_SLOTS are found
 * again by number (keel__device_at_slot). */
static atomic_uint next_slot;
static struct keel_device *_Atomic slot_devices[KEEL__REACH_SLOTS];

struct keel_device *keel__device_at_slot(unsigned slot)
{
    return slot < KEEL__REACH_SLOTS ? atomic_load_explicit(&slot_devices[slot], memory_order_acquire) : NULL;
}

keel_status_t keel__synchronize_far_devices(const struct keel_device *skip, struct keel_device **failed)
{
    keel_status_t first = KEEL_OK;
    for (int i = 0; i < keel__backend_count(); i++) {
        struct keel_backend *b = keel__backend_at(i);
        if (!atomic_load_explicit(&b->loaded, memory_order_acquire) || b->status != KEEL_OK)
            continue;
        for (int j = 0; j < b->device_count; j++) {
            struct keel_device *d = &b->devices[j];
            if (d == skip || !atomic_load_explicit(&d->opened, memory_order_acquire) || d->slot < KEEL__REACH_SLOTS)
                continue;
            keel_status_t st = d->plugin->device->synchronize(d->ctx);
            if (st != KEEL_OK && first == KEEL_OK) {
                first = st;
                *failed = d;
            }
        }
    }
    return first;
}

keel_status_t keel__device_ready(struct keel_device *dev, const char *fn)
{
    KEEL__CHECK_HANDLE(dev, KEEL__MAGIC_DEVICE, fn, "device");
    if (KEEL__UNLIKELY(!atomic_load_explicit(&dev->opened, memory_order_acquire))) {
        keel_status_t st = KEEL_OK;
        pthread_mutex_lock(&dev->open_lock);
        if (!atomic_load_explicit(&dev->opened, memory_order_relaxed)) {
            st = dev->plugin->device->open(dev->backend->ctx, dev->index, &dev->ctx);
            if (st == KEEL_OK) {
                struct keel_stream *s = keel__handle_alloc(KEEL__MAGIC_STREAM, sizeof(*s));
                void *sctx = NULL;
                if (!s) {
                    st = keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "out of host memory");
                } else if ((st = dev->plugin->stream->create(dev->ctx, 0, 0, &sctx)) != KEEL_OK) {
                    keel__handle_release(s);
                } else {
                    s->device = dev;
                    s->ctx = sctx;
                    s->is_default = 1;
                    dev->default_stream = s;
                }
                if (st != KEEL_OK && dev->plugin->device->close)
                    dev->plugin->device->close(dev->ctx);
            }
            if (st == KEEL_OK) {
                keel_device_properties_t p;
                memset(&p, 0, sizeof(p));
                p.struct_size = sizeof(p);
                if (dev->plugin->device->get_properties(dev->ctx, &p) == KEEL_OK) {
                    dev->max_threads_per_block = p.max_threads_per_block > 0 ? (unsigned)p.max_threads_per_block : ~0u;
                    for (int i = 0; i < 3; i++) {
                        dev->max_block[i] = p.max_block_dim[i] > 0 ? (unsigned)p.max_block_dim[i] : ~0u;
                        dev->max_grid[i] = p.max_grid_dim[i] > 0 ? (unsigned)p.max_grid_dim[i] : ~0u;
                    }
                } else {
                    dev->max_threads_per_block = ~0u;
                    for (int i = 0; i < 3; i++)
                        dev->max_block[i] = dev->max_grid[i] = ~0u;
                }
                dev->slot = atomic_fetch_add_explicit(&next_slot, 1, memory_order_relaxed);
                if (dev->slot < KEEL__REACH_SLOTS)
                    atomic_store_explicit(&slot_devices[dev->slot], dev, memory_order_release);
                atomic_store_explicit(&dev->opened, 1, memory_order_release);
            }
        }
        pthread_mutex_unlock(&dev->open_lock);
        if (st != KEEL_OK)
            return keel__prefix_error(st, "%s: cannot open %s", fn, dev->name);
    }
    return KEEL_OK;
}

keel_status_t keel_device_get_properties(keel_device_t *device, keel_device_properties_t *props)
{
    keel_status_t st = keel__device_ready(device, "keel_device_get_properties");
    if (st != KEEL_OK)
        return st;
    KEEL__CHECK_OUT(props, "keel_device_get_properties", "props");
    if (props->struct_size < sizeof(props->struct_size) + sizeof(props->name))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT,
                               "keel_device_get_properties: props->struct_size is %zu; set it to "
                               "sizeof(keel_device_properties_t)",
                               props->struct_size);
    keel_device_properties_t full;
    memset(&full, 0, sizeof(full));
    full.struct_size = sizeof(full);
    full.pci_bus_id = -1;
    st = device->plugin->device->get_properties(device->ctx, &full);
    if (st != KEEL_OK)
        return st;
    snprintf(full.backend, sizeof(full.backend), "%.15s", device->backend->name);
    full.index = device->index;
    full.struct_size = props->struct_size;
    memcpy(props, &full, props->struct_size < sizeof(full) ? props->struct_size : sizeof(full));
    return KEEL_OK;
}

keel_status_t keel_device_memory_info(keel_device_t *device, size_t *free_bytes, size_t *total_bytes)
{
    keel_status_t st = keel__device_ready(device, "keel_device_memory_info");
    if (st != KEEL_OK)
        return st;
    size_t f = 0, t = 0;
    if (!device->plugin->device->memory_info)
        return keel__set_error(KEEL_ERROR_NOT_SUPPORTED, "keel_device_memory_info: not supported by %s",
                               device->backend->name);
    st = device->plugin->device->memory_info(device->ctx, &f, &t);
    if (st != KEEL_OK)
        return st;
    if (free_bytes)
        *free_bytes = f;
    if (total_bytes)
        *total_bytes = t;
    return KEEL_OK;
}

keel_status_t keel_device_get_backend(keel_device_t *device, keel_backend_t **backend)
{
    KEEL__CHECK_HANDLE(device, KEEL__MAGIC_DEVICE, "keel_device_get_backend", "device");
    KEEL__CHECK_OUT(backend, "keel_device_get_backend", "backend");
    *backend = device->backend;
    return KEEL_OK;
}

keel_status_t keel_device_get_index(keel_device_t *device, int *index)
{
    KEEL__CHECK_HANDLE(device, KEEL__MAGIC_DEVICE, "keel_device_get_index", "device");
    KEEL__CHECK_OUT(index, "keel_device_get_index", "index");
    *index = device->index;
    return KEEL_OK;
}

keel_status_t keel_device_synchronize(keel_device_t *device)
{
    keel_status_t st = keel__device_ready(device, "keel_device_synchronize");
    if (st != KEEL_OK)
        return st;
    return device->plugin->device->synchronize(device->ctx);
}

keel_status_t keel_device_can_access_peer(keel_device_t *device, keel_device_t *peer, int *can_access)
{
    keel_status_t st = keel__device_ready(device, "keel_device_can_access_peer");
    if (st != KEEL_OK)
        return st;
    if ((st = keel__device_ready(peer, "keel_device_can_access_peer")) != KEEL_OK)
        return st;
    KEEL__CHECK_OUT(can_access, "keel_device_can_access_peer", "can_access");
    int can = 0;
    if (device->backend == peer->backend && device != peer && device->plugin->device->can_access_peer) {
        st = device->plugin->device->can_access_peer(device->ctx, peer->ctx, &can);
        if (st != KEEL_OK)
            return st;
    } else if (device == peer) {
        can = 1;
    }
    *can_access = can;
    return KEEL_OK;
}

const char *keel_device_name(keel_device_t *device)
{
    if (!device || device->magic != KEEL__MAGIC_DEVICE)
        return "(invalid device)";
    return device->name;
}

void keel__devices_flush(int (*backend_ok)(const struct keel_device *d))
{
    for (int i = 0; i < keel__backend_count(); i++) {
        struct keel_backend *b = keel__backend_at(i);
        for (int j = 0; b->status == KEEL_OK && j < b->device_count; j++) {
            struct keel_device *d = &b->devices[j];
            if (!atomic_load(&d->opened) || !backend_ok(d))
                continue;
            void *blk;
            while ((blk = keel__reuse_steal(d)) != NULL) {
                keel_status_t st = d->plugin->memory->free(d->ctx, KEEL_MEMORY_DEVICE, blk);
                if (st != KEEL_OK)
                    keel__log(KEEL_LOG_WARN, "keel_finalize: %s: the block %p kept for reuse: %s", d->name, blk,
                              keel_status_name(st));
            }
        }
    }
}

void keel__devices_close(int (*backend_ok)(const struct keel_device *d))
{
    for (int i = 0; i < keel__backend_count(); i++) {
        struct keel_backend *b = keel__backend_at(i);
        for (int j = 0; b->status == KEEL_OK && j < b->device_count; j++) {
            struct keel_device *d = &b->devices[j];
            if (atomic_load(&d->opened)) {
                if (backend_ok(d)) {
                    keel__stream_forget(d->default_stream, 1);
                    if (d->plugin->device->close)
                        d->plugin->device->close(d->ctx);
                    d->default_stream = NULL;
                    d->ctx = NULL;
                } else {
                    keel__handle_release(d->default_stream);   /* the device keeps its context */
                }
                atomic_store(&d->opened, 0);
            }
            pthread_mutex_destroy(&d->open_lock);
            pthread_mutex_destroy(&d->reuse_lock);
        }
    }
    for (unsigned s = 0; s < KEEL__REACH_SLOTS; s++)
        atomic_store(&slot_devices[s], NULL);
    atomic_store(&next_slot, 0);
}
