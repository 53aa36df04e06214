/* SPDX-License-Identifier: MIT */
/**
 * @file keel/log.h
 * @brief Logging and the environment variables Keel reads.
 *
 * Keel prints nothing unless asked: KEEL_LOG=error|warn|info|debug sets the
 * level at initialization, keel_log_set_level() changes it later. Messages go
 * to stderr, or to a callback the application installs.
 */
#ifndef KEEL_LOG_H
#define KEEL_LOG_H

#include "keel/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Log levels, each including the ones before it. */
typedef enum keel_log_level {
    KEEL_LOG_NONE = 0,
    KEEL_LOG_ERROR = 1,
    KEEL_LOG_WARN = 2,
    KEEL_LOG_INFO = 3,
    KEEL_LOG_DEBUG = 4
} keel_log_level_t;

/** @brief Set the level (values past KEEL_LOG_DEBUG are clamped). Thread-safe. */
KEEL_API void keel_log_set_level(keel_log_level_t level);

/** @brief The current level. */
KEEL_API keel_log_level_t keel_log_get_level(void);

/** @brief Receives each log line (without a trailing newline). Called from any Keel thread. */
typedef void (*keel_log_fn_t)(keel_log_level_t level, const char *message, void *user_data);

/** @brief Send log lines to @p fn instead of stderr; NULL restores stderr.
 *  The callback may call Keel (lines its own calls would log are dropped), but not
 *  keel_log_set_callback. */
KEEL_API void keel_log_set_callback(keel_log_fn_t fn, void *user_data);

/**
 * @brief The number of environment variables keel_env_var_get() lists.
 * @param[out] count
 * @return KEEL_ERROR_INVALID_ARGUMENT when @p count is NULL.
 */
KEEL_API keel_status_t keel_env_var_count(int *count);

/**
 * @brief The environment variables Keel reads, one per index, for tools and docs.
 * @param[in] index 0 .. n-1, n from keel_env_var_count()
 * @param[out] name "KEEL_BACKEND"; @param[out] description one line. Static strings.
 * @return KEEL_ERROR_OUT_OF_RANGE past the last one.
 */
KEEL_API keel_status_t keel_env_var_get(int index, const char **name, const char **description);

/**
 * @brief The value in force of the variable keel_env_var_get() lists at @p index:
 * the environment's value of its name, else of its older alias (a plugin's
 * variable may have one), as Keel reads it.
 * @param[in] index 0 .. n-1, n from keel_env_var_count()
 * @param[out] value the value, NULL when unset (may be NULL).
 * @param[out] set_by the variable the value came from (the name or the
 *             alias), NULL when unset (may be NULL). Pointers into the
 *             environment or static strings, valid until it changes.
 * @return KEEL_ERROR_OUT_OF_RANGE past the last one.
 */
KEEL_API keel_status_t keel_env_var_value(int index, const char **value, const char **set_by);

#ifdef __cplusplus
}
#endif

#endif /* KEEL_LOG_H */
