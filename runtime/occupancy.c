/* SPDX-License-Identifier: MIT */
/* keel_kernel_suggest_block_size: the occupancy search that CUDA's
 * cudaOccupancyMaxPotentialBlockSize does, over the backend's own answer to
 * keel_kernel_max_active_blocks, so it means the same on every backend. */
#include "runtime/internal.h"
#include "runtime/kernel_source.h"

keel_status_t keel_kernel_suggest_block_size(keel_kernel_t *kernel, size_t shared_bytes, int block_limit,
                                             int *block_threads, int *grid_blocks)
{
    const char *fn = "keel_kernel_suggest_block_size";
    KEEL__CHECK_HANDLE(kernel, KEEL__MAGIC_KERNEL, fn, "kernel");
    KEEL__CHECK_OUT(block_threads, fn, "block_threads");
    if (block_limit < 0)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: block_limit is %d", fn, block_limit);
    keel_device_properties_t p = {.struct_size = sizeof p};
    keel_status_t st = keel_device_get_properties(kernel->device, &p);
    if (st != KEEL_OK)
        return keel__prefix_error(st, "%s", fn);
    int max_threads = 0;
    if ((st = keel_kernel_get_attribute(kernel, KEEL_KERNEL_ATTR_MAX_THREADS_PER_BLOCK, &max_threads)) != KEEL_OK)
        return keel__prefix_error(st, "%s", fn);
    if (block_limit > 0 && block_limit < max_threads)
        max_threads = block_limit;
    int step = p.warp_size > 0 ? p.warp_size : 1;
    const keel__ksig_t *sig = kernel->sig;
    int fixed = sig && sig->block_size[0] ? (int)(sig->block_size[0] * sig->block_size[1] * sig->block_size[2]) : 0;
    /* The candidates, largest first: the declared size alone, or every multiple of the warp. */
    int lo = fixed ? fixed : step, hi = fixed ? fixed : max_threads / step * step;
    int best = 0, best_blocks = 0;
    long best_resident = 0;
    for (int t = hi; t >= lo; t -= step) {
        int blocks = 0;
        if ((st = keel_kernel_max_active_blocks(kernel, t, shared_bytes, &blocks)) != KEEL_OK)
            return keel__prefix_error(st, "%s", fn);
        if ((long)blocks * t > best_resident) {
            best_resident = (long)blocks * t;
            best = t;
            best_blocks = blocks;
        }
    }
    if (best == 0) {
        if (fixed)
            return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT,
                                   "%s: kernel %s declares keel_block_size of %d threads, which %zu bytes of shared "
                                   "memory do not fit beside", fn, kernel->name, fixed, shared_bytes);
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT,
                               "%s: no block of %d to %d threads (steps of %d) of kernel %s fits on %s with %zu bytes "
                               "of dynamic shared memory", fn, step, max_threads, step, kernel->name,
                               kernel->device->name, shared_bytes);
    }
    *block_threads = best;
    if (grid_blocks)
        *grid_blocks = best_blocks * (p.compute_units > 0 ? p.compute_units : 1);
    return KEEL_OK;
}
