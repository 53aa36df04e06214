/* SPDX-License-Identifier: MIT */
/* Fault injection: KEEL_FAULT makes chosen internal sites fail, so that
 * users and the tests can see what Keel does when an allocation, a thread,
 * a plugin, a vendor call, an enqueue or a compiler fails
 * (docs/reliability.md).
 *
 * Each site counts its calls from 1 (one atomic counter per site, touched
 * only while the site is armed); a rule says which calls fail: the Nth, the
 * Nth and every later one, or each with a probability, drawn from a hash of
 * the seed and the call's number so that a run that makes its calls in the
 * same order fails the same ones. */
#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include "runtime/internal.h"

unsigned keel__fault_armed;

static const char *const site_names[KEEL_FAULT_SITE_COUNT] = {
    [KEEL_FAULT_HOST_ALLOC] = "host-alloc",
    [KEEL_FAULT_DEVICE_ALLOC] = "device-alloc",
    [KEEL_FAULT_THREAD_CREATE] = "thread-create",
    [KEEL_FAULT_PLUGIN_LOAD] = "plugin-load",
    [KEEL_FAULT_VENDOR_CALL] = "vendor-call",
    [KEEL_FAULT_STREAM_ENQUEUE] = "stream-enqueue",
    [KEEL_FAULT_COMPILE] = "compile",
};

enum { RULE_NTH, RULE_FROM, RULE_PROB };

#define MAX_RULES 32

typedef struct rule {
    int site;
    int mode;
    unsigned long long n;   /* RULE_NTH, RULE_FROM */
    uint64_t threshold;     /* RULE_PROB: a call fails when its hash is below it */
    int always;             /* RULE_PROB with p = 1 */
    uint64_t seed;
} rule_t;

static rule_t rules[MAX_RULES];
static int nrules;
static atomic_ullong calls[KEEL_FAULT_SITE_COUNT];

static int setup_done;
static keel_status_t setup_status;
static char setup_detail[1024];

static _Thread_local unsigned long thread_faults;
static _Thread_local char thread_last[48];

static uint64_t mix64(uint64_t x)
{
    x += UINT64_C(0x9E3779B97F4A7C15);
    x = (x ^ (x >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94D049BB133111EB);
    return x ^ (x >> 31);
}

int keel__fault_hit(int site)
{
    if (site < 0 || site >= KEEL_FAULT_SITE_COUNT || !(keel__fault_armed & (1u << site)))
        return 0;
    unsigned long long n = atomic_fetch_add_explicit(&calls[site], 1, memory_order_relaxed) + 1;
    int hit = 0;
    for (int i = 0; i < nrules && !hit; i++) {
        const rule_t *r = &rules[i];
        if (r->site != site)
            continue;
        switch (r->mode) {
        case RULE_NTH: hit = n == r->n; break;
        case RULE_FROM: hit = n >= r->n; break;
        default: hit = r->always || mix64(r->seed ^ mix64((uint64_t)site << 56 ^ n)) < r->threshold; break;
        }
    }
    if (!hit)
        return 0;
    thread_faults++;
    snprintf(thread_last, sizeof thread_last, "%s:%llu", site_names[site], n);
    int saved = errno;
    keel__log(KEEL_LOG_WARN, "KEEL_FAULT: call %llu of %s fails (injected)", n, site_names[site]);
    errno = saved;
    return 1;
}

int keel__fault_hook(int site)
{
    return keel__fault_hit(site);
}

unsigned long keel__fault_thread_count(void)
{
    return thread_faults;
}

const char *keel__fault_last(void)
{
    return thread_last;
}

keel_status_t keel__fault_fail(keel_status_t status, const char *fmt, ...)
{
    char what[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return keel__set_error(status, "%s: injected failure (KEEL_FAULT %s)", what, thread_last);
}

/* ---- KEEL_FAULT's syntax ---- */

static const char *const form =
    "expected comma-separated entries site:N (the Nth call of the site fails), site:N+ (the Nth and every later "
    "call) or site:p=P[:seed=S] (each call with probability P, 0 to 1, drawn from seed S), the site one of "
    "host-alloc, device-alloc, thread-create, plugin-load, vendor-call, stream-enqueue, compile";

/* A decimal number of [s, end) without sign or spaces, at most max. */
static int parse_count(const char *s, const char *end, unsigned long long max, unsigned long long *out)
{
    unsigned long long v = 0;
    if (s == end)
        return -1;
    for (const char *p = s; p < end; p++) {
        if (!isdigit((unsigned char)*p))
            return -1;
        unsigned d = (unsigned)(*p - '0');
        if (v > (max - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* A probability: digits with an optional fraction ("0.01", ".5", "1"), 0 to 1. */
static int parse_prob(const char *s, const char *end, double *out)
{
    double v = 0, scale = 1;
    int digits = 0, dot = 0;
    for (const char *p = s; p < end; p++) {
        if (*p == '.' && !dot) {
            dot = 1;
            continue;
        }
        if (!isdigit((unsigned char)*p))
            return -1;
        digits++;
        if (dot) {
            scale /= 10;
            v += (*p - '0') * scale;
        } else {
            v = v * 10 + (*p - '0');
        }
        if (v > 1)
            return -1;
    }
    if (!digits)
        return -1;
    *out = v;
    return 0;
}

static keel_status_t bad(const char *value, int pos, const char *entry, size_t len, const char *problem)
{
    return keel__set_error(KEEL_ERROR_INVALID_ENVIRONMENT, "KEEL_FAULT=\"%s\": entry %d (\"%.*s\") %s; %s", value, pos,
                           (int)len, entry, problem, form);
}

/* One entry [p, end) into r. */
static keel_status_t parse_entry(const char *value, int pos, const char *p, const char *end, rule_t *r)
{
    size_t len = (size_t)(end - p);
    if (len == 0)
        return bad(value, pos, p, len, "is empty");
    const char *colon = memchr(p, ':', len);
    if (!colon)
        return bad(value, pos, p, len, "has no ':' after the site");
    size_t nlen = (size_t)(colon - p);
    r->site = -1;
    for (int i = 0; i < KEEL_FAULT_SITE_COUNT; i++)
        if (strlen(site_names[i]) == nlen && strncasecmp(p, site_names[i], nlen) == 0)
            r->site = i;
    if (r->site < 0)
        return bad(value, pos, p, len, "names no site");
    const char *spec = colon + 1;
    if (end - spec >= 2 && (spec[0] == 'p' || spec[0] == 'P') && spec[1] == '=') {
        const char *pv = spec + 2;
        const char *pend = memchr(pv, ':', (size_t)(end - pv));
        double prob;
        if (parse_prob(pv, pend ? pend : end, &prob) != 0)
            return bad(value, pos, p, len, "has a probability that is not a number from 0 to 1");
        r->mode = RULE_PROB;
        r->always = prob >= 1;
        r->threshold = r->always ? UINT64_MAX : (uint64_t)(prob * 18446744073709551616.0);
        r->seed = 0;
        if (pend) {
            const char *sv = pend + 1;
            unsigned long long seed;
            if (end - sv < 5 || strncasecmp(sv, "seed=", 5) != 0)
                return bad(value, pos, p, len, "has something other than :seed=S after the probability");
            if (parse_count(sv + 5, end, ULLONG_MAX, &seed) != 0)
                return bad(value, pos, p, len, "has a seed that is not a whole number");
            r->seed = seed;
        }
        return KEEL_OK;
    }
    int from = end > spec && end[-1] == '+';
    unsigned long long n;
    if (parse_count(spec, end - from, 1ull << 62, &n) != 0 || n == 0)
        return bad(value, pos, p, len, "has no call number 1, 2, 3, ... (or p=P) after the site");
    r->mode = from ? RULE_FROM : RULE_NTH;
    r->n = n;
    return KEEL_OK;
}

/* Parses value into parsed[] (*n rules); KEEL_OK or the error set. */
static keel_status_t fault_parse(const char *value, rule_t parsed[MAX_RULES], int *n)
{
    int pos = 0;
    keel_status_t st;
    *n = 0;
    for (const char *p = value;;) {
        pos++;
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        if (*n == MAX_RULES)
            return keel__set_error(KEEL_ERROR_INVALID_ENVIRONMENT, "KEEL_FAULT=\"%s\" has more than %d entries; %s",
                                   value, MAX_RULES, form);
        if ((st = parse_entry(value, pos, p, end, &parsed[*n])) != KEEL_OK)
            return st;
        ++*n;
        if (!comma)
            return KEEL_OK;
        p = comma + 1;
    }
}

keel_status_t keel__fault_check(const char *value)
{
    rule_t parsed[MAX_RULES];
    int n;
    return value && value[0] ? fault_parse(value, parsed, &n) : KEEL_OK;
}

keel_status_t keel__fault_setup(const char *value)
{
    if (setup_done) {
        if (setup_status != KEEL_OK)
            return keel__set_error(setup_status, "%s", setup_detail);
        return KEEL_OK;
    }
    setup_done = 1;
    if (!value || !value[0])
        return KEEL_OK;
    rule_t parsed[MAX_RULES];
    int n;
    keel_status_t st = fault_parse(value, parsed, &n);
    if (st != KEEL_OK) {
        setup_status = st;
        snprintf(setup_detail, sizeof setup_detail, "%s", keel_last_error());
        return st;
    }
    unsigned armed = 0;
    for (int i = 0; i < n; i++) {
        rules[i] = parsed[i];
        armed |= 1u << parsed[i].site;
    }
    nrules = n;
    keel__fault_armed = armed;
    keel__log(KEEL_LOG_INFO, "KEEL_FAULT=\"%s\": %d rule%s armed", value, n, n == 1 ? "" : "s");
    return KEEL_OK;
}
