/* SPDX-License-Identifier: MIT */
/* The environment variables Keel reads: the core's and the CPU backend's
 * table (for keel-info and docs; the plugins declare their own, see
 * runtime/env_decl.c) and the strict number parser they share. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "runtime/internal.h"
#include "runtime/ops_fallback.h"

static const struct {
    const char *name;
    const char *description;
} env_vars[] = {
    {"KEEL_BACKEND", "backends in order of preference, comma-separated, ^name excludes (default cuda,hip,cpu)"},
    {"KEEL_DEVICE", "device index within the selected backend (default 0)"},
    {"KEEL_BACKEND_PATH", "colon-separated directories searched for keel-<name>.so before the install directory"},
    {"KEEL_LOG", "log level: none, error, warn, info or debug (default none)"},
    {"KEEL_CPU_DEVICES", "number of CPU devices to emulate, 1..64 (default 1)"},
    {"KEEL_CPU_MEMORY_LIMIT", "memory cap of each CPU device in bytes, suffix K, M or G allowed (default none)"},
    {"KEEL_CPU_THREADS", "worker threads of each CPU device, 1..1024 (default: online cores)"},
    {"KEEL_CPU_CHECK", "1: the CPU backend's checking mode (stream work waits for the host, fresh and freed memory "
                       "poisoned, unordered uses of a range refused); 0 (default): off"},
    {"KEEL_CACHE_DIR", "directory of the run-time compilation cache, every backend's (default $XDG_CACHE_HOME/keel or "
                       "~/.cache/keel; empty: no cache)"},
    {"KEEL_CPU_CC", "CPU backend: the C compiler that builds kernels at run time (default: the one that built Keel)"},
    {"KEEL_CPU_CFLAGS", "CPU backend: its flags (default -O3 -march=native -fno-math-errno -fno-trapping-math)"},
    {"KEEL_BLAS", "what runs keel_gemm, keel_gemv and keel_dense: auto (default: the vendor library where it is "
                  "usable, else Keel's portable kernels), fallback (Keel's portable kernels), vendor (only the vendor "
                  "library)"},
    {"KEEL_FAULT", "fault injection: site:N, site:N+ or site:p=P[:seed=S], comma-separated; sites host-alloc, "
                   "device-alloc, thread-create, plugin-load, vendor-call, stream-enqueue, compile (default none)"},
};

/* The core's variables first, then those of each plugin's table (the
 * plugins that loaded: keel_init finds them). */
#define CORE_COUNT (sizeof(env_vars) / sizeof(env_vars[0]))

keel_status_t keel_env_var_count(int *count)
{
    KEEL__CHECK_OUT(count, "keel_env_var_count", "count");
    (void)keel_init();
    *count = (int)CORE_COUNT + keel__plugin_env_count();
    return KEEL_OK;
}

keel_status_t keel_env_var_get(int index, const char **name, const char **description)
{
    const char *n = NULL, *d = NULL;
    if (index >= 0 && (size_t)index < CORE_COUNT) {
        n = env_vars[index].name;
        d = env_vars[index].description;
    } else {
        (void)keel_init();
        const char *alias;
        if (index < 0 || keel__plugin_env_get(index - (int)CORE_COUNT, &n, &d, &alias) != 0)
            return keel__set_error(KEEL_ERROR_OUT_OF_RANGE, "keel_env_var_get: index %d is not in [0, %d)", index,
                                   (int)CORE_COUNT + keel__plugin_env_count());
    }
    if (name)
        *name = n;
    if (description)
        *description = d;
    return KEEL_OK;
}

keel_status_t keel_env_var_value(int index, const char **value, const char **set_by)
{
    const char *name = NULL, *desc, *alias = "";
    keel_status_t st = keel_env_var_get(index, &name, NULL);
    if (st != KEEL_OK)
        return keel__prefix_error(st, "keel_env_var_value");
    if ((size_t)index >= CORE_COUNT)
        (void)keel__plugin_env_get(index - (int)CORE_COUNT, &name, &desc, &alias);
    const char *from = name, *v = getenv(name);
    const char *old = alias[0] && (!v || !v[0]) ? getenv(alias) : NULL;
    if (old && old[0]) { /* an empty name gives way to a set alias, as the plugin reads it */
        from = alias;
        v = old;
    }
    if (!v)
        from = NULL;
    if (value)
        *value = v;
    if (set_by)
        *set_by = from;
    return KEEL_OK;
}

int keel__parse_uint(const char *s, unsigned long long max, unsigned long long *out)
{
    if (!s || !isdigit((unsigned char)s[0]))
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end != '\0' || v > max)
        return -1;
    *out = v;
    return 0;
}

keel_status_t keel__env_log(const char *value, int *level)
{
    if (keel__log_parse(value, level) != 0)
        return keel__set_error(KEEL_ERROR_INVALID_ENVIRONMENT,
                               "KEEL_LOG=\"%s\" is not a log level; expected none, error, warn, info or debug", value);
    return KEEL_OK;
}

keel_status_t keel__env_device(const char *value, long *index)
{
    unsigned long long v;
    if (keel__parse_uint(value, 1u << 20, &v) != 0)
        return keel__set_error(KEEL_ERROR_INVALID_ENVIRONMENT,
                               "KEEL_DEVICE=\"%s\" is not a device index; expected a number 0, 1, 2, ...", value);
    *index = (long)v;
    return KEEL_OK;
}

keel_status_t keel__env_check(const char *name, const char *value)
{
    /* The CPU backend's parsers report through the host services its probe
     * received; keel_init probes it, whatever the environment holds. */
    (void)keel_init();
    keel_clear_error();
    if (!value || !value[0])
        return KEEL_OK;   /* empty counts as unset */
    if (strcmp(name, "KEEL_LOG") == 0) {
        int level;
        return keel__env_log(value, &level);
    }
    if (strcmp(name, "KEEL_DEVICE") == 0) {
        long index;
        return keel__env_device(value, &index);
    }
    if (strcmp(name, "KEEL_BACKEND") == 0) {
        char names[KEEL__MAX_PREFS][32];
        int n;
        return keel__parse_backend_list(value, names, &n) == 0 ? KEEL_OK : keel_last_status();
    }
    if (strcmp(name, "KEEL_FAULT") == 0)
        return keel__fault_check(value);
    if (strcmp(name, "KEEL_BLAS") == 0) {
        int mode;
        return keel__env_blas(value, &mode);
    }
    if (strcmp(name, "KEEL_BACKEND_PATH") == 0)
        return keel__loader_path_check(value);
    return keel__cpu_env_check(name, value);
}
