/* SPDX-License-Identifier: MIT */
/* Running a compiler (runtime/spawn.c); shared by libkeel and keel-cc. */
#ifndef KEEL_CORE_SPAWN_H
#define KEEL_CORE_SPAWN_H

#include <stddef.h>
#include <sys/stat.h>

#ifndef KEEL_HIDDEN
#define KEEL_HIDDEN __attribute__((visibility("hidden")))
#endif

/* Splits @p s at white space into at most @p max @p words, pointing into
 * @p buf (a copy of @p s); returns the count, or -1 when it does not fit. */
KEEL_HIDDEN int keel__split_words(const char *s, char *buf, size_t size, char **words, int max);
/* Runs argv[0] (a path) with @p argv, its standard output and error going
 * into @p log (truncated to @p log_size); returns the exit status, 128 + the
 * signal that ended it, or -1 when it could not start (the reason in @p log). */
KEEL_HIDDEN int keel__run_capture(char **argv, char *log, size_t log_size);
/* Writes the words joined by spaces, for a log line. */
KEEL_HIDDEN void keel__join_words(char **words, int n, char *out, size_t size);

/* The executable @p prog names: itself when it holds a slash, else the
 * first match on PATH; 1 with its path in @p out and its stat in @p st. */
KEEL_HIDDEN int keel__find_program(const char *prog, char *out, size_t size, struct stat *st);

#endif /* KEEL_CORE_SPAWN_H */
