/* SPDX-License-Identifier: MIT */
/* Running a compiler: command words split without a shell, and a child
 * process whose output is collected, for the CPU backend's run-time
 * compilation and for keel-cc. */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/spawn.h"

extern char **environ;

/* Splits @p s at white space into @p words (pointers into @p buf). */
int keel__split_words(const char *s, char *buf, size_t size, char **words, int max)
{
    if ((size_t)snprintf(buf, size, "%s", s) >= size)
        return -1;
    int n = 0;
    for (char *p = buf; *p;) {
        while (*p == ' ' || *p == '\t' || *p == '\n')
            *p++ = '\0';
        if (!*p)
            break;
        if (n == max)
            return -1;
        words[n++] = p;
        while (*p && *p != ' ' && *p != '\t' && *p != '\n')
            p++;
    }
    return n;
}

/* Runs @p argv, collecting its output into @p log; returns the exit status,
 * or -1 when it could not run (errno-style reason in @p log). */
int keel__run_capture(char **argv, char *log, size_t log_size)
{
    int pipefd[2];
    log[0] = '\0';
    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        snprintf(log, log_size, "pipe: %s", strerror(errno));
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(pipefd[1]);
    if (rc != 0) {
        close(pipefd[0]);
        snprintf(log, log_size, "cannot run %s: %s", argv[0], strerror(rc));
        return -1;
    }
    size_t got = 0;
    for (;;) {
        char chunk[4096];
        ssize_t r = read(pipefd[0], chunk, sizeof chunk);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        size_t k = (size_t)r < log_size - 1 - got ? (size_t)r : log_size - 1 - got;
        memcpy(log + got, chunk, k);
        got += k;
    }
    log[got] = '\0';
    close(pipefd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            snprintf(log + got, log_size - got, "waitpid: %s", strerror(errno));
            return -1;
        }
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* Joins words for a log line. */
void keel__join_words(char **words, int n, char *out, size_t size)
{
    size_t w = 0;
    out[0] = '\0';
    for (int i = 0; i < n && w < size; i++) {
        int k = snprintf(out + w, size - w, "%s%s", i ? " " : "", words[i]);
        if (k < 0)
            break;
        w += (size_t)k;
    }
}


/* The executable @p prog names: itself when it has a slash, else the first
 * match on PATH. */
int keel__find_program(const char *prog, char *out, size_t size, struct stat *st)
{
    if (strchr(prog, '/')) {
        if (stat(prog, st) != 0 || !S_ISREG(st->st_mode) || access(prog, X_OK) != 0)
            return 0;
        return (size_t)snprintf(out, size, "%s", prog) < size;
    }
    const char *path = getenv("PATH");
    if (!path || !path[0])
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path; *p;) {
        const char *e = strchr(p, ':');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len && (size_t)snprintf(out, size, "%.*s/%s", (int)len, p, prog) < size && stat(out, st) == 0 &&
            S_ISREG(st->st_mode) && access(out, X_OK) == 0)
            return 1;
        p += len + (e != NULL);
    }
    return 0;
}

