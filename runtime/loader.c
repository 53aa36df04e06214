/* SPDX-License-Identifier: MIT */
/* The backend table and the plugin loader. Backends are known by name from
 * the start (cpu, cuda, hip, and any keel-<name>.so found on the search
 * path); each is loaded and probed on first need, once, and keeps the reason
 * of its failure for keel-info and keel_backend_get_info. */
#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "runtime/internal.h"

#define MAX_BACKENDS 32
#define MAX_DIRS 32

static struct keel_backend backends[MAX_BACKENDS];
static int nbackends;
/* The plugin directories; published once, by the keel__loader_setup that
 * succeeds, and never changed after (ndirs is stored last). */
static char *dirs[MAX_DIRS];
static atomic_int ndirs;
static char search_path[8192]; /* dirs, colon-separated, for keel_backend_search_path */
static int setup_done;

static const char *plugin_env_value(const char *name);

/* The plugin-facing services are the core's own functions. */
const keel_host_api_t keel__host_api = {
    .abi_version = KEEL_BACKEND_ABI_VERSION,
    .struct_size = sizeof(keel_host_api_t),
    .set_error = keel__set_error,
    .log = keel__log,
    .log_enabled = keel__log_enabled,
    .hash_init = keel__hash_init,
    .hash_field = keel__hash_field,
    .cache_load = keel__cache_load,
    .cache_store = keel__cache_store,
    .fault_armed = &keel__fault_armed,
    .fault = keel__fault_hook,
    .env_value = plugin_env_value,
};

static struct keel_backend *add_backend(const char *name, int builtin)
{
    for (int i = 0; i < nbackends; i++)
        if (strcmp(backends[i].name, name) == 0)
            return &backends[i];
    if (nbackends == MAX_BACKENDS)
        return NULL;
    struct keel_backend *b = &backends[nbackends++];
    b->magic = KEEL__MAGIC_BACKEND;
    snprintf(b->name, sizeof(b->name), "%s", name);
    b->builtin = builtin;
    b->status = KEEL_ERROR_BACKEND_UNAVAILABLE;
    snprintf(b->reason, sizeof(b->reason), "not loaded yet");
    pthread_mutex_init(&b->lock, NULL);
    return b;
}

/* Plugin file names are keel-<name>.so with name in [a-z0-9_]. */
static int plugin_name_of(const char *file, char *name, size_t cap)
{
    size_t len = strlen(file);
    if (len <= 8 || strncmp(file, "keel-", 5) != 0 || strcmp(file + len - 3, ".so") != 0)
        return -1;
    size_t n = len - 8;
    if (n >= cap)
        return -1;
    for (size_t i = 0; i < n; i++) {
        char c = file[5 + i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
            return -1;
        name[i] = c;
    }
    name[n] = '\0';
    return 0;
}

static void scan_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char name[32];
    while ((e = readdir(d)) != NULL)
        if (plugin_name_of(e->d_name, name, sizeof(name)) == 0)
            add_backend(name, 0);
    closedir(d);
}

/* Appends dir to found[0..n) unless it is there already; NULL in the slot
 * when out of memory (the caller checks the last slot). */
static int add_dir(char **found, int n, const char *dir)
{
    for (int i = 0; i < n; i++)
        if (found[i] && strcmp(found[i], dir) == 0)
            return n;
    if (n >= MAX_DIRS)
        return n;
    found[n] = keel__strdup(dir);
    return n + 1;
}

static int is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* The directories searched after KEEL_BACKEND_PATH: libkeel's own when it
 * runs from the build tree it was built in, the plugin directory next to it
 * (so an install that was moved, or made with "make install prefix=...",
 * finds its own plugins), then the configured one. */
static int add_default_dirs(char **found, int n)
{
    Dl_info info;
    char self[PATH_MAX], *real = NULL;
    if (dladdr((void *)&keel__loader_setup, &info) != 0 && info.dli_fname && info.dli_fname[0] == '/')
        real = realpath(info.dli_fname, NULL);
    if (real && strlen(real) < sizeof self) {
        snprintf(self, sizeof self, "%s", real);
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = '\0';
        /* The same directory, however reached (a link to the build tree included). */
        struct stat here, build;
        if (stat(self, &here) == 0 && stat(KEEL_BUILD_LIBDIR, &build) == 0 && here.st_dev == build.st_dev &&
            here.st_ino == build.st_ino) /* libtool puts the plugins beside libkeel */
            n = add_dir(found, n, self);
        char near[PATH_MAX + sizeof KEEL_PLUGIN_RELDIR + 1];
        if (KEEL_PLUGIN_RELDIR[0] != '/' && (n == 0 || found[n - 1])) {
            snprintf(near, sizeof near, "%s/%s", self, KEEL_PLUGIN_RELDIR);
            if (is_dir(near))
                n = add_dir(found, n, near);
        }
    }
    free(real);
    if (n == 0 || found[n - 1])
        n = add_dir(found, n, KEEL_PLUGIN_DIR);
    return n;
}

/* keel_init calls it under its lock, again after a failure that may pass
 * (out of host memory): nothing is published until every copy is made. */
/* Splits KEEL_BACKEND_PATH into its directories, each copied into found[]
 * (at most MAX_DIRS - 4, leaving room for the default ones; *n of them)
 * when found is not NULL. Returns the
 * verdict on the value: an entry that is no directory is
 * KEEL_ERROR_INVALID_ENVIRONMENT, the other entries are still taken; out of
 * memory is KEEL_ERROR_OUT_OF_MEMORY, found[*n - 1] NULL once copies began. */
static keel_status_t split_path(const char *path_env, char **found, int *n)
{
    keel_status_t st = KEEL_OK;
    *n = 0;
    char *copy = keel__strdup(path_env);
    if (!copy)
        return keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "keel_init: out of host memory");
    char *save = NULL;
    for (char *tok = strtok_r(copy, ":", &save); tok; tok = strtok_r(NULL, ":", &save)) {
        struct stat sb;
        if (stat(tok, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            if (st == KEEL_OK)
                st = keel__set_error(KEEL_ERROR_INVALID_ENVIRONMENT,
                                     "KEEL_BACKEND_PATH=\"%s\": \"%s\" is not a directory; expected a "
                                     "colon-separated list of directories holding keel-<name>.so plugins",
                                     path_env, tok);
            continue;
        }
        if (found && *n < MAX_DIRS - 4 && !(found[(*n)++] = keel__strdup(tok)))
            break;
    }
    free(copy);
    return st;
}

keel_status_t keel__loader_path_check(const char *path_env)
{
    return split_path(path_env, NULL, &(int){0});
}

keel_status_t keel__loader_setup(const char *path_env)
{
    keel_status_t st = KEEL_OK;
    if (setup_done)
        return KEEL_OK;
    add_backend("cuda", 0);
    add_backend("hip", 0);
    add_backend("cpu", 1);
    char *found[MAX_DIRS];
    int n = 0;
    if (path_env && (st = split_path(path_env, found, &n)) == KEEL_ERROR_OUT_OF_MEMORY)
        return st;
    if (n == 0 || found[n - 1])
        n = add_default_dirs(found, n);
    if (n == 0 || !found[n - 1]) {
        for (int i = 0; i < n; i++)
            free(found[i]);
        /* An invalid KEEL_BACKEND_PATH is the verdict that stays. */
        return st != KEEL_OK ? st : keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "keel_init: out of host memory");
    }
    for (int i = 0; i < n; i++) {
        dirs[i] = found[i];
        scan_dir(dirs[i]);
    }
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        int w = snprintf(search_path + used, sizeof search_path - used, "%s%s", i ? ":" : "", dirs[i]);
        if (w < 0 || (size_t)w >= sizeof search_path - used)
            break; /* cut at a whole directory; MAX_DIRS paths fit in all but pathological cases */
        used += (size_t)w;
    }
    search_path[used] = '\0';
    atomic_store_explicit(&ndirs, n, memory_order_release);
    setup_done = 1;
    return st;
}

#if __SIZEOF_POINTER__ == 8
typedef Elf64_Ehdr elf_ehdr_t;
typedef Elf64_Phdr elf_phdr_t;
#define ELF_NATIVE_CLASS ELFCLASS64
#else
typedef Elf32_Ehdr elf_ehdr_t;
typedef Elf32_Phdr elf_phdr_t;
#define ELF_NATIVE_CLASS ELFCLASS32
#endif
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define ELF_NATIVE_DATA ELFDATA2LSB
#else
#define ELF_NATIVE_DATA ELFDATA2MSB
#endif

static const char *segment_name(uint32_t type)
{
    switch (type) {
    case PT_LOAD: return "PT_LOAD";
    case PT_DYNAMIC: return "PT_DYNAMIC";
    case PT_INTERP: return "PT_INTERP";
    case PT_NOTE: return "PT_NOTE";
    case PT_TLS: return "PT_TLS";
    case PT_GNU_EH_FRAME: return "PT_GNU_EH_FRAME";
    case PT_GNU_RELRO: return "PT_GNU_RELRO";
    case PT_GNU_PROPERTY: return "PT_GNU_PROPERTY";
    default: return "segment";
    }
}

/* dlopen maps a shared object's segments straight from the file. Where the
 * file is shorter than its program headers say (a copy cut short, a full
 * disk), the pages past its end have nothing behind them, and the dynamic
 * loader's first touch of them kills the process with SIGBUS. So the
 * header, the program headers and every segment's bytes are checked
 * against the file's size first; what dlopen itself reports well (another
 * machine, missing libraries, a bad symbol) is left to it. */
int keel__elf_check(const char *path, char *why, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, cap, "cannot open it: %s", strerror(errno));
        return -1;
    }
    int rc = -1;
    struct stat sb;
    elf_ehdr_t eh;
    if (fstat(fd, &sb) != 0) {
        snprintf(why, cap, "cannot stat it: %s", strerror(errno));
        goto out;
    }
    if (!S_ISREG(sb.st_mode)) {
        snprintf(why, cap, "it is not a regular file");
        goto out;
    }
    unsigned long long size = (unsigned long long)sb.st_size;
    if (size == 0) {
        snprintf(why, cap, "the file is empty (0 bytes), not a shared object");
        goto out;
    }
    ssize_t got = pread(fd, &eh, sizeof eh, 0);
    if (got < SELFMAG || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
        snprintf(why, cap, "not an ELF file (it does not start with the ELF magic number), so not a shared object");
        goto out;
    }
    if ((size_t)got < sizeof eh) {
        snprintf(why, cap, "the file is truncated: %llu bytes, less than an ELF header", size);
        goto out;
    }
    if (eh.e_ident[EI_CLASS] != ELF_NATIVE_CLASS || eh.e_ident[EI_DATA] != ELF_NATIVE_DATA) {
        snprintf(why, cap, "an ELF file of another class or byte order (%s, %s) than this %d-bit %s-endian libkeel",
                 eh.e_ident[EI_CLASS] == ELFCLASS64 ? "64-bit" : eh.e_ident[EI_CLASS] == ELFCLASS32 ? "32-bit" : "no class",
                 eh.e_ident[EI_DATA] == ELFDATA2LSB ? "little-endian" : eh.e_ident[EI_DATA] == ELFDATA2MSB ? "big-endian" : "no byte order",
                 (int)(8 * sizeof(void *)), ELF_NATIVE_DATA == ELFDATA2LSB ? "little" : "big");
        goto out;
    }
    if (eh.e_type != ET_DYN) {
        snprintf(why, cap, "an ELF file of type %u, not a shared object (ET_DYN)", (unsigned)eh.e_type);
        goto out;
    }
    if (eh.e_phnum == 0 || eh.e_phnum == PN_XNUM || eh.e_phentsize != sizeof(elf_phdr_t)) {
        snprintf(why, cap, "its ELF header is damaged (%u program headers of %u bytes)", (unsigned)eh.e_phnum,
                 (unsigned)eh.e_phentsize);
        goto out;
    }
    unsigned long long ph_end = (unsigned long long)eh.e_phoff + (unsigned long long)eh.e_phnum * sizeof(elf_phdr_t);
    if (eh.e_phoff > size || ph_end > size) {
        snprintf(why, cap, "the file is truncated: %llu bytes, but its program headers end at byte %llu", size, ph_end);
        goto out;
    }
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        elf_phdr_t ph;
        if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (unsigned long long)i * sizeof ph)) != (ssize_t)sizeof ph) {
            snprintf(why, cap, "cannot read its program header %u: %s", i, strerror(errno));
            goto out;
        }
        unsigned long long off = ph.p_offset, len = ph.p_filesz;
        if (len == 0)
            continue;
        if (off > size || len > size - off) {
            snprintf(why, cap, "the file is truncated: %llu bytes, but its segment %u (%s) needs bytes %llu to %llu",
                     size, i, segment_name(ph.p_type), off, off + len);
            goto out;
        }
    }
    rc = 0;
out:
    close(fd);
    return rc;
}

static void fail(struct keel_backend *b, keel_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(struct keel_backend *b, keel_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->reason, sizeof(b->reason), fmt, ap);
    va_end(ap);
    b->status = status;
    if (b->dl) {
        dlclose(b->dl);
        b->dl = NULL;
    }
    b->plugin = NULL;
}

static const keel_backend_plugin_t *open_plugin(struct keel_backend *b)
{
    char file[64];
    snprintf(file, sizeof(file), "keel-%s.so", b->name);
    char tried[1024] = "";
    int n = atomic_load_explicit(&ndirs, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dirs[i], file);
        if (access(path, F_OK) != 0) {
            size_t used = strlen(tried);
            snprintf(tried + used, sizeof(tried) - used, "%s%s", used ? ", " : "", dirs[i]);
            continue;
        }
        snprintf(b->plugin_path, sizeof(b->plugin_path), "%s", path);
        char bad[512];
        if (keel__elf_check(path, bad, sizeof bad) != 0) {
            fail(b, KEEL_ERROR_BACKEND_UNAVAILABLE, "cannot load %s: %s", path, bad);
            return NULL;
        }
        if (KEEL__FAULT(KEEL_FAULT_PLUGIN_LOAD)) {
            fail(b, KEEL_ERROR_BACKEND_UNAVAILABLE, "cannot load %s: injected failure (KEEL_FAULT %s)", path,
                 keel__fault_last());
            return NULL;
        }
        dlerror();
        b->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!b->dl) {
            const char *why = dlerror();
            fail(b, KEEL_ERROR_BACKEND_UNAVAILABLE, "cannot load %s: %s", path, why ? why : "unknown dlopen error");
            return NULL;
        }
        keel_backend_init_fn_t init;
        *(void **)&init = dlsym(b->dl, KEEL_BACKEND_INIT_SYMBOL);
        if (!init) {
            fail(b, KEEL_ERROR_BACKEND_UNAVAILABLE, "%s does not export %s(): not a Keel plugin", path,
                 KEEL_BACKEND_INIT_SYMBOL);
            return NULL;
        }
        keel_clear_error();
        const keel_backend_plugin_t *p = init(&keel__host_api);
        if (!p) {
            fail(b, KEEL_ERROR_BACKEND_UNAVAILABLE, "%s: %s() returned no plugin: %s", path,
                 KEEL_BACKEND_INIT_SYMBOL, keel_last_error()[0] ? keel_last_error() : "it set no detail");
            return NULL;
        }
        b->abi_version = (int)p->abi_version;
        if (p->abi_version != KEEL_BACKEND_ABI_VERSION) {
            fail(b, KEEL_ERROR_ABI_MISMATCH, "%s was built for plugin ABI version %u; this libkeel %s speaks version %d",
                 path, p->abi_version, keel_version_string(), KEEL_BACKEND_ABI_VERSION);
            return NULL;
        }
        return p;
    }
    fail(b, KEEL_ERROR_BACKEND_UNAVAILABLE, "plugin %s not found (searched %s)", file, tried[0] ? tried : "nothing");
    return NULL;
}

/* Whether a family table was built with at least the entries up to field:
 * the entries of this ABI version. Entries added after them are optional and
 * read through KEEL__VT (runtime/internal.h). */
#define VT_HAS(t, type, field) ((t)->struct_size >= offsetof(type, field) + sizeof(((type *)0)->field))

static int tables_sized(const keel_backend_plugin_t *p)
{
    return VT_HAS(p->device, keel_device_vtable_t, stream_priority_range) &&
           VT_HAS(p->memory, keel_memory_vtable_t, memcpy_peer_async) &&
           VT_HAS(p->stream, keel_stream_vtable_t, end_capture) &&
           VT_HAS(p->event, keel_event_vtable_t, elapsed_time) &&
           VT_HAS(p->kernel, keel_kernel_vtable_t, max_active_blocks) &&
           (!p->graph || VT_HAS(p->graph, keel_graph_vtable_t, exec_destroy));
}

static int plugin_complete(const keel_backend_plugin_t *p)
{
    return p->struct_size >= offsetof(keel_backend_plugin_t, ops) && p->name && p->probe && p->device &&
           p->memory && p->stream && p->event && p->kernel && tables_sized(p) && p->device->open && p->device->get_properties && p->device->synchronize &&
           p->memory->alloc && p->memory->free && p->memory->memcpy_async && p->memory->memset_async &&
           p->stream->create && p->stream->destroy && p->stream->synchronize && p->stream->query &&
           p->stream->wait_event && p->stream->launch_host_func && p->event->create && p->event->destroy &&
           p->event->record && p->event->synchronize && p->event->query && p->event->elapsed_time &&
           p->kernel->launch && p->kernel->kernel_release;
}

static void load_backend(struct keel_backend *b)
{
    const keel_backend_plugin_t *p = b->builtin ? keel__cpu_backend_init(&keel__host_api) : open_plugin(b);
    if (b->builtin)
        snprintf(b->plugin_path, sizeof(b->plugin_path), "(built in)");
    if (!p)
        return;
    if (b->builtin)
        b->abi_version = (int)p->abi_version;
    if (!plugin_complete(p)) {
        fail(b, KEEL_ERROR_BACKEND_UNAVAILABLE, "%s lacks entries every plugin must provide (see keel/backend.h)",
             b->plugin_path);
        return;
    }
    if (strcmp(p->name, b->name) != 0) {
        fail(b, KEEL_ERROR_BACKEND_UNAVAILABLE, "%s calls itself \"%s\", not \"%s\"", b->plugin_path, p->name,
             b->name);
        return;
    }
    /* The plugin's variables are checked, and readable through env_value,
     * before its probe runs. */
    const keel_env_decl_t *env = p->struct_size >= offsetof(keel_backend_plugin_t, env) + sizeof(p->env) ? p->env
                                                                                                          : NULL;
    if (env) {
        keel_clear_error();
        keel_status_t est = keel__env_decls_check(env, b->name);
        if (est != KEEL_OK) {
            fail(b, est, "%s", keel_last_error());
            return;
        }
        int n = 0;
        for (; env[n].name; n++) {
            snprintf(b->env_name[n], sizeof b->env_name[n], "%s", env[n].name);
            snprintf(b->env_alias[n], sizeof b->env_alias[n], "%s", env[n].alias ? env[n].alias : "");
            keel__env_decl_describe(&env[n], b->name, b->env_desc[n], sizeof b->env_desc[n]);
        }
        b->env_count = n;
    }
    int count = 0;
    const char *desc = NULL;
    keel_clear_error();
    keel_status_t st = p->probe(&keel__host_api, &b->ctx, &count, &desc);
    if (st != KEEL_OK) {
        fail(b, st, "%s", keel_last_error()[0] ? keel_last_error() : keel_status_string(st));
        return;
    }
    /* Handle memory, as every handle: a device handle kept past
     * keel_finalize reads as destroyed. */
    if (count <= 0 || !(b->devices = keel__handle_alloc(KEEL__MAGIC_DEVICE, (size_t)count * sizeof(*b->devices)))) {
        /* The probe succeeded: let the plugin release what it made before it is unloaded. */
        if (p->shutdown)
            p->shutdown(b->ctx);
        b->ctx = NULL;
        if (count <= 0)
            fail(b, KEEL_ERROR_NO_DEVICE, "the %s backend found no device", b->name);
        else
            fail(b, KEEL_ERROR_OUT_OF_MEMORY, "out of host memory");
        return;
    }
    for (int i = 0; i < count; i++) {
        struct keel_device *d = &b->devices[i];
        d->magic = KEEL__MAGIC_DEVICE;
        d->backend = b;
        d->plugin = p;
        d->index = i;
        snprintf(d->name, sizeof(d->name), "%s:%d", b->name, i);
        pthread_mutex_init(&d->open_lock, NULL);
        pthread_mutex_init(&d->reuse_lock, NULL);
    }
    b->description = desc ? desc : b->name;
    b->plugin = p;
    b->device_count = count;
    b->status = KEEL_OK;
    b->reason[0] = '\0';
}

/* A load that failed for want of host memory, or because KEEL_FAULT made
 * something in it fail, is not final: the next keel__backend_loaded of the
 * backend loads it again (under its lock), so that a passing failure does
 * not leave a backend unusable for the rest of the process. */
struct keel_backend *keel__backend_loaded(struct keel_backend *b)
{
    if (!atomic_load_explicit(&b->loaded, memory_order_acquire)) {
        pthread_mutex_lock(&b->lock);
        if (!atomic_load_explicit(&b->loaded, memory_order_relaxed)) {
            /* Loading must not disturb the caller's last error. */
            char saved[2048];
            keel_status_t saved_status = keel_last_status();
            snprintf(saved, sizeof(saved), "%s", keel_last_error());
            unsigned long faults = keel__fault_thread_count();
            load_backend(b);
            int final = b->status == KEEL_OK ||
                        (b->status != KEEL_ERROR_OUT_OF_MEMORY && keel__fault_thread_count() == faults);
            if (b->status == KEEL_OK)
                keel__log(KEEL_LOG_INFO, "backend %s: usable, %d device(s): %s", b->name, b->device_count,
                          b->description);
            else
                keel__log(KEEL_LOG_INFO, "backend %s: not usable (%s)%s: %s", b->name, keel_status_name(b->status),
                          final ? "" : ", for now", b->reason);
            keel__restore_error(saved_status, saved);
            if (final)
                atomic_store_explicit(&b->loaded, 1, memory_order_release);
        }
        pthread_mutex_unlock(&b->lock);
    }
    return b;
}

int keel__backend_final(struct keel_backend *b)
{
    return atomic_load_explicit(&b->loaded, memory_order_acquire);
}

keel_status_t keel__backend_verdict(struct keel_backend *b, char *reason, size_t cap)
{
    keel__backend_loaded(b);
    if (keel__backend_final(b)) {
        snprintf(reason, cap, "%s", b->reason);
        return b->status;
    }
    pthread_mutex_lock(&b->lock);
    keel_status_t st = b->status;
    snprintf(reason, cap, "%s", b->reason);
    pthread_mutex_unlock(&b->lock);
    return st;
}

int keel__backend_count(void)
{
    return nbackends;
}

struct keel_backend *keel__backend_at(int i)
{
    return (i >= 0 && i < nbackends) ? &backends[i] : NULL;
}

struct keel_backend *keel__backend_named(const char *name)
{
    for (int i = 0; i < nbackends; i++)
        if (strcmp(backends[i].name, name) == 0)
            return &backends[i];
    return NULL;
}

void keel__backend_names(char *buf, size_t cap)
{
    buf[0] = '\0';
    for (int i = 0; i < nbackends; i++) {
        size_t used = strlen(buf);
        snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", backends[i].name);
    }
}

const char *keel__loader_search_path(int *count)
{
    int n = atomic_load_explicit(&ndirs, memory_order_acquire);
    if (count)
        *count = n;
    return n > 0 ? search_path : "";
}

/* Backends left as they are (a GPU plugin at exit, every backend in a child
 * of fork): their contexts stay reachable from here, not leaked. */
static struct keel_backend left[MAX_BACKENDS];
static int nleft;

void keel__loader_teardown(int (*keep)(const struct keel_backend *b))
{
    for (int i = 0; i < nbackends; i++) {
        struct keel_backend *b = &backends[i];
        int kept = keep(b);
        if (kept && nleft < MAX_BACKENDS)
            left[nleft++] = *b;
        if (b->status == KEEL_OK && !kept && b->plugin->shutdown)
            b->plugin->shutdown(b->ctx);
        if (b->devices) {
            int n = b->device_count;
            keel__handle_release(b->devices);
            /* Every device of the array reads as destroyed, not only the first. */
            for (int j = 0; j < n; j++)
                b->devices[j].magic = KEEL__MAGIC_DEAD;
        }
        if (b->dl && !kept)
            dlclose(b->dl);
        pthread_mutex_destroy(&b->lock);
        memset(b, 0, sizeof *b);
        b->magic = KEEL__MAGIC_DEAD;
    }
    nbackends = 0;
    int n = atomic_load(&ndirs);
    for (int i = 0; i < n; i++) {
        free(dirs[i]);
        dirs[i] = NULL;
    }
    atomic_store(&ndirs, 0);
    search_path[0] = '\0';
    setup_done = 0;
}

/* ---- the plugins' environment tables ---- */

static const char *plugin_env_value(const char *name)
{
    if (!name)
        return NULL;
    for (int i = 0; i < nbackends; i++)
        for (int j = 0; j < backends[i].env_count; j++)
            if (strcmp(backends[i].env_name[j], name) == 0) {
                const char *v = getenv(name);
                if ((!v || !v[0]) && backends[i].env_alias[j][0])
                    v = getenv(backends[i].env_alias[j]);
                return v && v[0] ? v : NULL;
            }
    return NULL;
}

int keel__plugin_env_count(void)
{
    int n = 0;
    for (int i = 0; i < nbackends; i++)
        n += keel__backend_loaded(&backends[i])->env_count;
    return n;
}

int keel__plugin_env_get(int index, const char **name, const char **description, const char **alias)
{
    for (int i = 0; i < nbackends; i++) {
        struct keel_backend *b = keel__backend_loaded(&backends[i]);
        if (index < b->env_count) {
            *name = b->env_name[index];
            *description = b->env_desc[index];
            *alias = b->env_alias[index];
            return 0;
        }
        index -= b->env_count;
    }
    return -1;
}
