/* SPDX-License-Identifier: MIT */
/* test-rocblas-load: how keel-hip finds librocblas (hip_rocblas_load.c),
 * against fake libraries built here (fake_rocblas.c), since Debian 12 has
 * no rocBLAS. Needs neither ROCm nor a GPU. What it cannot show: that the
 * declared argument lists and values match a real rocBLAS, or that the
 * calls compute anything (see README.md, "The HIP plugin"). */
#include <check.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hip_rocblas.h"
#include "test-dl.h"
#include "tests/fixture.h"

#define FAKE_FULL FAKE_ROCBLAS_DIR "/fake-rocblas.so"
#define FAKE_NO_DGEMV FAKE_ROCBLAS_DIR "/fake-rocblas-nodgemv.so"
#define MISSING "/nonexistent-keel-test/librocblas.so.0"

START_TEST(no_library_names_every_name_tried)
{
    const char *names[] = {MISSING, "/nonexistent-keel-test/librocblas.so", NULL};
    keel__rocblas_api_t api;
    char why[512];
    ck_assert_int_eq(keel__rocblas_load(names, &api, why, sizeof why), -1);
    ck_assert_msg(strstr(why, names[0]) != NULL && strstr(why, names[1]) != NULL, "why: %s", why);
    ck_assert_ptr_null(api.lib);
    ck_assert_ptr_null(kt_dl_addr(&api.gemm_ex));
}
END_TEST

START_TEST(each_name_in_its_own_slot)
{
    const char *names[] = {MISSING, FAKE_FULL, NULL};
    keel__rocblas_api_t api;
    char why[512];
    ck_assert_msg(keel__rocblas_load(names, &api, why, sizeof why) == 0, "load: %s", why);
    ck_assert_str_eq(api.lib_name, FAKE_FULL); /* the second name, after the first failed */
    const kt_dl_slot_t expect[] = {
        {"rocblas_create_handle", &api.create_handle},
        {"rocblas_destroy_handle", &api.destroy_handle},
        {"rocblas_set_stream", &api.set_stream},
        {"rocblas_set_pointer_mode", &api.set_pointer_mode},
        {"rocblas_gemm_ex", &api.gemm_ex},
        {"rocblas_gemm_strided_batched_ex", &api.gemm_strided_batched_ex},
        {"rocblas_sgemv", &api.sgemv},
        {"rocblas_dgemv", &api.dgemv},
    };
    kt_dl_check_slots(FAKE_FULL, expect, sizeof expect / sizeof expect[0]);
    dlclose(api.lib);
}
END_TEST

START_TEST(missing_function_is_named)
{
    const char *names[] = {FAKE_NO_DGEMV, FAKE_FULL, NULL};
    keel__rocblas_api_t api;
    char why[512];
    /* The first library that loads decides; the next name is not tried. */
    ck_assert_int_eq(keel__rocblas_load(names, &api, why, sizeof why), -1);
    ck_assert_msg(strstr(why, FAKE_NO_DGEMV) != NULL && strstr(why, "rocblas_dgemv") != NULL, "why: %s", why);
    ck_assert_ptr_null(api.lib);
    ck_assert_ptr_null(kt_dl_addr(&api.sgemv));
}
END_TEST

START_TEST(short_reason_buffer_is_terminated)
{
    const char *names[] = {MISSING, NULL};
    keel__rocblas_api_t api;
    char why[16];
    memset(why, 'x', sizeof why);
    ck_assert_int_eq(keel__rocblas_load(names, &api, why, sizeof why), -1);
    ck_assert_uint_eq(strlen(why), sizeof why - 1);
    ck_assert_int_eq(strncmp(why, MISSING, sizeof why - 1), 0);
}
END_TEST

START_TEST(status_names)
{
    ck_assert_str_eq(keel__rocblas_status_name(0), "rocblas_status_success");
    ck_assert_str_eq(keel__rocblas_status_name(KEEL_RB_STATUS_MEMORY_ERROR), "rocblas_status_memory_error");
    ck_assert_str_eq(keel__rocblas_status_name(13), "rocblas_status_check_numerics_fail");
    ck_assert_str_eq(keel__rocblas_status_name(14), "an unknown rocblas_status");
    ck_assert_str_eq(keel__rocblas_status_name(-1), "an unknown rocblas_status");
}
END_TEST

int main(int argc, char **argv)
{
    Suite *s = suite_create("rocblas-load");
    TCase *tc = tcase_create("load");
    tcase_add_test(tc, no_library_names_every_name_tried);
    tcase_add_test(tc, each_name_in_its_own_slot);
    tcase_add_test(tc, missing_function_is_named);
    tcase_add_test(tc, short_reason_buffer_is_terminated);
    tcase_add_test(tc, status_names);
    suite_add_tcase(s, tc);
    return kt_main(argc, argv, s, 0, 0);
}
