/* SPDX-License-Identifier: MIT */
/* Status names, the thread-local error detail, and the library version. */
#include <stdio.h>
#include <string.h>
#include "runtime/internal.h"

static const struct {
    const char *name;
    const char *text;
} status_table[KEEL_STATUS_COUNT] = {
    [KEEL_OK] = {"KEEL_OK", "success"},
    [KEEL_ERROR_INVALID_ARGUMENT] = {"KEEL_ERROR_INVALID_ARGUMENT", "invalid argument"},
    [KEEL_ERROR_INVALID_HANDLE] = {"KEEL_ERROR_INVALID_HANDLE", "invalid handle"},
    [KEEL_ERROR_INVALID_POINTER] = {"KEEL_ERROR_INVALID_POINTER", "invalid pointer"},
    [KEEL_ERROR_OUT_OF_RANGE] = {"KEEL_ERROR_OUT_OF_RANGE", "out of range"},
    [KEEL_ERROR_OUT_OF_MEMORY] = {"KEEL_ERROR_OUT_OF_MEMORY", "out of memory"},
    [KEEL_ERROR_NOT_SUPPORTED] = {"KEEL_ERROR_NOT_SUPPORTED", "not supported"},
    [KEEL_ERROR_NOT_READY] = {"KEEL_ERROR_NOT_READY", "not ready"},
    [KEEL_ERROR_NOT_FOUND] = {"KEEL_ERROR_NOT_FOUND", "not found"},
    [KEEL_ERROR_BACKEND_UNAVAILABLE] = {"KEEL_ERROR_BACKEND_UNAVAILABLE", "backend unavailable"},
    [KEEL_ERROR_NO_DEVICE] = {"KEEL_ERROR_NO_DEVICE", "no such device"},
    [KEEL_ERROR_ABI_MISMATCH] = {"KEEL_ERROR_ABI_MISMATCH", "plugin ABI mismatch"},
    [KEEL_ERROR_INVALID_ENVIRONMENT] = {"KEEL_ERROR_INVALID_ENVIRONMENT", "invalid environment variable"},
    [KEEL_ERROR_DEVICE_MISMATCH] = {"KEEL_ERROR_DEVICE_MISMATCH", "objects of different devices"},
    [KEEL_ERROR_LAUNCH_FAILED] = {"KEEL_ERROR_LAUNCH_FAILED", "launch failed"},
    [KEEL_ERROR_COMPILE_FAILED] = {"KEEL_ERROR_COMPILE_FAILED", "compilation or module load failed"},
    [KEEL_ERROR_DEVICE_LOST] = {"KEEL_ERROR_DEVICE_LOST", "device lost"},
    [KEEL_ERROR_BACKEND] = {"KEEL_ERROR_BACKEND", "backend error"},
    [KEEL_ERROR_BUSY] = {"KEEL_ERROR_BUSY", "busy"},
    [KEEL_ERROR_INTERNAL] = {"KEEL_ERROR_INTERNAL", "internal error"},
};

const char *keel_status_string(keel_status_t status)
{
    if ((unsigned)status >= KEEL_STATUS_COUNT)
        return "unknown status";
    return status_table[status].text;
}

const char *keel_status_name(keel_status_t status)
{
    if ((unsigned)status >= KEEL_STATUS_COUNT)
        return "KEEL_STATUS_UNKNOWN";
    return status_table[status].name;
}

/* One detail per thread: the failing call formats into it directly, so no
 * allocation happens on an error path (an allocation failure must be
 * reportable too). */
static _Thread_local char tls_detail[2048];
static _Thread_local keel_status_t tls_status;

keel_status_t keel__set_error_v(keel_status_t status, const char *fmt, va_list ap)
{
    vsnprintf(tls_detail, sizeof(tls_detail), fmt, ap);
    tls_status = status;
    if (keel__log_enabled(KEEL_LOG_DEBUG))
        keel__log(KEEL_LOG_DEBUG, "%s: %s", keel_status_name(status), tls_detail);
    return status;
}

keel_status_t keel__set_error(keel_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    keel__set_error_v(status, fmt, ap);
    va_end(ap);
    return status;
}

void keel__restore_error(keel_status_t status, const char *detail)
{
    if (detail != tls_detail)
        snprintf(tls_detail, sizeof(tls_detail), "%s", detail);
    tls_status = status;
}

keel_status_t keel__prefix_error(keel_status_t status, const char *fmt, ...)
{
    char prefix[1024], detail[sizeof(tls_detail)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    snprintf(detail, sizeof(detail), "%s", tls_detail);
    return keel__set_error(status, "%s: %s", prefix, detail);
}

const char *keel_last_error(void)
{
    return tls_detail;
}

keel_status_t keel_last_status(void)
{
    return tls_status;
}

void keel_clear_error(void)
{
    tls_detail[0] = '\0';
    tls_status = KEEL_OK;
}

#define KEEL__STR2(x) #x
#define KEEL__STR(x) KEEL__STR2(x)

const char *keel_version_string(void)
{
    return KEEL__STR(KEEL_VERSION_MAJOR) "." KEEL__STR(KEEL_VERSION_MINOR) "." KEEL__STR(KEEL_VERSION_PATCH);
}

void keel_version(int *major, int *minor, int *patch)
{
    if (major)
        *major = KEEL_VERSION_MAJOR;
    if (minor)
        *minor = KEEL_VERSION_MINOR;
    if (patch)
        *patch = KEEL_VERSION_PATCH;
}
