/* SPDX-License-Identifier: MIT */
/* Public modules, kernels and launches. The launch path is a handle check and
 * one indirect call: everything else was settled when the kernel was looked up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "runtime/internal.h"
#include "runtime/kernel_source.h"

#define MODULE(m, fn) KEEL__CHECK_HANDLE(m, KEEL__MAGIC_MODULE, fn, "module")
#define KERNEL(k, fn) KEEL__CHECK_HANDLE(k, KEEL__MAGIC_KERNEL, fn, "kernel")

static keel_status_t not_supported(struct keel_device *d, const char *fn, const char *what)
{
    return keel__set_error(KEEL_ERROR_NOT_SUPPORTED, "%s: the %s backend does not support %s", fn, d->backend->name,
                           what);
}

keel_status_t keel_module_load_data(keel_device_t *device, const void *image, size_t size, keel_module_t **module)
{
    keel_status_t st = keel__device_ready(device, "keel_module_load_data");
    if (st != KEEL_OK)
        return st;
    KEEL__CHECK_OUT(module, "keel_module_load_data", "module");
    if (!image || size == 0)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "keel_module_load_data: image is %s",
                               image ? "0 bytes long" : "NULL");
    if (!device->plugin->kernel->module_load_data)
        return not_supported(device, "keel_module_load_data", "modules from memory (load a file instead)");
    void *ctx = NULL;
    if ((st = device->plugin->kernel->module_load_data(device->ctx, image, size, &ctx)) != KEEL_OK)
        return st;
    return keel__module_wrap(device, ctx, NULL, module);
}

keel_status_t keel_module_load_file(keel_device_t *device, const char *path, keel_module_t **module)
{
    keel_status_t st = keel__device_ready(device, "keel_module_load_file");
    if (st != KEEL_OK)
        return st;
    KEEL__CHECK_OUT(module, "keel_module_load_file", "module");
    if (!path || !path[0])
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "keel_module_load_file: path is %s", path ? "empty" : "NULL");
    if (keel__module_file_load(device, path, module, &st))
        return st;
    if (!device->plugin->kernel->module_load_file)
        return not_supported(device, "keel_module_load_file", "modules from files");
    void *ctx = NULL;
    if ((st = device->plugin->kernel->module_load_file(device->ctx, path, &ctx)) != KEEL_OK)
        return st;
    return keel__module_wrap(device, ctx, NULL, module);
}

keel_status_t keel_module_compile(keel_device_t *device, const char *source, const char *name,
                                  const char *const *options, int num_options, keel_module_t **module)
{
    keel_status_t st = keel__device_ready(device, "keel_module_compile");
    if (st != KEEL_OK)
        return st;
    KEEL__CHECK_OUT(module, "keel_module_compile", "module");
    if (!source)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "keel_module_compile: source is NULL");
    if (num_options < 0 || (num_options > 0 && !options))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "keel_module_compile: %d options at %p", num_options,
                               (const void *)options);
    for (int i = 0; i < num_options; i++)
        if (!options[i])
            return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "keel_module_compile: options[%d] is NULL", i);
    if (!device->plugin->kernel->module_compile)
        return not_supported(device, "keel_module_compile", "run-time compilation");
    void *ctx = NULL;
    if ((st = device->plugin->kernel->module_compile(device->ctx, source, name ? name : "keel_module", options,
                                                     num_options, &ctx)) != KEEL_OK)
        return st;
    return keel__module_wrap(device, ctx, NULL, module);
}

keel_status_t keel_module_unload(keel_module_t *module)
{
    MODULE(module, "keel_module_unload");
    /* As keel_free: launches of the module's kernels still queued must be
     * done before its code goes (the CPU backend unmaps it at once, and
     * neither cuLibraryUnload nor hipModuleUnload is documented to wait).
     * They run only on streams of the module's device, so waiting for that
     * device is enough. A failure leaves the module loaded, to be unloaded
     * again. */
    struct keel_device *d = module->device;
    if (atomic_load(&d->default_stream->capturing))
        return keel__set_error(KEEL_ERROR_BUSY, "keel_module_unload: the default stream of %s is capturing a graph; "
                               "unload after the capture ends", d->name);
    keel_status_t waited = d->plugin->device->synchronize(d->ctx);
    if (waited != KEEL_OK)
        return keel__prefix_error(waited, "keel_module_unload: the module stays loaded (call again): %s reported",
                                  d->name);
    if ((waited = keel__module_globals_release(module)) != KEEL_OK)
        return waited;
    return keel__module_forget(module, KEEL__FORGET_HOLD);
}

keel_status_t keel__module_forget(struct keel_module *module, int backend)
{
    int held = backend == KEEL__FORGET_HOLD && keel__module_globals_hold(module);
    keel__module_globals_drop(module);
    const keel_kernel_vtable_t *kv = module->device->plugin->kernel;
    for (size_t i = 0; i < module->nkernels; i++) {
        struct keel_kernel *k = module->kernels[i];
        if (backend)
            kv->kernel_release(k->ctx);
        free(k->name);
        keel__handle_release(k);
    }
    free(module->kernels);
    keel__sigs_free(module->sigs);
    pthread_mutex_destroy(&module->lock);
    keel_status_t st = backend && !held && kv->module_unload ? kv->module_unload(module->ctx) : KEEL_OK;
    keel__handle_release(module);
    return st;
}

/* The parameters sig declares pointers (a '*' or '[' in the type). */
static uint64_t pointer_params(const keel__ksig_t *sig)
{
    uint64_t mask = 0;
    for (unsigned i = 0; i < sig->nparams && i < 64; i++)
        if (sig->params[i].size == sizeof(void *) && strpbrk(sig->params[i].type, "*["))
            mask |= UINT64_C(1) << i;
    return mask;
}

keel_status_t keel_module_get_kernel(keel_module_t *module, const char *name, keel_kernel_t **kernel)
{
    MODULE(module, "keel_module_get_kernel");
    KEEL__CHECK_OUT(kernel, "keel_module_get_kernel", "kernel");
    if (!name || !name[0])
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "keel_module_get_kernel: name is %s", name ? "empty" : "NULL");
    const keel_kernel_vtable_t *kv = module->device->plugin->kernel;
    if (!kv->module_get_kernel)
        return not_supported(module->device, "keel_module_get_kernel", "kernel lookup");
    keel_status_t st = KEEL_OK;
    pthread_mutex_lock(&module->lock);
    for (size_t i = 0; i < module->nkernels; i++) {
        if (strcmp(module->kernels[i]->name, name) == 0) {
            *kernel = module->kernels[i];
            pthread_mutex_unlock(&module->lock);
            return KEEL_OK;
        }
    }
    void *ctx = NULL;
    struct keel_kernel *k = NULL;
    if ((st = kv->module_get_kernel(module->ctx, name, &ctx)) != KEEL_OK)
        goto out;
    if (module->nkernels == module->capkernels) {
        size_t cap = module->capkernels ? 2 * module->capkernels : 8;
        struct keel_kernel **grown = keel__realloc(module->kernels, cap * sizeof(*grown));
        if (!grown)
            goto oom;
        module->kernels = grown;
        module->capkernels = cap;
    }
    k = keel__handle_alloc(KEEL__MAGIC_KERNEL, sizeof(*k));
    if (!k || !(k->name = keel__strdup(name)))
        goto oom;
    k->device = module->device;
    k->ctx = ctx;
    k->module = module;
    k->sig = module->sigs ? keel__ksource_find(module->sigs, name) : NULL;
    if (k->sig) {
        memcpy(k->block_size, k->sig->block_size, sizeof k->block_size);
        k->pointer_params = pointer_params(k->sig);
    }
    module->kernels[module->nkernels++] = k;
    *kernel = k;
    goto out;
oom:
    if (k)
        keel__handle_release(k);
    kv->kernel_release(ctx);
    st = keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "keel_module_get_kernel: out of host memory");
out:
    pthread_mutex_unlock(&module->lock);
    return st;
}

keel_status_t keel_kernel_register_cpu(keel_device_t *device, const keel_cpu_kernel_desc_t *desc,
                                       keel_kernel_t **kernel)
{
    keel_status_t st = keel__device_ready(device, "keel_kernel_register_cpu");
    if (st != KEEL_OK)
        return st;
    KEEL__CHECK_OUT(kernel, "keel_kernel_register_cpu", "kernel");
    if (!desc || !desc->fn || !desc->name)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "keel_kernel_register_cpu: %s is NULL",
                               !desc ? "desc" : !desc->fn ? "desc->fn" : "desc->name");
    if (desc->abi_version != KEEL_CPU_KERNEL_ABI)
        return keel__set_error(KEEL_ERROR_ABI_MISMATCH,
                               "keel_kernel_register_cpu: %s: descriptor ABI %u, expected %d (KEEL_CPU_KERNEL_ABI)",
                               desc->name, desc->abi_version, KEEL_CPU_KERNEL_ABI);
    size_t total = 0;
    if (desc->num_args > KEEL_MAX_KERNEL_ARGS)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "keel_kernel_register_cpu: %s: %u arguments, at most %d",
                               desc->name, desc->num_args, KEEL_MAX_KERNEL_ARGS);
    for (unsigned i = 0; i < desc->num_args; i++) {
        if (desc->arg_sizes[i] == 0)
            return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "keel_kernel_register_cpu: %s: argument %u has size 0",
                                   desc->name, i);
        total += desc->arg_sizes[i];
    }
    if (total > KEEL_MAX_KERNEL_ARG_BYTES)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT,
                               "keel_kernel_register_cpu: %s: arguments take %zu bytes, at most %d", desc->name, total,
                               KEEL_MAX_KERNEL_ARG_BYTES);
    if (!device->plugin->kernel->kernel_register_cpu)
        return not_supported(device, "keel_kernel_register_cpu", "C function kernels (it is not a CPU device)");
    struct keel_kernel *k = keel__handle_alloc(KEEL__MAGIC_KERNEL, sizeof(*k));
    if (!k || !(k->name = keel__strdup(desc->name))) {
        if (k)
            keel__handle_release(k);
        return keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "keel_kernel_register_cpu: out of host memory");
    }
    void *ctx = NULL;
    if ((st = device->plugin->kernel->kernel_register_cpu(device->ctx, desc, &ctx)) != KEEL_OK) {
        free(k->name);
        keel__handle_release(k);
        return st;
    }
    k->device = device;
    k->ctx = ctx;
    /* The descriptor's sizes let a checked launch compare them; a kernel
     * without them would take any arguments unchecked. */
    if (!(k->own_sig = keel__calloc(1, sizeof *k->own_sig))) {
        device->plugin->kernel->kernel_release(ctx);
        free(k->name);
        keel__handle_release(k);
        return keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "keel_kernel_register_cpu: out of host memory");
    }
    snprintf(k->own_sig->name, sizeof k->own_sig->name, "%s", desc->name);
    k->own_sig->nparams = desc->num_args;
    for (unsigned i = 0; i < desc->num_args; i++) {
        k->own_sig->params[i].size = desc->arg_sizes[i];
        snprintf(k->own_sig->params[i].name, sizeof k->own_sig->params[i].name, "arg%u", i);
    }
    k->sig = k->own_sig;
    *kernel = k;
    return KEEL_OK;
}

keel_status_t keel_kernel_release(keel_kernel_t *kernel)
{
    KERNEL(kernel, "keel_kernel_release");
    if (kernel->module)
        return keel__set_error(KEEL_ERROR_INVALID_HANDLE,
                               "keel_kernel_release: kernel %s belongs to a module; unload the module instead",
                               kernel->name);
    keel__kernel_forget(kernel, 1);
    return KEEL_OK;
}

void keel__kernel_forget(struct keel_kernel *kernel, int backend)
{
    if (backend)
        kernel->device->plugin->kernel->kernel_release(kernel->ctx);
    free(kernel->name);
    free(kernel->own_sig);
    keel__handle_release(kernel);
}

static keel_status_t bad_dims(const char *what, keel_dim3_t d)
{
    return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "keel_launch_kernel: %s is (%u, %u, %u); every extent must be > 0",
                           what, d.x, d.y, d.z);
}

static keel_status_t past_limits(const struct keel_device *dev, keel_dim3_t grid, keel_dim3_t block)
{
    return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT,
                           "keel_launch_kernel: grid (%u, %u, %u) x block (%u, %u, %u) exceeds the limits of %s: "
                           "block dims (%u, %u, %u), %u threads per block, grid dims (%u, %u, %u)",
                           grid.x, grid.y, grid.z, block.x, block.y, block.z, dev->name, dev->max_block[0],
                           dev->max_block[1], dev->max_block[2], dev->max_threads_per_block, dev->max_grid[0],
                           dev->max_grid[1], dev->max_grid[2]);
}

/* A pointer argument of a kernel whose parameter types are known that is
 * no live allocation but a freed block or an unloaded module's variable:
 * the kernel would run on memory given back. Live pointers are found in
 * the thread's cache; others (host memory, NULL) take one registry look. */
static keel_status_t stale_argument(const struct keel_kernel *k, void **args)
{
    for (uint64_t m = k->pointer_params; m; m &= m - 1) {
        unsigned i = (unsigned)__builtin_ctzll(m);
        const void *p = NULL;
        if (args[i])
            memcpy(&p, args[i], sizeof p);
        keel__alloc_t a;
        if (!p || keel__registry_lookup(p) || keel__registry_classify(p, 0, &a) != KEEL__PTR_FREED)
            continue;
        const keel__kparam_t *prm = &k->sig->params[i];
        const char *where = a.base == (uintptr_t)p ? "is" : "is inside";
        if (a.foreign == KEEL__FOREIGN_MODULE)
            return keel__set_error(KEEL_ERROR_INVALID_POINTER,
                                   "keel_launch_kernel: kernel %s: argument %u (%s %s) %p %s the variable of %zu bytes "
                                   "at %p of a module on %s, which keel_module_unload unloaded", k->name, i + 1,
                                   prm->type, prm->name, p, where, a.size, (void *)a.base, a.device->name);
        return keel__set_error(KEEL_ERROR_INVALID_POINTER,
                               "keel_launch_kernel: kernel %s: argument %u (%s %s) %p %s the %s block of %zu bytes at "
                               "%p on %s, which was freed", k->name, i + 1, prm->type, prm->name, p, where,
                               keel__memory_kind_name(a.kind), a.size, (void *)a.base, a.device->name);
    }
    return KEEL_OK;
}

keel_status_t keel_launch_kernel(keel_kernel_t *kernel, keel_dim3_t grid, keel_dim3_t block, size_t shared_bytes,
                                 keel_stream_t *stream, void **args)
{
    KERNEL(kernel, "keel_launch_kernel");
    KEEL__CHECK_HANDLE(stream, KEEL__MAGIC_STREAM, "keel_launch_kernel", "stream");
    if (KEEL__UNLIKELY(kernel->device != stream->device))
        return keel__set_error(KEEL_ERROR_DEVICE_MISMATCH, "keel_launch_kernel: kernel %s is on %s, the stream on %s",
                               kernel->name, kernel->device->name, stream->device->name);
    if (KEEL__UNLIKELY(!grid.x || !grid.y || !grid.z))
        return bad_dims("grid", grid);
    if (KEEL__UNLIKELY(!block.x || !block.y || !block.z))
        return bad_dims("block", block);
    if (KEEL__UNLIKELY(kernel->block_size[0] != 0) &&
        (block.x != kernel->block_size[0] || block.y != kernel->block_size[1] || block.z != kernel->block_size[2]))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT,
                               "keel_launch_kernel: kernel %s is declared keel_block_size(%u, %u, %u); the launch's "
                               "block is (%u, %u, %u)",
                               kernel->name, kernel->block_size[0], kernel->block_size[1], kernel->block_size[2],
                               block.x, block.y, block.z);
    const struct keel_device *d = kernel->device;
    if (KEEL__UNLIKELY(block.x > d->max_block[0] || block.y > d->max_block[1] || block.z > d->max_block[2] ||
                       (uint64_t)block.x * block.y * block.z > d->max_threads_per_block || grid.x > d->max_grid[0] ||
                       grid.y > d->max_grid[1] || grid.z > d->max_grid[2]))
        return past_limits(d, grid, block);
    if (kernel->pointer_params && args) {
        keel_status_t st = stale_argument(kernel, args);
        if (st != KEEL_OK)
            return st;
    }
    KEEL__FAULT_ENQUEUE("keel_launch_kernel");
    return kernel->device->plugin->kernel->launch(kernel->ctx, grid, block, shared_bytes, stream->ctx, args);
}

keel_status_t keel_kernel_get_attribute(keel_kernel_t *kernel, keel_kernel_attribute_t attr, int *value)
{
    KERNEL(kernel, "keel_kernel_get_attribute");
    KEEL__CHECK_OUT(value, "keel_kernel_get_attribute", "value");
    if ((unsigned)attr > KEEL_KERNEL_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "keel_kernel_get_attribute: unknown attribute %d", (int)attr);
    /* A kernel built from portable source: its parameters are known here,
     * whether or not the backend can count them. */
    if (attr == KEEL_KERNEL_ATTR_NUM_ARGS && kernel->sig) {
        *value = (int)kernel->sig->nparams;
        return KEEL_OK;
    }
    const keel_kernel_vtable_t *kv = kernel->device->plugin->kernel;
    if (!kv->get_attribute)
        return not_supported(kernel->device, "keel_kernel_get_attribute", "kernel attributes");
    int v = 0;
    keel_status_t st = kv->get_attribute(kernel->ctx, attr, &v);
    if (st == KEEL_OK)
        *value = v;
    return st;
}

keel_status_t keel_kernel_get_param(keel_kernel_t *kernel, unsigned index, keel_kernel_param_t *param)
{
    KERNEL(kernel, "keel_kernel_get_param");
    KEEL__CHECK_OUT(param, "keel_kernel_get_param", "param");
    if (param->struct_size < sizeof(*param))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "keel_kernel_get_param: struct_size %zu is less than %zu",
                               param->struct_size, sizeof(*param));
    const keel__ksig_t *sig = kernel->sig;
    if (!sig)
        return keel__set_error(KEEL_ERROR_NOT_FOUND, "keel_kernel_get_param: the parameters of kernel %s are not "
                               "known (it was not built from portable source)", kernel->name);
    if (index >= sig->nparams)
        return keel__set_error(KEEL_ERROR_OUT_OF_RANGE, "keel_kernel_get_param: kernel %s has %u parameters, not %u",
                               kernel->name, sig->nparams, index + 1);
    const keel__kparam_t *p = &sig->params[index];
    snprintf(param->type, sizeof param->type, "%s", p->type);
    snprintf(param->name, sizeof param->name, "%s", p->name);
    param->size = p->size;
    return KEEL_OK;
}

keel_status_t keel_kernel_set_max_dynamic_shared(keel_kernel_t *kernel, size_t bytes)
{
    KERNEL(kernel, "keel_kernel_set_max_dynamic_shared");
    const keel_kernel_vtable_t *kv = kernel->device->plugin->kernel;
    if (!kv->set_max_dynamic_shared)
        return not_supported(kernel->device, "keel_kernel_set_max_dynamic_shared", "raising the shared-memory limit");
    return kv->set_max_dynamic_shared(kernel->ctx, bytes);
}

keel_status_t keel_kernel_max_active_blocks(keel_kernel_t *kernel, int block_threads, size_t shared_bytes, int *blocks)
{
    KERNEL(kernel, "keel_kernel_max_active_blocks");
    KEEL__CHECK_OUT(blocks, "keel_kernel_max_active_blocks", "blocks");
    if (block_threads <= 0)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "keel_kernel_max_active_blocks: block_threads is %d",
                               block_threads);
    const keel_kernel_vtable_t *kv = kernel->device->plugin->kernel;
    if (!kv->max_active_blocks)
        return not_supported(kernel->device, "keel_kernel_max_active_blocks", "occupancy queries");
    int v = 0;
    keel_status_t st = kv->max_active_blocks(kernel->ctx, block_threads, shared_bytes, &v);
    if (st == KEEL_OK)
        *blocks = v;
    return st;
}

const char *keel_kernel_name(keel_kernel_t *kernel)
{
    if (!kernel || kernel->magic != KEEL__MAGIC_KERNEL)
        return "(invalid kernel)";
    return kernel->name;
}
