/* SPDX-License-Identifier: MIT */
/* Portable kernels: modules built from one kernel source for any backend
 * (keel_module_build), module files holding every backend's code (made by
 * keel-cc, read by keel_module_load_file), and launches checked against a
 * kernel's parameters (keel_launch). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "runtime/internal.h"
#include "runtime/kernel_source.h"
#include "runtime/module_file.h"

#define KEEL_MAX_SOURCE_BYTES (16u << 20)

keel_status_t keel__module_wrap(struct keel_device *d, void *ctx, struct keel__ksource *sigs, keel_module_t **module)
{
    struct keel_module *m = keel__handle_alloc(KEEL__MAGIC_MODULE, sizeof(*m));
    if (!m) {
        d->plugin->kernel->module_unload(ctx);
        keel__sigs_free(sigs);
        return keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    m->device = d;
    m->ctx = ctx;
    m->sigs = sigs;
    pthread_mutex_init(&m->lock, NULL);
    *module = m;
    return KEEL_OK;
}

void keel__sigs_free(struct keel__ksource *sigs)
{
    if (sigs) {
        keel__ksource_free(sigs);
        free(sigs);
    }
}

/* Which form of the language @p d compiles. */
static keel_status_t target_of(const struct keel_device *d, const char *fn, keel__ktarget_t *t)
{
    const char *b = d->backend->name;
    if (strcmp(b, "cpu") == 0)
        *t = KEEL__KTARGET_CPU;
    else if (strcmp(b, "cuda") == 0 || strcmp(b, "hip") == 0)
        *t = KEEL__KTARGET_GPU;
    else
        return keel__set_error(KEEL_ERROR_NOT_SUPPORTED, "%s: the %s backend has no compiler for portable kernels",
                               fn, b);
    if (!d->plugin->kernel->module_compile)
        return keel__set_error(KEEL_ERROR_NOT_SUPPORTED, "%s: the %s backend does not compile at run time", fn, b);
    return KEEL_OK;
}

/* Parses, translates for @p d and compiles: the work of keel_module_build. */
static keel_status_t build(struct keel_device *d, const char *source, const char *name, const char *const *options,
                           int num_options, const char *fn, keel_module_t **module)
{
    keel__ktarget_t target = KEEL__KTARGET_CPU;
    keel_status_t st = target_of(d, fn, &target);
    if (st != KEEL_OK)
        return st;
    struct keel__ksource *sigs = keel__calloc(1, sizeof *sigs);
    if (!sigs)
        return keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    char err[1024];
    if ((st = keel__ksource_parse(source, name, sigs, err, sizeof err)) != KEEL_OK) {
        free(sigs);
        return keel__set_error(st, "%s: %s", fn, err);
    }
    char *text = keel__ksource_generate(sigs, source, name, target);
    if (!text) {
        keel__sigs_free(sigs);
        return keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    }
    if (target == KEEL__KTARGET_GPU && keel__log_enabled(KEEL_LOG_DEBUG)) {
        /* The CPU backend keeps its generated source in the cache; a GPU
         * compiler takes it from memory, so it is written out here. */
        uint64_t key[2];
        char path[4300];
        keel__hash_init(key);
        keel__hash_str(key, text);
        if (keel__cache_path("gpu-source", key, ".cu", path, sizeof path)) {
            FILE *f = fopen(path, "w");
            if (f && fputs(text, f) >= 0 && fclose(f) == 0)
                keel__log(KEEL_LOG_DEBUG, "%s: %s: the generated source for %s is %s", fn, name, d->name, path);
            else if (f)
                fclose(f);
        }
    }
    void *ctx = NULL;
    st = d->plugin->kernel->module_compile(d->ctx, text, name, options, num_options, &ctx);
    free(text);
    if (st != KEEL_OK) {
        keel__sigs_free(sigs);
        /* The backends' messages name keel_module_compile, their entry point;
         * the caller called @p fn. */
        return keel__prefix_error(st, "%s", fn);
    }
    return keel__module_wrap(d, ctx, sigs, module);
}

static keel_status_t check_options(const char *const *options, int num_options, const char *fn)
{
    if (num_options < 0 || (num_options > 0 && !options))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: %d options at %p", fn, num_options,
                               (const void *)options);
    for (int i = 0; i < num_options; i++)
        if (!options[i])
            return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: options[%d] is NULL", fn, i);
    return KEEL_OK;
}

keel_status_t keel_module_build(keel_device_t *device, const char *source, const char *source_name,
                                const char *const *options, int num_options, keel_module_t **module)
{
    const char *fn = "keel_module_build";
    keel_status_t st = keel__device_ready(device, fn);
    if (st != KEEL_OK)
        return st;
    KEEL__CHECK_OUT(module, fn, "module");
    if (!source)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: source is NULL", fn);
    if ((st = check_options(options, num_options, fn)) != KEEL_OK)
        return st;
    return build(device, source, source_name && source_name[0] ? source_name : "kernel.kc", options, num_options, fn,
                 module);
}

/* Reads a whole file of at most @p max bytes, NUL-terminated. */
static keel_status_t read_file(const char *path, size_t max, const char *fn, char **data, size_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return keel__set_error(KEEL_ERROR_NOT_FOUND, "%s: %s: %s", fn, path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return keel__set_error(KEEL_ERROR_NOT_FOUND, "%s: %s is not a regular file", fn, path);
    }
    if ((uint64_t)st.st_size > max) {
        close(fd);
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: %s is %lld bytes, more than the %zu allowed", fn,
                               path, (long long)st.st_size, max);
    }
    char *buf = keel__malloc((size_t)st.st_size + 1);
    if (!buf) {
        close(fd);
        return keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "%s: no host memory for %s", fn, path);
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    buf[got] = '\0';
    *data = buf;
    *size = got;
    return KEEL_OK;
}

keel_status_t keel_module_build_file(keel_device_t *device, const char *path, const char *const *options,
                                     int num_options, keel_module_t **module)
{
    const char *fn = "keel_module_build_file";
    keel_status_t st = keel__device_ready(device, fn);
    if (st != KEEL_OK)
        return st;
    KEEL__CHECK_OUT(module, fn, "module");
    if (!path || !path[0])
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: path is %s", fn, path ? "empty" : "NULL");
    if ((st = check_options(options, num_options, fn)) != KEEL_OK)
        return st;
    char *source;
    size_t size;
    if ((st = read_file(path, KEEL_MAX_SOURCE_BYTES, fn, &source, &size)) != KEEL_OK)
        return st;
    if (strlen(source) != size) {
        free(source);
        return keel__set_error(KEEL_ERROR_COMPILE_FAILED, "%s: %s holds a NUL byte: it is not kernel source", fn, path);
    }
    st = build(device, source, path, options, num_options, fn, module);
    free(source);
    return st;
}

/* ---- module files (keel-cc) ---- */

/* The entry of @p kind for this device, or NULL. */
static const keel__modfile_entry_t *pick_entry(const keel__modfile_entry_t *e, uint32_t n, const char *kind,
                                               const char *target)
{
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(e[i].kind, kind) == 0 && (!target || strcmp(e[i].target, target) == 0))
            return &e[i];
    return NULL;
}

/* Opens CPU code held in memory, through a file of its own. */
static keel_status_t load_cpu_image(struct keel_device *d, const void *image, size_t size, const char *path,
                                    void **ctx)
{
    keel__image_file_t f;
    char why[256];
    if (keel__image_file_open(&f, image, size, why, sizeof why) != 0)
        return keel__set_error(KEEL_ERROR_COMPILE_FAILED, "keel_module_load_file: %s: %s", path, why);
    keel_status_t st = d->plugin->kernel->module_load_file(d->ctx, f.path, ctx);
    keel__image_file_close(&f);
    return st;
}

int keel__module_file_load(struct keel_device *d, const char *path, keel_module_t **module, keel_status_t *st)
{
    const char *fn = "keel_module_load_file";
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char magic[8] = "";
    ssize_t r = read(fd, magic, sizeof magic);
    close(fd);
    if (r != (ssize_t)sizeof magic || memcmp(magic, KEEL__MODFILE_MAGIC, sizeof magic) != 0)
        return 0;
    char *file;
    size_t size;
    if ((*st = read_file(path, (size_t)1 << 30, fn, &file, &size)) != KEEL_OK)
        return 1;
    const keel__modfile_header_t *h = (const void *)file;
    const keel__modfile_entry_t *e = (const void *)(file + sizeof *h);
    *st = KEEL_ERROR_COMPILE_FAILED;
    if (size < sizeof *h || h->version != KEEL__MODFILE_VERSION || h->count == 0 ||
        h->count > KEEL__MODFILE_MAX_ENTRIES || size < sizeof *h + h->count * sizeof *e) {
        keel__set_error(*st, "%s: %s is not a module file this Keel reads (version %u, %u entries)", fn, path,
                        size >= sizeof *h ? h->version : 0, size >= sizeof *h ? h->count : 0);
        goto out;
    }
    for (uint32_t i = 0; i < h->count; i++) {
        if (memchr(e[i].kind, '\0', sizeof e[i].kind) == NULL || memchr(e[i].target, '\0', sizeof e[i].target) == NULL ||
            e[i].offset > size || e[i].size > size - e[i].offset || e[i].size == 0) {
            keel__set_error(*st, "%s: %s is damaged: entry %u lies outside the file", fn, path, i);
            goto out;
        }
    }
    const keel__modfile_entry_t *sig = pick_entry(e, h->count, "signatures", NULL);
    struct keel__ksource *sigs = keel__calloc(1, sizeof *sigs);
    if (!sigs) {
        *st = keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
        goto out;
    }
    keel_status_t read_sigs = sig ? keel__ksource_deserialize(file + sig->offset, sig->size, sigs) : KEEL_ERROR_COMPILE_FAILED;
    if (read_sigs == KEEL_ERROR_OUT_OF_MEMORY) {
        free(sigs);
        *st = keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "%s: %s: out of host memory for its table of kernels", fn, path);
        goto out;
    }
    if (read_sigs != KEEL_OK) {
        free(sigs);
        keel__set_error(*st, "%s: %s is damaged: its table of kernels is missing or unreadable", fn, path);
        goto out;
    }
    const char *backend = d->backend->name;
    struct utsname u;
    const char *machine = uname(&u) == 0 ? u.machine : "unknown";
    const keel__modfile_entry_t *code =
        pick_entry(e, h->count, backend, strcmp(backend, "cpu") == 0 ? machine : NULL);
    const keel__modfile_entry_t *src = pick_entry(e, h->count, "source", NULL);
    if (src && memchr(file + src->offset, '\0', (size_t)src->size) != NULL)
        src = NULL;
    void *ctx = NULL;
    char why[2048] = "";
    if (code) {
        if (strcmp(backend, "cpu") == 0)
            *st = load_cpu_image(d, file + code->offset, (size_t)code->size, path, &ctx);
        else
            *st = d->plugin->kernel->module_load_data
                      ? d->plugin->kernel->module_load_data(d->ctx, file + code->offset, (size_t)code->size, &ctx)
                      : keel__set_error(KEEL_ERROR_NOT_SUPPORTED, "%s: the %s backend loads no module from memory",
                                        fn, backend);
        /* Code that does not load here (no code for this GPU model in the
         * fatbin, a shared object this system cannot open) gives way to the
         * source, as no code at all does. */
        if (*st != KEEL_OK)
            snprintf(why, sizeof why, "its %s code (%s) does not load: %s", backend, code->target, keel_last_error());
        if (*st != KEEL_OK && (!src || (*st != KEEL_ERROR_COMPILE_FAILED && *st != KEEL_ERROR_NOT_SUPPORTED))) {
            keel__set_error(*st, "%s: %s: %s", fn, path, why);
            keel__sigs_free(sigs);
            goto out;
        }
    }
    if (!code || *st != KEEL_OK) {
        if (src) {
            if (why[0])
                keel__log(KEEL_LOG_INFO, "%s: %s: %s; compiling its source for %s", fn, path, why, d->name);
            else
                keel__log(KEEL_LOG_INFO, "%s: %s has no code for %s (%s): compiling its source", fn, path, d->name,
                          machine);
            char *text = keel__strndup(file + src->offset, (size_t)src->size);
            keel__sigs_free(sigs);
            *st = text ? build(d, text, path, NULL, 0, fn, module)
                       : keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
            free(text);
            if (*st != KEEL_OK && why[0]) {
                char detail[4096];
                snprintf(detail, sizeof detail, "%s", keel_last_error());
                keel__set_error(*st, "%s (%s: %s)", detail, path, why);
            }
            goto out;
        }
        *st = keel__set_error(KEEL_ERROR_NOT_FOUND, "%s: %s holds no code for %s (%s backend%s%s) and no source", fn,
                              path, d->name, backend, strcmp(backend, "cpu") == 0 ? ", " : "",
                              strcmp(backend, "cpu") == 0 ? machine : "");
        keel__sigs_free(sigs);
        goto out;
    }
    *st = keel__module_wrap(d, ctx, sigs, module);
out:
    free(file);
    return 1;
}

/* ---- checked launches ---- */

keel_status_t keel_launch(keel_kernel_t *kernel, keel_dim3_t grid, keel_dim3_t block, size_t shared_bytes,
                          keel_stream_t *stream, unsigned num_args, void **args, const size_t *arg_sizes)
{
    const char *fn = "keel_launch";
    KEEL__CHECK_HANDLE(kernel, KEEL__MAGIC_KERNEL, fn, "kernel");
    if (num_args > KEEL_MAX_KERNEL_ARGS)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: %u arguments, at most %d", fn, num_args,
                               KEEL_MAX_KERNEL_ARGS);
    if (num_args && (!args || !arg_sizes))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: %u arguments but %s is NULL", fn, num_args,
                               !args ? "args" : "arg_sizes");
    for (unsigned i = 0; i < num_args; i++)
        if (!args[i])
            return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: kernel %s: args[%u] is NULL", fn, kernel->name,
                                   i);
    const keel__ksig_t *sig = kernel->sig;
    if (sig) {
        char params[1024];
        if (num_args != sig->nparams) {
            keel__ksig_format(sig, params, sizeof params);
            return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: kernel %s(%s) takes %u argument%s; the launch passes %u",
                                   fn, kernel->name, params, sig->nparams, sig->nparams == 1 ? "" : "s", num_args);
        }
        for (unsigned i = 0; i < num_args; i++) {
            const keel__kparam_t *p = &sig->params[i];
            if (p->size && arg_sizes[i] != p->size) {
                keel__ksig_format(sig, params, sizeof params);
                return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT,
                                       "%s: kernel %s(%s): argument %u (%s) is %zu bytes; the launch passes %zu", fn,
                                       kernel->name, params, i + 1, p->name, p->size, arg_sizes[i]);
            }
        }
    } else {
        const keel_kernel_vtable_t *kv = kernel->device->plugin->kernel;
        int n = 0;
        if (kv->get_attribute && kv->get_attribute(kernel->ctx, KEEL_KERNEL_ATTR_NUM_ARGS, &n) == KEEL_OK &&
            (unsigned)n != num_args)
            return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: kernel %s takes %d arguments; the launch passes %u",
                                   fn, kernel->name, n, num_args);
    }
    return keel_launch_kernel(kernel, grid, block, shared_bytes, stream, args);
}
