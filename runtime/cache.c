/* SPDX-License-Identifier: MIT */
/* The on-disk cache of run-time compilation, shared by every backend: the
 * directory (KEEL_CACHE_DIR, else $XDG_CACHE_HOME/keel, else ~/.cache/keel;
 * an empty KEEL_CACHE_DIR turns it off), the key hash, entries that carry a
 * checksummed header (NVRTC's cubins and PTX), and plain files installed by
 * an atomic rename (the CPU backend's shared objects, which dlopen maps where
 * they lie). A missing, unreadable or corrupt entry is a miss, never an
 * error; a cache that cannot be written only costs the next compile. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/internal.h"

/* Two independent 64-bit hashes (FNV-1a, and a multiplicative one with a
 * shift mix) over length-prefixed fields: 128 bits against collisions. */
void keel__hash_init(uint64_t h[2])
{
    h[0] = 0xcbf29ce484222325ull;
    h[1] = 0x243f6a8885a308d3ull;
}

static void hash_bytes(uint64_t h[2], const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t a = h[0], b = h[1];
    for (size_t i = 0; i < n; i++) {
        a = (a ^ p[i]) * 0x100000001b3ull;
        b = (b + p[i] + 1) * 0x9e3779b97f4a7c15ull;
        b ^= b >> 29;
    }
    h[0] = a;
    h[1] = b;
}

void keel__hash_field(uint64_t h[2], const void *data, size_t n)
{
    uint64_t len = n;
    hash_bytes(h, &len, sizeof len);
    hash_bytes(h, data, n);
}

void keel__hash_str(uint64_t h[2], const char *s)
{
    keel__hash_field(h, s ? s : "", s ? strlen(s) : 0);
}

int keel__cache_dir(char *buf, size_t size)
{
    const char *d = getenv("KEEL_CACHE_DIR");
    if (d)
        return d[0] != '\0' && (size_t)snprintf(buf, size, "%s", d) < size;
    const char *x = getenv("XDG_CACHE_HOME");
    if (x && x[0] == '/')
        return (size_t)snprintf(buf, size, "%s/keel", x) < size;
    const char *home = getenv("HOME");
    if (home && home[0])
        return (size_t)snprintf(buf, size, "%s/.cache/keel", home) < size;
    return 0;
}

static void mkdir_p(const char *path)
{
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s", path) >= sizeof tmp)
        return;
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            (void)mkdir(tmp, 0700);
            *p = '/';
        }
    }
    (void)mkdir(tmp, 0700);
}

int keel__cache_path(const char *kind, const uint64_t key[2], const char *ext, char *buf, size_t size)
{
    char dir[4096];
    if (!keel__cache_dir(dir, sizeof dir))
        return 0;
    mkdir_p(dir);
    return (size_t)snprintf(buf, size, "%s/%s-%016" PRIx64 "%016" PRIx64 "%s", dir, kind, key[0], key[1], ext) < size;
}

int keel__cache_install(const char *tmp_path, const char *path)
{
    /* rename is atomic: a concurrent reader sees no entry or a whole one. */
    if (rename(tmp_path, path) == 0)
        return 1;
    keel__log(KEEL_LOG_DEBUG, "cache: cannot install %s: %s", path, strerror(errno));
    (void)unlink(tmp_path);
    return 0;
}

/* ---- entries with a header ---- */

enum { BLOB_FORMAT = 1 };

struct blob_header {
    char magic[8];   /* "KEELBLB\0" */
    uint32_t format, reserved;
    uint64_t size;
    uint64_t key[2];
    uint64_t sum[2]; /* hash of the payload */
};

int keel__cache_load(const char *kind, const uint64_t key[2], void **data, size_t *size)
{
    char path[4300];
    if (!keel__cache_path(kind, key, ".bin", path, sizeof path))
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct blob_header h;
    char *buf = NULL;
    int ok = read(fd, &h, sizeof h) == (ssize_t)sizeof h && memcmp(h.magic, "KEELBLB", 8) == 0 &&
             h.format == BLOB_FORMAT && h.key[0] == key[0] && h.key[1] == key[1] && h.size > 0 &&
             h.size < ((uint64_t)1 << 31) && (buf = keel__malloc(h.size + 1)) != NULL;
    if (ok) {
        size_t got = 0;
        while (got < h.size) {
            ssize_t r = read(fd, buf + got, h.size - got);
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        uint64_t sum[2];
        keel__hash_init(sum);
        hash_bytes(sum, buf, got);
        ok = got == h.size && sum[0] == h.sum[0] && sum[1] == h.sum[1];
    }
    close(fd);
    if (!ok) {
        free(buf);
        keel__log(KEEL_LOG_DEBUG, "cache: ignoring the entry %s (unreadable, stale or corrupt)", path);
        return 0;
    }
    buf[h.size] = '\0'; /* text (PTX) must end in NUL; harmless for binaries */
    *data = buf;
    *size = h.size;
    keel__log(KEEL_LOG_DEBUG, "cache: hit %s", path);
    return 1;
}

void keel__cache_store(const char *kind, const uint64_t key[2], const void *data, size_t size)
{
    char path[4300], tmp[4400];
    if (!keel__cache_path(kind, key, ".bin", path, sizeof path))
        return;
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%p", path, (long)getpid(), (void *)&tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        keel__log(KEEL_LOG_DEBUG, "cache: cannot write %s: %s", tmp, strerror(errno));
        return;
    }
    struct blob_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, "KEELBLB", 8);
    h.format = BLOB_FORMAT;
    h.size = size;
    h.key[0] = key[0];
    h.key[1] = key[1];
    keel__hash_init(h.sum);
    hash_bytes(h.sum, data, size);
    int ok = write(fd, &h, sizeof h) == (ssize_t)sizeof h && write(fd, data, size) == (ssize_t)size;
    ok = close(fd) == 0 && ok;
    if (!ok) {
        (void)unlink(tmp);
        return;
    }
    if (keel__cache_install(tmp, path))
        keel__log(KEEL_LOG_DEBUG, "cache: stored %s", path);
}
