/* SPDX-License-Identifier: MIT */
/* The environment variables a plugin declares in its table
 * (keel_backend_plugin_t.env, keel_env_decl_t): checked before its probe,
 * read by the plugin through keel_host_api_t.env_value, and listed after
 * the core's own variables by keel_env_var_get. One parser serves every
 * plugin. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "runtime/internal.h"

/* The value of d as the environment holds it (d's name, else its alias),
 * NULL when unset or empty; *as is the variable it came from. */
static const char *raw_value(const keel_env_decl_t *d, const char **as)
{
    const char *v = getenv(d->name);
    *as = d->name;
    if ((!v || !v[0]) && d->alias) {
        v = getenv(d->alias);
        *as = d->alias;
    }
    return v && v[0] ? v : NULL;
}

/* Whether v is one of the '|'-separated words (case does not matter). */
static int is_word(const char *v, const char *words)
{
    size_t n = strlen(v);
    for (const char *w = words; w && *w;) {
        const char *bar = strchr(w, '|');
        size_t len = bar ? (size_t)(bar - w) : strlen(w);
        if (len == n && strncasecmp(v, w, n) == 0)
            return 1;
        w = bar ? bar + 1 : w + len;
    }
    return 0;
}

void keel__env_decl_values(const keel_env_decl_t *d, char *buf, size_t cap)
{
    char words[160] = "";
    if (d->choices) {
        /* "a|b|c" -> "a, b or c" */
        size_t nwords = 1, k = 0;
        for (const char *c = d->choices; *c; c++)
            nwords += *c == '|';
        size_t seen = 0;
        for (const char *c = d->choices; *c && k + 6 < sizeof words; c++) {
            if (*c != '|') {
                words[k++] = *c;
                continue;
            }
            seen++;
            const char *sep = seen + 1 == nwords && d->kind != KEEL_ENV_UINT ? " or " : ", ";
            for (const char *s = sep; *s && k + 1 < sizeof words; s++)
                words[k++] = *s;
        }
        words[k] = '\0';
    }
    switch (d->kind) {
    case KEEL_ENV_CHOICE:
        snprintf(buf, cap, "%s", words);
        break;
    case KEEL_ENV_UINT:
        snprintf(buf, cap, "%s%sa whole number from %llu to %llu", words, words[0] ? " or " : "", d->min, d->max);
        break;
    default:
        snprintf(buf, cap, "any text");
        break;
    }
}

static int value_ok(const keel_env_decl_t *d, const char *v)
{
    switch (d->kind) {
    case KEEL_ENV_CHOICE:
        return is_word(v, d->choices);
    case KEEL_ENV_UINT: {
        if (d->choices && is_word(v, d->choices))
            return 1;
        unsigned long long x;
        return keel__parse_uint(v, d->max, &x) == 0 && x >= d->min;
    }
    default:
        return 1;
    }
}

keel_status_t keel__env_decls_check(const keel_env_decl_t *table, const char *backend)
{
    int n = 0;
    for (const keel_env_decl_t *d = table; d->name; d++, n++) {
        if (n == KEEL__ENV_DECL_MAX)
            return keel__set_error(KEEL_ERROR_BACKEND_UNAVAILABLE,
                                   "the %s plugin declares more than %d environment variables", backend,
                                   KEEL__ENV_DECL_MAX);
        if (strncmp(d->name, "KEEL_", 5) != 0 || (d->alias && strncmp(d->alias, "KEEL_", 5) != 0) ||
            d->kind < KEEL_ENV_TEXT || d->kind > KEEL_ENV_UINT || (d->kind == KEEL_ENV_CHOICE && !d->choices) ||
            (d->kind == KEEL_ENV_UINT && d->min > d->max) || !d->doc)
            return keel__set_error(KEEL_ERROR_BACKEND_UNAVAILABLE,
                                   "the %s plugin's environment table is malformed at %s", backend, d->name);
        const char *as, *v = raw_value(d, &as);
        if (!v || value_ok(d, v))
            continue;
        char values[224];
        keel__env_decl_values(d, values, sizeof values);
        if (as != d->name)
            return keel__set_error(KEEL_ERROR_INVALID_ENVIRONMENT, "%s=\"%s\" (read as %s): expected %s", as, v,
                                   d->name, values);
        return keel__set_error(KEEL_ERROR_INVALID_ENVIRONMENT, "%s=\"%s\": expected %s", as, v, values);
    }
    return KEEL_OK;
}

void keel__env_decl_describe(const keel_env_decl_t *d, const char *backend, char *buf, size_t cap)
{
    char values[224];
    keel__env_decl_values(d, values, sizeof values);
    snprintf(buf, cap, "%s plugin: %s (%s; default %s%s%s)", backend, d->doc, values,
             d->default_text ? d->default_text : "unset", d->alias ? "; also read as " : "", d->alias ? d->alias : "");
}
