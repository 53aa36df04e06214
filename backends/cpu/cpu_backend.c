/* SPDX-License-Identifier: MIT */
/* The CPU backend's plugin struct, its probe (environment, machine facts)
 * and the device entries. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "backends/cpu/cpu_internal.h"

const keel_host_api_t *keel__cpu_host;

/* ---- environment ---- */

/* Parses a whole decimal number with an optional K/M/G (1024-based) suffix
 * when allow_suffix; anything else (signs, spaces, junk, overflow) fails. */
static int cpu_parse_size(const char *s, int allow_suffix, unsigned long long *out)
{
    unsigned long long v = 0;
    const char *p = s;
    if (!isdigit((unsigned char)*p))
        return -1;
    for (; isdigit((unsigned char)*p); p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (ULLONG_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (*p && allow_suffix) {
        unsigned shift;
        switch (*p) {
        case 'K': case 'k': shift = 10; break;
        case 'M': case 'm': shift = 20; break;
        case 'G': case 'g': shift = 30; break;
        default: return -1;
        }
        if (v > (ULLONG_MAX >> shift))
            return -1;
        v <<= shift;
        p++;
    }
    if (*p)
        return -1;
    *out = v;
    return 0;
}

/* An empty variable counts as unset, as a shell's "VAR= prog" means. */
static keel_status_t cpu_env_int(const char *var, const char *s, long lo, long hi, long dflt, long *out)
{
    unsigned long long v;
    if (!s || !*s) {
        *out = dflt;
        return KEEL_OK;
    }
    if (cpu_parse_size(s, 0, &v) != 0 || v < (unsigned long long)lo || v > (unsigned long long)hi)
        return CPU_ERR(KEEL_ERROR_INVALID_ENVIRONMENT,
                       "%s=\"%s\" is not valid: expected a whole number from %ld to %ld", var, s, lo, hi);
    *out = (long)v;
    return KEEL_OK;
}

static keel_status_t cpu_env_memory_limit(const char *s, size_t *cap)
{
    const char *var = "KEEL_CPU_MEMORY_LIMIT";
    unsigned long long v;
    *cap = 0;
    if (!s || !*s)
        return KEEL_OK;
    if (cpu_parse_size(s, 1, &v) != 0 || v == 0 || v > SIZE_MAX)
        return CPU_ERR(KEEL_ERROR_INVALID_ENVIRONMENT,
                       "%s=\"%s\" is not valid: expected a byte count greater than 0, optionally "
                       "followed by K, M or G (powers of 1024), e.g. 512M",
                       var, s);
    *cap = (size_t)v;
    return KEEL_OK;
}

keel_status_t keel__cpu_env_check(const char *name, const char *value)
{
    long v;
    size_t cap;
    if (strcmp(name, "KEEL_CPU_DEVICES") == 0)
        return cpu_env_int(name, value, 1, KEEL_CPU_MAX_DEVICES, 1, &v);
    if (strcmp(name, "KEEL_CPU_THREADS") == 0)
        return cpu_env_int(name, value, 1, KEEL_CPU_MAX_THREADS, 1, &v);
    if (strcmp(name, "KEEL_CPU_CHECK") == 0)
        return cpu_env_int(name, value, 0, 1, 0, &v);
    if (strcmp(name, "KEEL_CPU_MEMORY_LIMIT") == 0)
        return cpu_env_memory_limit(value, &cap);
    if (strcmp(name, "KEEL_CPU_CC") == 0 || strcmp(name, "KEEL_CPU_CFLAGS") == 0)
        return keel__cpu_compiler_check(name, value);
    return CPU_ERR(KEEL_ERROR_NOT_FOUND, "no parser for the variable %s", name);
}

/* ---- machine facts ---- */

static void cpu_trim_copy(char *dst, size_t cap, const char *src)
{
    while (*src == ' ' || *src == '\t')
        src++;
    size_t n = strcspn(src, "\n");
    while (n > 0 && (src[n - 1] == ' ' || src[n - 1] == '\t'))
        n--;
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static void cpu_read_cpuinfo(cpu_backend_t *b)
{
    char line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        size_t keylen = (size_t)(colon - line);
        while (keylen > 0 && (line[keylen - 1] == ' ' || line[keylen - 1] == '\t'))
            keylen--;
        const char *val = colon + 1;
        if (keylen == 10 && !strncmp(line, "model name", 10) && !b->model[0])
            cpu_trim_copy(b->model, sizeof b->model, val);
        else if (keylen == 9 && !strncmp(line, "vendor_id", 9) && !b->vendor[0])
            cpu_trim_copy(b->vendor, sizeof b->vendor, val);
        else if (keylen == 7 && !strncmp(line, "cpu MHz", 7) && !b->clock_khz)
            b->clock_khz = (int)(strtod(val, NULL) * 1000.0);
        else if (keylen == 8 && !strncmp(line, "Hardware", 8) && !b->model[0])
            cpu_trim_copy(b->model, sizeof b->model, val);   /* some ARM kernels */
    }
    fclose(f);
}

static void cpu_probe_machine(cpu_backend_t *b)
{
    struct utsname u;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    b->cores = n > 0 ? (int)(n > INT_MAX ? INT_MAX : n) : 1;
    cpu_read_cpuinfo(b);
    if (uname(&u) == 0)
        snprintf(b->arch, sizeof b->arch, "%.63s", u.machine);
    else
        snprintf(b->arch, sizeof b->arch, "unknown");
    if (!b->model[0])
        snprintf(b->model, sizeof b->model, "%s processor", b->arch);
    if (!b->vendor[0])
        snprintf(b->vendor, sizeof b->vendor, "unknown");
}

static size_t cpu_sys_bytes(int name)
{
    long pages = sysconf(name), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return 0;
    if ((unsigned long)pages > SIZE_MAX / (unsigned long)page)
        return SIZE_MAX;
    return (size_t)pages * (size_t)page;
}

/* MemAvailable counts reclaimable cache, which _SC_AVPHYS_PAGES does not. */
static size_t cpu_available_ram(void)
{
    char line[256];
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        while (fgets(line, sizeof line, f)) {
            unsigned long long kb;
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
                fclose(f);
                return kb > SIZE_MAX / 1024 ? SIZE_MAX : (size_t)kb * 1024;
            }
        }
        fclose(f);
    }
    return cpu_sys_bytes(_SC_AVPHYS_PAGES);
}

/* ---- probe ---- */

static keel_status_t cpu_probe(const keel_host_api_t *host, void **backend_ctx, int *device_count,
                               const char **description)
{
    long ndev = 0, threads = 0, check = 0;   /* set_error is opaque to analyzers: keep the paths defined */
    size_t cap;
    keel_status_t st;
    if (host)
        keel__cpu_host = host;
    cpu_backend_t *b = keel__calloc(1, sizeof *b);
    if (!b)
        return CPU_ERR(KEEL_ERROR_OUT_OF_MEMORY, "cpu backend: out of memory while probing");
    cpu_probe_machine(b);
    if ((st = cpu_env_int("KEEL_CPU_DEVICES", getenv("KEEL_CPU_DEVICES"), 1, KEEL_CPU_MAX_DEVICES, 1, &ndev)) !=
            KEEL_OK ||
        (st = cpu_env_memory_limit(getenv("KEEL_CPU_MEMORY_LIMIT"), &cap)) != KEEL_OK ||
        (st = cpu_env_int("KEEL_CPU_THREADS", getenv("KEEL_CPU_THREADS"), 1, KEEL_CPU_MAX_THREADS,
                          b->cores < KEEL_CPU_MAX_THREADS ? b->cores : KEEL_CPU_MAX_THREADS, &threads)) != KEEL_OK ||
        (st = cpu_env_int("KEEL_CPU_CHECK", getenv("KEEL_CPU_CHECK"), 0, 1, 0, &check)) != KEEL_OK) {
        free(b);
        return st;
    }
    b->ndevices = (int)ndev;
    b->mem_cap = cap;
    b->threads = (int)threads;
    b->ram = cpu_sys_bytes(_SC_PHYS_PAGES);
    if (keel__cpu_check != (int)check)   /* a probe again (after a failure) writes nothing the workers read */
        keel__cpu_check = (int)check;
    int len = snprintf(b->description, sizeof b->description, "CPU backend, %d core%s, %d device%s", b->cores,
                       b->cores == 1 ? "" : "s", b->ndevices, b->ndevices == 1 ? "" : "s");
    if (cap && len > 0 && (size_t)len < sizeof b->description)
        snprintf(b->description + len, sizeof b->description - (size_t)len, ", %zu bytes each", cap);
    if (keel__cpu_host->log_enabled && keel__cpu_host->log && keel__cpu_host->log_enabled(KEEL_LOG_INFO)) {
        if (cap)
            keel__cpu_host->log(KEEL_LOG_INFO, "cpu: %d device(s), %d thread(s) each, memory cap of %zu bytes each",
                                b->ndevices, b->threads, cap);
        else
            keel__cpu_host->log(KEEL_LOG_INFO, "cpu: %d device(s), %d thread(s) each, no memory cap", b->ndevices,
                                b->threads);
    }
    if (check && keel__cpu_host->log_enabled && keel__cpu_host->log && keel__cpu_host->log_enabled(KEEL_LOG_INFO))
        keel__cpu_host->log(KEEL_LOG_INFO, "cpu: checking mode (KEEL_CPU_CHECK=1): stream work waits for the host, "
                            "memory is poisoned, unordered uses of a range are refused");
    *backend_ctx = b;
    *device_count = b->ndevices;
    *description = b->description;
    return KEEL_OK;
}

static void cpu_shutdown(void *backend_ctx)
{
    free(backend_ctx);
}

/* ---- device entries ---- */

static keel_status_t cpu_device_open(void *backend_ctx, int index, void **device_ctx)
{
    cpu_backend_t *b = backend_ctx;
    if (index < 0 || index >= b->ndevices)
        return CPU_ERR(KEEL_ERROR_NO_DEVICE, "cpu backend has %d device(s); there is no device %d", b->ndevices,
                       index);
    cpu_device_t *d = keel__calloc(1, sizeof *d);
    if (!d)
        return CPU_ERR(KEEL_ERROR_OUT_OF_MEMORY, "cpu:%d: out of memory while opening the device", index);
    d->backend = b;
    d->index = index;
    atomic_init(&d->used, 0);
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->sync_cv, NULL);
    keel__cpu_pool_init(&d->pool, b->threads, b->cores);
    *device_ctx = d;
    return KEEL_OK;
}

/* Streams left by the application (and the default stream) are drained and
 * joined here, so no thread outlives the device. */
static void cpu_device_close(void *device_ctx)
{
    cpu_device_t *d = device_ctx;
    for (;;) {
        pthread_mutex_lock(&d->lock);
        cpu_stream_t *s = d->streams;
        pthread_mutex_unlock(&d->lock);
        if (!s)
            break;
        keel__cpu_stream_destroy_now(s);
    }
    keel__cpu_pool_fini(&d->pool);
    pthread_cond_destroy(&d->sync_cv);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

static void cpu_memory_numbers(cpu_device_t *d, size_t *free_bytes, size_t *total_bytes)
{
    size_t cap = d->backend->mem_cap;
    if (cap) {
        size_t used = atomic_load(&d->used);
        *total_bytes = cap;
        *free_bytes = used >= cap ? 0 : cap - used;
    } else {
        *total_bytes = cpu_sys_bytes(_SC_PHYS_PAGES);
        *free_bytes = cpu_available_ram();
    }
}

static keel_status_t cpu_device_get_properties(void *device_ctx, keel_device_properties_t *p)
{
    cpu_device_t *d = device_ctx;
    cpu_backend_t *b = d->backend;
    size_t sz = p->struct_size;
    memset(p, 0, sizeof *p);
    p->struct_size = sz;
    snprintf(p->name, sizeof p->name, "%s", b->model);
    snprintf(p->vendor, sizeof p->vendor, "%s", b->vendor);
    snprintf(p->architecture, sizeof p->architecture, "%s", b->arch);
    snprintf(p->backend, sizeof p->backend, "cpu");
    p->type = KEEL_DEVICE_TYPE_CPU;
    p->index = d->index;
    cpu_memory_numbers(d, &p->free_memory, &p->total_memory);
    p->compute_units = b->cores;
    p->max_threads_per_block = KEEL_CPU_THREADS_PER_BLOCK;
    p->max_block_dim[0] = 1024;
    p->max_block_dim[1] = 1024;
    p->max_block_dim[2] = 64;
    p->max_grid_dim[0] = 2147483647;
    p->max_grid_dim[1] = 65535;
    p->max_grid_dim[2] = 65535;
    p->warp_size = 1;
    p->shared_memory_per_block = KEEL_CPU_SHARED_PER_BLOCK;
    p->clock_rate_khz = b->clock_khz;
    p->compute_capability_major = 0;
    p->compute_capability_minor = 0;
    p->pci_bus_id = -1;
    p->unified_addressing = 1;
    p->managed_memory = 1;
    p->concurrent_managed_access = 1;
    p->stream_priorities = 0;
    p->stream_ordered_alloc = 0;
    p->async_engines = 0;
    return KEEL_OK;
}

static keel_status_t cpu_device_memory_info(void *device_ctx, size_t *free_bytes, size_t *total_bytes)
{
    size_t f, t;
    cpu_memory_numbers(device_ctx, &f, &t);
    if (free_bytes)
        *free_bytes = f;
    if (total_bytes)
        *total_bytes = t;
    return KEEL_OK;
}

void keel__cpu_device_sync_one(cpu_device_t *d, cpu_stream_t *s, keel_status_t *first)
{
    s->sync_refs++;
    pthread_mutex_unlock(&d->lock);
    keel_status_t st = keel__cpu_stream_sync(s);
    if (st != KEEL_OK && *first == KEEL_OK)
        *first = st;
    pthread_mutex_lock(&d->lock);
    if (--s->sync_refs == 0)
        pthread_cond_broadcast(&d->sync_cv);
}

/* Waits for what each stream existing when the call began had been given.
 * The device lock is not held while waiting: a host function may create or
 * destroy streams meanwhile. The stream waited on is pinned by sync_refs, so
 * destroy keeps it until the wait ends; only that one, so a host function of
 * it that destroys another stream does not wait for us. Stream ids grow, so
 * "the largest id below the last one" walks each stream once, skips those
 * destroyed meanwhile and leaves out those created after the call began. */
static keel_status_t cpu_device_synchronize(void *device_ctx)
{
    cpu_device_t *d = device_ctx;
    keel_status_t first = KEEL_OK;
    if (keel__cpu_tls_stream && keel__cpu_tls_stream->dev == d)
        return CPU_ERR(KEEL_ERROR_BUSY, "keel_device_synchronize: cpu:%d: called from a host function of one of the "
                       "device's streams (it would wait for itself)", d->index);
    if (KEEL__UNLIKELY(keel__cpu_check))
        return keel__cpu_check_device_sync(d);
    pthread_mutex_lock(&d->lock);
    int bound = d->next_stream_id;
    for (;;) {
        cpu_stream_t *s = NULL;
        for (cpu_stream_t *t = d->streams; t; t = t->next)
            if (t->id < bound && (!s || t->id > s->id))
                s = t;
        if (!s)
            break;
        bound = s->id;
        keel__cpu_device_sync_one(d, s, &first);
    }
    pthread_mutex_unlock(&d->lock);
    return first;
}

static keel_status_t cpu_device_can_access_peer(void *device_ctx, void *peer_device_ctx, int *can_access)
{
    *can_access = 1;   /* all emulated devices share the host's memory */
    return KEEL_OK;
}

static keel_status_t cpu_device_stream_priority_range(void *device_ctx, int *least, int *greatest)
{
    if (least)
        *least = 0;
    if (greatest)
        *greatest = 0;
    return KEEL_OK;
}

const keel_device_vtable_t keel__cpu_device_vtable = {
    .struct_size = sizeof(keel_device_vtable_t),
    .open = cpu_device_open,
    .close = cpu_device_close,
    .get_properties = cpu_device_get_properties,
    .memory_info = cpu_device_memory_info,
    .synchronize = cpu_device_synchronize,
    .can_access_peer = cpu_device_can_access_peer,
    .stream_priority_range = cpu_device_stream_priority_range,
};

/* The built-in operations (kernels/cpu) hand out their table through a
 * function, since a static initializer cannot take the address of a static
 * in another file. Weak, so the backend also links without them. */
KEEL_HIDDEN const void *keel__cpu_ops_table(void) __attribute__((weak));

static keel_backend_plugin_t cpu_plugin = {
    .abi_version = KEEL_BACKEND_ABI_VERSION,
    .struct_size = sizeof(keel_backend_plugin_t),
    .name = "cpu",
    .probe = cpu_probe,
    .shutdown = cpu_shutdown,
    .device = &keel__cpu_device_vtable,
    .memory = &keel__cpu_memory_vtable,
    .stream = &keel__cpu_stream_vtable,
    .event = &keel__cpu_event_vtable,
    .kernel = &keel__cpu_kernel_vtable,
    .graph = &keel__cpu_graph_vtable,
    .ops = NULL,
};

static void cpu_plugin_fill(void)
{
    cpu_plugin.ops = keel__cpu_ops_table ? keel__cpu_ops_table() : NULL;
}

const keel_backend_plugin_t *keel__cpu_backend_init(const keel_host_api_t *host)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    keel__cpu_host = host;
    pthread_once(&once, cpu_plugin_fill);
    return &cpu_plugin;
}
