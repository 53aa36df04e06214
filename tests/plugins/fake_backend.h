/* SPDX-License-Identifier: MIT */
/* A minimal backend for the loader's tests: one "device" whose memory is
 * malloc'd and whose streams run every command at once, on the caller's
 * thread. Each fake plugin includes this file after defining:
 *   FAKE_NAME          the backend name (matches the file keel-<name>.so)
 *   FAKE_ABI_VERSION   what it claims to be built for
 *   FAKE_PROBE_NODEV   1 to make probe report no device
 *   FAKE_INIT_SYMBOL   the name of the exported init function
 *   FAKE_INIT_NULL     1 to make the init function return NULL
 *   FAKE_INCOMPLETE    1 to leave out a required table (memory) and claim a
 *                      struct_size too small for the fields it has (optional)
 *   FAKE_SHORT_TABLE   1 to give the device table a struct_size that stops
 *                      before its last entry of this ABI version (optional)
 *   FAKE_ENV           1 to declare an environment table, fake_env, that the
 *                      plugin defines before including this file; the probe
 *                      then describes the backend with the values it reads
 *                      of KEEL_FAKE_MODE and KEEL_FAKE_COUNT (optional)
 * It is check-only code: small, not fast. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "keel/backend.h"

#define FAKE_EXPORT __attribute__((visibility("default")))
#ifndef FAKE_SHORT_TABLE
#define FAKE_SHORT_TABLE 0
#endif
#ifndef FAKE_ENV
#define FAKE_ENV 0
#endif
#include <stdio.h>

static const keel_host_api_t *host;

static keel_status_t fake_probe(const keel_host_api_t *h, void **ctx, int *count, const char **desc)
{
    host = h;
#if FAKE_PROBE_NODEV
    (void)ctx;
    (void)count;
    (void)desc;
    return h->set_error(KEEL_ERROR_NO_DEVICE, "%s: the fake probe found no device", FAKE_NAME);
#else
    *ctx = (void *)&host;
    *count = 1;
    *desc = "fake backend for Keel's loader tests";
#if FAKE_ENV
    static char described[128];
    const char *mode = h->env_value("KEEL_FAKE_MODE"), *n = h->env_value("KEEL_FAKE_COUNT");
    snprintf(described, sizeof described, "fake backend with mode=%s count=%s", mode ? mode : "(unset)",
             n ? n : "(unset)");
    *desc = described;
#endif
    return KEEL_OK;
#endif
}

static keel_status_t dev_open(void *bctx, int index, void **dctx)
{
    (void)bctx;
    *dctx = (void *)(intptr_t)(index + 1);
    return KEEL_OK;
}
static void dev_close(void *dctx) { (void)dctx; }
static keel_status_t dev_props(void *dctx, keel_device_properties_t *p)
{
    (void)dctx;
    size_t sz = p->struct_size;
    memset(p, 0, sizeof *p);
    p->struct_size = sz;
    strcpy(p->name, "fake device");
    strcpy(p->vendor, "Keel tests");
    strcpy(p->architecture, "none");
    strcpy(p->backend, FAKE_NAME);
    p->type = KEEL_DEVICE_TYPE_CPU;
    p->total_memory = (size_t)1 << 30;
    p->free_memory = (size_t)1 << 30;
    p->compute_units = 1;
    p->max_threads_per_block = 1;
    for (int i = 0; i < 3; i++)
        p->max_block_dim[i] = p->max_grid_dim[i] = 1;
    p->warp_size = 1;
    p->pci_bus_id = -1;
    p->unified_addressing = 1;
    return KEEL_OK;
}
static keel_status_t dev_meminfo(void *dctx, size_t *f, size_t *t)
{
    (void)dctx;
    *f = *t = (size_t)1 << 30;
    return KEEL_OK;
}
static keel_status_t dev_sync(void *dctx) { (void)dctx; return KEEL_OK; }
static keel_status_t dev_prio(void *dctx, int *least, int *greatest)
{
    (void)dctx;
    *least = *greatest = 0;
    return KEEL_OK;
}

static keel_status_t mem_alloc(void *dctx, keel_memory_kind_t kind, size_t bytes, void **ptr)
{
    (void)dctx;
    (void)kind;
    void *p = malloc(bytes);
    if (p == NULL)
        return host->set_error(KEEL_ERROR_OUT_OF_MEMORY, "%s: malloc(%zu) failed", FAKE_NAME, bytes);
    *ptr = p;
    return KEEL_OK;
}
static keel_status_t mem_free(void *dctx, keel_memory_kind_t kind, void *ptr)
{
    (void)dctx;
    (void)kind;
    free(ptr);
    return KEEL_OK;
}
static keel_status_t mem_copy(void *s, void *dst, keel_memory_kind_t dk, const void *src, keel_memory_kind_t sk,
                              size_t bytes)
{
    (void)s;
    (void)dk;
    (void)sk;
    memmove(dst, src, bytes);
    return KEEL_OK;
}
static keel_status_t mem_set(void *s, void *dst, int v, size_t bytes)
{
    (void)s;
    memset(dst, v, bytes);
    return KEEL_OK;
}

static keel_status_t st_create(void *dctx, unsigned flags, int prio, void **sctx)
{
    (void)flags;
    (void)prio;
    *sctx = dctx;
    return KEEL_OK;
}
static keel_status_t st_nop(void *sctx) { (void)sctx; return KEEL_OK; }
static keel_status_t st_wait(void *sctx, void *ectx) { (void)sctx; (void)ectx; return KEEL_OK; }
static keel_status_t st_host(void *sctx, keel_host_fn_t fn, void *ud)
{
    (void)sctx;
    fn(ud);
    return KEEL_OK;
}

static keel_status_t ev_create(void *dctx, unsigned flags, void **ectx)
{
    (void)flags;
    *ectx = dctx;
    return KEEL_OK;
}
static keel_status_t ev_nop(void *ectx) { (void)ectx; return KEEL_OK; }
static keel_status_t ev_record(void *ectx, void *sctx) { (void)ectx; (void)sctx; return KEEL_OK; }
static keel_status_t ev_elapsed(void *a, void *b, float *ms)
{
    (void)a;
    (void)b;
    *ms = 0.0f;
    return KEEL_OK;
}

static void k_release(void *k) { (void)k; }
static keel_status_t k_get(void *m, const char *name, void **k)
{
    (void)m;
    (void)k;
    return host->set_error(KEEL_ERROR_NOT_FOUND, "%s: no kernel %s", FAKE_NAME, name);
}
static keel_status_t k_launch(void *k, keel_dim3_t g, keel_dim3_t b, size_t sh, void *s, void **args)
{
    (void)k; (void)g; (void)b; (void)sh; (void)s; (void)args;
    return host->set_error(KEEL_ERROR_NOT_SUPPORTED, "%s: no kernels", FAKE_NAME);
}
static keel_status_t k_attr(void *k, keel_kernel_attribute_t a, int *v)
{
    (void)k; (void)a; (void)v;
    return host->set_error(KEEL_ERROR_NOT_SUPPORTED, "%s: no kernels", FAKE_NAME);
}

static const keel_device_vtable_t fake_device = {FAKE_SHORT_TABLE ? offsetof(keel_device_vtable_t, stream_priority_range) : sizeof(keel_device_vtable_t),
                                                  dev_open, dev_close, dev_props, dev_meminfo,
                                                  dev_sync, NULL, dev_prio};
static const keel_memory_vtable_t fake_memory = {sizeof(keel_memory_vtable_t), mem_alloc, mem_free, NULL, NULL, mem_copy, NULL, mem_set, NULL};
static const keel_stream_vtable_t fake_stream = {sizeof(keel_stream_vtable_t), st_create, st_nop, st_nop, st_nop, st_wait, st_host, NULL, NULL};
static const keel_event_vtable_t fake_event = {sizeof(keel_event_vtable_t), ev_create, ev_nop, ev_record, ev_nop, ev_nop, ev_elapsed};
static const keel_kernel_vtable_t fake_kernel = {sizeof(keel_kernel_vtable_t), NULL, NULL, NULL, NULL, k_get, NULL, k_release,
                                                  k_launch, k_attr, NULL, NULL};

#ifndef FAKE_INCOMPLETE
#define FAKE_INCOMPLETE 0
#endif

static const keel_backend_plugin_t fake_plugin = {
    .abi_version = FAKE_ABI_VERSION,
    .struct_size = FAKE_INCOMPLETE ? 16 : sizeof(keel_backend_plugin_t),
    .name = FAKE_NAME,
    .probe = fake_probe,
    .shutdown = NULL,
    .device = &fake_device,
    .memory = FAKE_INCOMPLETE ? NULL : &fake_memory,
    .stream = &fake_stream,
    .event = &fake_event,
    .kernel = &fake_kernel,
    .graph = NULL,
#if FAKE_ENV
    .env = fake_env,
#endif
};

FAKE_EXPORT const keel_backend_plugin_t *FAKE_INIT_SYMBOL(const keel_host_api_t *h);
const keel_backend_plugin_t *FAKE_INIT_SYMBOL(const keel_host_api_t *h)
{
    host = h;
#if FAKE_INIT_NULL
    return NULL;
#else
    return &fake_plugin;
#endif
}
