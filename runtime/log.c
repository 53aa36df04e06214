/* SPDX-License-Identifier: MIT */
/* Logging: off unless KEEL_LOG or keel_log_set_level asks; to stderr or a callback. */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include "runtime/internal.h"

static atomic_int log_level = KEEL_LOG_NONE;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static keel_log_fn_t log_fn;
static void *log_user;

static const char *const level_names[] = {"none", "error", "warn", "info", "debug"};

void keel_log_set_level(keel_log_level_t level)
{
    if ((int)level < KEEL_LOG_NONE)
        level = KEEL_LOG_NONE;
    if (level > KEEL_LOG_DEBUG)
        level = KEEL_LOG_DEBUG;
    atomic_store(&log_level, (int)level);
}

keel_log_level_t keel_log_get_level(void)
{
    return (keel_log_level_t)atomic_load(&log_level);
}

void keel_log_set_callback(keel_log_fn_t fn, void *user_data)
{
    pthread_mutex_lock(&log_lock);
    log_fn = fn;
    log_user = user_data;
    pthread_mutex_unlock(&log_lock);
}

int keel__log_enabled(int level)
{
    return level > KEEL_LOG_NONE && level <= atomic_load_explicit(&log_level, memory_order_relaxed);
}

/* Set while this thread runs the log callback: a Keel call failing inside
 * it would log again and take log_lock a second time. */
static _Thread_local int in_callback;

void keel__log_v(int level, const char *fmt, va_list ap)
{
    if (!keel__log_enabled(level) || in_callback)
        return;
    char line[2048];
    vsnprintf(line, sizeof(line), fmt, ap);
    /* The lock keeps lines from interleaving and the callback from changing mid-call. */
    pthread_mutex_lock(&log_lock);
    if (log_fn) {
        in_callback = 1;
        log_fn((keel_log_level_t)level, line, log_user);
        in_callback = 0;
    } else
        fprintf(stderr, "keel[%s]: %s\n", level_names[level], line);
    pthread_mutex_unlock(&log_lock);
}

void keel__log(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    keel__log_v(level, fmt, ap);
    va_end(ap);
}

/* Words in the environment match without regard to case, as backend names
 * in KEEL_BACKEND do: KEEL_LOG=INFO is info. */
int keel__log_parse(const char *value, int *level)
{
    for (int i = 0; i <= KEEL_LOG_DEBUG; i++) {
        if (strcasecmp(value, level_names[i]) == 0) {
            *level = i;
            return 0;
        }
    }
    if (strcasecmp(value, "warning") == 0) {
        *level = KEEL_LOG_WARN;
        return 0;
    }
    return -1;
}
