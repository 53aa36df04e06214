/* SPDX-License-Identifier: MIT */
/* Fault injection (KEEL_FAULT, runtime/fault.c): the checks that make chosen
 * internal sites fail, and the allocation and thread wrappers every host
 * allocation and thread of runtime/, backends/cpu/ and kernels/cpu/ goes
 * through. When KEEL_FAULT is unset a check is one load of a global and a
 * branch that is never taken: no call, no atomic. */
#ifndef KEEL_CORE_FAULT_H
#define KEEL_CORE_FAULT_H

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "keel/backend.h"

#ifndef KEEL_HIDDEN
#define KEEL_HIDDEN __attribute__((visibility("hidden")))
#endif

#ifdef KEEL_FAULT_OFF
/* keel-cc builds its own copy of the kernel translator, without faults. */
#define KEEL__FAULT(site) 0
#else
/* Bit (1u << site) for every site KEEL_FAULT names; written once, by
 * keel_init, before any other thread of Keel's exists. */
KEEL_HIDDEN extern unsigned keel__fault_armed;
/* Counts a call of site; 1 when this call fails (it is logged at warn). */
KEEL_HIDDEN int keel__fault_hit(int site) __attribute__((cold));
#define KEEL__FAULT(site) (__builtin_expect((keel__fault_armed & (1u << (site))) != 0, 0) && keel__fault_hit(site))
#endif

/* Parses KEEL_FAULT (NULL or empty: nothing armed) and arms it; once per
 * process (later calls return the first verdict). KEEL_OK, or
 * KEEL_ERROR_INVALID_ENVIRONMENT with the detail set. */
KEEL_HIDDEN keel_status_t keel__fault_setup(const char *value);
/* Parses a KEEL_FAULT value as keel__fault_setup does, arming nothing. */
KEEL_HIDDEN keel_status_t keel__fault_check(const char *value);
/* Faults injected so far on the calling thread: a failure met while it
 * moved is one KEEL_FAULT made, and nothing to remember. */
KEEL_HIDDEN unsigned long keel__fault_thread_count(void);
/* Sets the error "<formatted>: injected failure (KEEL_FAULT <site>:<call>)"
 * for the fault the calling thread just met, and returns status. */
KEEL_HIDDEN keel_status_t keel__fault_fail(keel_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), cold));
/* "<site>:<call>" of the last fault injected on this thread ("" if none). */
KEEL_HIDDEN const char *keel__fault_last(void);
/* The core's armed mask and counting function, for keel_host_api_t. */
KEEL_HIDDEN int keel__fault_hook(int site);

/* Returns from the calling function with KEEL_ERROR_OUT_OF_MEMORY when
 * KEEL_FAULT fails this enqueue: the core's check before a backend's
 * asynchronous entry (fn names the public call). */
#define KEEL__FAULT_ENQUEUE(fn)                                                                         \
    do {                                                                                                \
        if (KEEL__FAULT(KEEL_FAULT_STREAM_ENQUEUE))                                                     \
            return keel__fault_fail(KEEL_ERROR_OUT_OF_MEMORY, "%s: the enqueue on the stream failed", fn); \
    } while (0)

/* ---- host allocations and threads (site host-alloc, thread-create) ----
 * Each fails as the C library's does when KEEL_FAULT says so. */

static inline void *keel__malloc(size_t n)
{
    if (KEEL__FAULT(KEEL_FAULT_HOST_ALLOC)) {
        errno = ENOMEM;
        return NULL;
    }
    return malloc(n);
}

static inline void *keel__calloc(size_t count, size_t size)
{
    if (KEEL__FAULT(KEEL_FAULT_HOST_ALLOC)) {
        errno = ENOMEM;
        return NULL;
    }
    return calloc(count, size);
}

static inline void *keel__realloc(void *p, size_t n)
{
    if (KEEL__FAULT(KEEL_FAULT_HOST_ALLOC)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, n);
}

static inline void *keel__aligned_alloc(size_t align, size_t n)
{
    if (KEEL__FAULT(KEEL_FAULT_HOST_ALLOC)) {
        errno = ENOMEM;
        return NULL;
    }
    return aligned_alloc(align, n);
}

static inline int keel__posix_memalign(void **p, size_t align, size_t n)
{
    if (KEEL__FAULT(KEEL_FAULT_HOST_ALLOC))
        return ENOMEM;
    return posix_memalign(p, align, n);
}

static inline char *keel__strdup(const char *s)
{
    if (KEEL__FAULT(KEEL_FAULT_HOST_ALLOC)) {
        errno = ENOMEM;
        return NULL;
    }
    return strdup(s);
}

static inline char *keel__strndup(const char *s, size_t n)
{
    if (KEEL__FAULT(KEEL_FAULT_HOST_ALLOC)) {
        errno = ENOMEM;
        return NULL;
    }
    return strndup(s, n);
}

static inline int keel__pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    if (KEEL__FAULT(KEEL_FAULT_THREAD_CREATE))
        return EAGAIN;
    return pthread_create(t, attr, fn, arg);
}

#endif /* KEEL_CORE_FAULT_H */
