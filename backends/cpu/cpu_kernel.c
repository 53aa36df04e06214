/* SPDX-License-Identifier: MIT */
/* CPU kernels: modules are shared objects opened with dlopen, a kernel is a
 * copy of its descriptor, and a launch is a command that calls the kernel
 * once per block. The launch copies the argument values into the command
 * (and references neither the kernel nor the caller's memory), so the caller
 * may reuse its variables, and release the kernel, as soon as it returns. */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/cpu/cpu_internal.h"

#define CPU_ARG_ALIGN 16   /* as max_align_t: any argument type can be read in place */

static size_t cpu_round_up(size_t v, size_t a)
{
    return (v + a - 1) & ~(a - 1);
}

/* ---- modules ---- */

static keel_status_t cpu_module_load_file(void *device_ctx, const char *path, void **module_ctx)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return CPU_ERR(KEEL_ERROR_NOT_FOUND, "keel_module_load_file: %s: %s", path, strerror(errno));
    return keel__cpu_module_open(device_ctx, path, "keel_module_load_file", module_ctx);
}

static keel_status_t cpu_module_unload(void *module_ctx)
{
    cpu_module_t *m = module_ctx;
    dlclose(m->dl);
    free(m);
    return KEEL_OK;
}

/* Checks a descriptor and fills the kernel's argument layout. */
static keel_status_t cpu_kernel_setup(cpu_kernel_t *k, const keel_cpu_kernel_desc_t *desc, const char *name,
                                      const char *fn)
{
    if (desc->abi_version != KEEL_CPU_KERNEL_ABI)
        return CPU_ERR(KEEL_ERROR_ABI_MISMATCH,
                       "%s: CPU kernel '%s' was built for CPU kernel ABI %u; this Keel uses ABI %d", fn, name,
                       (unsigned)desc->abi_version, KEEL_CPU_KERNEL_ABI);
    if (!desc->fn)
        return CPU_ERR(KEEL_ERROR_INVALID_ARGUMENT, "%s: CPU kernel '%s' has no function", fn, name);
    if (desc->num_args > KEEL_MAX_KERNEL_ARGS)
        return CPU_ERR(KEEL_ERROR_INVALID_ARGUMENT, "%s: CPU kernel '%s' declares %u arguments; the limit is %d", fn,
                       name, desc->num_args, KEEL_MAX_KERNEL_ARGS);
    size_t total = 0;
    for (unsigned i = 0; i < desc->num_args; i++) {
        if (desc->arg_sizes[i] > KEEL_MAX_KERNEL_ARG_BYTES ||
            (total += desc->arg_sizes[i]) > KEEL_MAX_KERNEL_ARG_BYTES)
            return CPU_ERR(KEEL_ERROR_INVALID_ARGUMENT,
                           "%s: the arguments of CPU kernel '%s' take more than %d bytes", fn, name,
                           KEEL_MAX_KERNEL_ARG_BYTES);
    }
    k->desc = *desc;
    snprintf(k->name, sizeof k->name, "%s", name);
    k->desc.name = k->name;
    size_t off = cpu_round_up(desc->num_args * sizeof(uint16_t), CPU_ARG_ALIGN);
    for (unsigned i = 0; i < desc->num_args; i++) {
        k->offsets[i] = (uint16_t)off;
        off += cpu_round_up(desc->arg_sizes[i], CPU_ARG_ALIGN);
    }
    k->data_bytes = off;   /* at most 128 + 4096 + 64 * 15, within uint16 */
    atomic_init(&k->max_dyn_shared, KEEL_CPU_SHARED_PER_BLOCK);
    return KEEL_OK;
}

static keel_status_t cpu_module_get_kernel(void *module_ctx, const char *name, void **kernel_ctx)
{
    cpu_module_t *m = module_ctx;
    size_t len = strlen(name);
    char sym[sizeof KEEL_CPU_KERNEL_SYMBOL_PREFIX + 256];
    if (len > 255)
        return CPU_ERR(KEEL_ERROR_NOT_FOUND, "keel_module_get_kernel: a kernel name of %zu characters is too long",
                       len);
    snprintf(sym, sizeof sym, "%s%s", KEEL_CPU_KERNEL_SYMBOL_PREFIX, name);
    dlerror();
    const keel_cpu_kernel_desc_t *desc = dlsym(m->dl, sym);
    if (!desc)
        return CPU_ERR(KEEL_ERROR_NOT_FOUND,
                       "keel_module_get_kernel: %s has no CPU kernel '%s' (no symbol %s; export it with "
                       "KEEL_CPU_KERNEL_EXPORT)",
                       m->path, name, sym);
    cpu_kernel_t *k = keel__calloc(1, sizeof *k);
    if (!k)
        return CPU_ERR(KEEL_ERROR_OUT_OF_MEMORY, "keel_module_get_kernel: out of memory");
    keel_status_t st = cpu_kernel_setup(k, desc, name, "keel_module_get_kernel");
    if (st != KEEL_OK) {
        free(k);
        return st;
    }
    snprintf(sym, sizeof sym, "%s%s", KEEL_CPU_BLOCKS_SYMBOL_PREFIX, name);
    k->blocks = (keel_cpu_blocks_fn_t)dlsym(m->dl, sym);
    k->dev = m->dev;
    *kernel_ctx = k;
    return KEEL_OK;
}

/* Whether [p, p + size) lies in memory the module may write after loading:
 * a writable segment outside its read-only-after-relocation part (a const
 * variable is in neither, and a copy into it would fault). */
typedef struct writable_query {
    const struct link_map *lm;
    uintptr_t lo, hi;
    int found, writable;
} writable_query_t;

static int find_segment(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    writable_query_t *q = data;
    if (info->dlpi_addr != q->lm->l_addr || strcmp(info->dlpi_name, q->lm->l_name) != 0)
        return 0;
    int in_load = 0, in_relro = 0;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t b = info->dlpi_addr + ph->p_vaddr, e = b + ph->p_memsz;
        if (q->lo < b || q->hi > e)
            continue;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_W))
            in_load = 1;
        if (ph->p_type == PT_GNU_RELRO)
            in_relro = 1;
    }
    q->found = 1;
    q->writable = in_load && !in_relro;
    return 1;
}

/* A variable of the module: a symbol of the module's own file (dlsym also
 * searches what it links), an object, its size from the symbol table. */
static keel_status_t cpu_module_get_global(void *module_ctx, const char *name, void **ptr, size_t *bytes)
{
    cpu_module_t *m = module_ctx;
    const char *fn = "keel_module_get_global";
    char desc[sizeof KEEL_CPU_KERNEL_SYMBOL_PREFIX + 256];
    struct link_map *own = NULL, *lm = NULL;
    const ElfW(Sym) *sym = NULL;
    Dl_info info;
    if (strlen(name) > 255)
        return CPU_ERR(KEEL_ERROR_NOT_FOUND, "%s: a variable name of %zu characters is too long", fn, strlen(name));
    dlerror();
    void *p = dlsym(m->dl, name);
    if (p && (dlinfo(m->dl, RTLD_DI_LINKMAP, &own) != 0 || !dladdr1(p, &info, (void **)&lm, RTLD_DL_LINKMAP) ||
              lm != own))
        p = NULL; /* another library's symbol */
    if (p && (!dladdr1(p, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym || info.dli_saddr != p))
        sym = NULL;
    int type = sym ? ELF64_ST_TYPE(sym->st_info) /* the same as ELF32_ST_TYPE */ : STT_NOTYPE;
    if (!p || !sym || (type != STT_OBJECT && type != STT_COMMON)) {
        snprintf(desc, sizeof desc, "%s%s", KEEL_CPU_KERNEL_SYMBOL_PREFIX, name);
        if (dlsym(m->dl, desc))
            return CPU_ERR(KEEL_ERROR_NOT_FOUND,
                           "%s: '%s' is a kernel of %s, not a variable (look it up with keel_module_get_kernel)", fn,
                           name, m->path);
        if (p && sym && (type == STT_FUNC || type == STT_GNU_IFUNC))
            return CPU_ERR(KEEL_ERROR_NOT_FOUND, "%s: '%s' is a function of %s, not a variable", fn, name, m->path);
        if (p && sym && type == STT_TLS)
            return CPU_ERR(KEEL_ERROR_NOT_FOUND, "%s: '%s' of %s is a thread-local variable, which is no device "
                           "memory", fn, name, m->path);
        return CPU_ERR(KEEL_ERROR_NOT_FOUND,
                       "%s: %s has no variable '%s' (declare it keel_global or keel_constant at file scope; in a CPU "
                       "module of C kernels, a global of default visibility)", fn, m->path, name);
    }
    writable_query_t q = {own, (uintptr_t)p, (uintptr_t)p + sym->st_size, 0, 0};
    dl_iterate_phdr(find_segment, &q);
    if (!q.writable)
        return CPU_ERR(KEEL_ERROR_NOT_SUPPORTED,
                       "%s: '%s' of %s is read-only memory (declared const); Keel hands out writable variables only",
                       fn, name, m->path);
    *ptr = p;
    *bytes = sym->st_size;
    return KEEL_OK;
}

static keel_status_t cpu_kernel_register(void *device_ctx, const keel_cpu_kernel_desc_t *desc, void **kernel_ctx)
{
    cpu_kernel_t *k = keel__calloc(1, sizeof *k);
    if (!k)
        return CPU_ERR(KEEL_ERROR_OUT_OF_MEMORY, "keel_kernel_register_cpu: out of memory");
    keel_status_t st = cpu_kernel_setup(k, desc, desc->name ? desc->name : "(unnamed)", "keel_kernel_register_cpu");
    if (st != KEEL_OK) {
        free(k);
        return st;
    }
    k->dev = device_ctx;
    *kernel_ctx = k;
    return KEEL_OK;
}

static void cpu_kernel_release(void *kernel_ctx)
{
    free(kernel_ctx);
}

/* ---- launch ---- */

static keel_status_t cpu_kernel_launch(void *kernel_ctx, keel_dim3_t grid, keel_dim3_t block, size_t shared_bytes,
                                       void *stream_ctx, void **args)
{
    cpu_kernel_t *k = kernel_ctx;
    cpu_stream_t *s = stream_ctx;
    unsigned nargs = k->desc.num_args;
    /* The core may check these too; a few compares keep the backend honest
     * about the limits its properties announce. */
    if (block.x > 1024 || block.y > 1024 || block.z > 64 ||
        (uint64_t)block.x * block.y * block.z > KEEL_CPU_THREADS_PER_BLOCK)
        return CPU_ERR(KEEL_ERROR_INVALID_ARGUMENT,
                       "keel_launch_kernel: kernel '%s': a block of %u x %u x %u threads is past the device's limits "
                       "(at most 1024 threads, 1024 x 1024 x 64)",
                       k->name, block.x, block.y, block.z);
    if (grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535)
        return CPU_ERR(KEEL_ERROR_INVALID_ARGUMENT,
                       "keel_launch_kernel: kernel '%s': a grid of %u x %u x %u blocks is past the device's limits "
                       "(2147483647 x 65535 x 65535)",
                       k->name, grid.x, grid.y, grid.z);
    size_t limit = atomic_load_explicit(&k->max_dyn_shared, memory_order_relaxed);
    if (shared_bytes > limit && limit < KEEL_CPU_MAX_DYN_SHARED && shared_bytes <= KEEL_CPU_MAX_DYN_SHARED)
        return CPU_ERR(KEEL_ERROR_INVALID_ARGUMENT,
                       "keel_launch_kernel: kernel '%s' asks for %zu bytes of dynamic shared memory; its limit is %zu "
                       "(raise it up to %u with keel_kernel_set_max_dynamic_shared)",
                       k->name, shared_bytes, limit, KEEL_CPU_MAX_DYN_SHARED);
    if (shared_bytes > limit)
        return CPU_ERR(KEEL_ERROR_INVALID_ARGUMENT,
                       "keel_launch_kernel: kernel '%s' asks for %zu bytes of dynamic shared memory; the device's "
                       "maximum is %u (the kernel's limit is %zu)",
                       k->name, shared_bytes, KEEL_CPU_MAX_DYN_SHARED, limit);
    if (nargs && !args)
        return CPU_ERR(KEEL_ERROR_INVALID_ARGUMENT, "keel_launch_kernel: kernel '%s' takes %u arguments but args is NULL",
                       k->name, nargs);
    for (unsigned i = 0; i < nargs; i++)
        if (!args[i] && k->desc.arg_sizes[i])
            return CPU_ERR(KEEL_ERROR_INVALID_ARGUMENT, "keel_launch_kernel: kernel '%s': args[%u] is NULL", k->name, i);
    cpu_cmd_t *c = keel__cpu_cmd_begin(s, CPU_CMD_LAUNCH, k->data_bytes, "keel_launch_kernel");
    if (!c)
        return KEEL_ERROR_OUT_OF_MEMORY;
    c->u.launch.fn = k->desc.fn;
    c->u.launch.blocks = k->blocks;
    c->u.launch.grid = grid;
    c->u.launch.block = block;
    c->u.launch.shared_bytes = shared_bytes;
    c->u.launch.nargs = nargs;
    memcpy(c->data, k->offsets, nargs * sizeof(uint16_t));
    for (unsigned i = 0; i < nargs; i++)
        if (k->desc.arg_sizes[i])
            memcpy(c->data + k->offsets[i], args[i], k->desc.arg_sizes[i]);
    keel__cpu_cmd_commit(s, c);
    return KEEL_OK;
}

typedef struct cpu_launch_run {
    cpu_stream_t *stream;
    cpu_cmd_t *cmd;
    void *argv[KEEL_MAX_KERNEL_ARGS];
    atomic_int failed;
} cpu_launch_run_t;

static void cpu_launch_blocks(void *arg, size_t begin, size_t end)
{
    cpu_launch_run_t *r = arg;
    cpu_cmd_t *c = r->cmd;
    keel_cpu_kernel_ctx_t ctx = {
        .grid_dim = c->u.launch.grid,
        .block_dim = c->u.launch.block,
        .shared_mem = NULL,
        .shared_bytes = c->u.launch.shared_bytes,
    };
    if (ctx.shared_bytes) {
        ctx.shared_mem = keel__cpu_thread_scratch(ctx.shared_bytes);
        if (!ctx.shared_mem) {
            /* Report once; the blocks of this chunk do not run. */
            if (atomic_exchange(&r->failed, 1) == 0)
                keel__cpu_stream_fail(r->stream, KEEL_ERROR_LAUNCH_FAILED,
                                      "keel_launch_kernel: cpu:%d: no memory for %zu bytes of dynamic shared memory "
                                      "of a block",
                                      r->stream->dev->index, ctx.shared_bytes);
            return;
        }
    }
    uint64_t gx = ctx.grid_dim.x, gxy = gx * ctx.grid_dim.y;
    /* Split the linear index once, then step with carries: blocks go x fastest. */
    ctx.block_idx.z = (unsigned)(begin / gxy);
    ctx.block_idx.y = (unsigned)((begin % gxy) / gx);
    ctx.block_idx.x = (unsigned)(begin % gx);
    if (c->u.launch.blocks) {
        c->u.launch.blocks(&ctx, r->argv, begin, end);
        return;
    }
    keel_cpu_kernel_fn_t fn = c->u.launch.fn;
    for (size_t i = begin; i < end; i++) {
        fn(&ctx, r->argv);
        if (++ctx.block_idx.x == ctx.grid_dim.x) {
            ctx.block_idx.x = 0;
            if (++ctx.block_idx.y == ctx.grid_dim.y) {
                ctx.block_idx.y = 0;
                ctx.block_idx.z++;
            }
        }
    }
}

void keel__cpu_run_launch(cpu_stream_t *s, cpu_cmd_t *c)
{
    cpu_launch_run_t r;
    r.stream = s;
    r.cmd = c;
    atomic_init(&r.failed, 0);
    const uint16_t *offsets = (const uint16_t *)c->data;
    for (unsigned i = 0; i < c->u.launch.nargs; i++)
        r.argv[i] = c->data + offsets[i];
    keel_dim3_t g = c->u.launch.grid, b = c->u.launch.block;
    uint64_t nblocks = (uint64_t)g.x * g.y * g.z;
    uint64_t bthreads = (uint64_t)b.x * b.y * b.z;
    cpu_device_t *dev = s->dev;
    if (nblocks == 1 || dev->pool.wanted == 0 || (bthreads && nblocks < KEEL_CPU_INLINE_THREADS / bthreads))
        cpu_launch_blocks(&r, 0, (size_t)nblocks);
    else
        keel__cpu_pool_run(dev, (size_t)nblocks, 1, cpu_launch_blocks, &r);
}

/* ---- attributes ---- */

static keel_status_t cpu_kernel_get_attribute(void *kernel_ctx, keel_kernel_attribute_t attr, int *value)
{
    cpu_kernel_t *k = kernel_ctx;
    switch (attr) {
    case KEEL_KERNEL_ATTR_MAX_THREADS_PER_BLOCK:
        *value = KEEL_CPU_THREADS_PER_BLOCK;
        return KEEL_OK;
    case KEEL_KERNEL_ATTR_NUM_ARGS:
        *value = (int)k->desc.num_args;
        return KEEL_OK;
    case KEEL_KERNEL_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        *value = (int)atomic_load_explicit(&k->max_dyn_shared, memory_order_relaxed);
        return KEEL_OK;
    case KEEL_KERNEL_ATTR_SHARED_SIZE_BYTES:
    case KEEL_KERNEL_ATTR_NUM_REGS:
    case KEEL_KERNEL_ATTR_LOCAL_SIZE_BYTES:
        *value = 0;
        return KEEL_OK;
    }
    return CPU_ERR(KEEL_ERROR_INVALID_ARGUMENT, "keel_kernel_get_attribute: unknown attribute %d", (int)attr);
}

/* The limit can be set anywhere up to the device's shared_memory_per_block
 * (KEEL_CPU_MAX_DYN_SHARED, also the default), as on a GPU. Though a block's
 * shared memory is host memory of the executing thread, every pool thread
 * keeps a buffer of that size, so it stays bounded. */
static keel_status_t cpu_kernel_set_max_dynamic_shared(void *kernel_ctx, size_t bytes)
{
    cpu_kernel_t *k = kernel_ctx;
    if (bytes > KEEL_CPU_MAX_DYN_SHARED)
        return CPU_ERR(KEEL_ERROR_INVALID_ARGUMENT,
                       "keel_kernel_set_max_dynamic_shared: %zu bytes for kernel '%s' is over the cpu limit of %u",
                       bytes, k->name, KEEL_CPU_MAX_DYN_SHARED);
    atomic_store_explicit(&k->max_dyn_shared, bytes, memory_order_relaxed);
    return KEEL_OK;
}

/* A core runs one block at a time. A block that cpu_kernel_launch would
 * refuse (too many threads, more dynamic shared memory than the kernel's
 * limit) has none resident, as CUDA answers. */
static keel_status_t cpu_kernel_max_active_blocks(void *kernel_ctx, int block_threads, size_t shared_bytes,
                                                  int *blocks)
{
    cpu_kernel_t *k = kernel_ctx;
    size_t limit = atomic_load_explicit(&k->max_dyn_shared, memory_order_relaxed);
    *blocks = block_threads > KEEL_CPU_THREADS_PER_BLOCK || shared_bytes > limit ? 0 : 1;
    return KEEL_OK;
}

const keel_kernel_vtable_t keel__cpu_kernel_vtable = {
    .struct_size = sizeof(keel_kernel_vtable_t),
    .module_load_data = NULL,   /* a CPU module must be a file: dlopen needs one */
    .module_load_file = cpu_module_load_file,
    .module_compile = keel__cpu_module_compile,
    .module_unload = cpu_module_unload,
    .module_get_kernel = cpu_module_get_kernel,
    .kernel_register_cpu = cpu_kernel_register,
    .kernel_release = cpu_kernel_release,
    .launch = cpu_kernel_launch,
    .get_attribute = cpu_kernel_get_attribute,
    .set_max_dynamic_shared = cpu_kernel_set_max_dynamic_shared,
    .max_active_blocks = cpu_kernel_max_active_blocks,
    .module_get_global = cpu_module_get_global,
};
