/* SPDX-License-Identifier: MIT */
/* Module globals: the device memory of a module's variables (CUDA and HIP
 * __device__ and __constant__ variables, the kernel language's keel_global
 * and keel_constant ones). Each one handed out is entered in the allocation
 * registry as foreign memory of the module's device, so that copies and
 * memsets check their bounds and find their direction, and leaves it when
 * the module is unloaded. */
#include <stdlib.h>
#include <string.h>
#include "runtime/internal.h"
#include "runtime/kernel_source.h"

struct keel__global {
    char *name;
    void *ptr;
    size_t bytes;
    int owns_entry; /* 0 for a second name of the same variable */
};

static const struct keel__global *find(const struct keel_module *m, const char *name)
{
    for (size_t i = 0; i < m->nglobals; i++)
        if (strcmp(m->globals[i].name, name) == 0)
            return &m->globals[i];
    return NULL;
}

/* Whether the module's registry entry at ptr is one of its own globals. */
static int owned_here(const struct keel_module *m, uintptr_t base)
{
    for (size_t i = 0; i < m->nglobals; i++)
        if ((uintptr_t)m->globals[i].ptr == base && m->globals[i].owns_entry)
            return 1;
    return 0;
}

/* Enters the variable at p in the registry and records it under name; the lock is held. */
static keel_status_t add(struct keel_module *m, const char *name, void *p, size_t size, const struct keel__global **out)
{
    const char *fn = "keel_module_get_global";
    struct keel_device *d = m->device;
    if (m->nglobals == m->capglobals) {
        size_t cap = m->capglobals ? 2 * m->capglobals : 4;
        struct keel__global *grown = keel__realloc(m->globals, cap * sizeof(*grown));
        if (!grown)
            return keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
        m->globals = grown;
        m->capglobals = cap;
    }
    char *copy = keel__strdup(name);
    if (!copy)
        return keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    keel__alloc_t hit;
    int overlapped = 0, owns = 1;
    keel_status_t st = keel__registry_add_foreign(p, size, KEEL_MEMORY_DEVICE, d, KEEL__FOREIGN_MODULE, &hit,
                                                  &overlapped);
    if (st == KEEL_OK && overlapped) {
        if (hit.foreign == KEEL__FOREIGN_MODULE && hit.base == (uintptr_t)p && hit.size == size &&
            owned_here(m, hit.base))
            owns = 0; /* another name of a variable handed out already */
        else
            st = keel__set_error(KEEL_ERROR_INVALID_POINTER,
                                 "%s: variable '%s' (%zu bytes at %p) overlaps %s memory of %s (%zu bytes at %p)", fn,
                                 name, size, p, keel__memory_kind_name(hit.kind), hit.device->name, hit.size,
                                 (void *)hit.base);
    } else if (st != KEEL_OK) {
        st = keel__prefix_error(st, "%s: variable '%s'", fn, name);
    }
    if (st != KEEL_OK) {
        free(copy);
        return st;
    }
    struct keel__global *g = &m->globals[m->nglobals++];
    g->name = copy;
    g->ptr = p;
    g->bytes = size;
    g->owns_entry = owns;
    *out = g;
    return KEEL_OK;
}

keel_status_t keel_module_get_global(keel_module_t *module, const char *name, void **ptr, size_t *bytes)
{
    const char *fn = "keel_module_get_global";
    KEEL__CHECK_HANDLE(module, KEEL__MAGIC_MODULE, fn, "module");
    KEEL__CHECK_OUT(ptr, fn, "ptr");
    if (!name || !name[0])
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: name is %s", fn, name ? "empty" : "NULL");
    struct keel_device *d = module->device;
    keel_status_t (*get)(void *, const char *, void **, size_t *) = KEEL__VT(d->plugin->kernel, module_get_global);
    if (!get)
        return keel__set_error(KEEL_ERROR_NOT_SUPPORTED, "%s: the %s backend does not support module globals", fn,
                               d->backend->name);
    pthread_mutex_lock(&module->lock);
    const struct keel__global *g = find(module, name);
    keel_status_t st = KEEL_OK;
    if (!g) {
        void *p = NULL;
        size_t size = 0;
        if (module->sigs && keel__ksource_find(module->sigs, name))
            st = keel__set_error(KEEL_ERROR_NOT_FOUND,
                                 "%s: '%s' is a kernel of module %p on %s, not a variable (look it up with "
                                 "keel_module_get_kernel)", fn, name, (void *)module, d->name);
        else if ((st = get(module->ctx, name, &p, &size)) != KEEL_OK)
            st = keel__prefix_error(st, "module %p on %s", (void *)module, d->name);
        else if (!p || size == 0)
            st = keel__set_error(KEEL_ERROR_NOT_SUPPORTED,
                                 "%s: variable '%s' of module %p on %s has no size (%zu bytes at %p); Keel hands out "
                                 "variables of known size only", fn, name, (void *)module, d->name, size, p);
        else
            st = add(module, name, p, size, &g);
    }
    if (st == KEEL_OK) {
        *ptr = g->ptr;
        if (bytes)
            *bytes = g->bytes;
    }
    pthread_mutex_unlock(&module->lock);
    return st;
}

keel_status_t keel__module_globals_release(struct keel_module *m)
{
    /* The module's device is idle already; a copy another device was
     * handed (a peer copy) must be done too before the memory goes. */
    for (size_t i = 0; i < m->nglobals; i++) {
        keel__alloc_t a;
        struct keel_device *failed = NULL;
        if (!m->globals[i].owns_entry || !keel__registry_find(m->globals[i].ptr, &a) || !a.reach)
            continue;
        keel_status_t st = keel__wait_for_devices(a.device, a.reach, 0, &failed);
        if (st != KEEL_OK)
            return keel__prefix_error(st, "keel_module_unload: the module stays loaded (call again): %s reported",
                                      failed->name);
    }
    return KEEL_OK;
}

void keel__module_globals_drop(struct keel_module *m)
{
    for (size_t i = 0; i < m->nglobals; i++) {
        if (m->globals[i].owns_entry)
            keel__registry_remove(m->globals[i].ptr, NULL);
        free(m->globals[i].name);
    }
    free(m->globals);
    m->globals = NULL;
    m->nglobals = m->capglobals = 0;
}

/* Backend modules that keel_module_unload keeps loaded for a while, oldest
 * first, so that the record of freed blocks may remember their variables
 * (its entries must name memory that is still allocated: see
 * KEEL__FREED_SLOTS). Each has the bases of its variables, to forget them
 * when it is unloaded at last. */
typedef struct held_module {
    struct keel_device *device;
    void *ctx;
    uintptr_t *bases;
    size_t nbases;
} held_module_t;
static held_module_t held[KEEL__HOLD_MAX_MODULES];
static unsigned nheld;
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;

/* Forgets h's variables and, with unload, unloads its backend module. */
static void held_release(held_module_t *h, int unload)
{
    for (size_t i = 0; i < h->nbases; i++) {
        keel__alloc_t a = {.base = h->bases[i]}, ev[KEEL__RETIRE_EVICTS];
        int nev = 0;
        keel__registry_retire(&a, KEEL__FREED_FORGET, ev, &nev);
        keel__release_evicted(ev, nev);
    }
    free(h->bases);
    if (unload) {
        keel_status_t st = h->device->plugin->kernel->module_unload(h->ctx);
        if (st != KEEL_OK)
            keel__log(KEEL_LOG_WARN, "unloading a module of %s whose variables were remembered: %s", h->device->name,
                      keel_status_name(st));
    }
}

int keel__module_globals_hold(struct keel_module *m)
{
    struct keel_device *d = m->device;
    if (!d->plugin->kernel->module_unload)
        return 0;
    size_t n = 0;
    for (size_t i = 0; i < m->nglobals; i++)
        n += m->globals[i].owns_entry;
    if (n == 0)
        return 0;
    held_module_t h = {.device = d, .ctx = m->ctx, .bases = malloc(n * sizeof(uintptr_t))};
    if (!h.bases)
        return 0; /* the variables go unremembered, as any released block */
    for (size_t i = 0; i < m->nglobals; i++) {
        keel__alloc_t a, ev[KEEL__RETIRE_EVICTS];
        int nev = 0;
        if (!m->globals[i].owns_entry || keel__registry_remove(m->globals[i].ptr, &a) != KEEL_OK)
            continue;
        m->globals[i].owns_entry = 0;
        keel__registry_retire(&a, KEEL__FREED_MODULE, ev, &nev);
        keel__release_evicted(ev, nev);
        h.bases[h.nbases++] = a.base;
    }
    held_module_t oldest = {0};
    int full;
    pthread_mutex_lock(&held_lock);
    if ((full = nheld == KEEL__HOLD_MAX_MODULES)) {
        oldest = held[0];
        memmove(held, held + 1, (nheld - 1) * sizeof held[0]);
        nheld--;
    }
    held[nheld++] = h;
    pthread_mutex_unlock(&held_lock);
    if (full)
        held_release(&oldest, 1);
    return 1;
}

void keel__module_held_teardown(int (*backend_ok)(const struct keel_device *d))
{
    pthread_mutex_lock(&held_lock);
    while (nheld > 0) {
        held_module_t h = held[--nheld];
        pthread_mutex_unlock(&held_lock);
        held_release(&h, backend_ok(h.device));
        pthread_mutex_lock(&held_lock);
    }
    pthread_mutex_unlock(&held_lock);
}
