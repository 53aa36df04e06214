/* SPDX-License-Identifier: MIT */
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
 * Portable kernels: one source in Keel's kernel language (keel/kernel_lang.h)
 * for every backend, built at run time with keel_module_build(), or ahead of
 * time by keel-cc into a module file that keel_module_load_file() reads on
 * any device. Such kernels know their parameters, and keel_launch() (or
 * KEEL_LAUNCH) checks a launch against them.
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

/**
 * @brief Load a module from a file: a module file made by keel-cc (any
 *        backend: the part for the device, or its portable source compiled
 *        when it holds none), or the backend's own form (CUDA: .cubin,
 *        .fatbin, .ptx; HIP: a code object; CPU: a shared object of CPU kernels).
 * @return KEEL_ERROR_NOT_FOUND when the file is missing, or is a module file
 *         with neither code nor source for this device;
 *         KEEL_ERROR_COMPILE_FAILED when it cannot be loaded (a damaged file).
 */
KEEL_API keel_status_t keel_module_load_file(keel_device_t *device, const char *path, keel_module_t **module);

/**
 * @brief Compile source in the backend's own language at run time for
 *        @p device and load it: CUDA C++ through NVRTC on CUDA, HIP C++
 *        through hipRTC on HIP, C with KEEL_CPU_KERNEL_EXPORT descriptors
 *        through the system C compiler on the CPU; cached on disk as
 *        keel_module_build() is. For one source on every backend, use
 *        keel_module_build().
 * @param[in] options compiler options, @p num_options of them; may be NULL if 0.
 * @return KEEL_ERROR_NOT_SUPPORTED on backends without a run-time compiler;
 *         KEEL_ERROR_COMPILE_FAILED with the compiler log in the detail.
 */
KEEL_API keel_status_t keel_module_compile(keel_device_t *device, const char *source, const char *name,
                                           const char *const *options, int num_options, keel_module_t **module);

/**
 * @brief Build a module from portable kernel source for @p device: one
 *        source for every backend.
 *
 * The source is written in Keel's kernel language (keel/kernel_lang.h,
 * docs/kernel-language.md). Keel puts the language header in front of it,
 * translates the kernels' declarations for the device and compiles it there:
 * NVRTC on CUDA, hipRTC on HIP, the system C compiler on the CPU
 * (KEEL_CPU_CC, KEEL_CPU_CFLAGS). Each result is cached on disk
 * (KEEL_CACHE_DIR) by source, options, compiler and target: building the same
 * source again runs no compiler. KEEL_LOG=debug prints the compiler command
 * and where the generated source and the cached module are.
 * @param[in] source the kernel source, NUL-terminated.
 * @param[in] source_name what compiler messages call the source ("saxpy.kc"); NULL means "kernel.kc".
 * @param[in] options compiler options, @p num_options of them, passed as they are;
 *            -DNAME=VALUE and -UNAME mean the same on every backend.
 * @param[out] module written only on success.
 * @return KEEL_ERROR_COMPILE_FAILED with the compiler's log, whose messages
 *         name @p source_name and the line, when the source does not compile
 *         (or declares no kernel), or when the CPU backend finds no C compiler
 *         (the detail says to set KEEL_CPU_CC); KEEL_ERROR_NOT_SUPPORTED on a
 *         backend without a compiler for it.
 * Ownership: as keel_module_compile. The module knows each kernel's
 * parameters, so keel_launch() and KEEL_LAUNCH() check a launch against them.
 */
KEEL_API keel_status_t keel_module_build(keel_device_t *device, const char *source, const char *source_name,
                                         const char *const *options, int num_options, keel_module_t **module);

/**
 * @brief keel_module_build() on the contents of the file @p path, which compiler messages name.
 * @return KEEL_ERROR_NOT_FOUND when the file cannot be read; otherwise as keel_module_build().
 */
KEEL_API keel_status_t keel_module_build_file(keel_device_t *device, const char *path, const char *const *options,
                                              int num_options, keel_module_t **module);

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
 * @brief The device memory of the module's variable @p name
 *        (cuModuleGetGlobal, cudaGetSymbolAddress): a __device__ or
 *        __constant__ variable at namespace scope of CUDA or HIP code, a
 *        keel_global or keel_constant one of a portable kernel, a writable
 *        global of default visibility of a CPU module.
 *
 * The pointer is memory of the module's device, known to Keel's copies and
 * memsets for as long as the module lives: keel_memcpy() to it is
 * cudaMemcpyToSymbol, from it cudaMemcpyFromSymbol, and a copy past its end
 * is refused. Each module has variables of its own, also two modules of the
 * same code (on the CPU as on a GPU).
 * @param[in] name the variable's name as the code declares it (C++ does not
 *            mangle the names of variables at namespace scope).
 * @param[out] ptr its device address, written only on success.
 * @param[out] bytes its size in bytes (may be NULL).
 * @return KEEL_ERROR_NOT_FOUND naming the variable and the module when the
 *         module has no variable of that name, or the name is a kernel's;
 *         KEEL_ERROR_NOT_SUPPORTED on a backend without module globals, and
 *         on the CPU for a variable in read-only memory (declared const).
 * Ownership: the memory belongs to the module; keel_free() refuses it, and
 * keel_module_unload() ends it: copies and memsets refuse the stale pointer
 * (KEEL_ERROR_INVALID_POINTER) while the core still keeps the unloaded code
 * of the last few such modules, and later Keel no longer knows it. Looking
 * up the same name twice gives the same pointer.
 */
KEEL_API keel_status_t keel_module_get_global(keel_module_t *module, const char *name, void **ptr, size_t *bytes);

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

/**
 * @brief Launch @p kernel as keel_launch_kernel() does, after checking the
 *        arguments against the kernel's parameters.
 *
 * The parameters are known for kernels of keel_module_build(), of module
 * files made by keel-cc, and of registered CPU kernels (their descriptor);
 * for other kernels only the count is checked where the backend reports it.
 * @param[in] num_args the number of arguments passed.
 * @param[in] args pointers to the argument values, @p num_args of them.
 * @param[in] arg_sizes the size of each value (sizeof the variable passed).
 * @return KEEL_ERROR_INVALID_ARGUMENT naming the kernel, its parameters and
 *         the first mismatch when the count or a known size differs.
 */
KEEL_API keel_status_t keel_launch(keel_kernel_t *kernel, keel_dim3_t grid, keel_dim3_t block, size_t shared_bytes,
                                   keel_stream_t *stream, unsigned num_args, void **args, const size_t *arg_sizes);

/**
 * @brief Launch with the arguments written out, checked against the kernel's parameters:
 *        KEEL_LAUNCH(kernel, grid, block, 0, stream, n, a, x, y).
 *
 * Each argument may be any expression; its type is the one the kernel sees,
 * so pass an int for an int parameter (a size_t where an int is declared is
 * refused). At least one and at most 32 arguments (C only: it uses compound
 * literals and __typeof__); call keel_launch() for more, or none.
 */
#define KEEL_LAUNCH(kernel, grid, block, shared_bytes, stream, ...)                                     \
    keel_launch((kernel), (grid), (block), (shared_bytes), (stream), KEEL__NARG(__VA_ARGS__),             \
                (void *[]){KEEL__MAP(KEEL__ARG_ADDR, __VA_ARGS__)},                                       \
                (const size_t[]){KEEL__MAP(KEEL__ARG_SIZE, __VA_ARGS__)})
#define KEEL__ARG_ADDR(x) ((void *)&(__typeof__(x)){x})
#define KEEL__ARG_SIZE(x) sizeof(x)
#define KEEL__NARG(...) KEEL__NARG_(__VA_ARGS__, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1)
#define KEEL__NARG_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17, _18, _19, _20, _21, _22, _23, _24, _25, _26, _27, _28, _29, _30, _31, _32, n, ...) n
#define KEEL__CAT(a, b) KEEL__CAT_(a, b)
#define KEEL__CAT_(a, b) a##b
#define KEEL__MAP(m, ...) KEEL__CAT(KEEL__MAP_, KEEL__NARG(__VA_ARGS__))(m, __VA_ARGS__)
#define KEEL__MAP_1(m, a) m(a)
#define KEEL__MAP_2(m, a, ...) m(a), KEEL__MAP_1(m, __VA_ARGS__)
#define KEEL__MAP_3(m, a, ...) m(a), KEEL__MAP_2(m, __VA_ARGS__)
#define KEEL__MAP_4(m, a, ...) m(a), KEEL__MAP_3(m, __VA_ARGS__)
#define KEEL__MAP_5(m, a, ...) m(a), KEEL__MAP_4(m, __VA_ARGS__)
#define KEEL__MAP_6(m, a, ...) m(a), KEEL__MAP_5(m, __VA_ARGS__)
#define KEEL__MAP_7(m, a, ...) m(a), KEEL__MAP_6(m, __VA_ARGS__)
#define KEEL__MAP_8(m, a, ...) m(a), KEEL__MAP_7(m, __VA_ARGS__)
#define KEEL__MAP_9(m, a, ...) m(a), KEEL__MAP_8(m, __VA_ARGS__)
#define KEEL__MAP_10(m, a, ...) m(a), KEEL__MAP_9(m, __VA_ARGS__)
#define KEEL__MAP_11(m, a, ...) m(a), KEEL__MAP_10(m, __VA_ARGS__)
#define KEEL__MAP_12(m, a, ...) m(a), KEEL__MAP_11(m, __VA_ARGS__)
#define KEEL__MAP_13(m, a, ...) m(a), KEEL__MAP_12(m, __VA_ARGS__)
#define KEEL__MAP_14(m, a, ...) m(a), KEEL__MAP_13(m, __VA_ARGS__)
#define KEEL__MAP_15(m, a, ...) m(a), KEEL__MAP_14(m, __VA_ARGS__)
#define KEEL__MAP_16(m, a, ...) m(a), KEEL__MAP_15(m, __VA_ARGS__)
#define KEEL__MAP_17(m, a, ...) m(a), KEEL__MAP_16(m, __VA_ARGS__)
#define KEEL__MAP_18(m, a, ...) m(a), KEEL__MAP_17(m, __VA_ARGS__)
#define KEEL__MAP_19(m, a, ...) m(a), KEEL__MAP_18(m, __VA_ARGS__)
#define KEEL__MAP_20(m, a, ...) m(a), KEEL__MAP_19(m, __VA_ARGS__)
#define KEEL__MAP_21(m, a, ...) m(a), KEEL__MAP_20(m, __VA_ARGS__)
#define KEEL__MAP_22(m, a, ...) m(a), KEEL__MAP_21(m, __VA_ARGS__)
#define KEEL__MAP_23(m, a, ...) m(a), KEEL__MAP_22(m, __VA_ARGS__)
#define KEEL__MAP_24(m, a, ...) m(a), KEEL__MAP_23(m, __VA_ARGS__)
#define KEEL__MAP_25(m, a, ...) m(a), KEEL__MAP_24(m, __VA_ARGS__)
#define KEEL__MAP_26(m, a, ...) m(a), KEEL__MAP_25(m, __VA_ARGS__)
#define KEEL__MAP_27(m, a, ...) m(a), KEEL__MAP_26(m, __VA_ARGS__)
#define KEEL__MAP_28(m, a, ...) m(a), KEEL__MAP_27(m, __VA_ARGS__)
#define KEEL__MAP_29(m, a, ...) m(a), KEEL__MAP_28(m, __VA_ARGS__)
#define KEEL__MAP_30(m, a, ...) m(a), KEEL__MAP_29(m, __VA_ARGS__)
#define KEEL__MAP_31(m, a, ...) m(a), KEEL__MAP_30(m, __VA_ARGS__)
#define KEEL__MAP_32(m, a, ...) m(a), KEEL__MAP_31(m, __VA_ARGS__)

/** @brief Kernel attributes for keel_kernel_get_attribute(). */
typedef enum keel_kernel_attribute {
    KEEL_KERNEL_ATTR_MAX_THREADS_PER_BLOCK = 0,
    KEEL_KERNEL_ATTR_SHARED_SIZE_BYTES = 1,   /**< static shared memory */
    KEEL_KERNEL_ATTR_NUM_REGS = 2,
    KEEL_KERNEL_ATTR_LOCAL_SIZE_BYTES = 3,
    KEEL_KERNEL_ATTR_NUM_ARGS = 4,           /**< parameters: always known for a kernel built from portable source; from the
                                                  vendor otherwise (KEEL_ERROR_NOT_SUPPORTED on HIP) */
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
 *        can be resident on one compute unit at once: 0 for a launch the
 *        device would refuse (more threads than the kernel's
 *        KEEL_KERNEL_ATTR_MAX_THREADS_PER_BLOCK, more dynamic shared memory
 *        than its KEEL_KERNEL_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES), as CUDA answers.
 */
KEEL_API keel_status_t keel_kernel_max_active_blocks(keel_kernel_t *kernel, int block_threads,
                                                      size_t shared_bytes, int *blocks);

/**
 * @brief The block size that keeps the most threads of @p kernel resident,
 *        and the grid that fills the device with it
 *        (cudaOccupancyMaxPotentialBlockSize).
 *
 * Tries every multiple of the device's warp size up to the kernel's
 * KEEL_KERNEL_ATTR_MAX_THREADS_PER_BLOCK (and @p block_limit when > 0),
 * each with @p shared_bytes of dynamic shared memory, and picks the one
 * with the most resident threads per compute unit (the larger block on a
 * tie). A portable kernel that declares keel_block_size gets its declared
 * size, the only one it can be launched with.
 * @param[out] block_threads threads per block (one dimension).
 * @param[out] grid_blocks resident blocks per compute unit times the compute
 *             units: the smallest grid that fills the device (may be NULL).
 * @return KEEL_ERROR_INVALID_ARGUMENT when no block size fits (too much
 *         shared memory, or a block_limit below the warp size).
 */
KEEL_API keel_status_t keel_kernel_suggest_block_size(keel_kernel_t *kernel, size_t shared_bytes, int block_limit,
                                                      int *block_threads, int *grid_blocks);

/** @brief Name of a kernel (static while the kernel lives). */
KEEL_API const char *keel_kernel_name(keel_kernel_t *kernel);

/** @brief One parameter of a kernel. Set struct_size = sizeof(keel_kernel_param_t) before the call. */
typedef struct keel_kernel_param {
    size_t struct_size;   /**< [in] sizeof(keel_kernel_param_t) */
    char type[96];        /**< its type as the source writes it ("const float *"); "" when not known */
    char name[64];        /**< its name; "" when not known */
    size_t size;          /**< its size in bytes; 0 when not known */
} keel_kernel_param_t;

/**
 * @brief Parameter @p index of @p kernel, for kernels whose parameters Keel
 *        knows (see keel_launch()); how many there are is
 *        KEEL_KERNEL_ATTR_NUM_ARGS.
 * @return KEEL_ERROR_NOT_FOUND when Keel does not know the kernel's
 *         parameters; KEEL_ERROR_OUT_OF_RANGE for an index past them.
 */
KEEL_API keel_status_t keel_kernel_get_param(keel_kernel_t *kernel, unsigned index, keel_kernel_param_t *param);

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
 * @brief Optional second entry of a CPU kernel: runs the blocks [@p begin,
 *        @p end) of a launch in linear order (x fastest), starting from
 *        ctx->block_idx == block @p begin. A module may export one per kernel
 *        as KEEL_CPU_BLOCKS_SYMBOL_PREFIX<name>; the CPU backend then calls it
 *        once per range of blocks a thread takes, instead of the descriptor's
 *        function once per block (portable kernels export it).
 */
typedef void (*keel_cpu_blocks_fn_t)(const keel_cpu_kernel_ctx_t *ctx, void **args, size_t begin, size_t end);
/** @brief Prefix of the symbol of a kernel's keel_cpu_blocks_fn_t. */
#define KEEL_CPU_BLOCKS_SYMBOL_PREFIX "keel_cpu_blocks_"

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
