/* SPDX-License-Identifier: MIT */
/* test-hip: keel-hip.so on a machine without a usable HIP device (an AMD
 * GPU, or an NVIDIA one where the plugin is built for HIP's NVIDIA
 * platform). The plugin is built here, so the core must find and load it,
 * probe must fail with the reason ("no HIP device ..."), KEEL_BACKEND=hip
 * must be an error that says so, and KEEL_BACKEND=hip,cpu must fall through
 * to the CPU. Each setting runs in a fresh tests/keel-env-probe, since Keel
 * reads its environment once per process. Exits 77 where a HIP device is
 * usable (these expectations are for machines without one, and the
 * conformance suites test the GPU), and where the plugin is unusable for a
 * reason other than missing hardware or drivers (a vendor library missing,
 * say), which it prints. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/fixture.h"

/* Runs the probe with @p env and one command; returns the value of its line. */
static char *probe(const char *const *env, const char *cmd)
{
    const char *argv[] = {cmd, NULL};
    kt_child_result_t r = kt_run_probe(env, 1, argv);
    char *v = kt_line_value(r.out, cmd);
    if (v == NULL)
        fprintf(stderr, "probe %s: no result line (exit %d)\nstdout: %s\nstderr: %s\n", cmd, r.status, r.out, r.err);
    kt_child_free(&r);
    return v;
}

/* The "backend:hip ..." line of the probe's backend list, or NULL. */
static char *hip_info(void)
{
    const char *argv[] = {"backends", NULL};
    kt_child_result_t r = kt_run_probe((const char *const[]){NULL}, 1, argv);
    char *v = kt_line_value(r.out, "backend:hip");
    kt_child_free(&r);
    return v;
}

/* Whether @p detail names a reason a HIP backend is unusable on a machine
 * without a HIP device: no GPU or no driver (AMD's amdgpu and /dev/kfd, or
 * the NVIDIA driver), or on AMD no ROCm runtime. */
static int names_reason(const char *detail)
{
    return strstr(detail, "no HIP device") != NULL || strstr(detail, "libamdhip64") != NULL;
}

START_TEST(plugin_found_and_probe_fails)
{
    char *info = hip_info();
    ck_assert_msg(info != NULL, "the backend list has no hip entry");
    ck_assert_msg(strstr(info, "usable=0") != NULL, "hip: %s", info);
    ck_assert_msg(strstr(info, "keel-hip.so") != NULL, "keel-hip.so was built but not found: %s", info);
    ck_assert_msg(names_reason(info), "the reason does not say why: %s", info);
    free(info);
}
END_TEST

START_TEST(explicit_hip_is_unavailable)
{
    char *v = probe((const char *const[]){"KEEL_BACKEND=hip", NULL}, "init");
    ck_assert_ptr_nonnull(v);
    ck_assert_msg(strncmp(v, "KEEL_ERROR_BACKEND_UNAVAILABLE ", 31) == 0, "KEEL_BACKEND=hip: init %s", v);
    ck_assert_msg(strstr(v, "hip: ") != NULL && names_reason(v), "the detail does not name the reason: %s", v);
    free(v);
}
END_TEST

START_TEST(device_of_unusable_backend)
{
    char *v = probe((const char *const[]){"KEEL_BACKEND=cpu", NULL}, "get:hip:0");
    ck_assert_ptr_nonnull(v);
    ck_assert_msg(strncmp(v, "KEEL_ERROR_BACKEND_UNAVAILABLE ", 31) == 0 && names_reason(v), "get:hip:0 %s", v);
    free(v);
}
END_TEST

START_TEST(hip_then_cpu_falls_through)
{
    char *v = probe((const char *const[]){"KEEL_BACKEND=hip,cpu", NULL}, "default");
    ck_assert_ptr_nonnull(v);
    ck_assert_msg(strncmp(v, "OK cpu:", 7) == 0, "KEEL_BACKEND=hip,cpu: default %s", v);
    free(v);
}
END_TEST

int main(void)
{
    char *info = hip_info();
    if (info != NULL && strstr(info, "usable=1") != NULL) {
        printf("SKIP: a HIP device is usable (%s); these tests are for machines without one\n", info);
        free(info);
        return 77;
    }
    if (info != NULL && strstr(info, "keel-hip.so") != NULL && !names_reason(info)) {
        printf("SKIP: keel-hip.so is not usable here for a reason other than a missing GPU or driver (%s); "
               "these tests are for machines without a HIP device\n",
               info);
        free(info);
        return 77;
    }
    free(info);
    Suite *s = suite_create("hip");
    TCase *tc = tcase_create("no-gpu");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, plugin_found_and_probe_fails);
    tcase_add_test(tc, explicit_hip_is_unavailable);
    tcase_add_test(tc, device_of_unusable_backend);
    tcase_add_test(tc, hip_then_cpu_falls_through);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
