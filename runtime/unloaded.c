/* SPDX-License-Identifier: MIT */
/* The record of unloaded modules' variables: what keel_module_get_global
 * handed out of a module that keel_module_unload unloaded since, so that a
 * copy, memset, free or launch through such a stale pointer is refused
 * instead of touching memory the unload gave back.
 *
 * An entry must never name memory that has become someone else's, or a
 * valid pointer would be refused. So an entry is kept only while its
 * addresses cannot be handed out again: while the backend module is still
 * loaded (keel__module_globals_hold keeps a few), and after its unload only
 * where the pages holding the variable could be reserved right away, with
 * an anonymous PROT_NONE mapping placed where nothing is mapped
 * (MAP_FIXED_NOREPLACE). The CPU backend's dlclose unmaps a module, so its
 * variables' pages are free to reserve; a GPU driver that keeps the address
 * range mapped leaves nothing to reserve, and those entries are dropped.
 * A reservation costs address space and one kernel mapping, not memory;
 * KEEL__UNLOADED_MAX_RUNS bounds how many are made.
 *
 * The entries are a sorted array of non-overlapping ranges (a binary search
 * answers a lookup); the reservations, a list to unmap at keel_finalize. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "runtime/internal.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0 /* the address is a hint then, and reserve checks it */
#endif

typedef struct entry {
    keel__alloc_t a;
    int sealed; /* its backend module is unloaded and its pages reserved */
} entry_t;

typedef struct run {
    uintptr_t start;
    size_t len;
} run_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry_t *entries;
static size_t nentries, capentries;
static atomic_size_t count; /* nentries, read without the lock by the lookups */
static run_t *runs;
static size_t nruns, capruns;

/* The first entry whose range ends after key (nentries if none). */
static size_t lower_bound(uintptr_t key)
{
    size_t lo = 0, hi = nentries;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (entries[mid].a.base + entries[mid].a.size <= key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void remove_at(size_t i)
{
    memmove(entries + i, entries + i + 1, (nentries - i - 1) * sizeof entries[0]);
    nentries--;
}

/* Grows *arr to hold need elements of size sz; 0, or -1 out of memory. */
static int grow(void **arr, size_t *cap, size_t need, size_t sz)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *p = keel__realloc(*arr, c * sz);
    if (!p)
        return -1;
    *arr = p;
    *cap = c;
    return 0;
}

int keel__unloaded_add(const keel__alloc_t *vars, size_t n)
{
    pthread_mutex_lock(&lock);
    if (grow((void **)&entries, &capentries, nentries + n, sizeof entries[0]) != 0) {
        pthread_mutex_unlock(&lock);
        return -1;
    }
    for (size_t k = 0; k < n; k++) {
        const keel__alloc_t *v = &vars[k];
        size_t i = lower_bound(v->base);
        /* An entry overlapping a variable that was live until now names
         * memory that was reused after all: it goes. */
        while (i < nentries && entries[i].a.base < v->base + v->size)
            remove_at(i);
        memmove(entries + i + 1, entries + i, (nentries - i) * sizeof entries[0]);
        entries[i].a = *v;
        entries[i].a.reach = 0;
        entries[i].a.foreign = KEEL__FOREIGN_MODULE;
        entries[i].sealed = 0;
        nentries++;
    }
    atomic_store(&count, nentries);
    pthread_mutex_unlock(&lock);
    return 0;
}

/* Reserves [start, start + len) where nothing is mapped: 1 on success. */
static int reserve(uintptr_t start, size_t len)
{
    if (nruns >= KEEL__UNLOADED_MAX_RUNS || grow((void **)&runs, &capruns, nruns + 1, sizeof runs[0]) != 0)
        return 0;
    void *want = (void *)start;
    void *p = mmap(want, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED)
        return 0;
    if (p != want) { /* a kernel that does not know the flag took it as a hint */
        munmap(p, len);
        return 0;
    }
    runs[nruns++] = (run_t){start, len};
    return 1;
}

/* Seals the unsealed entry of base, or drops it. */
static void seal_or_drop(uintptr_t base, int sealed)
{
    size_t i = lower_bound(base);
    if (i >= nentries || entries[i].a.base != base || entries[i].sealed)
        return;
    if (sealed)
        entries[i].sealed = 1;
    else
        remove_at(i);
}

typedef struct span {
    uintptr_t first, last, base; /* the pages of the variable at base */
} span_t;

static int by_first(const void *x_, const void *y_)
{
    const span_t *x = x_, *y = y_;
    return x->first < y->first ? -1 : x->first > y->first;
}

void keel__unloaded_seal(const keel__alloc_t *vars, size_t n, int unloaded)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    span_t *s = unloaded && n ? keel__malloc(n * sizeof *s) : NULL;
    pthread_mutex_lock(&lock);
    if (s) {
        for (size_t k = 0; k < n; k++)
            s[k] = (span_t){vars[k].base & ~(page - 1), (vars[k].base + vars[k].size + page - 1) & ~(page - 1),
                            vars[k].base};
        qsort(s, n, sizeof *s, by_first);
        /* Variables whose pages overlap or touch share one reservation. */
        for (size_t k = 0; k < n;) {
            size_t j = k;
            uintptr_t last = s[k].last;
            while (j + 1 < n && s[j + 1].first <= last) {
                j++;
                if (s[j].last > last)
                    last = s[j].last;
            }
            int ok = reserve(s[k].first, last - s[k].first);
            for (; k <= j; k++)
                seal_or_drop(s[k].base, ok);
        }
    } else {
        for (size_t k = 0; k < n; k++)
            seal_or_drop(vars[k].base, 0);
    }
    atomic_store(&count, nentries);
    pthread_mutex_unlock(&lock);
    free(s);
}

int keel__unloaded_find(uintptr_t key, uintptr_t end, keel__alloc_t *out)
{
    if (atomic_load_explicit(&count, memory_order_acquire) == 0)
        return 0;
    int found = 0;
    pthread_mutex_lock(&lock);
    size_t i = lower_bound(key);
    if (i < nentries && entries[i].a.base < end) {
        *out = entries[i].a;
        found = 1;
    }
    pthread_mutex_unlock(&lock);
    return found;
}

void keel__unloaded_reset(void)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nruns; i++)
        munmap((void *)runs[i].start, runs[i].len);
    free(runs);
    free(entries);
    runs = NULL;
    entries = NULL;
    nruns = capruns = nentries = capentries = 0;
    atomic_store(&count, 0);
    pthread_mutex_unlock(&lock);
}
