/* SPDX-License-Identifier: MIT */
/* Shared objects that dlopen must map as a fresh copy: CPU code held in
 * memory (a module file's CPU part), or a second module of a file that is
 * loaded already (each module has its own globals, as on a GPU). dlopen
 * needs a file, so the code goes into an anonymous one (memfd), or a
 * temporary file where that is missing. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "runtime/internal.h"

int keel__image_file_open(keel__image_file_t *f, const void *image, size_t size, char *why, size_t cap)
{
    memset(f, 0, sizeof *f);
    f->fd = memfd_create("keel-module", MFD_CLOEXEC);
    if (f->fd < 0) {
        const char *t = getenv("TMPDIR");
        snprintf(f->tmp, sizeof f->tmp, "%s/keel-module-XXXXXX", t && t[0] ? t : "/tmp");
        f->fd = mkstemp(f->tmp);
        if (f->fd < 0) {
            snprintf(why, cap, "no file for its CPU code: %s", strerror(errno));
            f->tmp[0] = '\0';
            return -1;
        }
    }
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(f->fd, (const char *)image + done, size - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        done += (size_t)w;
    }
    if (done != size) {
        snprintf(why, cap, "writing its CPU code: %s", strerror(errno));
        keel__image_file_close(f);
        return -1;
    }
    if (f->tmp[0]) {
        snprintf(f->path, sizeof f->path, "%s", f->tmp);
        return 0;
    }
    /* glibc finds a loaded library by its name before it looks at the file:
     * a /proc/self/fd path whose number an earlier memfd had (closed after
     * its dlopen, its code still loaded) would give back that earlier code.
     * The file moves to a number no loaded library is named by; the numbers
     * passed over stay taken until the file is closed. */
    snprintf(f->path, sizeof f->path, "/proc/self/fd/%d", f->fd);
    for (;;) {
        void *loaded = dlopen(f->path, RTLD_LAZY | RTLD_NOLOAD);
        if (!loaded)
            return 0;
        dlclose(loaded);
        int moved = f->npassed < KEEL__IMAGE_FILE_PASSES ? fcntl(f->fd, F_DUPFD_CLOEXEC, f->fd + 1) : -1;
        if (moved < 0) {
            snprintf(why, cap, "no file name for its CPU code");
            keel__image_file_close(f);
            return -1;
        }
        f->passed[f->npassed++] = f->fd;
        f->fd = moved;
        snprintf(f->path, sizeof f->path, "/proc/self/fd/%d", f->fd);
    }
}

void keel__image_file_close(keel__image_file_t *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    while (f->npassed > 0)
        close(f->passed[--f->npassed]);
    if (f->tmp[0])
        unlink(f->tmp);
    f->tmp[0] = '\0';
}
