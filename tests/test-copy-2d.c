/* SPDX-License-Identifier: MIT */
/* Pitched memory on every device: keel_malloc_pitch, 2D and 3D copies
 * between every kind of memory with pitches of their own, 2D memsets, and
 * the refusals (rows that would overlap, extents past an allocation, NULL,
 * memory that is not Keel's, a stream of another device). Results are
 * compared with the same copy done by plain loops on the host. */
#include <stdlib.h>
#include <string.h>
#include "fixture.h"

/* The host's own copy of rows, the reference of every test here. */
static void ref_rows(unsigned char *dst, size_t dpitch, const unsigned char *src, size_t spitch, size_t width,
                     size_t height)
{
    for (size_t i = 0; i < height; i++)
        memcpy(dst + i * dpitch, src + i * spitch, width);
}

static void expect_same(const unsigned char *got, const unsigned char *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "%s%s: byte %zu is %#x, expected %#x", kt_where(), what, i, got[i],
                      want[i]);
}

KT_DEVICE_TEST(pitched_allocation_rounds_rows_up)
{
    const size_t widths[] = {1, 255, 256, 257, 1000, 4096};
    for (size_t k = 0; k < sizeof widths / sizeof widths[0]; k++) {
        void *p = NULL;
        size_t pitch = 0;
        KT_OK(keel_malloc_pitch(dev, widths[k], 7, &p, &pitch));
        ck_assert_msg(pitch >= widths[k] && pitch % KEEL_PITCH_ALIGNMENT == 0 && pitch < widths[k] + KEEL_PITCH_ALIGNMENT,
                      "%swidth %zu: pitch %zu", kt_where(), widths[k], pitch);
        keel_pointer_info_t info = {.struct_size = sizeof info};
        KT_OK(keel_pointer_get_info(p, &info));
        ck_assert_msg(info.kind == KEEL_MEMORY_DEVICE && info.base == p && info.size >= pitch * 7,
                      "%swidth %zu: kind %d, base %p (%p), size %zu", kt_where(), widths[k], info.kind, info.base, p,
                      info.size);
        /* The last row's last byte is writable, the byte after the extent is not Keel's to touch. */
        KT_OK(keel_memset((char *)p + pitch * 6 + widths[k] - 1, 0x5A, 1));
        KT_OK(keel_free(p));
    }
    void *p = KT_SENTINEL;
    size_t pitch = 12345;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_malloc_pitch(dev, 0, 4, &p, &pitch));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_malloc_pitch(dev, 64, 0, &p, &pitch));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_malloc_pitch(dev, SIZE_MAX - 10, 1, &p, &pitch));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_malloc_pitch(dev, 4096, SIZE_MAX / 1024, &p, &pitch));
    KT_DETAIL_HAS("overflow");
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_malloc_pitch(dev, 64, 4, NULL, &pitch));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_malloc_pitch(dev, 64, 4, &p, NULL));
    ck_assert_msg(p == KT_SENTINEL && pitch == 12345, "%sa refused call wrote its out-parameters", kt_where());
}

/* host (pitch 1000) -> device (its own pitch) -> a second device buffer at
 * an offset with another pitch -> pinned -> managed -> host (pitch 777), sync
 * and on a stream; every byte between rows stays as it was. */
static void round_trip(keel_device_t *dev, keel_stream_t *s)
{
    enum { W = 613, H = 37, HP = 1000, OP = 777 };
    unsigned char *host = malloc(HP * H), *out = malloc(OP * H), *want = malloc(OP * H);
    kt_fill_random_bytes(host, HP * H);
    kt_poison(out, OP * H);
    memcpy(want, out, OP * H);
    ref_rows(want, OP, host, HP, W, H);

    void *d1 = NULL, *d2 = NULL, *pin = NULL, *man = NULL;
    size_t p1 = 0;
    const size_t p2 = 2048, off2 = 100;
    KT_OK(keel_malloc_pitch(dev, W, H, &d1, &p1));
    KT_OK(keel_malloc(dev, off2 + p2 * H, &d2));
    KT_OK(keel_malloc_host(dev, 640 * H, &pin));
    int managed = keel_malloc_managed(dev, 700 * H, &man) == KEEL_OK;
    if (s) {
        KT_OK(keel_memcpy_2d_async(d1, p1, host, HP, W, H, s));
        KT_OK(keel_memcpy_2d_async((char *)d2 + off2, p2, d1, p1, W, H, s));
        KT_OK(keel_memcpy_2d_async(pin, 640, (char *)d2 + off2, p2, W, H, s));
        if (managed)
            KT_OK(keel_memcpy_2d_async(man, 700, pin, 640, W, H, s));
        KT_OK(keel_memcpy_2d_async(out, OP, managed ? man : pin, managed ? 700 : 640, W, H, s));
        KT_OK(keel_stream_synchronize(s));
    } else {
        KT_OK(keel_memcpy_2d(d1, p1, host, HP, W, H));
        KT_OK(keel_memcpy_2d((char *)d2 + off2, p2, d1, p1, W, H));
        KT_OK(keel_memcpy_2d(pin, 640, (char *)d2 + off2, p2, W, H));
        if (managed)
            KT_OK(keel_memcpy_2d(man, 700, pin, 640, W, H));
        KT_OK(keel_memcpy_2d(out, OP, managed ? man : pin, managed ? 700 : 640, W, H));
    }
    expect_same(out, want, OP * H, s ? "async 2D round trip" : "2D round trip");
    KT_OK(keel_free(d1));
    KT_OK(keel_free(d2));
    KT_OK(keel_free(pin));
    if (managed)
        KT_OK(keel_free(man));
    free(host);
    free(out);
    free(want);
}

KT_DEVICE_TEST(copy_2d_round_trips_through_every_kind)
{
    round_trip(dev, NULL);
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    round_trip(dev, s);
    KT_OK(keel_stream_destroy(s));
}

KT_DEVICE_TEST(copy_2d_of_dense_rows_and_host_to_host)
{
    enum { W = 4096, H = 64 };
    unsigned char *a = malloc(W * H), *b = malloc(W * H);
    kt_fill_random_bytes(a, W * H);
    kt_poison(b, W * H);
    void *d = NULL;
    KT_OK(keel_malloc(dev, W * H, &d));
    KT_OK(keel_memcpy_2d(d, W, a, W, W, H)); /* pitch == width: one plain copy */
    KT_OK(keel_memcpy(b, d, W * H));
    expect_same(b, a, W * H, "dense 2D copy");
    /* Host to host: a plain loop, no device. */
    unsigned char *c = malloc(3 * W * H), *want = malloc(3 * W * H);
    kt_poison(c, 3 * W * H);
    memcpy(want, c, 3 * W * H);
    ref_rows(want, 3 * W, a, W, W, H);
    KT_OK(keel_memcpy_2d(c, 3 * W, a, W, W, H));
    expect_same(c, want, 3 * W * H, "host-to-host 2D copy");
    /* Zero width or height does nothing, even with pitches that would be refused. */
    KT_OK(keel_memcpy_2d(d, 1, a, 1, 0, 5));
    KT_OK(keel_memcpy_2d(d, 1, a, 1, 5, 0));
    KT_OK(keel_free(d));
    free(a);
    free(b);
    free(c);
    free(want);
}

KT_DEVICE_TEST(memset_2d_sets_rows_and_leaves_the_gaps)
{
    enum { W = 300, P = 512, H = 50 };
    unsigned char *host = malloc(P * H), *want = malloc(P * H);
    kt_fill_random_bytes(host, P * H);
    memcpy(want, host, P * H);
    for (size_t i = 0; i < H; i++)
        memset(want + i * P + 7, 0xC3, W);
    void *d = NULL;
    KT_OK(keel_malloc(dev, P * H, &d));
    KT_OK(keel_memcpy(d, host, P * H));
    KT_OK(keel_memset_2d((char *)d + 7, P, 0xC3, W, H));
    unsigned char *back = malloc(P * H);
    KT_OK(keel_memcpy(back, d, P * H));
    expect_same(back, want, P * H, "memset_2d");
    /* And on a stream, after a copy that it must follow. */
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    for (size_t i = 0; i < H; i++)
        memset(want + i * P + 7, 0x1E, W);
    KT_OK(keel_memcpy_async(d, host, P * H, s));
    KT_OK(keel_memset_2d_async((char *)d, P, 0x1E, W + 7, H, s));
    for (size_t i = 0; i < H; i++)
        memset(want + i * P, 0x1E, 7);
    kt_poison(back, P * H);
    KT_OK(keel_memcpy_async(back, d, P * H, s));
    KT_OK(keel_stream_synchronize(s));
    expect_same(back, want, P * H, "memset_2d_async");
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_free(d));
    free(host);
    free(want);
    free(back);
}

KT_DEVICE_TEST(copy_3d_moves_a_box_between_pitched_volumes)
{
    /* A box of 45 x 9 x 6 bytes out of a host volume of 64 x 16 x 8 into a
     * device volume of its own pitches, then back into a third layout. */
    enum { W = 45, H = 9, D = 6 };
    const size_t hp = 64, hs = 64 * 16, hd = 8, op = 50, os = 50 * 12;
    unsigned char *vol = malloc(hs * hd), *out = malloc(os * D), *want = malloc(os * D);
    kt_fill_random_bytes(vol, hs * hd);
    kt_poison(out, os * D);
    memcpy(want, out, os * D);
    const size_t src_off = 2 * hs + 3 * hp + 5; /* slice 2, row 3, byte 5 */
    for (size_t k = 0; k < D; k++)
        ref_rows(want + k * os, op, vol + src_off + k * hs, hp, W, H);
    void *d = NULL;
    size_t dp = 0;
    KT_OK(keel_malloc_pitch(dev, W, (size_t)H * D, &d, &dp));
    keel_copy_3d_t in = {.dst = d, .dst_pitch = dp, .dst_slice_pitch = dp * H, .src = vol + src_off,
                         .src_pitch = hp, .src_slice_pitch = hs, .width = W, .height = H, .depth = D};
    KT_OK(keel_memcpy_3d(&in));
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    keel_copy_3d_t back = {.dst = out, .dst_pitch = op, .dst_slice_pitch = os, .src = d, .src_pitch = dp,
                           .src_slice_pitch = dp * H, .width = W, .height = H, .depth = D};
    KT_OK(keel_memcpy_3d_async(&back, s));
    KT_OK(keel_stream_synchronize(s));
    expect_same(out, want, os * D, "3D box");
    /* Slices that would overlap, a box past the allocation, NULL. */
    keel_copy_3d_t bad = in;
    bad.dst_slice_pitch = dp * H - 1;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_memcpy_3d(&bad));
    KT_DETAIL_HAS("overlap");
    bad = in;
    bad.depth = D + 1;
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_memcpy_3d(&bad));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_memcpy_3d(NULL));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_memcpy_3d_async(NULL, s));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_memcpy_3d_async(&in, NULL));
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_free(d));
    free(vol);
    free(out);
    free(want);
}

KT_DEVICE_TEST(pitched_copies_refuse_bad_input)
{
    enum { P = 256, H = 8 };
    void *d = NULL;
    KT_OK(keel_malloc(dev, P * H, &d));
    unsigned char host[P * H];
    kt_fill_random_bytes(host, sizeof host);
    KT_OK(keel_memset(d, KT_POISON_BYTE, P * H));
    /* Rows wider than a pitch. */
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_memcpy_2d(d, 100, host, P, 101, 2));
    KT_DETAIL_HAS("pitch");
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_memcpy_2d(d, P, host, 100, 101, 2));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_memset_2d(d, 10, 0, 11, 2));
    /* The extent past the allocation: one row too many, or the last row one byte too long. */
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_memcpy_2d(d, P, host, P, P, H + 1));
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_memcpy_2d((char *)d + 1, P, host, P, P, H));
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_memset_2d(d, P, 0, P, H + 1));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_memcpy_2d(d, SIZE_MAX / 2, host, P, 1, 4));
    /* NULL, and a memset of memory that is not Keel's. */
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memcpy_2d(NULL, P, host, P, 4, 4));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memcpy_2d(d, P, NULL, P, 4, 4));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memset_2d(host, P, 0, 4, 4));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memset_2d(NULL, P, 0, 4, 4));
    keel_stream_t *s = NULL;
    KT_OK(keel_device_default_stream(dev, &s));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_memcpy_2d_async(d, P, host, P, 4, 4, NULL));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_memset_2d_async(d, P, 0, 4, 4, NULL));
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_memcpy_2d_async(d, P, host, P, P, H + 1, s));
    /* Nothing of the refused calls reached the memory. */
    unsigned char back[P * H];
    KT_OK(keel_memcpy(back, d, sizeof back));
    for (size_t i = 0; i < sizeof back; i++)
        ck_assert_msg(back[i] == KT_POISON_BYTE, "%sbyte %zu was written by a refused call", kt_where(), i);
    /* A stream of another device of the same backend. */
    keel_device_t *other = kt_other_device(dev);
    if (other) {
        keel_stream_t *os = NULL;
        KT_OK(keel_device_default_stream(other, &os));
        KT_FAIL(KEEL_ERROR_DEVICE_MISMATCH, keel_memcpy_2d_async(d, P, host, P, 4, 4, os));
        KT_FAIL(KEEL_ERROR_DEVICE_MISMATCH, keel_memset_2d_async(d, P, 0, 4, 4, os));
    }
    KT_OK(keel_free(d));
}

static Suite *suite(void)
{
    Suite *s = suite_create("copy-2d");
    TCase *tc = kt_tcase_create("copy-2d", 60);
    kt_add_device_test(tc, pitched_allocation_rounds_rows_up);
    kt_add_device_test(tc, copy_2d_round_trips_through_every_kind);
    kt_add_device_test(tc, copy_2d_of_dense_rows_and_host_to_host);
    kt_add_device_test(tc, memset_2d_sets_rows_and_leaves_the_gaps);
    kt_add_device_test(tc, copy_3d_moves_a_box_between_pitched_volumes);
    kt_add_device_test(tc, pitched_copies_refuse_bad_input);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return kt_main(argc, argv, suite(), 1, 1);
}
