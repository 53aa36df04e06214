/* SPDX-License-Identifier: MIT */
/**
 * @file keel/backend.h
 * @brief The plugin ABI: what a backend implements and how Keel finds it.
 *
 * A backend plugin is a shared object exporting one function,
 * keel_backend_init, which returns a static keel_backend_plugin_t. Keel opens
 * plugins with dlopen(RTLD_NOW | RTLD_LOCAL) from KEEL_BACKEND_PATH and then
 * the installed plugin directory, checks abi_version, calls probe(), and keeps
 * the reason of every failure for keel-info and keel_backend_get_info().
 *
 * Objects are opaque to the core: a backend returns a void * context for each
 * device, stream, event, module, kernel, graph and graph exec, and the core
 * wraps it in its own checked handle. Every entry returns a keel_status_t; on
 * failure it calls host->set_error() with the detail (the vendor's error name
 * and message). The core has already validated handles, sizes and pointers
 * before any entry is called, and it serializes nothing: entries must be
 * thread-safe.
 *
 * An entry marked optional may be NULL; the core then answers
 * KEEL_ERROR_NOT_SUPPORTED (or emulates it where the comment says so).
 */
#ifndef KEEL_BACKEND_H
#define KEEL_BACKEND_H

#include <stdint.h>
#include "keel.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Version of this ABI. Raised whenever a struct below changes incompatibly. */
#define KEEL_BACKEND_ABI_VERSION 2

/** @brief Name of the symbol every plugin exports. */
#define KEEL_BACKEND_INIT_SYMBOL "keel_backend_init"

/**
 * @brief The places KEEL_FAULT can make fail (docs/reliability.md), one bit
 * each in keel_host_api_t.fault_armed.
 */
typedef enum keel_fault_site {
    KEEL_FAULT_HOST_ALLOC = 0,     /**< "host-alloc": a host allocation of Keel's own */
    KEEL_FAULT_DEVICE_ALLOC = 1,   /**< "device-alloc": a backend's alloc entry, before it is called */
    KEEL_FAULT_THREAD_CREATE = 2,  /**< "thread-create": a thread a backend starts */
    KEEL_FAULT_PLUGIN_LOAD = 3,    /**< "plugin-load": dlopen of a plugin or of a CPU module */
    KEEL_FAULT_VENDOR_CALL = 4,    /**< "vendor-call": a call into a GPU vendor's runtime */
    KEEL_FAULT_STREAM_ENQUEUE = 5, /**< "stream-enqueue": a command's enqueue on a stream */
    KEEL_FAULT_COMPILE = 6,        /**< "compile": the start of a run-time compiler */
    KEEL_FAULT_SITE_COUNT = 7
} keel_fault_site_t;

/** @brief How the core checks a plugin's environment variable (keel_env_decl_t). */
typedef enum keel_env_kind {
    KEEL_ENV_TEXT = 0,   /**< any text (a path, compiler flags): not checked */
    KEEL_ENV_CHOICE = 1, /**< one of the words of choices, '|'-separated; case does not matter */
    KEEL_ENV_UINT = 2    /**< a whole number from min to max, or one of the words of choices (NULL: none) */
} keel_env_kind_t;

/**
 * @brief One environment variable a plugin reads, in the table of
 * keel_backend_plugin_t.env (ended by an entry whose name is NULL). The core
 * checks every variable of the table before probe: a value that does not
 * parse makes the backend unusable, with a reason that names the variable
 * and the values it takes. keel_env_var_get() lists the table and keel-info
 * prints it. The plugin reads a value through keel_host_api_t.env_value.
 */
typedef struct keel_env_decl {
    const char *name;             /**< "KEEL_GPU_COPY_THREADS" */
    const char *alias;            /**< an older name, read when name is unset; or NULL */
    keel_env_kind_t kind;
    const char *choices;          /**< the words accepted, '|'-separated ("kernel|function"), or NULL */
    unsigned long long min, max;  /**< the range of KEEL_ENV_UINT */
    const char *default_text;     /**< what unset means, in words ("4096", "half the cores, at most 8") */
    const char *doc;              /**< one line: what it does */
} keel_env_decl_t;

/** @brief Services the core offers a plugin. */
typedef struct keel_host_api {
    uint32_t abi_version;   /**< KEEL_BACKEND_ABI_VERSION of the core */
    uint32_t struct_size;
    /** Record the detail of a failure on this thread and return @p status. printf-style. */
    keel_status_t (*set_error)(keel_status_t status, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
    /** Log a line at @p level (keel_log_level_t) if logging is at that level. */
    void (*log)(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
    /** Whether a message at @p level would be printed (to skip formatting). */
    int (*log_enabled)(int level);
    /* The run-time compilation cache every backend shares (KEEL_CACHE_DIR);
     * present when struct_size covers them. A key is 128 bits, hashed from
     * length-prefixed fields: everything that decides the compiled code. */
    /** Start a key. */
    void (*hash_init)(uint64_t key[2]);
    /** Mix @p size bytes into a key as one field. */
    void (*hash_field)(uint64_t key[2], const void *data, size_t size);
    /** Read the entry of @p kind ("nvrtc") and @p key: 1 and a malloc'ed, NUL-terminated copy, or 0 on a miss. */
    int (*cache_load)(const char *kind, const uint64_t key[2], void **data, size_t *size);
    /** Write an entry (atomically; failures are silent, as a miss costs only a compile). */
    void (*cache_store)(const char *kind, const uint64_t key[2], const void *data, size_t size);
    /* Fault injection (KEEL_FAULT); present when struct_size covers them. */
    /** The sites KEEL_FAULT arms, bit (1u << site) each; 0 when it is unset.
     *  Final before any plugin is loaded: a plugin may copy it at init. */
    const unsigned *fault_armed;
    /** Counts one call of @p site (keel_fault_site_t) and returns 1 when that
     *  call is to fail; only worth calling while the site's bit is set. The
     *  failure is logged; the caller fails as the real failure would, and its
     *  detail should say "injected" (see the CUDA plugin's KEEL_GPU_TRY). */
    int (*fault)(int site);
    /* The plugin's environment variables; present when struct_size covers it. */
    /** The value of a variable of the plugin's own env table, by its name (its
     *  alias is read when the name is unset); NULL when unset or empty. The
     *  value was checked before probe, so it parses as the table says. */
    const char *(*env_value)(const char *name);
} keel_host_api_t;

typedef struct keel_device_vtable {
    uint32_t struct_size; /**< sizeof(keel_device_vtable_t) the plugin was built with; entries past it are absent */
    keel_status_t (*open)(void *backend_ctx, int index, void **device_ctx);
    /** optional: release the device; called by keel_finalize() once its streams (the default
     *  one included), events, modules, graphs and memory are gone. */
    void (*close)(void *device_ctx);
    /** Fill every field of @p props (a full-size struct; the core copies what the caller asked). */
    keel_status_t (*get_properties)(void *device_ctx, keel_device_properties_t *props);
    keel_status_t (*memory_info)(void *device_ctx, size_t *free_bytes, size_t *total_bytes);
    keel_status_t (*synchronize)(void *device_ctx);
    /** optional: NULL means no peer access. */
    keel_status_t (*can_access_peer)(void *device_ctx, void *peer_device_ctx, int *can_access);
    keel_status_t (*stream_priority_range)(void *device_ctx, int *least, int *greatest);
} keel_device_vtable_t;

typedef struct keel_memory_vtable {
    uint32_t struct_size; /**< sizeof(keel_memory_vtable_t) the plugin was built with; entries past it are absent */
    /** @p kind is DEVICE, PINNED or MANAGED. OUT_OF_MEMORY must leave the device usable. */
    keel_status_t (*alloc)(void *device_ctx, keel_memory_kind_t kind, size_t bytes, void **ptr);
    /** Called after the core synchronized the device and every other device that was
     *  handed the block (see keel_free); possibly long after keel_free, from another
     *  thread's call (see docs/backend-authors.md). */
    keel_status_t (*free)(void *device_ctx, keel_memory_kind_t kind, void *ptr);
    /** optional: stream-ordered device allocation; NULL makes the core use alloc after no wait. */
    keel_status_t (*alloc_async)(void *stream_ctx, size_t bytes, void **ptr);
    /** optional: stream-ordered free; NULL makes the core synchronize the stream and free. */
    keel_status_t (*free_async)(void *stream_ctx, void *ptr);
    /** Copy on a stream; the kinds come from the registry (HOST for memory Keel did not allocate). */
    keel_status_t (*memcpy_async)(void *stream_ctx, void *dst, keel_memory_kind_t dst_kind, const void *src,
                                  keel_memory_kind_t src_kind, size_t bytes);
    /** optional: synchronous copy ordered after @p stream_ctx (the default stream); NULL makes the
     *  core use memcpy_async + stream synchronize. */
    keel_status_t (*memcpy_sync)(void *stream_ctx, void *dst, keel_memory_kind_t dst_kind, const void *src,
                                 keel_memory_kind_t src_kind, size_t bytes);
    keel_status_t (*memset_async)(void *stream_ctx, void *dst, int value, size_t bytes);
    /** optional: copy between devices of this backend, enqueued on @p stream_ctx (a stream of either). */
    keel_status_t (*memcpy_peer_async)(void *stream_ctx, void *dst, void *dst_device_ctx, const void *src,
                                       void *src_device_ctx, size_t bytes);
    /* Entries past this point are optional, read only when struct_size covers them. */
    /** optional: @p height rows of @p width bytes, pitches checked (width <= each pitch) and
     *  extents in bounds; also between two devices' memory. NULL makes the core copy row by row. */
    keel_status_t (*memcpy_2d_async)(void *stream_ctx, void *dst, keel_memory_kind_t dst_kind, size_t dst_pitch,
                                     const void *src, keel_memory_kind_t src_kind, size_t src_pitch, size_t width,
                                     size_t height);
    /** optional: NULL makes the core set row by row. */
    keel_status_t (*memset_2d_async)(void *stream_ctx, void *dst, size_t pitch, int value, size_t width,
                                     size_t height);
    /** optional: page-lock the application's host memory for fast copies with every device
     *  (the range does not overlap any Keel allocation). NULL: keel_host_register is NOT_SUPPORTED. */
    keel_status_t (*host_register)(void *device_ctx, void *ptr, size_t bytes);
    /** Undo host_register, after the core waited for every device the memory was handed to. */
    keel_status_t (*host_unregister)(void *device_ctx, void *ptr);
    /** optional: migrate managed memory toward @p to_device_ctx (NULL: the host), ordered on the
     *  stream. NULL: a hint the backend does not take (the core checks and does nothing). */
    keel_status_t (*prefetch_async)(void *stream_ctx, const void *ptr, size_t bytes, void *to_device_ctx);
    /** optional: a keel_memory_advice_t on managed memory of device_ctx; @p target_device_ctx is
     *  the device it names (NULL: the host). NULL: a hint the backend does not take. */
    keel_status_t (*advise)(void *device_ctx, const void *ptr, size_t bytes, int advice, void *target_device_ctx);
} keel_memory_vtable_t;

typedef struct keel_stream_vtable {
    uint32_t struct_size; /**< sizeof(keel_stream_vtable_t) the plugin was built with; entries past it are absent */
    /** @p priority is already clamped to the device's range. */
    keel_status_t (*create)(void *device_ctx, unsigned flags, int priority, void **stream_ctx);
    /** Waits for the stream's work, then releases it. */
    keel_status_t (*destroy)(void *stream_ctx);
    keel_status_t (*synchronize)(void *stream_ctx);
    /** KEEL_OK when idle, KEEL_ERROR_NOT_READY when not (without setting an error). */
    keel_status_t (*query)(void *stream_ctx);
    keel_status_t (*wait_event)(void *stream_ctx, void *event_ctx);
    keel_status_t (*launch_host_func)(void *stream_ctx, keel_host_fn_t fn, void *user_data);
    /** optional: graph capture. */
    keel_status_t (*begin_capture)(void *stream_ctx);
    keel_status_t (*end_capture)(void *stream_ctx, void **graph_ctx);
    /** optional: the vendor's stream handle (keel_stream_get_native). */
    keel_status_t (*get_native)(void *stream_ctx, uintptr_t *native);
    /** optional: a vendor stream waits for the stream's work so far (keel_stream_order_native). */
    keel_status_t (*order_native)(void *stream_ctx, uintptr_t native);
} keel_stream_vtable_t;

typedef struct keel_event_vtable {
    uint32_t struct_size; /**< sizeof(keel_event_vtable_t) the plugin was built with; entries past it are absent */
    keel_status_t (*create)(void *device_ctx, unsigned flags, void **event_ctx);
    keel_status_t (*destroy)(void *event_ctx);
    keel_status_t (*record)(void *event_ctx, void *stream_ctx);
    keel_status_t (*synchronize)(void *event_ctx);
    /** KEEL_OK when done, KEEL_ERROR_NOT_READY when not (without setting an error). */
    keel_status_t (*query)(void *event_ctx);
    keel_status_t (*elapsed_time)(void *start_ctx, void *end_ctx, float *ms);
} keel_event_vtable_t;

typedef struct keel_kernel_vtable {
    uint32_t struct_size; /**< sizeof(keel_kernel_vtable_t) the plugin was built with; entries past it are absent */
    /** optional each: the forms of module the backend accepts. */
    keel_status_t (*module_load_data)(void *device_ctx, const void *image, size_t size, void **module_ctx);
    keel_status_t (*module_load_file)(void *device_ctx, const char *path, void **module_ctx);
    keel_status_t (*module_compile)(void *device_ctx, const char *source, const char *name,
                                    const char *const *options, int num_options, void **module_ctx);
    /** Called after the core synchronized the module's device (see keel_module_unload). */
    keel_status_t (*module_unload)(void *module_ctx);
    /** NOT_FOUND (with set_error) when absent. The core caches the result per name. */
    keel_status_t (*module_get_kernel)(void *module_ctx, const char *name, void **kernel_ctx);
    /** optional: CPU backends only. */
    keel_status_t (*kernel_register_cpu)(void *device_ctx, const keel_cpu_kernel_desc_t *desc, void **kernel_ctx);
    /** Releases a kernel from module_get_kernel or kernel_register_cpu. */
    void (*kernel_release)(void *kernel_ctx);
    /** The hot path: dims and args are already checked non-zero / non-NULL where needed. */
    keel_status_t (*launch)(void *kernel_ctx, keel_dim3_t grid, keel_dim3_t block, size_t shared_bytes,
                            void *stream_ctx, void **args);
    keel_status_t (*get_attribute)(void *kernel_ctx, keel_kernel_attribute_t attr, int *value);
    /** optional */
    keel_status_t (*set_max_dynamic_shared)(void *kernel_ctx, size_t bytes);
    /** optional; *blocks = 0 for a launch that launch() would refuse */
    keel_status_t (*max_active_blocks)(void *kernel_ctx, int block_threads, size_t shared_bytes, int *blocks);
    /** optional: the device address and size in bytes of the module's
     *  variable @p name (a __device__ or __constant__ variable, a keel_global
     *  or keel_constant one), valid until module_unload. NOT_FOUND (with
     *  set_error) when the module has no such variable or the name is a
     *  function's. The core caches the result per name. */
    keel_status_t (*module_get_global)(void *module_ctx, const char *name, void **ptr, size_t *bytes);
} keel_kernel_vtable_t;

typedef struct keel_graph_vtable {
    uint32_t struct_size; /**< sizeof(keel_graph_vtable_t) the plugin was built with; entries past it are absent */
    keel_status_t (*instantiate)(void *graph_ctx, void **exec_ctx);
    keel_status_t (*launch)(void *exec_ctx, void *stream_ctx);
    keel_status_t (*destroy)(void *graph_ctx);
    keel_status_t (*exec_destroy)(void *exec_ctx);
} keel_graph_vtable_t;

/** @brief What a plugin's keel_backend_init returns. Static; never freed. */
typedef struct keel_backend_plugin {
    uint32_t abi_version;   /**< KEEL_BACKEND_ABI_VERSION the plugin was built with */
    uint32_t struct_size;   /**< sizeof(keel_backend_plugin_t) the plugin was built with */
    const char *name;       /**< "cuda"; must match the plugin file name `keel-<name>.so` */
    /**
     * Load the vendor library, count devices. On failure call host->set_error
     * with the reason ("libcuda.so.1 not found", "no CUDA device") and return
     * KEEL_ERROR_BACKEND_UNAVAILABLE or KEEL_ERROR_NO_DEVICE.
     * @param[out] description a static one-line string ("CUDA 13.0, driver 13.0").
     */
    keel_status_t (*probe)(const keel_host_api_t *host, void **backend_ctx, int *device_count,
                           const char **description);
    /** optional: release the backend context. Called by keel_finalize() after every device of
     *  the backend was closed, and then the plugin is unloaded (dlclose); a later
     *  initialization loads it again and calls keel_backend_init and probe afresh. At
     *  process exit it is called only if no device of the plugin was opened (the vendor
     *  runtime may be gone by then: see docs/reliability.md). */
    void (*shutdown)(void *backend_ctx);
    const keel_device_vtable_t *device;
    const keel_memory_vtable_t *memory;
    const keel_stream_vtable_t *stream;
    const keel_event_vtable_t *event;
    const keel_kernel_vtable_t *kernel;
    const keel_graph_vtable_t *graph;   /**< optional */
    const void *ops;                    /**< optional: built-in operations table (keel/ops.h), NULL until defined */
    const keel_env_decl_t *env;         /**< optional: the plugin's environment variables, ended by a NULL name */
    const void *reserved[6];            /**< zero */
} keel_backend_plugin_t;

/** @brief Type of the exported init function. */
typedef const keel_backend_plugin_t *(*keel_backend_init_fn_t)(const keel_host_api_t *host);

#ifdef __cplusplus
}
#endif

#endif /* KEEL_BACKEND_H */
