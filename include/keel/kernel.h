/**
 * @file keel/kernel.h
 * @brief Modules, kernels and launches.
 *
 * A module is code in the backend's binary form, loaded onto one device: a
 * cubin, fatbin or PTX image for CUDA; a code object for HIP; a shared object
 * of C kernels for the CPU. A kernel is looked up in a module by name and
 * launched on a stream with a grid, a block, dynamic shared memory and an
 * array of pointers to the argument values (as cudaLaunchKernel takes them).
 * The argument values are copied at launch: the caller's variables may change
 * or go out of scope once the launch returns.
 *
 * CPU kernels: a C function of type keel_cpu_kernel_fn_t, called once per
 * block, that loops over the threads of its block itself (KEEL_CPU_FOR_EACH_THREAD).
 * The end of such a loop is the block's barrier. A shared object exports one
 * descriptor per kernel, made with KEEL_CPU_KERNEL_EXPORT, and a kernel can
 * also be registered from a function pointer with keel_kernel_register_cpu().
 */
#ifndef KEEL_KERNEL_H
#define KEEL_KERNEL_H

#include <stdint.h>
#include "keel/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct keel_module keel_module_t; /**< loaded code on one device (opaque) */
typedef struct keel_kernel keel_kernel_t; /**< one launchable function (opaque) */

/** @brief Three extents or indices, as CUDA's dim3. */
typedef struct keel_dim3 {
    unsigned x, y, z;
} keel_dim3_t;

/** @brief Most arguments a kernel may take. */
#define KEEL_MAX_KERNEL_ARGS 64
/** @brief Most bytes of argument values a launch may pass (as CUDA's 4 KiB). */
#define KEEL_MAX_KERNEL_ARG_BYTES 4096

/**
 * @brief Load a module from an image in memory.
 * @param[in] image the backend's binary (CUDA: cubin, fatbin or NUL-terminated PTX;
 *            CPU: not supported, use keel_module_load_file).
 * @param[out] module written only on success.
 * @return KEEL_ERROR_COMPILE_FAILED with the loader's log in the detail.
 * Ownership: the caller unloads with keel_module_unload(); kernels of the
 * module die with it.
 */
KEEL_API keel_status_t keel_module_load_data(keel_device_t *device, const void *image, size_t size,
                                             keel_module_t **module);

/** @brief Load a module from a file (CUDA: .cubin/.fatbin/.ptx; CPU: a shared object). */
KEEL_API keel_status_t keel_module_load_file(keel_device_t *device, const char *path, keel_module_t **module);

/**
 * @brief Compile kernel source at run time for @p device and load it
 *        (CUDA: CUDA C++ through NVRTC, cached on disk by source, options
 *        and architecture).
 * @param[in] options compiler options, @p num_options of them; may be NULL if 0.
 * @return KEEL_ERROR_NOT_SUPPORTED on backends without a run-time compiler;
 *         KEEL_ERROR_COMPILE_FAILED with the compiler log in the detail.
 */
KEEL_API keel_status_t keel_module_compile(keel_device_t *device, const char *source, const char *name,
                                           const char *const *options, int num_options, keel_module_t **module);

/**
 * @brief Unload a module. Synchronous: like keel_free, it first waits for all
 *        work on the module's device, so no launch of its kernels that is
 *        still queued can run after its code is gone.
 *        Not to be called from a host function (it would wait for itself).
 * @return KEEL_ERROR_BUSY while the device's default stream is capturing a
 *         graph. If waiting for the device reports an earlier asynchronous
 *         error, that error is returned and the module stays loaded (unload
 *         it again).
 * A graph that captured a launch of its kernels must not be launched after
 * the unload: Keel does not track which graphs use a module.
 * Ownership: its kernels die with it.
 */
KEEL_API keel_status_t keel_module_unload(keel_module_t *module);

/**
 * @brief Look up a kernel by name.
 * @return KEEL_ERROR_NOT_FOUND when the module has no such kernel.
 * Ownership: the kernel belongs to the module. Looking up the same name twice gives the same handle.
 */
KEEL_API keel_status_t keel_module_get_kernel(keel_module_t *module, const char *name, keel_kernel_t **kernel);

/**
 * @brief Launch @p kernel on @p stream.
 * @param[in] grid number of blocks in x, y, z (each > 0).
 * @param[in] block threads per block in x, y, z (each > 0, product within the device's limit).
 * @param[in] shared_bytes dynamic shared memory per block.
 * @param[in] args pointers to each argument's value, as many as the kernel takes;
 *            may be NULL for a kernel of no arguments.
 * @return KEEL_ERROR_DEVICE_MISMATCH if kernel and stream are on different devices.
 * Errors the kernel itself hits are reported by a later synchronize.
 */
KEEL_API keel_status_t keel_launch_kernel(keel_kernel_t *kernel, keel_dim3_t grid, keel_dim3_t block,
                                          size_t shared_bytes, keel_stream_t *stream, void **args);

/** @brief Kernel attributes for keel_kernel_get_attribute(). */
typedef enum keel_kernel_attribute {
    KEEL_KERNEL_ATTR_MAX_THREADS_PER_BLOCK = 0,
    KEEL_KERNEL_ATTR_SHARED_SIZE_BYTES = 1,   /**< static shared memory */
    KEEL_KERNEL_ATTR_NUM_REGS = 2,
    KEEL_KERNEL_ATTR_LOCAL_SIZE_BYTES = 3,
    KEEL_KERNEL_ATTR_NUM_ARGS = 4,
    KEEL_KERNEL_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES = 5
} keel_kernel_attribute_t;

/** @brief Read one attribute of a kernel. */
KEEL_API keel_status_t keel_kernel_get_attribute(keel_kernel_t *kernel, keel_kernel_attribute_t attr, int *value);

/**
 * @brief Raise the dynamic shared memory a launch of @p kernel may use
 *        (CUDA: past 48 KiB). KEEL_ERROR_NOT_SUPPORTED where meaningless.
 */
KEEL_API keel_status_t keel_kernel_set_max_dynamic_shared(keel_kernel_t *kernel, size_t bytes);

/**
 * @brief How many blocks of @p block_threads threads using @p shared_bytes
 *        can be resident on one compute unit at once.
 */
KEEL_API keel_status_t keel_kernel_max_active_blocks(keel_kernel_t *kernel, int block_threads,
                                                      size_t shared_bytes, int *blocks);

/** @brief Name of a kernel (static while the kernel lives). */
KEEL_API const char *keel_kernel_name(keel_kernel_t *kernel);

/* ---- CPU kernels -------------------------------------------------------- */

/** @brief What a CPU kernel sees of its launch. */
typedef struct keel_cpu_kernel_ctx {
    keel_dim3_t grid_dim;    /**< blocks in the grid */
    keel_dim3_t block_dim;   /**< threads in a block */
    keel_dim3_t block_idx;   /**< this block */
    void *shared_mem;        /**< this block's dynamic shared memory (NULL if none asked) */
    size_t shared_bytes;
} keel_cpu_kernel_ctx_t;

/** @brief A CPU kernel: called once per block; @p args[i] points at the i-th argument value. */
typedef void (*keel_cpu_kernel_fn_t)(const keel_cpu_kernel_ctx_t *ctx, void **args);

/** @brief Version of keel_cpu_kernel_desc_t. */
#define KEEL_CPU_KERNEL_ABI 1

/** @brief Describes a CPU kernel: its function and the size of each argument. */
typedef struct keel_cpu_kernel_desc {
    uint32_t abi_version;                     /**< KEEL_CPU_KERNEL_ABI */
    const char *name;
    keel_cpu_kernel_fn_t fn;
    unsigned num_args;
    size_t arg_sizes[KEEL_MAX_KERNEL_ARGS];   /**< sizeof each argument, in order */
} keel_cpu_kernel_desc_t;

/** @brief Prefix of the descriptor symbol a CPU module exports for each kernel. */
#define KEEL_CPU_KERNEL_SYMBOL_PREFIX "keel_cpu_kernel_"

/**
 * @brief Export CPU kernel @p fn from a shared object, with @p nargs arguments
 *        whose sizes follow: KEEL_CPU_KERNEL_EXPORT(saxpy, 4, sizeof(int), sizeof(float), sizeof(float *), sizeof(float *));
 */
#define KEEL_CPU_KERNEL_EXPORT(fn, nargs, ...)                                          \
    __attribute__((visibility("default"))) const keel_cpu_kernel_desc_t keel_cpu_kernel_##fn = \
        {KEEL_CPU_KERNEL_ABI, #fn, fn, (nargs), {__VA_ARGS__}}

/** @brief Loop @p tid (a keel_dim3_t variable declared by the macro) over the threads of the block, x fastest. */
#define KEEL_CPU_FOR_EACH_THREAD(ctx, tid)                                                  \
    for (keel_dim3_t tid = {0, 0, 0}; tid.z < (ctx)->block_dim.z; tid.z++, tid.y = 0)        \
        for (; tid.y < (ctx)->block_dim.y; tid.y++, tid.x = 0)                                \
            for (; tid.x < (ctx)->block_dim.x; tid.x++)

/**
 * @brief Register a CPU kernel given by pointer on a CPU device.
 * @return KEEL_ERROR_NOT_SUPPORTED on non-CPU devices.
 * Ownership: the caller releases it with keel_kernel_release().
 */
KEEL_API keel_status_t keel_kernel_register_cpu(keel_device_t *device, const keel_cpu_kernel_desc_t *desc,
                                                keel_kernel_t **kernel);

/** @brief Release a kernel made by keel_kernel_register_cpu(); kernels of modules are refused. */
KEEL_API keel_status_t keel_kernel_release(keel_kernel_t *kernel);

#ifdef __cplusplus
}
#endif

#endif /* KEEL_KERNEL_H */
