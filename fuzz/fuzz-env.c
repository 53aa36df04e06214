/* SPDX-License-Identifier: MIT */
/* fuzz-env: a libFuzzer harness for the parsers of Keel's environment
 * variables. The first byte of an input picks the variable, the rest is its
 * value; keel__env_check (runtime/env.c) runs the code that parses that
 * variable at initialization, without acting on the value, so that one
 * process can try millions of them.
 *
 * What it checks: each value is accepted (KEEL_OK) or refused with
 * KEEL_ERROR_INVALID_ENVIRONMENT and a detail naming the variable; the
 * verdict is the same when asked twice; and, for the variables whose
 * grammar is small, the verdict agrees with a reference written here from
 * docs/environment.md. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "runtime/internal.h"

static const char *const vars[] = {
    "KEEL_LOG",         "KEEL_DEVICE",      "KEEL_BACKEND",          "KEEL_FAULT",  "KEEL_BACKEND_PATH",
    "KEEL_CPU_DEVICES", "KEEL_CPU_THREADS", "KEEL_CPU_MEMORY_LIMIT", "KEEL_CPU_CC", "KEEL_CPU_CFLAGS",
    "KEEL_CPU_CHECK",   "KEEL_BLAS",
};
#define NVARS (sizeof vars / sizeof vars[0])

static void fail(const char *var, const char *value, const char *what, keel_status_t st)
{
    fprintf(stderr, "fuzz-env: %s=\"%s\": %s (%s: \"%s\")\n", var, value, what, keel_status_name(st),
            keel_last_error());
    abort();
}

/* Whole decimal numbers from lo to hi, nothing around them. */
static int ref_number(const char *v, unsigned long long lo, unsigned long long hi)
{
    unsigned long long n = 0;
    if (!*v)
        return 0;
    for (; *v; v++) {
        if (!isdigit((unsigned char)*v))
            return 0;
        if (n > hi)
            return 0;
        n = n * 10 + (unsigned)(*v - '0');
    }
    return n >= lo && n <= hi;
}

static int ref_log(const char *v)
{
    static const char *const levels[] = {"none", "error", "warn", "warning", "info", "debug"};
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++)
        if (strcasecmp(v, levels[i]) == 0)
            return 1;
    return 0;
}

static int ref_blas(const char *v)
{
    return strcasecmp(v, "auto") == 0 || strcasecmp(v, "fallback") == 0 || strcasecmp(v, "vendor") == 0;
}

/* A byte count > 0 with an optional K, M or G, in either case. */
static int ref_memory(const char *v)
{
    size_t n = strlen(v);
    unsigned shift = 0;
    if (n && strchr("kKmMgG", v[n - 1])) {
        shift = strchr("kK", v[n - 1]) ? 10 : strchr("mM", v[n - 1]) ? 20 : 30;
        n--;
    }
    if (!n)
        return 0;
    unsigned long long x = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)v[i]))
            return 0;
        unsigned d = (unsigned)(v[i] - '0');
        if (x > (~0ull - d) / 10)
            return 0;
        x = x * 10 + d;
    }
    return x > 0 && x <= (~(size_t)0 >> shift);
}

/* Comma-separated names of letters, digits and _, each optionally ^, not
 * all of the names kept excluded. */
static int ref_backend(const char *v)
{
    char kept[64][32], gone[64][32];
    int nk = 0, ng = 0;
    for (const char *p = v;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        int ex = len && *p == '^';
        size_t nl = len - (size_t)ex;
        if (nl == 0 || nl >= 32 || nk >= 32 || ng >= 32)
            return nl == 0 || nl >= 32 ? 0 : -1;   /* -1: past what the reference models */
        char name[32];
        for (size_t i = 0; i < nl; i++) {
            unsigned char c = (unsigned char)p[ex + i];
            if (!isalnum(c) && c != '_')
                return 0;
            name[i] = (char)tolower(c);
        }
        name[nl] = '\0';
        strcpy(ex ? gone[ng++] : kept[nk++], name);
        if (!end)
            break;
        p = end + 1;
    }
    if (nk == 0) {
        strcpy(kept[nk++], "cuda");
        strcpy(kept[nk++], "hip");
        strcpy(kept[nk++], "cpu");
    }
    for (int i = 0; i < nk; i++) {
        int dropped = 0;
        for (int j = 0; j < ng; j++)
            dropped |= strcmp(kept[i], gone[j]) == 0;
        if (!dropped)
            return 1;
    }
    return 0;
}

/* The reference's verdict: 1 valid, 0 invalid, -1 not modelled. */
static int reference(const char *var, const char *v)
{
    if (!*v)
        return 1;
    if (!strcmp(var, "KEEL_LOG"))
        return ref_log(v);
    if (!strcmp(var, "KEEL_DEVICE"))
        return ref_number(v, 0, 1u << 20);
    if (!strcmp(var, "KEEL_CPU_DEVICES"))
        return ref_number(v, 1, 64);
    if (!strcmp(var, "KEEL_CPU_THREADS"))
        return ref_number(v, 1, 1024);
    if (!strcmp(var, "KEEL_CPU_CHECK"))
        return ref_number(v, 0, 1);
    if (!strcmp(var, "KEEL_CPU_MEMORY_LIMIT"))
        return ref_memory(v);
    if (!strcmp(var, "KEEL_BACKEND"))
        return ref_backend(v);
    if (!strcmp(var, "KEEL_BLAS"))
        return ref_blas(v);
    return -1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    /* Whatever the fuzzer's own environment holds, initialize cleanly. */
    for (size_t i = 0; i < NVARS; i++)
        unsetenv(vars[i]);
    setenv("KEEL_BACKEND", "cpu", 1);
    if (keel_init() != KEEL_OK) {
        fprintf(stderr, "fuzz-env: keel_init: %s\n", keel_last_error());
        exit(1);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const char *var = vars[data[0] % NVARS];
    char *value = malloc(size);
    memcpy(value, data + 1, size - 1);
    value[size - 1] = '\0';

    keel_status_t st = keel__env_check(var, value);
    char detail[4096];
    snprintf(detail, sizeof detail, "%s", keel_last_error());
    if (st != KEEL_OK) {
        if (st != KEEL_ERROR_INVALID_ENVIRONMENT)
            fail(var, value, "refused with a status other than KEEL_ERROR_INVALID_ENVIRONMENT", st);
        if (!strstr(detail, var))
            fail(var, value, "refused with a detail that does not name the variable", st);
    }
    keel_status_t again = keel__env_check(var, value);
    if (again != st || (st != KEEL_OK && strcmp(detail, keel_last_error()) != 0))
        fail(var, value, "a second parse gives another verdict", again);
    int ref = reference(var, value);
    if (ref >= 0 && ref != (st == KEEL_OK))
        fail(var, value, ref ? "refused a value docs/environment.md accepts" : "accepted a value docs/environment.md refuses",
             st);
    free(value);
    return 0;
}
