/* SPDX-License-Identifier: MIT */
/* DLPack export and import: Keel memory described as DLManagedTensor, and
 * other libraries' tensors entered into the allocation registry. */
#include <stdlib.h>
#include <string.h>
#include "runtime/internal.h"
#include "keel/dlpack.h"

/* ---- dtypes and devices ---- */

keel_status_t keel_dlpack_dtype(keel_dtype_t dtype, DLDataType *out)
{
    KEEL__CHECK_OUT(out, "keel_dlpack_dtype", "out");
    DLDataType t = {.lanes = 1};
    switch (dtype) {
    case KEEL_F32: t.code = kDLFloat; t.bits = 32; break;
    case KEEL_F64: t.code = kDLFloat; t.bits = 64; break;
    case KEEL_F16: t.code = kDLFloat; t.bits = 16; break;
    case KEEL_BF16: t.code = kDLBfloat; t.bits = 16; break;
    default:
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "keel_dlpack_dtype: unknown dtype %d", (int)dtype);
    }
    *out = t;
    return KEEL_OK;
}

keel_status_t keel_dtype_from_dlpack(DLDataType t, keel_dtype_t *out)
{
    KEEL__CHECK_OUT(out, "keel_dtype_from_dlpack", "out");
    keel_dtype_t d = 0;
    if (t.lanes == 1 && t.code == kDLFloat)
        d = t.bits == 32 ? KEEL_F32 : t.bits == 64 ? KEEL_F64 : t.bits == 16 ? KEEL_F16 : 0;
    else if (t.lanes == 1 && t.code == kDLBfloat && t.bits == 16)
        d = KEEL_BF16;
    if (!d)
        return keel__set_error(KEEL_ERROR_NOT_SUPPORTED,
                               "keel_dtype_from_dlpack: DLPack type (code %u, %u bits, %u lanes) is none of Keel's "
                               "dtypes (float16/32/64, bfloat16)", t.code, t.bits, t.lanes);
    *out = d;
    return KEEL_OK;
}

typedef enum family { FAMILY_NONE, FAMILY_CPU, FAMILY_CUDA, FAMILY_HIP } family_t;

static family_t family_of(const struct keel_device *d)
{
    if (d->backend->builtin)
        return FAMILY_CPU;
    if (strcmp(d->backend->name, "cuda") == 0)
        return FAMILY_CUDA;
    if (strcmp(d->backend->name, "hip") == 0)
        return FAMILY_HIP;
    return FAMILY_NONE;
}

static keel_status_t device_of(const struct keel_device *d, keel_memory_kind_t kind, DLDevice *out, const char *fn)
{
    DLDevice dev = {.device_type = kDLCPU, .device_id = 0};
    switch (family_of(d)) {
    case FAMILY_CPU:
        break;
    case FAMILY_CUDA:
        dev.device_type = kind == KEEL_MEMORY_PINNED ? kDLCUDAHost : kind == KEEL_MEMORY_MANAGED ? kDLCUDAManaged : kDLCUDA;
        dev.device_id = kind == KEEL_MEMORY_PINNED ? 0 : d->index;
        break;
    case FAMILY_HIP:
        dev.device_type = kind == KEEL_MEMORY_PINNED ? kDLROCMHost : kDLROCM;
        dev.device_id = kind == KEEL_MEMORY_PINNED ? 0 : d->index;
        break;
    default:
        return keel__set_error(KEEL_ERROR_NOT_SUPPORTED, "%s: DLPack has no device type for the %s backend", fn,
                               d->backend->name);
    }
    *out = dev;
    return KEEL_OK;
}

keel_status_t keel_dlpack_device(keel_device_t *device, keel_memory_kind_t kind, DLDevice *out)
{
    KEEL__CHECK_HANDLE(device, KEEL__MAGIC_DEVICE, "keel_dlpack_device", "device");
    KEEL__CHECK_OUT(out, "keel_dlpack_device", "out");
    if (kind < KEEL_MEMORY_DEVICE || kind > KEEL_MEMORY_MANAGED)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "keel_dlpack_device: kind %d is not device, pinned or "
                               "managed memory", (int)kind);
    return device_of(device, kind, out, "keel_dlpack_device");
}

/* The memory kind a device of Keel gives memory of a DLPack device, or -1
 * when the device cannot address it. */
static int kind_for(const struct keel_device *d, DLDevice dev)
{
    switch (family_of(d)) {
    case FAMILY_CPU:
        switch (dev.device_type) {
        case kDLCPU: return KEEL_MEMORY_DEVICE;
        case kDLCUDAHost: case kDLROCMHost: return KEEL_MEMORY_PINNED;
        case kDLCUDAManaged: return KEEL_MEMORY_MANAGED;
        default: return -1;
        }
    case FAMILY_CUDA:
        switch (dev.device_type) {
        case kDLCUDA: return dev.device_id == d->index ? KEEL_MEMORY_DEVICE : -1;
        case kDLCUDAHost: return KEEL_MEMORY_PINNED;
        case kDLCUDAManaged: return KEEL_MEMORY_MANAGED;
        default: return -1;
        }
    case FAMILY_HIP:
        switch (dev.device_type) {
        case kDLROCM: return dev.device_id == d->index ? KEEL_MEMORY_DEVICE : -1;
        case kDLROCMHost: return KEEL_MEMORY_PINNED;
        default: return -1;
        }
    default:
        return -1;
    }
}

static const char *device_type_name(DLDeviceType t)
{
    switch (t) {
    case kDLCPU: return "kDLCPU";
    case kDLCUDA: return "kDLCUDA";
    case kDLCUDAHost: return "kDLCUDAHost";
    case kDLCUDAManaged: return "kDLCUDAManaged";
    case kDLROCM: return "kDLROCM";
    case kDLROCMHost: return "kDLROCMHost";
    case kDLOpenCL: return "kDLOpenCL";
    case kDLVulkan: return "kDLVulkan";
    case kDLMetal: return "kDLMetal";
    default: return "an unknown device type";
    }
}

/* ---- shapes ---- */

/* Checks a shape and its strides (elements; NULL for compact row-major)
 * and finds the byte range [*lo, *hi) its elements take relative to
 * element 0; *empty when it has no element. */
static keel_status_t extent(int32_t ndim, const int64_t *shape, const int64_t *strides, DLDataType t, int64_t *lo,
                            int64_t *hi, int *empty, const char *fn)
{
    if (ndim < 0 || ndim > KEEL_DLPACK_MAX_NDIM)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: %d dimensions (0 to %d are supported)", fn, (int)ndim,
                               KEEL_DLPACK_MAX_NDIM);
    if (ndim > 0 && !shape)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: shape is NULL for %d dimensions", fn, (int)ndim);
    if (t.bits == 0 || t.bits % 8 != 0 || t.lanes == 0)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: data type of %u bits and %u lanes (bits must be a "
                               "nonzero multiple of 8, lanes at least 1)", fn, t.bits, t.lanes);
    int64_t item = (int64_t)(t.bits / 8) * t.lanes;
    int64_t low = 0, high = 0, compact = 1;
    *empty = 0;
    for (int i = ndim - 1; i >= 0; i--) {
        if (shape[i] < 0)
            return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: extent %lld of dimension %d is negative", fn,
                                   (long long)shape[i], i);
        if (shape[i] == 0)
            *empty = 1;
    }
    for (int i = ndim - 1; i >= 0; i--) {
        int64_t s = strides ? strides[i] : compact;
        int64_t step, span;
        if (__builtin_mul_overflow(s, item, &step) || __builtin_mul_overflow(step, shape[i] > 0 ? shape[i] - 1 : 0, &span))
            return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: dimension %d (extent %lld, stride %lld) overflows",
                                   fn, i, (long long)shape[i], (long long)s);
        if (span < 0 ? __builtin_add_overflow(low, span, &low) : __builtin_add_overflow(high, span, &high))
            return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: the shape's extent overflows", fn);
        if (!strides && __builtin_mul_overflow(compact, shape[i] > 0 ? shape[i] : 1, &compact))
            return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: the shape's element count overflows", fn);
    }
    *lo = low;
    *hi = high + item;
    return KEEL_OK;
}

/* ---- export ---- */

/* One block: the managed tensor, then the shape and the strides. */
typedef struct exported {
    DLManagedTensor managed;
    void (*release)(void *user_data);
    void *user_data;
    int64_t dims[]; /* shape, then strides */
} exported_t;

static void export_deleter(DLManagedTensor *self)
{
    if (!self)
        return;
    exported_t *e = self->manager_ctx;
    if (e->release)
        e->release(e->user_data);
    free(e);
}

keel_status_t keel_dlpack_export(const keel_dlpack_export_params_t *p, DLManagedTensor **tensor)
{
    static const char fn[] = "keel_dlpack_export";
    if (!p)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: params is NULL", fn);
    KEEL__CHECK_OUT(tensor, fn, "tensor");
    if (p->struct_size < sizeof(*p))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: struct_size %zu is less than %zu", fn, p->struct_size,
                               sizeof(*p));
    int64_t lo, hi;
    int empty;
    keel_status_t st = extent(p->ndim, p->shape, p->strides, p->dtype, &lo, &hi, &empty, fn);
    if (st != KEEL_OK)
        return st;
    if (!p->data)
        return keel__set_error(KEEL_ERROR_INVALID_POINTER, "%s: data is NULL", fn);
    keel__alloc_t a;
    if (!keel__registry_find(p->data, &a))
        return keel__set_error(KEEL_ERROR_INVALID_POINTER, "%s: %p is in no live Keel allocation", fn, p->data);
    int64_t off = (int64_t)((uintptr_t)p->data - a.base);
    if (!empty && (off + lo < 0 || off + hi > (int64_t)a.size))
        return keel__set_error(KEEL_ERROR_OUT_OF_RANGE,
                               "%s: the elements span bytes [%lld, %lld) from the start of the %zu-byte allocation at "
                               "%p on %s, outside it", fn, (long long)(off + lo), (long long)(off + hi), a.size,
                               (void *)a.base, a.device->name);
    DLDevice dev;
    if ((st = device_of(a.device, a.kind, &dev, fn)) != KEEL_OK)
        return st;
    size_t n = (size_t)p->ndim;
    exported_t *e = keel__malloc(sizeof(*e) + 2 * n * sizeof(int64_t));
    if (!e)
        return keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    int64_t *shape = e->dims, *strides = e->dims + n, compact = 1;
    for (size_t i = n; i-- > 0;) {
        shape[i] = p->shape[i];
        strides[i] = p->strides ? p->strides[i] : compact;
        compact *= p->shape[i] > 0 ? p->shape[i] : 1;
    }
    e->release = p->release;
    e->user_data = p->user_data;
    e->managed = (DLManagedTensor){
        .dl_tensor = {.data = (void *)a.base, .device = dev, .ndim = p->ndim, .dtype = p->dtype,
                      .shape = n ? shape : NULL, .strides = n ? strides : NULL, .byte_offset = (uint64_t)off},
        .manager_ctx = e,
        .deleter = export_deleter,
    };
    *tensor = &e->managed;
    return KEEL_OK;
}

/* ---- import ---- */

/* Foreign memory in the registry, shared by every imported tensor that
 * lies in it; guarded by regions_lock. */
typedef struct region {
    uintptr_t base;
    size_t size;
    unsigned refs;
    struct region *next;
} region_t;

static pthread_mutex_t regions_lock = PTHREAD_MUTEX_INITIALIZER;
static region_t *regions;

typedef struct imported {
    uint32_t magic;
    keel_tensor_t pub;
    DLManagedTensor *managed;
    region_t *region;   /* NULL when the memory is a Keel allocation's */
    int64_t dims[];     /* shape, then strides */
} imported_t;

static region_t *region_at(uintptr_t base)
{
    for (region_t *r = regions; r; r = r->next)
        if (r->base == base)
            return r;
    return NULL;
}

/* Under regions_lock: the region holding [lo, hi), entered or grown as
 * needed, with one more reference; *out is NULL when a Keel allocation
 * holds it, and *kind becomes the kind of the entry that holds it. */
static keel_status_t hold_region(struct keel_device *d, keel_memory_kind_t *kind, uintptr_t lo, uintptr_t hi,
                                 region_t **out)
{
    static const char fn[] = "keel_dlpack_import";
    keel__alloc_t a;
    int overlapped;
    keel_status_t st = keel__registry_add_foreign((void *)lo, hi - lo, *kind, d, KEEL__FOREIGN_DLPACK, &a, &overlapped);
    if (st != KEEL_OK)
        return keel__prefix_error(st, "%s: entering %zu bytes at %p", fn, (size_t)(hi - lo), (void *)lo);
    if (!overlapped) {
        region_t *r = keel__malloc(sizeof(*r));
        if (!r) {
            keel__registry_remove((void *)lo, NULL);
            return keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
        }
        *r = (region_t){.base = lo, .size = hi - lo, .refs = 1, .next = regions};
        regions = r;
        *out = r;
        return KEEL_OK;
    }
    if (a.device != d)
        return keel__set_error(KEEL_ERROR_DEVICE_MISMATCH, "%s: %zu bytes at %p overlap memory of %s (%zu bytes at %p), "
                               "not of %s", fn, (size_t)(hi - lo), (void *)lo, a.device->name, a.size,
                               (void *)a.base, d->name);
    int inside = lo >= a.base && hi <= a.base + a.size;
    *kind = a.kind;
    if (a.foreign != KEEL__FOREIGN_DLPACK) { /* Keel's, or registered host memory: used in place */
        if (!inside)
            return keel__set_error(KEEL_ERROR_OUT_OF_RANGE, "%s: %zu bytes at %p overlap the Keel allocation of %zu bytes "
                                   "at %p on %s without lying inside it", fn, (size_t)(hi - lo), (void *)lo, a.size,
                                   (void *)a.base, d->name);
        *out = NULL;
        return KEEL_OK;
    }
    region_t *r = region_at(a.base);
    if (!r)
        return keel__set_error(KEEL_ERROR_INTERNAL, "%s: imported memory at %p has no record", fn, (void *)a.base);
    if (!inside) {
        /* Another tensor of the same memory reaches further: one entry for both. */
        uintptr_t nlo = lo < a.base ? lo : a.base, nhi = hi > a.base + a.size ? hi : a.base + a.size;
        keel__alloc_t old;
        keel__registry_remove((void *)a.base, &old);
        keel__alloc_t other;
        st = keel__registry_add_foreign((void *)nlo, nhi - nlo, a.kind, d, KEEL__FOREIGN_DLPACK, &other, &overlapped);
        if (st != KEEL_OK || overlapped) {
            keel__registry_put_back(&old);
            if (st != KEEL_OK)
                return keel__prefix_error(st, "%s: growing imported memory at %p", fn, (void *)a.base);
            return keel__set_error(KEEL_ERROR_OUT_OF_RANGE, "%s: %zu bytes at %p overlap two allocations (%p and %p)", fn,
                                   (size_t)(hi - lo), (void *)lo, (void *)a.base, (void *)other.base);
        }
        r->base = nlo;
        r->size = nhi - nlo;
    }
    r->refs++;
    *out = r;
    return KEEL_OK;
}

static void drop_region(region_t *r)
{
    if (--r->refs > 0)
        return;
    keel__registry_remove((void *)r->base, NULL);
    for (region_t **pp = &regions; *pp; pp = &(*pp)->next) {
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    }
    free(r);
}

keel_status_t keel_dlpack_import(keel_device_t *device, DLManagedTensor *managed, const keel_tensor_t **tensor)
{
    static const char fn[] = "keel_dlpack_import";
    keel_status_t st = keel__device_ready(device, fn);
    if (st != KEEL_OK)
        return st;
    if (!managed)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: managed tensor is NULL", fn);
    KEEL__CHECK_OUT(tensor, fn, "tensor");
    const DLTensor *t = &managed->dl_tensor;
    int64_t lo, hi;
    int empty;
    if ((st = extent(t->ndim, t->shape, t->strides, t->dtype, &lo, &hi, &empty, fn)) != KEEL_OK)
        return st;
    int kind = kind_for(device, t->device);
    if (kind < 0)
        return keel__set_error(KEEL_ERROR_DEVICE_MISMATCH, "%s: memory of %s %d cannot be used by %s%s", fn,
                               device_type_name(t->device.device_type), (int)t->device.device_id, device->name,
                               t->device.device_type == kDLCPU ? " (pageable host memory: copy it to the device)" : "");
    if (!t->data && !empty)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: data is NULL for a tensor with elements", fn);
    size_t n = (size_t)t->ndim;
    imported_t *im = keel__handle_alloc(KEEL__MAGIC_TENSOR, sizeof(*im) + 2 * n * sizeof(int64_t));
    if (!im)
        return keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    int64_t *shape = im->dims, *strides = im->dims + n, compact = 1;
    for (size_t i = n; i-- > 0;) {
        shape[i] = t->shape[i];
        strides[i] = t->strides ? t->strides[i] : compact;
        compact *= t->shape[i] > 0 ? t->shape[i] : 1;
    }
    uintptr_t elem0 = (uintptr_t)t->data + (uintptr_t)t->byte_offset;
    keel_memory_kind_t mkind = (keel_memory_kind_t)kind;
    if (!empty) {
        pthread_mutex_lock(&regions_lock);
        st = hold_region(device, &mkind, elem0 + (uintptr_t)lo, elem0 + (uintptr_t)hi, &im->region);
        pthread_mutex_unlock(&regions_lock);
        if (st != KEEL_OK) {
            keel__handle_release(im);
            return st;
        }
    }
    im->managed = managed;
    im->pub = (keel_tensor_t){.data = (void *)elem0, .ndim = t->ndim, .shape = shape, .strides = strides,
                              .dtype = t->dtype, .device = device, .kind = mkind,
                              .managed = managed};
    *tensor = &im->pub;
    return KEEL_OK;
}

void keel__dlpack_teardown(int deleters)
{
    void *h;
    while ((h = keel__handle_find_live(KEEL__MAGIC_TENSOR, NULL, NULL)) != NULL) {
        imported_t *im = h;
        if (deleters) {
            keel_dlpack_release(&im->pub);
            continue;
        }
        if (im->region) {
            pthread_mutex_lock(&regions_lock);
            drop_region(im->region);
            pthread_mutex_unlock(&regions_lock);
        }
        keel__handle_release(im);
    }
}

keel_status_t keel_dlpack_release(const keel_tensor_t *tensor)
{
    if (!tensor)
        return KEEL_OK;
    imported_t *im = (imported_t *)((char *)tensor - offsetof(imported_t, pub));
    KEEL__CHECK_HANDLE(im, KEEL__MAGIC_TENSOR, "keel_dlpack_release", "imported tensor");
    if (im->region) {
        pthread_mutex_lock(&regions_lock);
        drop_region(im->region);
        pthread_mutex_unlock(&regions_lock);
    }
    DLManagedTensor *m = im->managed;
    keel__handle_release(im);
    if (m->deleter)
        m->deleter(m);
    return KEEL_OK;
}
