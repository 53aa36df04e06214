/* SPDX-License-Identifier: MIT */
/* test-dlpack: DLPack export and import (keel/dlpack.h): round trips at the
 * same address, the device types of each backend, foreign memory used by the
 * built-in operations, deleters called exactly once, bad input refused; and
 * the native stream handshake of keel/stream.h. */
#include <math.h>
#include <stdlib.h>
#include "fixture.h"
#include "keel/dlpack.h"

static int is_backend(keel_device_t *dev, const char *name)
{
    return strcmp(kt_backend_name(dev), name) == 0;
}

static int device_index(keel_device_t *dev)
{
    int i = -1;
    KT_OK(keel_device_get_index(dev, &i));
    return i;
}

static DLDataType f32_type(void)
{
    DLDataType t = {.code = kDLFloat, .bits = 32, .lanes = 1};
    return t;
}

/* What the table of keel/dlpack.h says memory of kind on dev is. */
static DLDevice expected_device(keel_device_t *dev, keel_memory_kind_t kind)
{
    DLDevice d = {.device_type = kDLCPU, .device_id = 0};
    if (is_backend(dev, "cuda")) {
        d.device_type = kind == KEEL_MEMORY_PINNED ? kDLCUDAHost : kind == KEEL_MEMORY_MANAGED ? kDLCUDAManaged : kDLCUDA;
        d.device_id = kind == KEEL_MEMORY_PINNED ? 0 : device_index(dev);
    } else if (is_backend(dev, "hip")) {
        d.device_type = kind == KEEL_MEMORY_PINNED ? kDLROCMHost : kDLROCM;
        d.device_id = kind == KEEL_MEMORY_PINNED ? 0 : device_index(dev);
    }
    return d;
}

static int releases;
static void count_release(void *user_data)
{
    ck_assert_ptr_eq(user_data, &releases);
    releases++;
}

static int deletes;
static void count_delete(DLManagedTensor *self)
{
    ck_assert_ptr_eq(self->manager_ctx, &deletes);
    deletes++;
}

static keel_dlpack_export_params_t export_params(const void *data, int32_t ndim, const int64_t *shape,
                                                 const int64_t *strides)
{
    keel_dlpack_export_params_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.data = data;
    p.ndim = ndim;
    p.shape = shape;
    p.strides = strides;
    p.dtype = f32_type();
    p.release = count_release;
    p.user_data = &releases;
    return p;
}

/* A tensor of another library: host memory this test owns. */
static DLManagedTensor foreign_tensor(void *data, DLDeviceType type, int32_t ndim, int64_t *shape, int64_t *strides)
{
    DLManagedTensor m;
    memset(&m, 0, sizeof m);
    m.dl_tensor.data = data;
    m.dl_tensor.device.device_type = type;
    m.dl_tensor.device.device_id = 0;
    m.dl_tensor.ndim = ndim;
    m.dl_tensor.dtype = f32_type();
    m.dl_tensor.shape = shape;
    m.dl_tensor.strides = strides;
    m.manager_ctx = &deletes;
    m.deleter = count_delete;
    return m;
}

static keel_status_t alloc_kind(keel_device_t *dev, keel_memory_kind_t kind, size_t bytes, void **p)
{
    switch (kind) {
    case KEEL_MEMORY_PINNED: return keel_malloc_host(dev, bytes, p);
    case KEEL_MEMORY_MANAGED: return keel_malloc_managed(dev, bytes, p);
    default: return keel_malloc(dev, bytes, p);
    }
}

KT_DEVICE_TEST(export_then_import_keeps_the_address_and_calls_release_once)
{
    static const keel_memory_kind_t kinds[] = {KEEL_MEMORY_DEVICE, KEEL_MEMORY_PINNED, KEEL_MEMORY_MANAGED};
    enum { ROWS = 6, COLS = 40, N = ROWS * COLS };
    for (size_t k = 0; k < 3; k++) {
        void *base = NULL;
        keel_status_t st = alloc_kind(dev, kinds[k], (N + 8) * sizeof(float), &base);
        if (kinds[k] == KEEL_MEMORY_MANAGED && kt_unsupported(dev, KT_MANAGED_MEMORY, st))
            continue;
        KT_OK(st);
        float host[N], out[N];
        double ref[N];
        kt_fill_random_f32(host, N);
        float *view = (float *)base + 8; /* not the allocation's start: byte_offset 32 */
        KT_OK(keel_memcpy(view, host, sizeof host));

        int64_t shape[2] = {ROWS, COLS};
        keel_dlpack_export_params_t p = export_params(view, 2, shape, NULL);
        DLManagedTensor *m = NULL;
        releases = 0;
        KT_OK(keel_dlpack_export(&p, &m));
        ck_assert_ptr_eq(m->dl_tensor.data, base);
        ck_assert_int_eq(m->dl_tensor.byte_offset, 8 * sizeof(float));
        DLDevice want = expected_device(dev, kinds[k]);
        ck_assert_int_eq(m->dl_tensor.device.device_type, want.device_type);
        ck_assert_int_eq(m->dl_tensor.device.device_id, want.device_id);
        ck_assert_int_eq(m->dl_tensor.ndim, 2);
        ck_assert_int_eq(m->dl_tensor.shape[0], ROWS);
        ck_assert_int_eq(m->dl_tensor.shape[1], COLS);
        ck_assert_int_eq(m->dl_tensor.strides[0], COLS);
        ck_assert_int_eq(m->dl_tensor.strides[1], 1);
        DLDevice dd;
        KT_OK(keel_dlpack_device(dev, kinds[k], &dd));
        ck_assert_int_eq(dd.device_type, want.device_type);

        /* Back into Keel: the same memory, usable by an operation. */
        const keel_tensor_t *t = NULL;
        KT_OK(keel_dlpack_import(dev, m, &t));
        ck_assert_ptr_eq(t->data, view);
        ck_assert_int_eq(t->kind, kinds[k]);
        ck_assert_ptr_eq(t->device, dev);
        ck_assert_int_eq(t->strides[0], COLS);
        keel_stream_t *s = NULL;
        KT_OK(keel_device_default_stream(dev, &s));
        KT_OK(keel_unary(s, KEEL_UNARY_EXP, KEEL_F32, N, t->data, t->data));
        KT_OK(keel_stream_synchronize(s));
        KT_OK(keel_memcpy(out, view, sizeof out));
        for (int i = 0; i < N; i++)
            ref[i] = exp((double)host[i]);
        ck_assert_int_eq(kt_check_f32(out, ref, N, 1e-5, 1e-6), -1);

        ck_assert_int_eq(releases, 0);
        KT_OK(keel_dlpack_release(t)); /* runs the export's deleter */
        ck_assert_int_eq(releases, 1);
        KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_dlpack_release(t));
        KT_DETAIL_HAS("destroyed");
        ck_assert_int_eq(releases, 1);
        /* The allocation is still Keel's. */
        KT_OK(keel_free(base));
    }
}

KT_DEVICE_TEST(export_of_a_strided_view_and_its_bounds)
{
    float *p = NULL;
    KT_OK(keel_malloc(dev, 100 * sizeof(float), (void **)&p));
    /* Columns 2..4 of a 10 x 10 matrix, transposed: shape 3 x 10, strides 1, 10. */
    int64_t shape[2] = {3, 10}, strides[2] = {1, 10};
    keel_dlpack_export_params_t ep = export_params(p + 2, 2, shape, strides);
    ep.release = NULL;
    DLManagedTensor *m = NULL;
    KT_OK(keel_dlpack_export(&ep, &m));
    ck_assert_int_eq(m->dl_tensor.strides[0], 1);
    ck_assert_int_eq(m->dl_tensor.strides[1], 10);
    ck_assert_int_eq(m->dl_tensor.byte_offset, 2 * sizeof(float));
    m->deleter(m); /* no release function: only Keel's block goes */
    /* A negative stride that reaches before the allocation, and a view past its end. */
    int64_t neg[1] = {-1}, one[1] = {3};
    ep = export_params(p + 1, 1, one, neg);
    m = KT_SENTINEL;
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_dlpack_export(&ep, &m));
    KT_DETAIL_HAS("outside it");
    ck_assert_ptr_eq(m, KT_SENTINEL);
    ep = export_params(p + 2, 1, one, neg); /* elements 2, 1, 0: inside */
    releases = 0;
    KT_OK(keel_dlpack_export(&ep, &m));
    m->deleter(m);
    ck_assert_int_eq(releases, 1);
    int64_t big[1] = {101};
    ep = export_params(p, 1, big, NULL);
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_dlpack_export(&ep, &m));
    /* An empty view reaches nothing; a scalar is one element. */
    int64_t empty[2] = {0, 1000};
    ep = export_params(p, 2, empty, NULL);
    ep.release = NULL;
    KT_OK(keel_dlpack_export(&ep, &m));
    m->deleter(m);
    ep = export_params(p + 99, 0, NULL, NULL);
    ep.release = NULL;
    KT_OK(keel_dlpack_export(&ep, &m));
    ck_assert_ptr_null(m->dl_tensor.shape);
    m->deleter(m);
    KT_OK(keel_free(p));
}

KT_DEVICE_TEST(export_refuses_bad_input)
{
    float *p = NULL;
    KT_OK(keel_malloc(dev, 64 * sizeof(float), (void **)&p));
    int64_t shape[1] = {4}, neg[1] = {-4};
    DLManagedTensor *m = KT_SENTINEL;
    keel_dlpack_export_params_t ep = export_params(p, 1, shape, NULL);
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_dlpack_export(NULL, &m));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_dlpack_export(&ep, NULL));
    ep.struct_size = 8;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_dlpack_export(&ep, &m));
    KT_DETAIL_HAS("struct_size");
    ep = export_params(p, -1, shape, NULL);
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_dlpack_export(&ep, &m));
    ep = export_params(p, KEEL_DLPACK_MAX_NDIM + 1, shape, NULL);
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_dlpack_export(&ep, &m));
    ep = export_params(p, 1, NULL, NULL);
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_dlpack_export(&ep, &m));
    ep = export_params(p, 1, neg, NULL);
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_dlpack_export(&ep, &m));
    KT_DETAIL_HAS("negative");
    ep = export_params(p, 1, shape, NULL);
    ep.dtype.bits = 12;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_dlpack_export(&ep, &m));
    ep.dtype = f32_type();
    ep.dtype.lanes = 0;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_dlpack_export(&ep, &m));
    ep = export_params(NULL, 1, shape, NULL);
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_dlpack_export(&ep, &m));
    float host[4];
    ep = export_params(host, 1, shape, NULL);
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_dlpack_export(&ep, &m));
    KT_DETAIL_HAS("no live Keel allocation");
    int64_t huge[2] = {INT64_MAX / 2, 4};
    ep = export_params(p, 2, huge, NULL);
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_dlpack_export(&ep, &m));
    KT_DETAIL_HAS("overflows");
    ck_assert_ptr_eq(m, KT_SENTINEL);
    KT_OK(keel_free(p));
    /* A freed block is no Keel allocation any more. */
    ep = export_params(p, 1, shape, NULL);
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_dlpack_export(&ep, &m));
}

/* Host memory of another library, used by the operations of a CPU device
 * in place; a GPU device refuses pageable host memory. */
KT_DEVICE_TEST(foreign_host_memory_is_used_in_place)
{
    enum { ROWS = 5, COLS = 33, N = ROWS * COLS };
    float *a = malloc(N * sizeof(float)), *b = malloc(N * sizeof(float));
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    kt_fill_random_f32(a, N);
    kt_fill_random_f32(b, N);
    int64_t shape[2] = {ROWS, COLS};
    DLManagedTensor ma = foreign_tensor(a, kDLCPU, 2, shape, NULL);
    DLManagedTensor mb = foreign_tensor(b, kDLCPU, 2, shape, NULL);
    const keel_tensor_t *ta = KT_SENTINEL, *tb = NULL;
    deletes = 0;
    if (!kt_is_cpu(dev)) {
        KT_FAIL(KEEL_ERROR_DEVICE_MISMATCH, keel_dlpack_import(dev, &ma, &ta));
        KT_DETAIL_HAS("kDLCPU");
        ck_assert_ptr_eq(ta, KT_SENTINEL);
        ck_assert_int_eq(deletes, 0);
        free(a);
        free(b);
        return;
    }
    KT_OK(keel_dlpack_import(dev, &ma, &ta));
    KT_OK(keel_dlpack_import(dev, &mb, &tb));
    ck_assert_ptr_eq(ta->data, a);
    ck_assert_int_eq(ta->kind, KEEL_MEMORY_DEVICE);
    keel_pointer_info_t info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    KT_OK(keel_pointer_get_info(a + 7, &info));
    ck_assert_ptr_eq(info.base, a);
    ck_assert_int_eq(info.size, N * sizeof(float));
    ck_assert_ptr_eq(info.device, dev);

    float *y = NULL, out[N];
    double ref[N];
    KT_OK(keel_malloc(dev, sizeof out, (void **)&y));
    keel_stream_t *s = NULL;
    KT_OK(keel_device_default_stream(dev, &s));
    KT_OK(keel_binary(s, KEEL_BINARY_ADD, KEEL_F32, ROWS, COLS, 2.0, ta->data, COLS, -0.5, tb->data, COLS,
                      KEEL_BROADCAST_NONE, y, COLS));
    KT_OK(keel_stream_synchronize(s));
    KT_OK(keel_memcpy(out, y, sizeof out));
    for (int i = 0; i < N; i++)
        ref[i] = 2.0 * a[i] - 0.5 * b[i];
    ck_assert_int_eq(kt_check_f32(out, ref, N, 1e-6, 1e-6), -1);
    /* The operations write it in place too. */
    KT_OK(keel_unary(s, KEEL_UNARY_NEG, KEEL_F32, N, y, ta->data));
    KT_OK(keel_stream_synchronize(s));
    for (int i = 0; i < N; i++)
        ck_assert_float_eq(a[i], -out[i]);

    /* Keel does not free it, and refuses operations past its end. */
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_free(a));
    KT_DETAIL_HAS("DLPack");
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_unary(s, KEEL_UNARY_NEG, KEEL_F32, N + 1, ta->data, y));
    ck_assert_int_eq(deletes, 0);
    KT_OK(keel_dlpack_release(ta));
    KT_OK(keel_dlpack_release(tb));
    ck_assert_int_eq(deletes, 2);
    /* Released: plain host memory again. */
    KT_OK(keel_pointer_get_info(a, &info));
    ck_assert_int_eq(info.kind, KEEL_MEMORY_HOST);
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_unary(s, KEEL_UNARY_NEG, KEEL_F32, N, a, y));
    KT_OK(keel_free(y));
    free(a);
    free(b);
}

/* Two tensors of one buffer (as two views of one PyTorch storage): each
 * import holds the memory; the second reaches further than the first. */
KT_DEVICE_TEST(overlapping_imports_share_the_memory)
{
    if (!kt_is_cpu(dev))
        return; /* needs device memory Keel did not allocate */
    enum { N = 256 };
    float *buf = malloc(N * sizeof(float));
    ck_assert_ptr_nonnull(buf);
    kt_fill_random_f32(buf, N);
    int64_t s1[1] = {100}, s2[1] = {200}, s3[1] = {50};
    DLManagedTensor m1 = foreign_tensor(buf + 20, kDLCPU, 1, s1, NULL);
    DLManagedTensor m2 = foreign_tensor(buf, kDLCPU, 1, s2, NULL);
    DLManagedTensor m3 = foreign_tensor(buf + 30, kDLCPU, 1, s3, NULL);
    const keel_tensor_t *t1, *t2, *t3;
    deletes = 0;
    KT_OK(keel_dlpack_import(dev, &m1, &t1));
    KT_OK(keel_dlpack_import(dev, &m2, &t2)); /* grows the entry to [0, 200) */
    KT_OK(keel_dlpack_import(dev, &m3, &t3)); /* inside it */
    keel_pointer_info_t info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    KT_OK(keel_pointer_get_info(buf + 150, &info));
    ck_assert_ptr_eq(info.base, buf);
    ck_assert_int_eq(info.size, 200 * sizeof(float));
    KT_OK(keel_dlpack_release(t2));
    KT_OK(keel_dlpack_release(t1));
    ck_assert_int_eq(deletes, 2);
    /* t3 still holds it: an operation on it runs. */
    keel_stream_t *s;
    KT_OK(keel_device_default_stream(dev, &s));
    float before = buf[30];
    KT_OK(keel_unary(s, KEEL_UNARY_NEG, KEEL_F32, 50, t3->data, t3->data));
    KT_OK(keel_stream_synchronize(s));
    ck_assert_float_eq(buf[30], -before);
    KT_OK(keel_dlpack_release(t3));
    ck_assert_int_eq(deletes, 3);
    KT_OK(keel_pointer_get_info(buf + 30, &info));
    ck_assert_int_eq(info.kind, KEEL_MEMORY_HOST);
    free(buf);
}

KT_DEVICE_TEST(import_refuses_bad_input_and_keeps_the_deleter)
{
    float *p = NULL;
    KT_OK(keel_malloc(dev, 1024, (void **)&p));
    DLDevice mine;
    KT_OK(keel_dlpack_device(dev, KEEL_MEMORY_DEVICE, &mine));
    int64_t shape[1] = {16}, neg[1] = {-1}, big[1] = {1000};
    const keel_tensor_t *t = KT_SENTINEL;
    deletes = 0;

    DLManagedTensor m = foreign_tensor(p, mine.device_type, 1, shape, NULL);
    m.dl_tensor.device.device_id = mine.device_id;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_dlpack_import(dev, NULL, &t));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_dlpack_import(dev, &m, NULL));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_dlpack_import(NULL, &m, &t));
    m.dl_tensor.device.device_type = kDLVulkan;
    KT_FAIL(KEEL_ERROR_DEVICE_MISMATCH, keel_dlpack_import(dev, &m, &t));
    KT_DETAIL_HAS("kDLVulkan");
    KT_DETAIL_HAS(keel_device_name(dev));
    if (!kt_is_cpu(dev)) {
        m.dl_tensor.device = mine;
        m.dl_tensor.device.device_id = mine.device_id + 1;
        KT_FAIL(KEEL_ERROR_DEVICE_MISMATCH, keel_dlpack_import(dev, &m, &t));
    }
    m.dl_tensor.device = mine;
    m.dl_tensor.ndim = KEEL_DLPACK_MAX_NDIM + 1;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_dlpack_import(dev, &m, &t));
    m.dl_tensor.ndim = 1;
    m.dl_tensor.shape = neg;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_dlpack_import(dev, &m, &t));
    m.dl_tensor.shape = shape;
    m.dl_tensor.dtype.bits = 0;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_dlpack_import(dev, &m, &t));
    m.dl_tensor.dtype = f32_type();
    m.dl_tensor.data = NULL;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_dlpack_import(dev, &m, &t));
    KT_DETAIL_HAS("NULL");
    /* Inside a Keel allocation but reaching past its end. */
    m.dl_tensor.data = p;
    m.dl_tensor.byte_offset = 1024 - 8;
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_dlpack_import(dev, &m, &t));
    KT_DETAIL_HAS("without lying inside it");
    m.dl_tensor.byte_offset = 0;
    m.dl_tensor.shape = big;
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_dlpack_import(dev, &m, &t));
    ck_assert_ptr_eq(t, KT_SENTINEL);
    ck_assert_int_eq(deletes, 0);
    /* An empty tensor needs no memory. */
    int64_t zero[1] = {0};
    m.dl_tensor.shape = zero;
    m.dl_tensor.data = NULL;
    KT_OK(keel_dlpack_import(dev, &m, &t));
    ck_assert_int_eq(t->shape[0], 0);
    KT_OK(keel_dlpack_release(t));
    ck_assert_int_eq(deletes, 1);
    /* Not imported tensors. */
    KT_OK(keel_dlpack_release(NULL));
    static union { max_align_t align; char bytes[256]; } junk;
    memset(junk.bytes, 0x33, sizeof junk.bytes);
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_dlpack_release((const keel_tensor_t *)(junk.bytes + 128)));
    KT_OK(keel_free(p));
}

KT_DEVICE_TEST(native_stream_handles)
{
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    uintptr_t h = 0x1234;
    if (kt_is_cpu(dev)) {
        KT_FAIL(KEEL_ERROR_NOT_SUPPORTED, keel_stream_get_native(s, &h));
        ck_assert_uint_eq(h, 0x1234);
        KT_FAIL(KEEL_ERROR_NOT_SUPPORTED, keel_stream_order_native(s, 1));
        KT_DETAIL_HAS("cpu");
    } else {
        KT_OK(keel_stream_get_native(s, &h));
        ck_assert_uint_ne(h, 0);
        keel_stream_t *other = NULL;
        uintptr_t oh = 0;
        KT_OK(keel_stream_create(dev, 0, 0, &other));
        KT_OK(keel_stream_get_native(other, &oh));
        ck_assert_uint_ne(h, oh);
        KT_OK(keel_stream_order_native(s, oh));
        KT_OK(keel_stream_order_native(s, 1)); /* the legacy default stream (CUDA) */
        KT_OK(keel_stream_synchronize(other));
        KT_OK(keel_stream_destroy(other));
    }
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_stream_get_native(s, NULL));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_get_native(NULL, &h));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_order_native(NULL, 1));
    KT_OK(keel_stream_destroy(s));
}

START_TEST(dtypes_both_ways)
{
    static const keel_dtype_t all[] = {KEEL_F32, KEEL_F64, KEEL_F16, KEEL_BF16};
    for (size_t i = 0; i < 4; i++) {
        DLDataType t;
        keel_dtype_t back = 0;
        KT_OK(keel_dlpack_dtype(all[i], &t));
        ck_assert_int_eq(t.bits, 8 * keel_dtype_size(all[i]));
        ck_assert_int_eq(t.lanes, 1);
        KT_OK(keel_dtype_from_dlpack(t, &back));
        ck_assert_int_eq(back, all[i]);
    }
    DLDataType i32 = {.code = kDLInt, .bits = 32, .lanes = 1}, vec = {.code = kDLFloat, .bits = 32, .lanes = 4}, t;
    keel_dtype_t d = KEEL_F64;
    KT_FAIL(KEEL_ERROR_NOT_SUPPORTED, keel_dtype_from_dlpack(i32, &d));
    KT_FAIL(KEEL_ERROR_NOT_SUPPORTED, keel_dtype_from_dlpack(vec, &d));
    ck_assert_int_eq(d, KEEL_F64);
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_dlpack_dtype((keel_dtype_t)99, &t));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_dtype_from_dlpack(i32, NULL));
    keel_device_t *dev = kt_device(0);
    DLDevice dd;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_dlpack_device(dev, KEEL_MEMORY_HOST, &dd));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_dlpack_device(NULL, KEEL_MEMORY_DEVICE, &dd));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("dlpack");
    TCase *tc = kt_tcase_create("dlpack", 60);
    kt_add_device_test(tc, export_then_import_keeps_the_address_and_calls_release_once);
    kt_add_device_test(tc, export_of_a_strided_view_and_its_bounds);
    kt_add_device_test(tc, export_refuses_bad_input);
    kt_add_device_test(tc, foreign_host_memory_is_used_in_place);
    kt_add_device_test(tc, overlapping_imports_share_the_memory);
    kt_add_device_test(tc, import_refuses_bad_input_and_keeps_the_deleter);
    kt_add_device_test(tc, native_stream_handles);
    tcase_add_test(tc, dtypes_both_ways);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return kt_main(argc, argv, suite(), 1, 1);
}
