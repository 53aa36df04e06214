/* SPDX-License-Identifier: MIT */
/* Internal layout of the built-in CPU backend: an emulated device is host
 * memory plus a set of threads. Each stream owns one worker thread that runs
 * its commands in order; each device owns a pool of helper threads that the
 * running command may spread a kernel's blocks (or a parallel loop) over. */
#ifndef KEEL_CPU_INTERNAL_H
#define KEEL_CPU_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "backends/cpu/cpu_check.h"
#include "runtime/internal.h"

#define KEEL_CPU_MAX_DEVICES 64
#define KEEL_CPU_MAX_THREADS 1024
#define KEEL_CPU_ALIGN 256                           /* as cudaMalloc's guarantee */
#define KEEL_CPU_THREADS_PER_BLOCK 1024              /* the device's max_threads_per_block */
#define KEEL_CPU_SHARED_PER_BLOCK 65536              /* the default dynamic shared limit */
#define KEEL_CPU_MAX_DYN_SHARED KEEL_CPU_SHARED_PER_BLOCK /* what set_max_dynamic_shared accepts: the device property */
#define KEEL_CPU_ENQUEUE_MAX_PAYLOAD 512
/* Bytes a command holds without a heap buffer: a cpu_enqueue payload, or the
 * offsets and values of the arguments of a typical kernel. */
#define KEEL_CPU_CMD_INLINE 640
/* Below this many threads (grid x block) a launch runs on the stream's worker
 * alone: waking the pool costs more than such a launch does. */
#define KEEL_CPU_INLINE_THREADS 4096
/* How long an idle worker, or a synchronizing caller, spins before it sleeps
 * on its condition variable: a futex wake costs tens of microseconds on a
 * virtual machine, longer than most commands that follow one another. */
#define KEEL_CPU_SPIN_NS 20000
/* Commands a stream holds before an enqueue waits (as a GPU's launch queue):
 * bounds the memory of a producer that runs far ahead of its stream. */
#define KEEL_CPU_QUEUE_DEPTH 4096

extern KEEL_HIDDEN const keel_host_api_t *keel__cpu_host;

#define CPU_ERR(status, ...) (keel__cpu_host->set_error((status), __VA_ARGS__))

/* ---- backend and device ---- */
typedef struct cpu_backend {
    int ndevices;
    size_t mem_cap;   /* per device, 0 = no cap */
    size_t ram;       /* the machine's physical memory: the most one allocation may ask without a cap */
    int threads;      /* pool size per device (counting the stream worker that joins in) */
    int cores;
    int clock_khz;
    char model[160];
    char vendor[64];
    char arch[64];
    char description[160];
} cpu_backend_t;

/* One parallel loop handed to the pool. Lives on the stack of the thread that
 * submits it; that thread does not return before every user has left it. */
typedef struct cpu_job {
    void (*body)(void *arg, size_t begin, size_t end);
    void *arg;
    size_t n, grain;
    atomic_size_t next;     /* first index not yet claimed */
    int joined;             /* helpers that took it up (pool lock) */
    _Atomic uint64_t left;  /* helpers done with it: the submitting thread spins on it */
    int linked;             /* still in the pool's list (pool lock) */
    struct cpu_job *next_job;
} cpu_job_t;

typedef struct cpu_pool {
    pthread_mutex_t lock;
    pthread_cond_t work_cv;   /* a job was posted, or stop */
    pthread_cond_t done_cv;   /* a job lost its last user */
    cpu_job_t *head, *tail;
    _Atomic uint64_t posted;  /* jobs ever posted: helpers spin on it before sleeping */
    pthread_t *threads;
    int nthreads;             /* started helpers */
    int wanted;               /* helpers to start: threads - 1 */
    int started;              /* start attempted */
    int spin;                 /* helpers spin before sleeping (not when they outnumber the cores) */
    int stop;
} cpu_pool_t;

struct cpu_stream;

typedef struct cpu_device {
    cpu_backend_t *backend;
    int index;
    atomic_size_t used;           /* bytes allocated, counted against backend->mem_cap */
    pthread_mutex_t lock;         /* the stream list, and each stream's sync_refs */
    pthread_cond_t sync_cv;       /* a stream's sync_refs went down */
    struct cpu_stream *streams;   /* newest first */
    int next_stream_id;
    cpu_pool_t pool;
} cpu_device_t;

/* ---- commands ---- */
enum cpu_cmd_type {
    CPU_CMD_LAUNCH = 1,
    CPU_CMD_COPY,
    CPU_CMD_SET,
    CPU_CMD_HOST,
    CPU_CMD_RECORD,
    CPU_CMD_WAIT,
    CPU_CMD_FREE,
    CPU_CMD_CALL
};

struct cpu_event;

typedef struct cpu_cmd {
    struct cpu_cmd *next;
    int type;
    uint64_t ticket;          /* its place in the stream: the value of 'submitted' it took */
    union {
        struct {
            keel_cpu_kernel_fn_t fn;
            keel_cpu_blocks_fn_t blocks;   /* or NULL: fn once per block */
            keel_dim3_t grid, block;
            size_t shared_bytes;
            unsigned nargs;           /* data: uint16 offsets[nargs], then the values */
        } launch;
        struct {
            void *dst;
            const void *src;
            size_t bytes;
        } copy;
        struct {
            void *dst;
            int value;
            size_t bytes;
        } set;
        struct {
            keel_host_fn_t fn;
            void *user_data;
        } host;
        struct {
            struct cpu_event *event;  /* holds a reference */
            uint64_t gen;             /* 0 in a graph: taken when replayed */
        } ev;
        struct {
            void *ptr;
        } free;
        struct {
            void (*fn)(void *payload);  /* payload in data */
        } call;
    } u;
    size_t data_size;
    unsigned char *data;      /* inline_buf or heap */
    unsigned char *heap;
    size_t heap_cap;
    _Alignas(16) unsigned char inline_buf[KEEL_CPU_CMD_INLINE];
} cpu_cmd_t;

/* A captured sequence of commands; also the instantiated form (a copy). */
typedef struct cpu_graph {
    cpu_device_t *dev;
    cpu_cmd_t *head, *tail;
    size_t count;
} cpu_graph_t;

typedef struct cpu_stream {
    cpu_device_t *dev;
    int id;
    pthread_mutex_t lock;
    pthread_cond_t work_cv;   /* the worker waits for commands */
    pthread_cond_t idle_cv;   /* synchronizers and producers of a full queue wait for completions */
    cpu_cmd_t *head, *tail;   /* queued, not yet taken by the worker */
    cpu_cmd_t *free_list;     /* recycled records: no malloc per command */
    /* Tickets: each command takes submitted + 1, and runs once completed has
     * reached its ticket - 1. Queued commands change both under the lock; an
     * inline run (keel__cpu_enqueue_small) takes its ticket with a CAS that
     * only succeeds when submitted == completed, i.e. the stream is idle, and
     * bumps completed without the lock. So both only move by atomic RMWs. */
    _Atomic uint64_t submitted, completed;
    int worker_sleeping;      /* on work_cv for lack of commands (lock) */
    /* On work_cv for an inline run to end, which signals only when this is
     * set: the common case, a worker asleep for lack of work, costs an inline
     * run nothing. */
    atomic_int worker_waits_inline;
    atomic_int idle_waiters;  /* threads waiting on idle_cv */
    /* The smallest value of completed that a thread on idle_cv waits for
     * (0: none registered; lock). The worker wakes them only when completed
     * reaches it: waking a synchronizer after every command cost two context
     * switches per command and preempted OpenBLAS's threads (sgemm 512^3 on
     * 2 cores: 0.975 of a direct call). */
    uint64_t wake_at;
    int stop;
    pthread_t thread;
    cpu_cmd_t *running;       /* the command the worker runs (lock) */
    cpu_graph_t *capture;     /* non-NULL while capturing (lock) */
    atomic_int capturing;     /* capture != NULL, for the lock-free inline test */
    keel_status_t async_status;   /* first failure of a command, reported by synchronize */
    char async_msg[256];
    struct cpu_stream *prev, *next;   /* device's list (device lock) */
    /* Device synchronizers waiting on this stream without the device lock
     * (device lock): destroy waits for them to leave before freeing. */
    int sync_refs;
    cpu_check_stream_t ck;    /* the checking mode's state (its lock) */
} cpu_stream_t;

typedef struct cpu_event {
    unsigned flags;
    atomic_int refs;          /* the owner + every command naming it */
    pthread_mutex_t lock;
    pthread_cond_t cv;
    uint64_t recorded;        /* generation of the last record */
    /* Records of one event on several streams complete in any order, and a
     * wait is for one generation, not for the highest: the done generations
     * are every one up to contig_done, plus those in 'late' (sorted, all
     * above contig_done + 1). 'late' always has room for every generation
     * taken or reserved but not yet done, so completing never allocates. */
    uint64_t contig_done;
    uint64_t *late;
    size_t nlate, late_cap;
    size_t reserved;          /* generations promised to graph launches not yet taken */
    uint64_t max_done;        /* highest generation done */
    struct timespec done_at;  /* CLOCK_MONOTONIC when max_done was reached */
    cpu_check_event_t ck;     /* the checking mode's state (its lock) */
} cpu_event_t;

typedef struct cpu_kernel {
    cpu_device_t *dev;
    keel_cpu_kernel_desc_t desc;
    keel_cpu_blocks_fn_t blocks;              /* the module's range entry, or NULL */
    char name[128];
    uint16_t offsets[KEEL_MAX_KERNEL_ARGS];   /* of each value in a launch's data */
    size_t data_bytes;                        /* offsets + values */
    atomic_size_t max_dyn_shared;
} cpu_kernel_t;

typedef struct cpu_module {
    cpu_device_t *dev;
    void *dl;
    char path[4096];
} cpu_module_t;

/* Set on threads the backend runs, and around an inline run on a caller's
 * thread, so parallel_for knows its pool. */
extern KEEL_HIDDEN _Thread_local cpu_device_t *keel__cpu_tls_device;
extern KEEL_HIDDEN _Thread_local int keel__cpu_tls_pool_worker;
/* The stream whose worker is the calling thread, else NULL: a host function
 * that synchronizes or destroys its own stream would wait for itself. */
extern KEEL_HIDDEN _Thread_local cpu_stream_t *keel__cpu_tls_stream;

/* ---- cpu_backend.c ---- */
KEEL_HIDDEN extern const keel_device_vtable_t keel__cpu_device_vtable;
/* Device lock held (released while waiting): waits for s, pinned by
 * sync_refs so that destroy keeps it; the first failure goes to *first. */
KEEL_HIDDEN void keel__cpu_device_sync_one(cpu_device_t *d, cpu_stream_t *s, keel_status_t *first);

/* ---- cpu_pool.c ---- */
KEEL_HIDDEN void keel__cpu_pool_init(cpu_pool_t *pool, int threads, int cores);
KEEL_HIDDEN void keel__cpu_pool_fini(cpu_pool_t *pool);
/* Runs body over [0, n) on dev's pool, the calling thread included. */
KEEL_HIDDEN void keel__cpu_pool_run(cpu_device_t *dev, size_t n, size_t grain,
                                    void (*body)(void *arg, size_t begin, size_t end), void *arg);
/* Spin for at most KEEL_CPU_SPIN_NS until *v differs from old; 1 when it did. */
KEEL_HIDDEN int keel__cpu_spin_changed(_Atomic uint64_t *v, uint64_t old);
/* Spin for at most KEEL_CPU_SPIN_NS until *v >= target; 1 when it did. */
KEEL_HIDDEN int keel__cpu_spin_reached(_Atomic uint64_t *v, uint64_t target);
/* Dynamic shared memory of the calling thread, grown to bytes; NULL on malloc failure. */
KEEL_HIDDEN void *keel__cpu_thread_scratch(size_t bytes);
KEEL_HIDDEN void keel__cpu_thread_scratch_free(void);

/* ---- cpu_stream.c ---- */
KEEL_HIDDEN extern const keel_stream_vtable_t keel__cpu_stream_vtable;
/* Locks the stream and returns a record with room for data_bytes of data
 * (NULL with the error set and the lock released on failure). */
KEEL_HIDDEN cpu_cmd_t *keel__cpu_cmd_begin(cpu_stream_t *s, int type, size_t data_bytes, const char *fn);
/* Queues (or captures) the record and unlocks the stream. */
KEEL_HIDDEN void keel__cpu_cmd_commit(cpu_stream_t *s, cpu_cmd_t *c);
/* Gives back a record taken by keel__cpu_cmd_begin and unlocks the stream. */
KEEL_HIDDEN void keel__cpu_cmd_cancel(cpu_stream_t *s, cpu_cmd_t *c);
/* Stream lock held: a record from the free list or the heap, data room ensured. */
KEEL_HIDDEN cpu_cmd_t *keel__cpu_cmd_get(cpu_stream_t *s, size_t data_bytes);
KEEL_HIDDEN int keel__cpu_cmd_reserve(cpu_cmd_t *c, size_t data_bytes);
KEEL_HIDDEN void keel__cpu_cmd_free(cpu_cmd_t *c);
/* Stream lock held: appends to the queue or to the capture, wakes the worker. */
KEEL_HIDDEN void keel__cpu_cmd_push_locked(cpu_stream_t *s, cpu_cmd_t *c);
/* Drops what a record references (event references). */
KEEL_HIDDEN void keel__cpu_cmd_release_refs(cpu_cmd_t *c);
/* 1 when the stream was idle and the caller now holds its next place in
 * stream order: run the work on the calling thread, then call
 * keel__cpu_inline_end. 0: enqueue as usual. Never while capturing. */
KEEL_HIDDEN int keel__cpu_inline_begin(cpu_stream_t *s);
KEEL_HIDDEN void keel__cpu_inline_end(cpu_stream_t *s);
KEEL_HIDDEN keel_status_t keel__cpu_stream_sync(cpu_stream_t *s);
KEEL_HIDDEN void keel__cpu_stream_destroy_now(cpu_stream_t *s);
KEEL_HIDDEN void keel__cpu_stream_fail(cpu_stream_t *s, keel_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- cpu_event.c ---- */
KEEL_HIDDEN extern const keel_event_vtable_t keel__cpu_event_vtable;
KEEL_HIDDEN void keel__cpu_event_ref(cpu_event_t *e);
KEEL_HIDDEN void keel__cpu_event_unref(cpu_event_t *e);
/* A new generation for a record (event lock taken inside); 0 when there is
 * no memory to track it. */
KEEL_HIDDEN uint64_t keel__cpu_event_next_gen(cpu_event_t *e);
/* Promises one later keel__cpu_event_next_gen_reserved (-1: out of memory);
 * unreserve gives an unused promise back. */
KEEL_HIDDEN int keel__cpu_event_reserve(cpu_event_t *e);
KEEL_HIDDEN void keel__cpu_event_unreserve(cpu_event_t *e);
KEEL_HIDDEN uint64_t keel__cpu_event_next_gen_reserved(cpu_event_t *e);
KEEL_HIDDEN uint64_t keel__cpu_event_current_gen(cpu_event_t *e);
KEEL_HIDDEN void keel__cpu_event_complete(cpu_event_t *e, uint64_t gen);
KEEL_HIDDEN void keel__cpu_event_wait_gen(cpu_event_t *e, uint64_t gen);

/* ---- cpu_memory.c ---- */
KEEL_HIDDEN extern const keel_memory_vtable_t keel__cpu_memory_vtable;
KEEL_HIDDEN void keel__cpu_mem_release(void *ptr);
KEEL_HIDDEN void keel__cpu_copy(void *dst, const void *src, size_t bytes);
KEEL_HIDDEN void keel__cpu_set(void *dst, int value, size_t bytes);

/* ---- cpu_compile.c ---- */
KEEL_HIDDEN keel_status_t keel__cpu_module_compile(void *device_ctx, const char *source, const char *name,
                                                   const char *const *options, int num_options, void **module_ctx);
/* KEEL_CPU_CC's or KEEL_CPU_CFLAGS's value split as a build splits it
 * (cpu_compile.c); the other one at its default. */
KEEL_HIDDEN keel_status_t keel__cpu_compiler_check(const char *name, const char *value);
KEEL_HIDDEN keel_status_t keel__cpu_module_open(cpu_device_t *d, const char *path, const char *fn,
                                                void **module_ctx);

/* ---- cpu_kernel.c ---- */
KEEL_HIDDEN extern const keel_kernel_vtable_t keel__cpu_kernel_vtable;
KEEL_HIDDEN void keel__cpu_run_launch(cpu_stream_t *s, cpu_cmd_t *c);

/* ---- cpu_check.c: the checking mode, called only when keel__cpu_check is set ---- */
/* Registers a new stream before its worker starts; forgets it after the join. */
KEEL_HIDDEN void keel__cpu_check_stream_init(cpu_stream_t *s);
KEEL_HIDDEN void keel__cpu_check_stream_fini(cpu_stream_t *s);
KEEL_HIDDEN void keel__cpu_check_event_fini(cpu_event_t *e);
/* Stream lock held, the command's ticket taken (not capturing): notes its
 * accesses, and for a record or a wait the ordering it brings. */
KEEL_HIDDEN void keel__cpu_check_queued(cpu_stream_t *s, cpu_cmd_t *c);
/* The worker ran c (before c drops its references). */
KEEL_HIDDEN void keel__cpu_check_ran(cpu_stream_t *s, cpu_cmd_t *c);
/* The worker, stream lock held (released while waiting): waits until the
 * command of this ticket may run. */
KEEL_HIDDEN void keel__cpu_check_gate(cpu_stream_t *s, uint64_t ticket);
/* Lets the stream run its commands up to the ticket. */
KEEL_HIDDEN void keel__cpu_check_release(cpu_stream_t *s, uint64_t ticket);
/* Lets the stream whose record made generation gen of e run up to it. */
KEEL_HIDDEN void keel__cpu_check_release_event(cpu_event_t *e, uint64_t gen);
/* Refuses (KEEL_ERROR_BUSY) a call on s whose ranges conflict with queued
 * work of another stream that nothing orders it after; on success the
 * ranges go to the command the call queues next on this thread, until
 * keel__cpu_check_disarm. */
KEEL_HIDDEN keel_status_t keel__cpu_check_copy(cpu_stream_t *s, const char *fn, const void *dst, const void *src,
                                               size_t bytes);
KEEL_HIDDEN keel_status_t keel__cpu_check_set(cpu_stream_t *s, const char *fn, const void *dst, size_t bytes);
KEEL_HIDDEN keel_status_t keel__cpu_check_op(cpu_stream_t *s);
KEEL_HIDDEN void keel__cpu_check_disarm(void);
/* keel_device_synchronize in the checking mode: each stream in turn, the one
 * given work last first. */
KEEL_HIDDEN keel_status_t keel__cpu_check_device_sync(cpu_device_t *d);

/* ---- cpu_graph.c ---- */
KEEL_HIDDEN extern const keel_graph_vtable_t keel__cpu_graph_vtable;
KEEL_HIDDEN cpu_graph_t *keel__cpu_graph_new(cpu_device_t *dev);
KEEL_HIDDEN void keel__cpu_graph_free(cpu_graph_t *g);

#endif /* KEEL_CPU_INTERNAL_H */
