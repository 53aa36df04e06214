/* SPDX-License-Identifier: MIT */
/* Internal declarations of the core: object layouts, the registry, errors.
 * Nothing here is part of the public or plugin ABI. */
#ifndef KEEL_CORE_INTERNAL_H
#define KEEL_CORE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdint.h>
#include <time.h>
#include "keel/backend.h"
#include "runtime/fault.h"

#define KEEL_HIDDEN __attribute__((visibility("hidden")))

/* Every handle starts with a magic word naming its type. A destroyed handle
 * gets KEEL__MAGIC_DEAD and its memory is kept in a per-type free list, so a
 * stale handle reads as dead (or as a live object of the same type, the ABA
 * case every pointer-handle runtime has) and never as freed memory. */
enum {
    KEEL__MAGIC_DEAD = 0x6b64656fu,
    KEEL__MAGIC_BACKEND = 0x6b626b64u,
    KEEL__MAGIC_DEVICE = 0x6b646576u,
    KEEL__MAGIC_STREAM = 0x6b737472u,
    KEEL__MAGIC_EVENT = 0x6b657674u,
    KEEL__MAGIC_MODULE = 0x6b6d6f64u,
    KEEL__MAGIC_KERNEL = 0x6b6b726eu,
    KEEL__MAGIC_GRAPH = 0x6b677270u,
    KEEL__MAGIC_GRAPH_EXEC = 0x6b677865u,
    KEEL__MAGIC_TENSOR = 0x6b746e73u
};

/* The most environment variables one plugin may declare. */
#define KEEL__ENV_DECL_MAX 16

struct keel_backend {
    uint32_t magic;
    char name[32];
    char plugin_path[4096];       /* "" when no file was found */
    char reason[1024];            /* why not usable */
    const char *description;
    keel_status_t status;         /* KEEL_OK when usable */
    int abi_version;
    const keel_backend_plugin_t *plugin;
    void *ctx;                    /* backend_ctx from probe */
    void *dl;                     /* dlopen handle, NULL for built-in */
    int device_count;
    struct keel_device *devices;  /* device_count of them */
    int builtin;                  /* the CPU backend: no file, no dlopen */
    pthread_mutex_t lock;         /* guards the first load */
    atomic_int loaded;            /* load attempted (status/reason final) */
    /* The plugin's environment table (runtime/env_decl.c), copied when it
     * was checked: kept, for keel_env_var_get, after a probe that failed
     * unloaded the plugin. */
    int env_count;
    char env_name[KEEL__ENV_DECL_MAX][64];
    char env_alias[KEEL__ENV_DECL_MAX][64];
    char env_desc[KEEL__ENV_DECL_MAX][320];
};

struct keel_device {
    uint32_t magic;
    struct keel_backend *backend;
    const keel_backend_plugin_t *plugin; /* == backend->plugin, one hop less on hot paths */
    int index;
    char name[48];                /* "cuda:0" */
    pthread_mutex_t open_lock;    /* guards the first open */
    atomic_int opened;            /* 1 once open succeeded */
    void *ctx;
    struct keel_stream *default_stream;
    /* Launch limits, read at open so a launch checks them without a call. */
    unsigned max_threads_per_block;
    unsigned max_block[3];
    unsigned max_grid[3];
    /* Streams of this device that hold a block for reuse (runtime/reuse.c). */
    pthread_mutex_t reuse_lock;
    struct keel_stream *reuse_list;
    /* Its number among the opened devices of every backend, given at open:
     * its bit in an allocation's reach (keel__reach_bit). */
    unsigned slot;
    /* Which BLAS its operations use, and Keel's portable kernels once built
     * (runtime/ops_fallback.c); made at the first call that asks. */
    struct keel__blas *_Atomic blas;
};

struct keel_stream {
    uint32_t magic;
    struct keel_device *device;
    void *ctx;
    int priority;
    int is_default;
    atomic_int capturing;
    /* The block the last keel_free_async on this stream kept for the next
     * keel_malloc_async of the same size here (runtime/reuse.c; written
     * under the device's reuse_lock, with atomic stores, so that an
     * allocation may see an empty slot without taking the lock). */
    void *reuse_ptr;
    size_t reuse_size;
    int reuse_stream_ordered;
    struct keel_stream *reuse_next, **reuse_pprev;
};

struct keel_event {
    uint32_t magic;
    struct keel_device *device;
    void *ctx;
    unsigned flags;
};

struct keel__ksig;
struct keel__ksource;

struct keel_kernel {
    uint32_t magic;
    struct keel_device *device;
    void *ctx;
    struct keel_module *module;   /* NULL for registered CPU kernels */
    char *name;
    /* The parameters, where known: from a portable source or a module file
     * (the module's table), or from a CPU descriptor (own_sig, owned). */
    const struct keel__ksig *sig;
    struct keel__ksig *own_sig;
    unsigned block_size[3];       /* keel_block_size(x, y, z) of the source, or zeros */
    uint64_t pointer_params;      /* bit i: parameter i is declared a pointer (sig's types) */
};

struct keel_module {
    uint32_t magic;
    struct keel_device *device;
    void *ctx;
    pthread_mutex_t lock;
    struct keel_kernel **kernels; /* looked-up kernels, owned */
    size_t nkernels, capkernels;
    struct keel__ksource *sigs;   /* kernels' signatures (portable sources, module files), owned; or NULL */
    struct keel__global *globals; /* variables handed out, each in the registry (runtime/module_global.c), owned */
    size_t nglobals, capglobals;
};

struct keel_graph {
    uint32_t magic;
    struct keel_device *device;
    void *ctx;
};

struct keel_graph_exec {
    uint32_t magic;
    struct keel_device *device;
    void *ctx;
};

/* ---- errors and logging (runtime/error.c, runtime/log.c) ---- */
KEEL_HIDDEN keel_status_t keel__set_error(keel_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Sets the error to "<formatted prefix>: <the detail already set>", e.g. to
 * say which Keel call a backend's failure belongs to. */
KEEL_HIDDEN keel_status_t keel__prefix_error(keel_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Puts back a saved error detail without logging it again. */
KEEL_HIDDEN void keel__restore_error(keel_status_t status, const char *detail);
KEEL_HIDDEN keel_status_t keel__set_error_v(keel_status_t status, const char *fmt, va_list ap);
KEEL_HIDDEN void keel__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- portable kernels (runtime/kernel_build.c) ---- */
/* Wraps a backend module in a handle; on failure unloads it. @p sigs (may be
 * NULL) passes to the module. */
KEEL_HIDDEN keel_status_t keel__module_wrap(struct keel_device *d, void *ctx, struct keel__ksource *sigs,
                                            keel_module_t **module);
/* Frees a signature table (NULL is fine). */
KEEL_HIDDEN void keel__sigs_free(struct keel__ksource *sigs);
/* keel_module_load_file's handling of module files made by keel-cc: 1 when
 * @p path is one (the result in *st), 0 when it is not. */
KEEL_HIDDEN int keel__module_file_load(struct keel_device *d, const char *path, keel_module_t **module,
                                       keel_status_t *st);

/* Waits until every device a copy handed the module's variables to is done
 * with them (keel_module_unload; the module's own device is idle already).
 * A failure leaves the module as it was. */
KEEL_HIDDEN keel_status_t keel__module_globals_release(struct keel_module *m);
/* Forgets m's globals at once, without waiting (keel_finalize has waited). */
KEEL_HIDDEN void keel__module_globals_drop(struct keel_module *m);
/* For keel_module_unload, once its device is idle: when m handed out
 * variables, keeps its backend module loaded for a while (at most
 * KEEL__HOLD_MAX_MODULES of them, the oldest unloaded first) and remembers
 * the variables in the record of freed blocks (KEEL__FREED_MODULE), so that
 * a copy or memset through a stale pointer is refused instead of touching
 * memory the unload gave back. Returns 1 when the backend module is held
 * (the caller must not unload it), 0 when the caller unloads it now. */
#define KEEL__HOLD_MAX_MODULES 4
KEEL_HIDDEN int keel__module_globals_hold(struct keel_module *m);
/* Unloads every held backend module whose device passes backend_ok, and
 * forgets the rest (keel_finalize). */
KEEL_HIDDEN void keel__module_held_teardown(int (*backend_ok)(const struct keel_device *d));

/* ---- shared objects mapped as a fresh copy (runtime/image_file.c) ---- */
#define KEEL__IMAGE_FILE_PASSES 16
typedef struct keel__image_file {
    int fd;
    char path[4200];   /* the name to give dlopen while the file is open */
    char tmp[4200];    /* a temporary file that close removes, or "" */
    int passed[KEEL__IMAGE_FILE_PASSES], npassed;
} keel__image_file_t;
/* Writes @p image into an anonymous file (a memfd, else a temporary file)
 * whose path names no library loaded already, so that dlopen of f->path
 * maps a copy of its own. 0, or -1 with the reason in why. */
KEEL_HIDDEN int keel__image_file_open(keel__image_file_t *f, const void *image, size_t size, char *why, size_t cap);
/* Closes the file (dlopen keeps what it mapped). */
KEEL_HIDDEN void keel__image_file_close(keel__image_file_t *f);

/* ---- the run-time compilation cache (runtime/cache.c) ---- */
KEEL_HIDDEN void keel__hash_init(uint64_t h[2]);
KEEL_HIDDEN void keel__hash_field(uint64_t h[2], const void *data, size_t n);
KEEL_HIDDEN void keel__hash_str(uint64_t h[2], const char *s);
/* The cache directory into @p buf; 0 when caching is off or it does not fit. */
KEEL_HIDDEN int keel__cache_dir(char *buf, size_t size);
/* "<dir>/<kind>-<key><ext>", creating the directory; 0 when caching is off. */
KEEL_HIDDEN int keel__cache_path(const char *kind, const uint64_t key[2], const char *ext, char *buf, size_t size);
/* Renames a finished file into place; on failure removes it and returns 0. */
KEEL_HIDDEN int keel__cache_install(const char *tmp_path, const char *path);
KEEL_HIDDEN int keel__cache_load(const char *kind, const uint64_t key[2], void **data, size_t *size);
KEEL_HIDDEN void keel__cache_store(const char *kind, const uint64_t key[2], const void *data, size_t size);
KEEL_HIDDEN void keel__log_v(int level, const char *fmt, va_list ap);
KEEL_HIDDEN int keel__log_enabled(int level);
KEEL_HIDDEN extern const keel_host_api_t keel__host_api;

/* ---- handles (runtime/handle.c) ---- */
KEEL_HIDDEN void *keel__handle_alloc(uint32_t magic, size_t size);
KEEL_HIDDEN void keel__handle_release(void *handle);
/* The first live handle of this type for which pick (NULL: any) says 1, or
 * NULL: keel_finalize's walk over what the application did not destroy. */
KEEL_HIDDEN void *keel__handle_find_live(uint32_t magic, int (*pick)(void *obj, void *arg), void *arg);
/* While on, a released handle reads as destroyed but keeps what it points
 * to, and is never reused: the teardown of objects it cannot release (a
 * child of fork) leaves them reachable, not leaked. */
KEEL_HIDDEN void keel__handle_keep_contents(int on);

/* ---- releasing objects (keel_finalize, runtime/finalize.c) ----
 * Each releases the handle whatever its backend says; with backend 0 no
 * backend entry is called (a plugin left alone at process exit). */
KEEL_HIDDEN keel_status_t keel__module_forget(struct keel_module *module, int backend);
/* backend for keel__module_forget from keel_module_unload: the backend
 * module may stay loaded a while for its variables (keel__module_globals_hold). */
#define KEEL__FORGET_HOLD 2
KEEL_HIDDEN void keel__kernel_forget(struct keel_kernel *kernel, int backend);
KEEL_HIDDEN keel_status_t keel__graph_forget(struct keel_graph *graph, int backend);
KEEL_HIDDEN keel_status_t keel__graph_exec_forget(struct keel_graph_exec *exec, int backend);
KEEL_HIDDEN keel_status_t keel__event_forget(struct keel_event *event, int backend);
/* Ends a capture and destroys the stream (keel__devices_flush took the
 * block it kept for reuse). */
KEEL_HIDDEN void keel__stream_forget(struct keel_stream *stream, int backend);
/* runtime/memory.c: gives every live allocation and every freed block the core
 * holds back to its backend (none of a device for which backend_ok says 0). */
KEEL_HIDDEN void keel__memory_teardown(int (*backend_ok)(const struct keel_device *d));
/* runtime/dlpack.c: releases every imported tensor the application did not,
 * calling its producer's deleter when deleters is set (not at exit, where
 * the producer may be gone, nor in a child of fork). */
KEEL_HIDDEN void keel__dlpack_teardown(int deleters);
/* runtime/device.c: flush: frees the blocks the streams of every opened device
 * keep for reuse; close: the default stream and the device itself of every
 * opened device (backend_ok as above), after which no device is open and
 * the slots start again from 0. */
KEEL_HIDDEN void keel__devices_flush(int (*backend_ok)(const struct keel_device *d));
KEEL_HIDDEN void keel__devices_close(int (*backend_ok)(const struct keel_device *d));
/* runtime/loader.c: shuts every backend down and unloads its plugin (not a
 * plugin for which keep says 1), forgets the plugin directories. */
KEEL_HIDDEN void keel__loader_teardown(int (*keep)(const struct keel_backend *b));
/* runtime/finalize.c: releases everything (init_lock held). At exit: commands
 * queued are skipped and GPU plugins in use left alone; in a child of fork:
 * only Keel's records are released, no backend is called (the threads are
 * the parent's). 0, or -1 when at exit something still runs and everything
 * was left as it was. */
enum { KEEL__TEARDOWN_FINALIZE, KEEL__TEARDOWN_EXIT, KEEL__TEARDOWN_FORKED };
KEEL_HIDDEN int keel__teardown(int mode);

/* ---- initialization and selection (runtime/init.c) ---- */
/* Runs keel_init once; returns its status (environment/selection errors),
 * re-setting the thread's error detail when it is a failure. */
KEEL_HIDDEN keel_status_t keel__ensure_init(void);
/* Runs keel_init once; KEEL_ERROR_INVALID_ENVIRONMENT (detail set) when a
 * KEEL_* variable of the core or of the CPU backend cannot be parsed, else
 * KEEL_OK even where the default selection failed. Every way to a device
 * checks it. */
KEEL_HIDDEN keel_status_t keel__ensure_env(void);
/* Checks a device handle and opens the device on first use (creating its
 * default stream); on failure sets the error, prefixed with fn. */
KEEL_HIDDEN keel_status_t keel__device_ready(struct keel_device *dev, const char *fn);

/* ---- allocation registry (runtime/registry.c) ---- */
typedef struct keel__alloc {
    uintptr_t base;
    size_t size;
    keel_memory_kind_t kind;
    struct keel_device *device;
    int stream_ordered;           /* from keel_malloc_async: freed through free_async */
    int foreign;                  /* not Keel's own: one of KEEL__FOREIGN_* */
    /* Devices other than the owner whose streams were handed the block by
     * a copy or memset, one bit each (keel__reach_bit): keel_free waits for
     * them too. Bits are only ever added while the block lives. */
    uint64_t reach;
} keel__alloc_t;
/* Where memory the registry holds but Keel did not allocate comes from. */
enum {
    KEEL__FOREIGN_DLPACK = 1,     /* another library's, imported through DLPack (runtime/dlpack.c) */
    KEEL__FOREIGN_REGISTERED = 2, /* the application's, pinned by keel_host_register (runtime/host_register.c) */
    KEEL__FOREIGN_MODULE = 3      /* a module's variable, from keel_module_get_global (runtime/module_global.c) */
};
KEEL_HIDDEN keel_status_t keel__registry_add(void *base, size_t size, keel_memory_kind_t kind,
                                             struct keel_device *dev, int stream_ordered);
/* Enters memory Keel did not allocate, [base, base + size), as a foreign
 * allocation of dev (origin: KEEL__FOREIGN_*), unless it overlaps a live allocation: then adds
 * nothing, sets *overlapped and returns that allocation in *overlap. */
KEEL_HIDDEN keel_status_t keel__registry_add_foreign(void *base, size_t size, keel_memory_kind_t kind,
                                                     struct keel_device *dev, int origin, keel__alloc_t *overlap,
                                                     int *overlapped);
/* Waits for owner (when owner_too) and every device in reach, as keel_free
 * does before it releases a block; *failed names the device that failed. */
KEEL_HIDDEN keel_status_t keel__wait_for_devices(struct keel_device *owner, uint64_t reach, int owner_too,
                                                 struct keel_device **failed);
/* Puts back an allocation that keel__registry_remove took out, reach
 * included, and forgets what the record of freed blocks says of its base. */
KEEL_HIDDEN keel_status_t keel__registry_put_back(const keel__alloc_t *a);
/* Removes an allocation by its exact base; INVALID_POINTER if none. */
KEEL_HIDDEN keel_status_t keel__registry_remove(void *base, keel__alloc_t *out);
/* Finds the allocation holding ptr; returns 1 and fills out, else 0. */
KEEL_HIDDEN int keel__registry_find(const void *ptr, keel__alloc_t *out);
/* As keel__registry_find, but returns the calling thread's cached copy of
 * the allocation (NULL if none), valid until this thread's next registry
 * call: the validation fast path of the built-in operations reads it in
 * place. */
KEEL_HIDDEN const keel__alloc_t *keel__registry_lookup(const void *ptr);
/* The records of n pointers (n <= 4) from the calling thread's lookup
 * cache alone, all or none: 1 with out[i] set when the cache holds every
 * one, else 0 (then keel__registry_lookup each). One search for all of
 * them: the call of an operation on a few buffers pays the cache's
 * address, its validity test and its loads once. */
KEEL_HIDDEN int keel__registry_lookup_cached(const void *const *ptrs, int n, const keel__alloc_t **out);
/* Adds dev to the reach of the live allocation at exactly base (nothing if
 * there is none). The caller checks its copy's reach first: the call takes
 * the registry lock, and a new bit invalidates every thread's cache. */
KEEL_HIDDEN void keel__registry_add_reach(uintptr_t base, struct keel_device *dev);

/* The bit of a device in keel__alloc_t.reach: devices past the 63rd share
 * the last bit, which makes keel_free wait for all of them. */
#define KEEL__REACH_SLOTS 63
static inline uint64_t keel__reach_bit(const struct keel_device *d)
{
    return (uint64_t)1 << (d->slot < KEEL__REACH_SLOTS ? d->slot : KEEL__REACH_SLOTS);
}
/* runtime/device.c: the opened device with this slot (< KEEL__REACH_SLOTS), or NULL. */
KEEL_HIDDEN struct keel_device *keel__device_at_slot(unsigned slot);
/* runtime/device.c: synchronizes every opened device whose slot is at least
 * KEEL__REACH_SLOTS except skip; the first failure, with *failed set. */
KEEL_HIDDEN keel_status_t keel__synchronize_far_devices(const struct keel_device *skip,
                                                        struct keel_device **failed);

/* What a pointer that is in no live allocation is, as far as the registry
 * can tell (keel__registry_classify). */
typedef enum keel__ptr_class {
    KEEL__PTR_LIVE = 0,     /* in a live allocation: *out is it */
    KEEL__PTR_UNKNOWN,      /* nothing Keel knows: host memory */
    KEEL__PTR_PAST_END,     /* exactly the end of the live allocation *out (and bytes > 0) */
    KEEL__PTR_RUNS_INTO,    /* starts outside any allocation, but [ptr, ptr + bytes) overlaps *out */
    KEEL__PTR_FREED,        /* [ptr, ptr + bytes) (at least ptr itself) overlaps the freed block *out */
} keel__ptr_class_t;
/* Classifies the range [ptr, ptr + bytes): the lookup of keel__registry_find
 * and, for a pointer it does not find, why under the same lock. */
KEEL_HIDDEN keel__ptr_class_t keel__registry_classify(const void *ptr, size_t bytes, keel__alloc_t *out);
/* keel__registry_classify of n ranges (n <= 4): cls[i] and out[i] for
 * [ptrs[i], ptrs[i] + bytes[i]). The pointers the thread's cache does not
 * hold are looked up under one hold of the lock, their index slots asked
 * for together: with many live allocations, the lookups of a copy's two
 * sides then wait for memory once rather than twice. */
KEEL_HIDDEN void keel__registry_classify_n(const void *const *ptrs, const size_t *bytes, int n, keel__alloc_t *out,
                                           keel__ptr_class_t *cls);

/* The record of recently freed blocks, which keel__registry_classify
 * consults. It remembers KEEL__FREED_SLOTS blocks. A remembered block's
 * addresses must not become someone else's host memory meanwhile, or a
 * valid host pointer would be refused as freed; so a block is remembered
 * only while it is still allocated: a block the core keeps for the purpose
 * (held: memory that keel_free frees, not stream-ordered, of at most
 * KEEL__HOLD_MAX_BYTES, at most KEEL__HOLD_MAX_BLOCKS of them), or a block
 * a stream keeps for reuse, or a variable of an unloaded module whose code
 * the core keeps loaded for the purpose. Once any block is given back to its backend
 * its addresses may become host memory: a GPU driver with unified
 * addressing releases device memory's address range too, and the host's
 * allocator maps it again (seen with CUDA on an H200), so a GPU's device
 * memory is no exception. Other blocks are not remembered. */
#define KEEL__FREED_SLOTS 64
#define KEEL__HOLD_MAX_BYTES ((size_t)1 << 20)
#define KEEL__HOLD_MAX_BLOCKS 16
typedef enum keel__freed_state {
    KEEL__FREED_FORGET = 0,  /* not remembered (any entry of the base is dropped) */
    KEEL__FREED_HELD,        /* still allocated: the core releases it when it is no longer remembered */
    KEEL__FREED_KEPT,        /* kept by a stream for reuse (runtime/reuse.c) */
    KEEL__FREED_MODULE,      /* a variable of an unloaded module whose backend module is still held
                                (keel__module_globals_hold); forgotten, not released, to make room */
} keel__freed_state_t;
/* Remembers the freed block a in the given state, dropping any entry of
 * the same base (KEEL__FREED_FORGET: only that). Held blocks that stop
 * being remembered to make room are returned in evicted (their number in
 * *nevicted): the caller releases them through their backend. */
#define KEEL__RETIRE_EVICTS 3
KEEL_HIDDEN void keel__registry_retire(const keel__alloc_t *a, keel__freed_state_t state,
                                       keel__alloc_t evicted[KEEL__RETIRE_EVICTS], int *nevicted);
/* Releases the held blocks in evicted through their backends (runtime/memory.c). */
KEEL_HIDDEN void keel__release_evicted(const keel__alloc_t *ev, int n);
/* The stream that kept the block at base gave it back to its backend: a
 * KEEL__FREED_KEPT entry of base is dropped; an entry in another state is
 * left alone. */
KEEL_HIDDEN void keel__registry_unkeep(uintptr_t base);
/* keel__registry_remove, and in the same step remembers the block as
 * KEEL__FREED_KEPT when a stream may keep it (keel__reuse_keepable; for
 * keel_free_async: keel__registry_put_back forgets it again,
 * keel__reuse_release corrects it when the stream does not keep it). */
KEEL_HIDDEN keel_status_t keel__registry_remove_kept(void *base, keel__alloc_t *out,
                                                     keel__alloc_t evicted[KEEL__RETIRE_EVICTS], int *nevicted);
/* Takes one held block of dev out of the record (to be released by the
 * caller); 1 if there was one. */
KEEL_HIDDEN int keel__registry_take_held(struct keel_device *dev, keel__alloc_t *out);
/* Takes any live allocation out of the registry, else any held block; 1 if
 * there was one (keel_finalize releases it). */
KEEL_HIDDEN int keel__registry_take_any(keel__alloc_t *out);
/* Empties the registry and the record of freed blocks and frees the
 * registry's own memory; every thread's cached lookups go stale. */
KEEL_HIDDEN void keel__registry_reset(void);
/* ---- stream-ordered block reuse (runtime/reuse.c) ----
 * keel_free_async keeps the block it frees on its stream, one per stream and
 * at most KEEL__REUSE_MAX bytes, and the next keel_malloc_async of the same
 * size on that stream takes it back without a backend call. The block is out
 * of the registry meanwhile, so the freed pointer stays invalid. */
#define KEEL__REUSE_MAX ((size_t)256 << 20)
/* Whether a stream may keep a freed block: stream-ordered and at most
 * KEEL__REUSE_MAX bytes. */
static inline int keel__reuse_keepable(size_t size, int stream_ordered)
{
    return stream_ordered && size <= KEEL__REUSE_MAX;
}
/* Frees a block through the backend as keel_free_async does: free_async
 * where the block is stream-ordered, else synchronize the device and free.
 * The record's KEEL__FREED_KEPT entry of the block, if any, is dropped. */
KEEL_HIDDEN keel_status_t keel__reuse_release(struct keel_stream *s, void *p, int stream_ordered);
/* Keeps a stream-ordered block on s when s holds none and it is at most
 * KEEL__REUSE_MAX bytes, else releases it. */
KEEL_HIDDEN keel_status_t keel__reuse_put(struct keel_stream *s, void *p, size_t size, int stream_ordered);
/* *hit = 1 and the block in *p when s holds one of exactly size bytes; a
 * block of another size is released (its error is returned). */
KEEL_HIDDEN keel_status_t keel__reuse_take(struct keel_stream *s, size_t size, void **p, int *stream_ordered,
                                           int *hit);
/* Releases the block s holds (before the stream is destroyed). */
KEEL_HIDDEN keel_status_t keel__reuse_drop(struct keel_stream *s);
/* Takes out the block one of d's streams keeps, without releasing it; NULL
 * when none keeps one (keel_finalize frees it). */
KEEL_HIDDEN void *keel__reuse_steal(struct keel_device *d);
/* Releases every block the streams of dev hold and waits for the device,
 * so that an allocation that failed can try again; *released says whether
 * there was any. */
KEEL_HIDDEN keel_status_t keel__reuse_flush(struct keel_device *dev, int *released);

/* ---- the built-in CPU backend (backends/cpu) ---- */
KEEL_HIDDEN const keel_backend_plugin_t *keel__cpu_backend_init(const keel_host_api_t *host);
/* Teardown at process exit (backends/cpu/cpu_stream.c). From then on the
 * workers skip the commands still queued (they complete events and free
 * blocks, nothing else), and a stream whose worker is the calling thread
 * is taken apart without a join. */
KEEL_HIDDEN void keel__cpu_exit_begin(void);
/* Waits until every stream of the device is idle (but the calling worker's
 * own); 0, or -1 if the deadline (CLOCK_MONOTONIC) passed first. */
KEEL_HIDDEN int keel__cpu_device_quiesce(void *device_ctx, const struct timespec *deadline);
/* Whether the calling thread is a CPU stream worker (1) or a pool helper
 * (2), running a command (a host function, a kernel); else 0. */
KEEL_HIDDEN int keel__cpu_thread_role(void);
/* Frees the calling thread's kernel scratch memory. */
KEEL_HIDDEN void keel__cpu_thread_scratch_free(void);

/* ---- validation helpers ---- */
#define KEEL__UNLIKELY(x) __builtin_expect(!!(x), 0)

#define KEEL__CHECK_HANDLE(h, MAGIC, fn, what)                                                         \
    do {                                                                                               \
        if (KEEL__UNLIKELY((h) == NULL))                                                               \
            return keel__set_error(KEEL_ERROR_INVALID_HANDLE, "%s: %s is NULL", fn, what);             \
        if (KEEL__UNLIKELY((h)->magic != (MAGIC)))                                                     \
            return keel__set_error(KEEL_ERROR_INVALID_HANDLE, "%s: %s %p is %s", fn, what, (void *)(h), \
                                   (h)->magic == KEEL__MAGIC_DEAD ? "destroyed" : "not a " what " handle"); \
    } while (0)

#define KEEL__CHECK_OUT(p, fn, what)                                                                   \
    do {                                                                                               \
        if (KEEL__UNLIKELY((p) == NULL))                                                               \
            return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: output pointer %s is NULL", fn, what); \
    } while (0)

#endif /* KEEL_CORE_INTERNAL_H */

/* runtime/env.c: a decimal number with nothing around it, at most max; 0 or -1. */
KEEL_HIDDEN int keel__parse_uint(const char *s, unsigned long long max, unsigned long long *out);
/* runtime/log.c: KEEL_LOG's value to a level; 0 or -1. */
KEEL_HIDDEN int keel__log_parse(const char *value, int *level);
/* runtime/env.c: KEEL_LOG's and KEEL_DEVICE's values, parsed as keel_init
 * parses them: KEEL_OK, or KEEL_ERROR_INVALID_ENVIRONMENT with the detail. */
KEEL_HIDDEN keel_status_t keel__env_log(const char *value, int *level);
KEEL_HIDDEN keel_status_t keel__env_device(const char *value, long *index);
/* runtime/env.c: one variable's value, parsed by the code that reads it at
 * initialization, without acting on it (for the fuzzer of fuzz/fuzz-env.c;
 * call keel_init first). KEEL_OK, KEEL_ERROR_INVALID_ENVIRONMENT with the
 * detail, or KEEL_ERROR_NOT_FOUND for a variable it has no parser for. */
KEEL_HIDDEN keel_status_t keel__env_check(const char *name, const char *value);
/* runtime/init.c: KEEL_BACKEND split into the names to try, in order, at most
 * KEEL__MAX_PREFS; 0, or -1 with the error set. */
#define KEEL__MAX_PREFS 32
KEEL_HIDDEN int keel__parse_backend_list(const char *value, char names[][32], int *count);
/* runtime/loader.c: KEEL_BACKEND_PATH's entries checked as keel__loader_setup does. */
KEEL_HIDDEN keel_status_t keel__loader_path_check(const char *path_env);
/* backends/cpu/cpu_backend.c: the CPU backend's own variables (KEEL_CPU_*),
 * as its probe and its compiler read them; KEEL_ERROR_NOT_FOUND for others. */
KEEL_HIDDEN keel_status_t keel__cpu_env_check(const char *name, const char *value);
/* ---- a plugin's environment table (runtime/env_decl.c) ---- */
/* Checks every variable of table (ended by a NULL name) as set now: an
 * error naming the variable and the values it takes, or KEEL_OK. */
KEEL_HIDDEN keel_status_t keel__env_decls_check(const keel_env_decl_t *table, const char *backend);
/* What the variable takes, in words ("kernel or function", "a whole number from 1 to 16"). */
KEEL_HIDDEN void keel__env_decl_values(const keel_env_decl_t *d, char *buf, size_t cap);
/* keel_env_var_get's line for a plugin's variable. */
KEEL_HIDDEN void keel__env_decl_describe(const keel_env_decl_t *d, const char *backend, char *buf, size_t cap);
/* The variables of the loaded plugins' tables, after the core's (runtime/loader.c). */
KEEL_HIDDEN int keel__plugin_env_count(void);
/* The plugin variable at index: its name, description and older alias
 * ("" when it has none); -1 past the last one. */
KEEL_HIDDEN int keel__plugin_env_get(int index, const char **name, const char **description, const char **alias);

/* "device", "pinned host", "managed" or "host" (runtime/memory.c). */
KEEL_HIDDEN const char *keel__memory_kind_name(keel_memory_kind_t k);

/* An optional entry of a plugin's family table (keel/backend.h), or NULL when
 * the plugin was built before the entry existed (its struct_size stops short). */
#define KEEL__VT(t, field) \
    ((t)->struct_size >= offsetof(__typeof__(*(t)), field) + sizeof((t)->field) ? (t)->field : NULL)

/* runtime/loader.c */
KEEL_HIDDEN keel_status_t keel__loader_setup(const char *backend_path_env);
KEEL_HIDDEN const char *keel__loader_search_path(int *count);
KEEL_HIDDEN struct keel_backend *keel__backend_loaded(struct keel_backend *b); /* loads on first use */
/* Whether b's state is final: loaded, or failed for good. A load that ran
 * out of memory, or met a fault KEEL_FAULT injected, is tried again by the
 * next keel__backend_loaded; its status and reason may change meanwhile. */
KEEL_HIDDEN int keel__backend_final(struct keel_backend *b);
/* Loads b if needed and returns its status, its reason copied into reason
 * (consistently, also while it is not final). */
KEEL_HIDDEN keel_status_t keel__backend_verdict(struct keel_backend *b, char *reason, size_t cap);
KEEL_HIDDEN int keel__backend_count(void);
KEEL_HIDDEN struct keel_backend *keel__backend_at(int index);
KEEL_HIDDEN struct keel_backend *keel__backend_named(const char *name);
KEEL_HIDDEN void keel__backend_names(char *buf, size_t cap);
/* Whether the file at path can be given to dlopen without the risk of a
 * SIGBUS: an ELF shared object of this machine's class and byte order whose
 * header, program headers and segments all lie inside the file. 0, or -1
 * with the reason ("the file is truncated: ...") in why. */
KEEL_HIDDEN int keel__elf_check(const char *path, char *why, size_t cap);
