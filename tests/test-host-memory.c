/* SPDX-License-Identifier: MIT */
/* The application's host memory made pinned (keel_host_register) and the
 * hints on managed memory (keel_memory_prefetch_async, keel_memory_advise),
 * on every device: copies through registered memory, what keel_free and a
 * second registration say of it, an unregister that waits for queued work,
 * hints that leave the data as it was, and the refusals. */
#include <stdlib.h>
#include <string.h>
#include "fixture.h"

enum { N = 1 << 16 };

KT_DEVICE_TEST(registered_host_memory_copies_as_pinned)
{
    unsigned char *host = aligned_alloc(4096, N), *back = malloc(N);
    kt_fill_random_bytes(host, N);
    kt_poison(back, N);
    keel_status_t st = keel_host_register(dev, host, N);
    if (kt_unsupported(dev, KT_HOST_REGISTER, st)) {
        free(host);
        free(back);
        return;
    }
    KT_OK(st);
    keel_pointer_info_t info = {.struct_size = sizeof info};
    KT_OK(keel_pointer_get_info(host + 100, &info));
    ck_assert_msg(info.kind == KEEL_MEMORY_PINNED && info.device == dev && info.base == host && info.size == N,
                  "%sregistered memory: kind %d, device %p, base %p, size %zu", kt_where(), info.kind,
                  (void *)info.device, info.base, info.size);
    /* Round trip through the device on a stream, into and out of the registered range. */
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    void *d = NULL;
    KT_OK(keel_malloc(dev, N, &d));
    KT_OK(keel_memcpy_async(d, host, N, s));
    KT_OK(keel_memset_async(d, 0x77, 64, s));
    KT_OK(keel_memcpy_async(host + N / 2, d, N / 2, s));
    KT_OK(keel_stream_synchronize(s));
    unsigned char *want = malloc(N);
    memcpy(want, host, N); /* after: the second half holds the device's first half */
    KT_OK(keel_memcpy(back, d, N));
    for (size_t i = 0; i < N / 2; i++)
        ck_assert_msg(host[N / 2 + i] == back[i], "%sbyte %zu copied back differs", kt_where(), i);
    ck_assert_msg(host[N / 2] == 0x77, "%sthe memset did not reach the registered memory", kt_where());
    /* A copy past its end is refused: it is a bounded allocation now. */
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_memcpy(d, host + 1, N));
    /* It stays the application's: keel_free refuses it, a second registration too. */
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_free(host));
    KT_DETAIL_HAS("keel_host_unregister");
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_host_register(dev, host + 4096, 4096));
    KT_DETAIL_HAS("registered already");
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_host_unregister(host + 1));
    ck_assert_msg(memcmp(host, want, N) == 0, "%sa refused call changed the memory", kt_where());
    KT_OK(keel_host_unregister(host));
    KT_OK(keel_pointer_get_info(host, &info));
    ck_assert_msg(info.kind == KEEL_MEMORY_HOST, "%sunregistered memory is still kind %d", kt_where(), info.kind);
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_host_unregister(host));
    /* Once unregistered it is plain host memory again: copies still work. */
    KT_OK(keel_memcpy(back, host, N));
    ck_assert_msg(memcmp(back, want, N) == 0, "%scopy from unregistered memory differs", kt_where());
    KT_OK(keel_free(d));
    KT_OK(keel_stream_destroy(s));
    free(host);
    free(back);
    free(want);
}

KT_DEVICE_TEST(unregister_waits_for_queued_copies)
{
    unsigned char *host = aligned_alloc(4096, N), *src = malloc(N);
    kt_fill_random_bytes(src, N);
    kt_poison(host, N);
    if (kt_unsupported(dev, KT_HOST_REGISTER, keel_host_register(dev, host, N))) {
        free(host);
        free(src);
        return;
    }
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    void *d = NULL;
    KT_OK(keel_malloc(dev, N, &d));
    KT_OK(keel_memcpy(d, src, N));
    kt_gate_t *g = kt_gate_new();
    KT_OK(kt_gate_enqueue(g, s));
    KT_OK(keel_memcpy_async(host, d, N, s)); /* waits behind the gate */
    ck_assert_int_eq(kt_gate_open_later(g, 200), 0);
    KT_OK(keel_host_unregister(host));
    ck_assert_msg(kt_gate_is_open(g), "%skeel_host_unregister returned before the queued copy could run", kt_where());
    ck_assert_msg(memcmp(host, src, N) == 0, "%sthe copy queued before the unregister did not complete", kt_where());
    KT_OK(keel_stream_synchronize(s));
    kt_gate_free(g);
    KT_OK(keel_free(d));
    KT_OK(keel_stream_destroy(s));
    free(host);
    free(src);
}

/* The application's memory right after a registered range is its own
 * host memory, not "one past the end" of a Keel allocation: copies take it. */
KT_DEVICE_TEST(memory_right_after_a_registered_range_is_host_memory)
{
    unsigned char *buf = aligned_alloc(4096, 2 * N), *src = malloc(N), *back = malloc(N);
    kt_fill_random_bytes(src, N);
    kt_poison(back, N);
    if (kt_unsupported(dev, KT_HOST_REGISTER, keel_host_register(dev, buf, N))) {
        free(buf);
        free(src);
        free(back);
        return;
    }
    void *d = NULL;
    KT_OK(keel_malloc(dev, N, &d));
    KT_OK(keel_memcpy(d, src, N));
    KT_OK(keel_memcpy(buf + N, d, N));      /* to the bytes after the range */
    KT_OK(keel_memcpy(back, buf + N, N));   /* and from them */
    ck_assert_msg(memcmp(back, src, N) == 0, "%sthe copy through the memory after the range differs", kt_where());
    KT_OK(keel_host_unregister(buf));
    KT_OK(keel_free(d));
    free(buf);
    free(src);
    free(back);
}

KT_DEVICE_TEST(host_register_refuses_bad_input)
{
    unsigned char *host = malloc(N);
    void *pinned = NULL, *d = NULL;
    KT_OK(keel_malloc_host(dev, N, &pinned));
    KT_OK(keel_malloc(dev, N, &d));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_host_register(dev, NULL, N));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_host_register(dev, host, 0));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_host_register(dev, host, SIZE_MAX));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_host_register(NULL, host, N));
    /* Keel's own memory, or a range that runs into it. */
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_host_register(dev, pinned, 4096));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_host_register(dev, (char *)pinned - 64, 128));
    if (kt_is_cpu(dev)) /* the CPU's device memory is host memory too */
        KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_host_register(dev, d, 64));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_host_unregister(NULL));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_host_unregister(host));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_host_unregister(pinned));
    KT_OK(keel_free(pinned));
    KT_OK(keel_free(d));
    free(host);
}

KT_DEVICE_TEST(managed_memory_hints_keep_the_data)
{
    void *m = NULL;
    keel_status_t st = keel_malloc_managed(dev, N, &m);
    if (kt_unsupported(dev, KT_MANAGED_MEMORY, st))
        return;
    KT_OK(st);
    unsigned char *src = malloc(N), *back = malloc(N);
    kt_fill_random_bytes(src, N);
    KT_OK(keel_memcpy(m, src, N));
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    KT_OK(keel_memory_advise(m, N, KEEL_ADVISE_READ_MOSTLY, NULL));
    KT_OK(keel_memory_advise(m, N, KEEL_ADVISE_PREFERRED_LOCATION, dev));
    KT_OK(keel_memory_advise(m, N / 2, KEEL_ADVISE_ACCESSED_BY, dev));
    KT_OK(keel_memory_prefetch_async(m, N, dev, s));
    KT_OK(keel_memset_async((char *)m + 10, 0x42, 5, s));
    KT_OK(keel_memory_prefetch_async((char *)m + 4096, N - 4096, NULL, s));
    KT_OK(keel_stream_synchronize(s));
    KT_OK(keel_memory_advise(m, N, KEEL_ADVISE_UNSET_READ_MOSTLY, NULL));
    KT_OK(keel_memory_advise(m, N, KEEL_ADVISE_UNSET_PREFERRED_LOCATION, dev));
    KT_OK(keel_memory_advise(m, N / 2, KEEL_ADVISE_UNSET_ACCESSED_BY, dev));
    memset(src + 10, 0x42, 5);
    KT_OK(keel_memcpy(back, m, N));
    ck_assert_msg(memcmp(back, src, N) == 0, "%sthe hints changed the data", kt_where());
    /* Refusals: not managed memory, past its end, an unknown advice, no stream. */
    void *d = NULL;
    KT_OK(keel_malloc(dev, 4096, &d));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memory_prefetch_async(d, 4096, dev, s));
    KT_DETAIL_HAS("managed");
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memory_advise(src, 16, KEEL_ADVISE_READ_MOSTLY, NULL));
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_memory_prefetch_async((char *)m + 1, N, dev, s));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_memory_prefetch_async(m, 0, dev, s));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_memory_advise(m, N, (keel_memory_advice_t)0, NULL));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_memory_advise(m, N, (keel_memory_advice_t)7, NULL));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_memory_prefetch_async(m, N, dev, NULL));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memory_prefetch_async(NULL, N, dev, s));
    keel_device_t *foreign = kt_foreign_device(dev);
    if (foreign) {
        KT_FAIL(KEEL_ERROR_DEVICE_MISMATCH, keel_memory_advise(m, N, KEEL_ADVISE_PREFERRED_LOCATION, foreign));
        keel_stream_t *fs = NULL;
        KT_OK(keel_device_default_stream(foreign, &fs));
        KT_FAIL(KEEL_ERROR_DEVICE_MISMATCH, keel_memory_prefetch_async(m, N, NULL, fs));
    }
    KT_OK(keel_free(d));
    KT_OK(keel_free(m));
    KT_OK(keel_stream_destroy(s));
    free(src);
    free(back);
}

static Suite *suite(void)
{
    Suite *s = suite_create("host-memory");
    TCase *tc = kt_tcase_create("host-memory", 60);
    kt_add_device_test(tc, registered_host_memory_copies_as_pinned);
    kt_add_device_test(tc, unregister_waits_for_queued_copies);
    kt_add_device_test(tc, memory_right_after_a_registered_range_is_host_memory);
    kt_add_device_test(tc, host_register_refuses_bad_input);
    kt_add_device_test(tc, managed_memory_hints_keep_the_data);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return kt_main(argc, argv, suite(), 1, 1);
}
