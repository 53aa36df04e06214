/* SPDX-License-Identifier: MIT */
/* The CPU backend's checking mode (KEEL_CPU_CHECK=1): stream work is held
 * back until the host synchronizes, waits or queries, streams run in an
 * adversarial order, fresh and freed memory is poisoned, and Keel's copies,
 * memsets and built-in operations that touch a range which unsynchronized
 * work of another stream still uses are refused with the call that should
 * have come first. See docs/reliability.md. Internal to libkeel; the core
 * calls the hooks at the end of this header. */
#ifndef KEEL_CPU_CHECK_H
#define KEEL_CPU_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include "keel/status.h"

/* The byte fresh and freed memory is filled with: NaN in every float
 * format, -1 in every signed integer. */
#define KEEL_CPU_CHECK_POISON 0xFF

/* Set once by the CPU backend's probe; read on the hot paths as a flag. */
extern __attribute__((visibility("hidden"))) int keel__cpu_check;

/* What a stream's next command is ordered after, through the events it
 * waited for: for each other stream (by check id), the last ticket of it
 * that came before. */
typedef struct cpu_vc_entry {
    uint64_t sid, ticket;
} cpu_vc_entry_t;

typedef struct cpu_vclock {
    cpu_vc_entry_t *v;
    size_t n, cap;
} cpu_vclock_t;

/* A byte range a queued command reads or writes. */
typedef struct cpu_access {
    uint64_t ticket;
    uintptr_t lo, hi;
    int write;
    const char *fn;   /* the call that queued it (a static string) */
} cpu_access_t;

/* Per stream, under the checking mode's lock. */
typedef struct cpu_check_stream {
    uint64_t sid;          /* never reused, unlike the device's stream ids */
    uint64_t released;     /* the worker runs commands up to this ticket */
    uint64_t last_seq;     /* when its last command was queued, over all streams */
    cpu_vclock_t know;
    cpu_access_t *acc;     /* accesses of queued commands, in ticket order */
    size_t nacc, acc_cap;
    uint64_t sync_token;   /* the device synchronize that last waited for it */
    struct cpu_stream *next_live;
} cpu_check_stream_t;

/* A record of an event, queued and not yet run. */
typedef struct cpu_check_rec {
    uint64_t gen, sid, ticket;
    cpu_vclock_t know;     /* what the recording stream was ordered after */
} cpu_check_rec_t;

typedef struct cpu_check_event {
    cpu_check_rec_t *rec;
    size_t nrec, rec_cap;
} cpu_check_event_t;

/* ---- called by the core (no-ops unless the mode is on and the memory is the CPU backend's) ---- */
struct keel_device;
struct keel_stream;
/* keel_free, after its waits: the block is poisoned before Keel keeps or releases it. */
__attribute__((visibility("hidden"))) void keel__cpu_check_freed(struct keel_device *d, void *ptr, size_t bytes);
/* keel_free_async: a poisoning memset is queued on the stream before the block is kept for reuse. */
__attribute__((visibility("hidden"))) void keel__cpu_check_freed_async(struct keel_stream *s, void *ptr, size_t bytes);
/* A built-in operation's validation: forget the ranges of the last one, then
 * note each operand's range (outputs by their parameter names). */
__attribute__((visibility("hidden"))) void keel__cpu_check_note_reset(void);
__attribute__((visibility("hidden"))) void keel__cpu_check_note(const char *fn, const char *what, const void *ptr,
                                                                size_t bytes);
/* A built-in operation the core runs as kernel launches (Keel's portable
 * BLAS): checks the noted operands against the queued work of the other
 * streams, and arms them for every command queued on this thread until
 * keel__cpu_check_op_end. KEEL_OK without a check for another backend's stream. */
__attribute__((visibility("hidden"))) keel_status_t keel__cpu_check_op_begin(struct keel_stream *s);
__attribute__((visibility("hidden"))) void keel__cpu_check_op_end(void);

#endif /* KEEL_CPU_CHECK_H */
