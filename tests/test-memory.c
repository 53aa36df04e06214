/* SPDX-License-Identifier: MIT */
/* test-memory: allocation of every kind, copies in every direction (sync and
 * stream-ordered), memset, the pointer registry, and the error paths of every
 * function of keel/memory.h. */
#include <stdint.h>
#include <stdlib.h>
#include "fixture.h"

typedef keel_status_t (*alloc_fn)(keel_device_t *, size_t, void **);

static keel_status_t alloc_kind(keel_device_t *dev, keel_memory_kind_t kind, size_t bytes, void **p)
{
    switch (kind) {
    case KEEL_MEMORY_DEVICE:
        return keel_malloc(dev, bytes, p);
    case KEEL_MEMORY_PINNED:
        return keel_malloc_host(dev, bytes, p);
    case KEEL_MEMORY_MANAGED:
        return keel_malloc_managed(dev, bytes, p);
    default:
        return KEEL_ERROR_INVALID_ARGUMENT;
    }
}

static int has_managed(keel_device_t *dev)
{
    keel_device_properties_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    KT_OK(keel_device_get_properties(dev, &p));
    return p.managed_memory;
}

static const keel_memory_kind_t kinds[] = {KEEL_MEMORY_DEVICE, KEEL_MEMORY_PINNED, KEEL_MEMORY_MANAGED};

static void check_info(const void *ptr, keel_memory_kind_t kind, keel_device_t *dev, const void *base, size_t size)
{
    keel_pointer_info_t info;
    memset(&info, 0x5A, sizeof info);
    info.struct_size = sizeof info;
    KT_OK(keel_pointer_get_info(ptr, &info));
    ck_assert_msg(info.kind == kind, "%spointer %p: kind %d, expected %d", kt_where(), ptr, info.kind, kind);
    ck_assert_ptr_eq(info.device, dev);
    ck_assert_ptr_eq(info.base, base);
    ck_assert_int_eq(info.size, size);
    ck_assert_int_eq(info.offset, base ? (size_t)((const char *)ptr - (const char *)base) : 0);
}

KT_DEVICE_TEST(alloc_every_kind_is_registered_and_freed)
{
    for (size_t k = 0; k < 3; k++) {
        void *p = NULL;
        keel_status_t s = alloc_kind(dev, kinds[k], 4096 + 17, &p);
        if (kinds[k] == KEEL_MEMORY_MANAGED && !has_managed(dev)) {
            ck_assert_int_eq(s, KEEL_ERROR_NOT_SUPPORTED);
            continue;
        }
        ck_assert_msg(s == KEEL_OK, "%skind %d: %s (%s)", kt_where(), kinds[k], keel_status_name(s), keel_last_error());
        ck_assert_ptr_nonnull(p);
        check_info(p, kinds[k], dev, p, 4096 + 17);
        check_info((char *)p + 4096, kinds[k], dev, p, 4096 + 17);
        check_info((char *)p + 4096 + 16, kinds[k], dev, p, 4096 + 17);
        /* One past the end is not in it. */
        check_info((char *)p + 4096 + 17, KEEL_MEMORY_HOST, NULL, NULL, 0);
        KT_OK(keel_free(p));
        check_info(p, KEEL_MEMORY_HOST, NULL, NULL, 0);
    }
}

KT_DEVICE_TEST(alloc_rejects_bad_input_and_leaves_out_untouched)
{
    for (size_t k = 0; k < 3; k++) {
        if (kinds[k] == KEEL_MEMORY_MANAGED && !has_managed(dev))
            continue;
        void *p = KT_SENTINEL;
        KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, alloc_kind(dev, kinds[k], 0, &p));
        ck_assert_ptr_eq(p, KT_SENTINEL);
        KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, alloc_kind(dev, kinds[k], 64, NULL));
        KT_FAIL(KEEL_ERROR_INVALID_HANDLE, alloc_kind(NULL, kinds[k], 64, &p));
        ck_assert_ptr_eq(p, KT_SENTINEL);
    }
}

KT_DEVICE_TEST(huge_alloc_is_out_of_memory_and_recoverable)
{
    void *p = KT_SENTINEL;
    KT_FAIL(KEEL_ERROR_OUT_OF_MEMORY, keel_malloc(dev, SIZE_MAX / 2, &p));
    ck_assert_ptr_eq(p, KT_SENTINEL);
    KT_OK(keel_malloc(dev, 1 << 20, &p));
    ck_assert_ptr_ne(p, KT_SENTINEL);
    KT_OK(keel_free(p));
    p = KT_SENTINEL;
    KT_FAIL(KEEL_ERROR_OUT_OF_MEMORY, keel_malloc_host(dev, SIZE_MAX / 2, &p));
    ck_assert_ptr_eq(p, KT_SENTINEL);
}

/* keel_malloc_pinned is keel_malloc_host under the name of what it gives;
 * KEEL_MEMORY_UNKNOWN is the kind of memory Keel does not know. */
KT_DEVICE_TEST(pinned_names_and_unknown_memory)
{
    ck_assert_int_eq(KEEL_MEMORY_UNKNOWN, KEEL_MEMORY_HOST);
    enum { N = 4096 + 13 };
    unsigned char *src = malloc(N), *back = malloc(N);
    void *p = KT_SENTINEL;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_malloc_pinned(dev, 0, &p));
    ck_assert_msg(strstr(keel_last_error(), "keel_malloc_pinned") != NULL, "the message names the call: %s",
                  keel_last_error());
    ck_assert_ptr_eq(p, KT_SENTINEL);
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_malloc_pinned(NULL, 64, &p));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_malloc_pinned(dev, 64, NULL));
    KT_FAIL(KEEL_ERROR_OUT_OF_MEMORY, keel_malloc_pinned(dev, SIZE_MAX / 2, &p));
    ck_assert_ptr_eq(p, KT_SENTINEL);
    KT_OK(keel_malloc_pinned(dev, N, &p));
    check_info(p, KEEL_MEMORY_PINNED, dev, p, N);
    /* it behaves as pinned memory: a round trip through the device */
    void *d = NULL;
    KT_OK(keel_malloc(dev, N, &d));
    kt_fill_random_bytes(src, N);
    memcpy(p, src, N);
    KT_OK(keel_memcpy(d, p, N));
    kt_poison(p, N);
    KT_OK(keel_memcpy(p, d, N));
    ck_assert_msg(memcmp(p, src, N) == 0, "the round trip through pinned memory changed the data");
    KT_OK(keel_free(d));
    KT_OK(keel_free(p));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_free(p));
    keel_pointer_info_t info;
    memset(&info, 0x5A, sizeof info);
    info.struct_size = sizeof info;
    KT_OK(keel_pointer_get_info(back, &info));
    ck_assert_int_eq(info.kind, KEEL_MEMORY_UNKNOWN);
    free(src);
    free(back);
}

/* Every address inside an allocation finds it, whatever its size (the
 * registry files allocations by size class), and the address just past its
 * end does not. */
KT_DEVICE_TEST(interior_pointers_of_every_size_find_their_allocation)
{
    static const size_t sizes[] = {1, 7, 63, 64, 65, 100, 255, 256, 257, 4095, 4096, 4097, 65539, (1u << 20) + 5};
    enum { NS = sizeof sizes / sizeof sizes[0], COPIES = 3 };
    void *p[NS][COPIES];
    for (int c = 0; c < COPIES; c++)
        for (int i = 0; i < NS; i++)
            KT_OK(keel_malloc(dev, sizes[i], &p[i][c]));
    for (int c = 0; c < COPIES; c++)
        for (int i = 0; i < NS; i++) {
            char *b = p[i][c];
            size_t n = sizes[i];
            size_t offs[] = {0, n - 1, n / 2, (size_t)(kt_rand64() % n), (size_t)(kt_rand64() % n)};
            for (size_t k = 0; k < sizeof offs / sizeof offs[0]; k++)
                check_info(b + offs[k], KEEL_MEMORY_DEVICE, dev, b, n);
            keel_pointer_info_t info;
            memset(&info, 0, sizeof info);
            info.struct_size = sizeof info;
            KT_OK(keel_pointer_get_info(b + n, &info));
            ck_assert_msg(info.base != b, "%sthe end of %zu bytes at %p is reported inside them", kt_where(), n,
                          (void *)b);
        }
    for (int c = 0; c < COPIES; c++)
        for (int i = 0; i < NS; i++)
            KT_OK(keel_free(p[i][c]));
}

KT_DEVICE_TEST(free_rejects_unknown_interior_and_double_frees)
{
    KT_OK(keel_free(NULL));
    char stack[64];
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_free(stack));
    void *heap = malloc(64);
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_free(heap));
    free(heap);
    void *p = NULL;
    KT_OK(keel_malloc(dev, 1024, &p));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_free((char *)p + 1));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_free((char *)p + 512));
    /* The refused frees left it alive. */
    check_info(p, KEEL_MEMORY_DEVICE, dev, p, 1024);
    KT_OK(keel_free(p));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_free(p));
    void *h = NULL;
    KT_OK(keel_malloc_host(dev, 100, &h));
    KT_OK(keel_free(h));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_free(h));
}

/* Round trip host -> A -> B -> host with random data, for each pair of kinds
 * and at odd offsets, poisoning the destination first. */
KT_DEVICE_TEST(copies_between_every_kind_round_trip)
{
    enum { N = 3 * 4096 + 7 };
    unsigned char *src = malloc(N), *dst = malloc(N);
    int nk = has_managed(dev) ? 3 : 2;
    for (int a = 0; a < nk; a++) {
        for (int b = 0; b < nk; b++) {
            void *pa = NULL, *pb = NULL;
            KT_OK(alloc_kind(dev, kinds[a], N + 64, &pa));
            KT_OK(alloc_kind(dev, kinds[b], N + 64, &pb));
            kt_fill_random_bytes(src, N);
            kt_poison(dst, N);
            KT_OK(keel_memset(pa, KT_POISON_BYTE, N + 64));
            KT_OK(keel_memset(pb, KT_POISON_BYTE, N + 64));
            KT_OK(keel_memcpy((char *)pa + 3, src, N));
            KT_OK(keel_memcpy((char *)pb + 61, (char *)pa + 3, N));
            KT_OK(keel_memcpy(dst, (char *)pb + 61, N));
            for (size_t i = 0; i < N; i++)
                ck_assert_msg(dst[i] == src[i], "%skinds %d->%d: byte %zu is %#x, expected %#x", kt_where(),
                              kinds[a], kinds[b], i, dst[i], src[i]);
            /* The bytes around the copy stay as they were. */
            unsigned char edge[3];
            KT_OK(keel_memcpy(edge, pb, 3));
            ck_assert_int_eq(edge[0], KT_POISON_BYTE);
            ck_assert_int_eq(edge[2], KT_POISON_BYTE);
            KT_OK(keel_memcpy(edge, (char *)pb + 61 + N, 3));
            ck_assert_int_eq(edge[0], KT_POISON_BYTE);
            KT_OK(keel_free(pa));
            KT_OK(keel_free(pb));
        }
    }
    /* Host to host through keel_memcpy is a plain copy. */
    kt_fill_random_bytes(src, N);
    kt_poison(dst, N);
    KT_OK(keel_memcpy(dst, src, N));
    ck_assert_msg(memcmp(dst, src, N) == 0, "host to host copy differs");
    free(src);
    free(dst);
}

KT_DEVICE_TEST(async_copies_and_memset_on_a_stream)
{
    enum { N = 1 << 16 };
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    unsigned char *src = malloc(N), *dst = malloc(N);
    void *pinned = NULL, *d1 = NULL, *d2 = NULL;
    KT_OK(keel_malloc_host(dev, N, &pinned));
    KT_OK(keel_malloc(dev, N, &d1));
    KT_OK(keel_malloc(dev, N, &d2));
    kt_fill_random_bytes(src, N);
    kt_poison(dst, N);
    /* pageable -> device -> device -> pinned -> pageable, all in one stream's order */
    KT_OK(keel_memset_async(d2, 0x11, N, s));
    KT_OK(keel_memcpy_async(d1, src, N, s));
    KT_OK(keel_memcpy_async(d2, d1, N / 2, s));
    KT_OK(keel_memset_async((char *)d2 + N / 2 + 100, 0x3C, 50, s));
    KT_OK(keel_memcpy_async(pinned, d2, N, s));
    KT_OK(keel_stream_synchronize(s));
    memcpy(dst, pinned, N);
    /* Host to host on a stream works too, in the stream's order. */
    unsigned char *h2 = malloc(N);
    kt_poison(h2, N);
    KT_OK(keel_memcpy_async(h2, dst, N, s));
    KT_OK(keel_stream_synchronize(s));
    ck_assert_msg(memcmp(h2, dst, N) == 0, "%shost-to-host async copy differs", kt_where());
    free(h2);
    /* Zero bytes is a no-op, as in CUDA, even at the end of an allocation. */
    KT_OK(keel_memcpy((char *)d1 + N, src, 0));
    KT_OK(keel_memcpy_async(d1, src, 0, s));
    KT_OK(keel_memset(d1, 0, 0));
    for (size_t i = 0; i < N; i++) {
        unsigned char want = i < N / 2 ? src[i] : (i >= N / 2 + 100 && i < N / 2 + 150) ? 0x3C : 0x11;
        ck_assert_msg(dst[i] == want, "%sbyte %zu is %#x, expected %#x", kt_where(), i, dst[i], want);
    }
    KT_OK(keel_free(pinned));
    KT_OK(keel_free(d1));
    KT_OK(keel_free(d2));
    KT_OK(keel_stream_destroy(s));
    free(src);
    free(dst);
}

KT_DEVICE_TEST(memset_sets_exactly_the_range)
{
    enum { N = 10007 };
    unsigned char *host = malloc(N);
    void *d = NULL;
    KT_OK(keel_malloc(dev, N, &d));
    KT_OK(keel_memset(d, 0x77, N));
    KT_OK(keel_memset((char *)d + 5, 0x100 + 0x2B, 1000)); /* only the low byte counts */
    KT_OK(keel_memcpy(host, d, N));
    for (size_t i = 0; i < N; i++) {
        unsigned char want = (i >= 5 && i < 1005) ? 0x2B : 0x77;
        ck_assert_msg(host[i] == want, "%sbyte %zu is %#x, expected %#x", kt_where(), i, host[i], want);
    }
    KT_OK(keel_free(d));
    free(host);
}

KT_DEVICE_TEST(out_of_range_copies_are_refused_with_the_sizes)
{
    void *d = NULL;
    KT_OK(keel_malloc(dev, 4096, &d));
    unsigned char *host = malloc(8192);
    kt_fill_random_bytes(host, 8192);
    KT_OK(keel_memset(d, KT_POISON_BYTE, 4096));
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_memcpy(d, host, 8192));
    KT_DETAIL_HAS("8192");
    KT_DETAIL_HAS("4096");
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_memcpy(host, d, 4097));
    KT_DETAIL_HAS("4097");
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_memcpy((char *)d + 4000, host, 97));
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_memcpy(host, (char *)d + 4095, 2));
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_memset((char *)d + 1, 0, 4096));
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_memcpy((char *)d + 8, (char *)d, 4090));
    /* A length that wraps around the address space is still refused. */
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_memcpy((char *)d + 16, host, SIZE_MAX - 8));
    keel_stream_t *s = NULL;
    KT_OK(keel_device_default_stream(dev, &s));
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_memcpy_async(d, host, 4097, s));
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_memset_async(d, 0, 5000, s));
    KT_OK(keel_stream_synchronize(s));
    /* None of the refused calls wrote anything. */
    unsigned char back[4096];
    KT_OK(keel_memcpy(back, d, 4096));
    for (size_t i = 0; i < 4096; i++)
        ck_assert_msg(back[i] == KT_POISON_BYTE, "%sbyte %zu was written by a refused call", kt_where(), i);
    /* Exactly to the end is fine. */
    KT_OK(keel_memcpy((char *)d + 4000, host, 96));
    KT_OK(keel_free(d));
    free(host);
}

KT_DEVICE_TEST(memset_of_unknown_or_freed_memory_is_refused)
{
    char stack[64];
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memset(stack, 0, sizeof stack));
    keel_stream_t *s = NULL;
    KT_OK(keel_device_default_stream(dev, &s));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memset_async(stack, 0, sizeof stack, s));
    void *d = NULL;
    KT_OK(keel_malloc(dev, 64, &d));
    KT_OK(keel_free(d));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memset(d, 0, 64));
}

KT_DEVICE_TEST(copy_and_memset_reject_bad_arguments)
{
    void *d = NULL;
    KT_OK(keel_malloc(dev, 256, &d));
    unsigned char host[256];
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memcpy(NULL, d, 16));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memcpy(d, NULL, 16));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memcpy(host, NULL, 0));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memset(NULL, 0, 16));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memcpy_async(NULL, d, 16, s));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memset_async(NULL, 0, 16, s));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_memcpy_async(host, d, 16, NULL));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_memset_async(d, 0, 16, NULL));
    keel_stream_t *dead = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &dead));
    KT_OK(keel_stream_destroy(dead));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_memcpy_async(host, d, 16, dead));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_memset_async(d, 0, 16, dead));
    void *p = KT_SENTINEL;
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_malloc_async(dead, 64, &p));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_malloc_async(NULL, 64, &p));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_malloc_async(s, 0, &p));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_malloc_async(s, 64, NULL));
    ck_assert_ptr_eq(p, KT_SENTINEL);
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_free_async(d, NULL));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_free_async(d, dead));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_free_async(host, s));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_free_async((char *)d + 8, s));
    KT_OK(keel_stream_synchronize(s));
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_free(d));
}

KT_DEVICE_TEST(pointer_info_of_host_memory_and_bad_arguments)
{
    char stack[16];
    check_info(stack, KEEL_MEMORY_HOST, NULL, NULL, 0);
    check_info(NULL, KEEL_MEMORY_HOST, NULL, NULL, 0);
    keel_pointer_info_t info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_pointer_get_info(stack, NULL));
    /* A shorter struct: fields past its size stay untouched. */
    void *d = NULL;
    KT_OK(keel_malloc(dev, 128, &d));
    memset(&info, 0x5A, sizeof info);
    info.struct_size = offsetof(keel_pointer_info_t, base);
    KT_OK(keel_pointer_get_info(d, &info));
    ck_assert_int_eq(info.kind, KEEL_MEMORY_DEVICE);
    ck_assert_ptr_eq(info.device, dev);
    const unsigned char *b = (const unsigned char *)&info;
    for (size_t i = offsetof(keel_pointer_info_t, base); i < sizeof info; i++)
        ck_assert_msg(b[i] == 0x5A, "byte %zu past struct_size was written", i);
    memset(&info, 0x5A, sizeof info);
    info.struct_size = 0;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_pointer_get_info(d, &info));
    ck_assert_msg(b[sizeof(size_t)] == 0x5A, "a refused call wrote the struct");
    KT_OK(keel_free(d));
}

KT_DEVICE_TEST(stream_ordered_alloc_and_free)
{
    enum { N = 50000 };
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    float *src = malloc(N * sizeof(float)), *dst = malloc(N * sizeof(float));
    for (int round = 0; round < 20; round++) {
        void *d = KT_SENTINEL;
        KT_OK(keel_malloc_async(s, N * sizeof(float), &d));
        ck_assert_ptr_ne(d, KT_SENTINEL);
        check_info((char *)d + 40, KEEL_MEMORY_DEVICE, dev, d, N * sizeof(float));
        kt_fill_random_f32(src, N);
        kt_poison(dst, N * sizeof(float));
        KT_OK(keel_memcpy_async(d, src, N * sizeof(float), s));
        KT_OK(keel_memcpy_async(dst, d, N * sizeof(float), s));
        KT_OK(keel_free_async(d, s));
        /* The pointer is invalid for new calls at once. */
        KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_free(d));
        KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_free_async(d, s));
        check_info(d, KEEL_MEMORY_HOST, NULL, NULL, 0);
        KT_OK(keel_stream_synchronize(s));
        ck_assert_msg(memcmp(src, dst, N * sizeof(float)) == 0, "%sround %d: data differs", kt_where(), round);
    }
    /* Memory from keel_malloc_async may also be freed with keel_free after a synchronize. */
    void *d = NULL;
    KT_OK(keel_malloc_async(s, 1000, &d));
    KT_OK(keel_stream_synchronize(s));
    KT_OK(keel_free(d));
    KT_OK(keel_stream_destroy(s));
    free(src);
    free(dst);
}

/* Stream-ordered blocks allocated and freed in a random order over two
 * streams, with sizes that change, so that freed blocks come back at their
 * old base with the same size and with another, and new blocks land over
 * freed ones: after every step each live block answers for itself (its
 * start and an interior address) and holds what was copied into it, and a
 * freed pointer belongs to no allocation unless a live block now holds it. */
KT_DEVICE_TEST(stream_ordered_blocks_come_back_at_their_base)
{
    enum { SLOTS = 8, ROUNDS = 300 };
    static const size_t sizes[] = {1u << 16, (1u << 16) + 4096, 3u << 16, 1u << 20};
    keel_stream_t *s[2] = {NULL, NULL};
    KT_OK(keel_stream_create(dev, 0, 0, &s[0]));
    KT_OK(keel_stream_create(dev, 0, 0, &s[1]));
    unsigned char *live[SLOTS] = {0};
    size_t size[SLOTS] = {0};
    unsigned char src[256], back[256];
    for (int round = 0; round < ROUNDS; round++) {
        int i = (int)(kt_rand64() % SLOTS);
        keel_stream_t *st = s[i % 2];
        if (live[i]) {
            unsigned char *gone = live[i];
            KT_OK(keel_free_async(gone, st));
            live[i] = NULL;
            int held = 0;
            for (int j = 0; j < SLOTS; j++)
                held |= live[j] && gone + 8 >= live[j] && gone + 8 < live[j] + size[j];
            if (!held)
                check_info(gone + 8, KEEL_MEMORY_HOST, NULL, NULL, 0);
        } else {
            size[i] = sizes[kt_rand64() % 4];
            KT_OK(keel_malloc_async(st, size[i], (void **)&live[i]));
            kt_fill_random_bytes(src, sizeof src);
            KT_OK(keel_memcpy_async(live[i] + size[i] - sizeof src, src, sizeof src, st));
            kt_poison(back, sizeof back);
            KT_OK(keel_memcpy_async(back, live[i] + size[i] - sizeof back, sizeof back, st));
            KT_OK(keel_stream_synchronize(st));
            ck_assert_msg(memcmp(src, back, sizeof src) == 0, "%sround %d: block %p does not hold its data", kt_where(),
                          round, (void *)live[i]);
        }
        for (int j = 0; j < SLOTS; j++) {
            if (!live[j])
                continue;
            check_info(live[j], KEEL_MEMORY_DEVICE, dev, live[j], size[j]);
            check_info(live[j] + size[j] / 2 + 3, KEEL_MEMORY_DEVICE, dev, live[j], size[j]);
        }
        if (round % 40 == 39) { /* let the backend release what the streams freed */
            KT_OK(keel_stream_synchronize(s[0]));
            KT_OK(keel_stream_synchronize(s[1]));
        }
    }
    for (int j = 0; j < SLOTS; j++)
        if (live[j])
            KT_OK(keel_free_async(live[j], s[j % 2]));
    KT_OK(keel_stream_destroy(s[0]));
    KT_OK(keel_stream_destroy(s[1]));
}

/* A block freed with keel_free_async is kept on its stream: the next
 * keel_malloc_async of the same size there gets it back at once, while the
 * stream is still held (so no backend free can have happened), and another
 * stream never gets it while work queued on the first may still use it. The
 * freed pointer stays invalid until it is handed out again. */
KT_DEVICE_TEST(freed_block_is_reused_on_its_own_stream_only)
{
    const size_t n = 3 << 20;
    unsigned char *src = malloc(n), *dst = malloc(n);
    kt_fill_random_f32((float *)src, n / sizeof(float));
    keel_stream_t *s1 = NULL, *s2 = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s1));
    KT_OK(keel_stream_create(dev, 0, 0, &s2));
    kt_gate_t *g = kt_gate_new();
    KT_OK(kt_gate_enqueue(g, s1));
    void *p = NULL, *q = NULL, *r = NULL, *t = NULL;
    KT_OK(keel_malloc_async(s1, n, &p));
    KT_OK(keel_memset_async(p, 0x5a, n, s1));
    KT_OK(keel_free_async(p, s1));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_free(p));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memset_async(p, 0, 1, s1));
    check_info(p, KEEL_MEMORY_HOST, NULL, NULL, 0);
    KT_OK(keel_malloc_async(s2, n, &q));
    ck_assert_msg(q != p, "%sanother stream got the block freed on a stream that is still held", kt_where());
    KT_OK(keel_malloc_async(s1, n, &r));
    ck_assert_msg(r == p, "%sthe same stream did not get its freed block back (%p, freed %p)", kt_where(), r, p);
    check_info((char *)r + 100, KEEL_MEMORY_DEVICE, dev, r, n);
    /* Open before the copies: a copy from pageable memory may wait for its
     * stream (CUDA stages it through pinned buffers). Queued after the
     * memset, the copies must see their own data, not 0x5a. */
    kt_gate_open(g);
    KT_OK(keel_memcpy_async(r, src, n, s1));
    KT_OK(keel_memcpy_async(dst, r, n, s1));
    KT_OK(keel_stream_synchronize(s1));
    ck_assert_msg(memcmp(src, dst, n) == 0, "%sthe reused block does not hold what was copied in", kt_where());
    /* Another size: the kept block goes back and a new one serves. */
    KT_OK(keel_free_async(r, s1));
    KT_OK(keel_malloc_async(s1, n + 4096, &t));
    check_info(t, KEEL_MEMORY_DEVICE, dev, t, n + 4096);
    KT_OK(keel_memcpy_async(t, src, n, s1));
    KT_OK(keel_memcpy_async(dst, t, n, s1));
    KT_OK(keel_free_async(t, s1));
    KT_OK(keel_free_async(q, s2));
    KT_OK(keel_stream_synchronize(s1));
    ck_assert_msg(memcmp(src, dst, n) == 0, "%sthe block of the new size does not hold what was copied in", kt_where());
    /* Destroying the streams frees the blocks they keep (a leak checker would see them otherwise). */
    KT_OK(keel_stream_destroy(s1));
    KT_OK(keel_stream_destroy(s2));
    kt_gate_free(g);
    free(src);
    free(dst);
}

/* Pageable copies of sizes around and past the staging threshold (the GPU
 * plugins stage copies of 2 MiB and more through pinned buffers, chunk by
 * chunk, each chunk copied by the host in 256 KiB pieces; smaller
 * device-to-host ones go through the stream's pinned buffer), from and to
 * unaligned host addresses: random bytes go to the device and back exact,
 * and the bytes around the destination stay as they were. */
KT_DEVICE_TEST(pageable_copies_of_every_chunking_round_trip)
{
    static const size_t sizes[] = {(2u << 20) - 1, 2u << 20, (2u << 20) + 1, (3u << 20) + 12345,
                                   (9u << 20) + 7, (23u << 20) + 4097};
    const size_t most = (23u << 20) + 4097, pad = 64;
    unsigned char *src = malloc(most + pad), *dst = malloc(most + 2 * pad), *guard = malloc(most + 2 * pad);
    ck_assert_msg(src && dst && guard, "%sno host memory for the test", kt_where());
    void *d = NULL;
    KT_OK(keel_malloc(dev, most, &d));
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i], so = 1 + i % 7, doff = pad + 3 * (i % 5);
        kt_fill_random_bytes(src, most + pad);
        kt_fill_random_bytes(dst, most + 2 * pad);
        memcpy(guard, dst, most + 2 * pad);
        KT_OK(keel_memcpy(d, src + so, n));
        KT_OK(keel_memcpy(dst + doff, d, n));
        ck_assert_msg(memcmp(dst + doff, src + so, n) == 0, "%s%zu bytes did not come back exact", kt_where(), n);
        ck_assert_msg(memcmp(dst, guard, doff) == 0 &&
                          memcmp(dst + doff + n, guard + doff + n, most + 2 * pad - doff - n) == 0,
                      "%sa copy of %zu bytes wrote outside its destination", kt_where(), n);
    }
    KT_OK(keel_free(d));
    free(src);
    free(dst);
    free(guard);
}

/* keel_free waits for the device's work: a copy out of the memory that is
 * queued behind a slow host function must still see the data. */
KT_DEVICE_TEST(free_waits_for_queued_work_on_the_memory)
{
    enum { N = 4096 };
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    unsigned char src[N], dst[N];
    kt_fill_random_bytes(src, N);
    kt_poison(dst, N);
    void *d = NULL;
    KT_OK(keel_malloc(dev, N, &d));
    KT_OK(keel_memcpy(d, src, N));
    KT_OK(keel_stream_launch_host_func(s, kt_host_sleep, (void *)(intptr_t)30));
    KT_OK(keel_memcpy_async(dst, d, N, s));
    KT_OK(keel_free(d));
    /* The copy is done now: keel_free synchronized the device. */
    ck_assert_msg(memcmp(src, dst, N) == 0, "%sthe copy queued before keel_free did not complete", kt_where());
    KT_OK(keel_stream_destroy(s));
}

KT_DEVICE_TEST(copies_between_devices_of_one_backend)
{
    keel_device_t *other = kt_other_device(dev);
    if (other == NULL) {
        ck_assert_msg(!(kt_cpu_devices_env() && kt_is_cpu(dev)), "KEEL_CPU_DEVICES is set, yet one CPU device");
        return; /* run again with KEEL_CPU_DEVICES=3 by kt_main */
    }
    enum { N = 30000 };
    unsigned char *src = malloc(N), *dst = malloc(N);
    kt_fill_random_bytes(src, N);
    kt_poison(dst, N);
    void *a = NULL, *b = NULL;
    KT_OK(keel_malloc(dev, N, &a));
    KT_OK(keel_malloc(other, N, &b));
    check_info(b, KEEL_MEMORY_DEVICE, other, b, N);
    KT_OK(keel_memcpy(a, src, N));
    KT_OK(keel_memcpy(b, a, N));
    KT_OK(keel_memcpy(dst, b, N));
    ck_assert_msg(memcmp(src, dst, N) == 0, "%sdevice-to-device copy across devices differs", kt_where());
    /* Async, on a stream of either device. */
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(other, 0, 0, &s));
    kt_fill_random_bytes(src, N);
    kt_poison(dst, N);
    KT_OK(keel_memcpy(a, src, N));
    KT_OK(keel_memcpy_async(b, a, N, s));
    KT_OK(keel_memcpy_async(dst, b, N, s));
    KT_OK(keel_stream_synchronize(s));
    ck_assert_msg(memcmp(src, dst, N) == 0, "%sasync copy across devices differs", kt_where());
    /* Device memory of one device is not set or freed through another device's stream. */
    keel_stream_t *mine = NULL;
    KT_OK(keel_device_default_stream(dev, &mine));
    KT_FAIL(KEEL_ERROR_DEVICE_MISMATCH, keel_memset_async(b, 0, 16, mine));
    KT_FAIL(KEEL_ERROR_DEVICE_MISMATCH, keel_free_async(b, mine));
    check_info(b, KEEL_MEMORY_DEVICE, other, b, N); /* the refused free left it alive */
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_free(a));
    KT_OK(keel_free(b));
    free(src);
    free(dst);
}

/* keel_free waits for every device whose streams were handed the block, not
 * only for its own: a copy out of the block queued behind a held stream of
 * another device (pinned memory read by that device's stream, device memory
 * by a peer copy, or, for CPU memory, a stream of another backend) has run,
 * with the block's data, by the time keel_free returns. The gate opens by
 * itself after a while, so a free that waits returns. */
static void free_waits_for_another_device(keel_device_t *dev, keel_device_t *other, keel_memory_kind_t kind)
{
    enum { N = 64 << 10 };
    unsigned char *src = malloc(N), *dst = malloc(N);
    kt_fill_random_bytes(src, N);
    kt_poison(dst, N);
    void *p = NULL, *q = NULL;
    KT_OK(alloc_kind(dev, kind, N, &p));
    KT_OK(keel_memcpy(p, src, N));
    /* Device memory leaves its device only by a copy into the other device's memory. */
    if (kind == KEEL_MEMORY_DEVICE)
        KT_OK(keel_malloc(other, N, &q));
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(other, 0, 0, &s));
    kt_gate_t *g = kt_gate_new();
    KT_OK(kt_gate_enqueue(g, s));
    KT_OK(keel_memcpy_async(q ? q : dst, p, N, s));
    ck_assert_int_eq(kt_gate_open_later(g, 200), 0);
    KT_OK(keel_free(p));
    ck_assert_msg(keel_stream_query(s) == KEEL_OK,
                  "%skeel_free of %s memory returned while a copy out of it was still queued on %s", kt_where(),
                  kind == KEEL_MEMORY_DEVICE ? "device" : "pinned", keel_device_name(other));
    KT_OK(keel_stream_synchronize(s));
    if (q)
        KT_OK(keel_memcpy(dst, q, N));
    ck_assert_msg(memcmp(src, dst, N) == 0, "%sthe copy on %s did not read the freed block's data", kt_where(),
                  keel_device_name(other));
    KT_OK(keel_stream_destroy(s));
    kt_gate_free(g);
    KT_OK(keel_free(q));
    free(src);
    free(dst);
}

/* A device of a GPU backend (the check-only fake backends run host functions
 * on the calling thread, so a gate would hold the test itself). */
static int is_gpu(keel_device_t *d)
{
    keel_device_properties_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    return d && keel_device_get_properties(d, &p) == KEEL_OK &&
           (strcmp(p.backend, "cuda") == 0 || strcmp(p.backend, "hip") == 0);
}

KT_DEVICE_TEST(free_waits_for_copies_queued_on_other_devices)
{
    keel_device_t *other = kt_other_device(dev), *foreign = kt_is_cpu(dev) ? kt_foreign_device(dev) : NULL;
    if (!is_gpu(foreign))
        foreign = NULL;
    if (other == NULL && foreign == NULL) {
        ck_assert_msg(!(kt_cpu_devices_env() && kt_is_cpu(dev)), "KEEL_CPU_DEVICES is set, yet one CPU device");
        return; /* run again with KEEL_CPU_DEVICES=3 by kt_main */
    }
    if (other) {
        free_waits_for_another_device(dev, other, KEEL_MEMORY_PINNED);
        free_waits_for_another_device(dev, other, KEEL_MEMORY_DEVICE);
    }
    /* CPU memory is host memory to another backend's stream. */
    if (foreign) {
        free_waits_for_another_device(dev, foreign, KEEL_MEMORY_PINNED);
        free_waits_for_another_device(dev, foreign, KEEL_MEMORY_DEVICE);
    }
}

/* Copies refuse what memset and the built-in operations refuse: the pointer
 * one past the end of a live allocation (for a nonzero size), a host range
 * that runs into an allocation, and a freed block, whether freed by
 * keel_free or by keel_free_async. None of them writes anything. */
static void ptr_text(char *buf, size_t cap, const void *p)
{
    snprintf(buf, cap, "%p", p);
}

KT_DEVICE_TEST(copies_refuse_the_end_of_an_allocation_and_freed_blocks)
{
    enum { N = 4096 + 17 };
    unsigned char host[256], back[256];
    kt_fill_random_bytes(host, sizeof host);
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    char want_p[32], want_end[32];
    int nk = has_managed(dev) ? 3 : 2;
    for (int k = 0; k < nk; k++) {
        unsigned char *p = NULL;
        KT_OK(alloc_kind(dev, kinds[k], N, (void **)&p));
        KT_OK(keel_memset(p, KT_POISON_BYTE, N));
        unsigned char *end = p + N;
        ptr_text(want_p, sizeof want_p, p);
        ptr_text(want_end, sizeof want_end, end);
        KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_memcpy(end, host, 1));
        KT_DETAIL_HAS(want_end);
        KT_DETAIL_HAS(want_p);
        KT_DETAIL_HAS("4113");
        kt_poison(back, sizeof back);
        KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_memcpy(back, end, 16));
        KT_DETAIL_HAS(want_end);
        KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_memcpy_async(end, host, 1, s));
        KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_memcpy_async(back, end, 16, s));
        KT_OK(keel_stream_synchronize(s));
        for (size_t i = 0; i < sizeof back; i++)
            ck_assert_msg(back[i] == KT_POISON_BYTE, "%sa refused copy wrote byte %zu", kt_where(), i);
        /* Zero bytes at the end stay a no-op. */
        KT_OK(keel_memcpy(end, host, 0));
        KT_OK(keel_memcpy_async(back, end, 0, s));
        /* A range that starts outside the allocation and runs into it: out
         * of range, or a freed pointer where its start lies in a block freed
         * before (allocators lay blocks side by side). */
        keel_status_t into = keel_memcpy(back, p - 64, 128);
        ck_assert_msg(into == KEEL_ERROR_OUT_OF_RANGE || into == KEEL_ERROR_INVALID_POINTER,
                      "%skeel_memcpy(back, p - 64, 128) -> %s (%s)", kt_where(), keel_status_name(into),
                      keel_last_error());
        into = keel_memcpy_async(back, p - 64, 128, s);
        ck_assert_msg(into == KEEL_ERROR_OUT_OF_RANGE || into == KEEL_ERROR_INVALID_POINTER,
                      "%skeel_memcpy_async(back, p - 64, 128) -> %s (%s)", kt_where(), keel_status_name(into),
                      keel_last_error());
        /* Copies up to the end still work. */
        KT_OK(keel_memcpy(end - sizeof host, host, sizeof host));
        KT_OK(keel_memcpy(back, end - sizeof back, sizeof back));
        ck_assert_msg(memcmp(back, host, sizeof host) == 0, "%sthe copy to the end differs", kt_where());
        KT_OK(keel_free(p));
        /* The freed block, from its start or inside it, in either role. */
        KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memcpy(p, host, 64));
        KT_DETAIL_HAS(want_p);
        KT_DETAIL_HAS("freed");
        KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memcpy(back, p + 100, 64));
        KT_DETAIL_HAS("freed");
        KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memcpy_async(p + 8, host, 64, s));
        KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memcpy_async(back, p, 64, s));
        KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memcpy(p, host, 0));
        /* A second free names the freed block too. */
        KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_free(p));
        KT_DETAIL_HAS("freed");
    }
    /* A block freed stream-ordered is refused at once, and copies work again
     * once keel_malloc_async hands it out again. */
    unsigned char *a = NULL, *b = NULL;
    KT_OK(keel_malloc_async(s, N, (void **)&a));
    KT_OK(keel_free_async(a, s));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memcpy_async(a, host, 64, s));
    KT_DETAIL_HAS("freed");
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memcpy(back, a + 64, 64));
    KT_OK(keel_malloc_async(s, N, (void **)&b));
    KT_OK(keel_memcpy_async(b, host, sizeof host, s));
    kt_poison(back, sizeof back);
    KT_OK(keel_memcpy_async(back, b, sizeof back, s));
    KT_OK(keel_stream_synchronize(s));
    ck_assert_msg(memcmp(back, host, sizeof host) == 0, "%sthe copy through a reallocated block differs", kt_where());
    KT_OK(keel_free_async(b, s));
    KT_OK(keel_stream_destroy(s));
}

/* Host memory that the system allocator puts where Keel freed a block is
 * plain host memory: the record of freed blocks must not refuse it. Keel
 * keeps a freed block of host-accessible memory out of the allocator's
 * reach while it remembers it, so the two never share an address. */
KT_DEVICE_TEST(host_memory_allocated_after_a_free_still_copies)
{
    enum { N = 4096 };
    unsigned char src[N];
    kt_fill_random_bytes(src, N);
    for (int round = 0; round < 32; round++) {
        void *p = NULL;
        KT_OK(alloc_kind(dev, kinds[round % 2], N, &p));
        KT_OK(keel_memcpy(p, src, N));
        KT_OK(keel_free(p));
        /* Sizes the freed chunk would serve, and one just above it. */
        unsigned char *h = malloc(N + 256 + (round % 3) * 8);
        kt_poison(h, N + 256);
        KT_OK(keel_memcpy(h + 256, src, N));
        KT_OK(keel_memcpy(h, h + 256, N));
        ck_assert_msg(memcmp(h, src, N) == 0, "%sround %d: host copy differs", kt_where(), round);
        free(h);
    }
}

/* A successful free leaves the last error alone (status.h), and the detail
 * of a refused free names the call and the pointer it was given, whatever
 * failed before it on the thread. */
KT_DEVICE_TEST(free_messages_name_their_own_call)
{
    void *p = NULL;
    keel_stream_t *s = NULL;
    KT_OK(keel_malloc(dev, 256, &p));
    KT_OK(keel_device_default_stream(dev, &s));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_stream_create(dev, 0x7, 0, &s));
    char before[512];
    snprintf(before, sizeof(before), "%s", keel_last_error());
    void *q = NULL;
    KT_OK(keel_malloc(dev, 64, &q));
    KT_OK(keel_free(q));
    ck_assert_msg(keel_last_status() == KEEL_ERROR_INVALID_ARGUMENT && strcmp(keel_last_error(), before) == 0,
                  "%sa successful keel_free changed the last error to %s: %s", kt_where(),
                  keel_status_name(keel_last_status()), keel_last_error());
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_free((char *)p + 8));
    KT_DETAIL_HAS("keel_free:");
    KT_DETAIL_HAS("not its start");
    int x = 0;
    char want[64];
    snprintf(want, sizeof(want), "%p", (void *)&x);
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_free_async(&x, s));
    KT_DETAIL_HAS("keel_free_async:");
    KT_DETAIL_HAS(want);
    ck_assert_msg(strstr(keel_last_error(), "not its start") == NULL, "%sstale detail reused: %s", kt_where(),
                  keel_last_error());
    KT_OK(keel_free(p));
}

/* Stream-ordered allocation is not captured: refused while capturing, like
 * the stream-ordered free, and the capture goes on. */
KT_DEVICE_TEST(stream_ordered_alloc_is_refused_while_capturing)
{
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    if (keel_stream_begin_capture(s) != KEEL_OK) { /* a backend without graphs */
        KT_OK(keel_stream_destroy(s));
        return;
    }
    void *p = KT_SENTINEL;
    KT_FAIL(KEEL_ERROR_BUSY, keel_malloc_async(s, 1024, &p));
    ck_assert_msg(p == KT_SENTINEL, "%sa refused keel_malloc_async wrote its out-pointer", kt_where());
    keel_graph_t *g = NULL;
    KT_OK(keel_stream_end_capture(s, &g));
    KT_OK(keel_graph_destroy(g));
    KT_OK(keel_stream_destroy(s));
}

/* A peer copy is enqueued on a stream of one of its two devices; a third
 * device's stream is refused. */
KT_DEVICE_TEST(peer_copy_on_a_third_devices_stream_is_refused)
{
    keel_backend_t *b = NULL;
    KT_OK(keel_device_get_backend(dev, &b));
    keel_backend_info_t info = {.struct_size = sizeof(info)};
    KT_OK(keel_backend_get_info(b, &info));
    if (info.device_count < 3)
        return;
    keel_device_t *d1 = NULL, *d2 = NULL, *d3 = NULL;
    KT_OK(keel_backend_get_device(b, 0, &d1));
    KT_OK(keel_backend_get_device(b, 1, &d2));
    KT_OK(keel_backend_get_device(b, 2, &d3));
    void *a = NULL, *c = NULL;
    keel_stream_t *s3 = NULL;
    KT_OK(keel_malloc(d1, 64, &a));
    KT_OK(keel_malloc(d2, 64, &c));
    KT_OK(keel_device_default_stream(d3, &s3));
    KT_FAIL(KEEL_ERROR_DEVICE_MISMATCH, keel_memcpy_async(c, a, 64, s3));
    KT_DETAIL_HAS(keel_device_name(d3));
    KT_OK(keel_free(a));
    KT_OK(keel_free(c));
}

/* Device memory of two plugin backends cannot meet in one copy; the CPU
 * backend's memory is host memory to any other backend, so copies with it
 * work (test-loader covers two plugins). A stream of one backend never
 * touches another backend's memory through a memset. */
KT_DEVICE_TEST(memory_of_different_backends)
{
    keel_device_t *foreign = kt_foreign_device(dev);
    if (foreign == NULL)
        return; /* test-loader covers this with the fake plugins */
    enum { N = 4096 };
    void *a = NULL, *b = NULL;
    KT_OK(keel_malloc(dev, N, &a));
    KT_OK(keel_malloc(foreign, N, &b));
    if (kt_is_cpu(dev) || kt_is_cpu(foreign)) {
        unsigned char src[N], dst[N];
        kt_fill_random_bytes(src, N);
        kt_poison(dst, N);
        KT_OK(keel_memcpy(a, src, N));
        KT_OK(keel_memcpy(b, a, N));
        KT_OK(keel_memcpy(dst, b, N));
        ck_assert_msg(memcmp(src, dst, N) == 0, "%scopy through %s differs", kt_where(), keel_device_name(foreign));
    } else {
        KT_FAIL(KEEL_ERROR_DEVICE_MISMATCH, keel_memcpy(a, b, 64));
    }
    keel_stream_t *fs = NULL;
    KT_OK(keel_device_default_stream(foreign, &fs));
    KT_FAIL(KEEL_ERROR_DEVICE_MISMATCH, keel_memset_async(a, 0, 64, fs));
    KT_OK(keel_free(a));
    KT_OK(keel_free(b));
}

static Suite *suite(void)
{
    Suite *s = suite_create("memory");
    TCase *tc = kt_tcase_create("memory", 60);
    kt_add_device_test(tc, alloc_every_kind_is_registered_and_freed);
    kt_add_device_test(tc, alloc_rejects_bad_input_and_leaves_out_untouched);
    kt_add_device_test(tc, huge_alloc_is_out_of_memory_and_recoverable);
    kt_add_device_test(tc, pinned_names_and_unknown_memory);
    kt_add_device_test(tc, interior_pointers_of_every_size_find_their_allocation);
    kt_add_device_test(tc, free_rejects_unknown_interior_and_double_frees);
    kt_add_device_test(tc, copies_between_every_kind_round_trip);
    kt_add_device_test(tc, async_copies_and_memset_on_a_stream);
    kt_add_device_test(tc, memset_sets_exactly_the_range);
    kt_add_device_test(tc, out_of_range_copies_are_refused_with_the_sizes);
    kt_add_device_test(tc, memset_of_unknown_or_freed_memory_is_refused);
    kt_add_device_test(tc, copy_and_memset_reject_bad_arguments);
    kt_add_device_test(tc, pointer_info_of_host_memory_and_bad_arguments);
    kt_add_device_test(tc, stream_ordered_alloc_and_free);
    kt_add_device_test(tc, freed_block_is_reused_on_its_own_stream_only);
    kt_add_device_test(tc, pageable_copies_of_every_chunking_round_trip);
    kt_add_device_test(tc, stream_ordered_blocks_come_back_at_their_base);
    kt_add_device_test(tc, free_waits_for_queued_work_on_the_memory);
    kt_add_device_test(tc, copies_between_devices_of_one_backend);
    kt_add_device_test(tc, memory_of_different_backends);
    kt_add_device_test(tc, free_messages_name_their_own_call);
    kt_add_device_test(tc, stream_ordered_alloc_is_refused_while_capturing);
    kt_add_device_test(tc, peer_copy_on_a_third_devices_stream_is_refused);
    kt_add_device_test(tc, free_waits_for_copies_queued_on_other_devices);
    kt_add_device_test(tc, copies_refuse_the_end_of_an_allocation_and_freed_blocks);
    kt_add_device_test(tc, host_memory_allocated_after_a_free_still_copies);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return kt_main(argc, argv, suite(), 1, 1);
}
