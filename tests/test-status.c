/* SPDX-License-Identifier: MIT */
/* test-status: status codes and their strings, the thread-local last error,
 * the library version, keel_init, logging controls and the environment table. */
#include <pthread.h>
#include <stdlib.h>
#include "fixture.h"

START_TEST(status_strings_are_distinct_and_nonempty)
{
    for (int i = 0; i < KEEL_STATUS_COUNT; i++) {
        const char *s = keel_status_string((keel_status_t)i);
        const char *n = keel_status_name((keel_status_t)i);
        ck_assert_ptr_nonnull(s);
        ck_assert_ptr_nonnull(n);
        ck_assert_msg(s[0] != '\0', "status %d has an empty string", i);
        ck_assert_msg(strncmp(n, "KEEL_", 5) == 0, "status %d is named \"%s\"", i, n);
        ck_assert_msg(strcmp(s, "unknown status") != 0, "status %d is called unknown", i);
        for (int j = 0; j < i; j++) {
            ck_assert_msg(strcmp(s, keel_status_string((keel_status_t)j)) != 0, "statuses %d and %d share \"%s\"", i,
                          j, s);
            ck_assert_msg(strcmp(n, keel_status_name((keel_status_t)j)) != 0, "statuses %d and %d share \"%s\"", i,
                          j, n);
        }
    }
}
END_TEST

START_TEST(status_names_match_the_enum)
{
    ck_assert_str_eq(keel_status_name(KEEL_OK), "KEEL_OK");
    ck_assert_str_eq(keel_status_name(KEEL_ERROR_INVALID_ARGUMENT), "KEEL_ERROR_INVALID_ARGUMENT");
    ck_assert_str_eq(keel_status_name(KEEL_ERROR_INVALID_HANDLE), "KEEL_ERROR_INVALID_HANDLE");
    ck_assert_str_eq(keel_status_name(KEEL_ERROR_INVALID_POINTER), "KEEL_ERROR_INVALID_POINTER");
    ck_assert_str_eq(keel_status_name(KEEL_ERROR_OUT_OF_RANGE), "KEEL_ERROR_OUT_OF_RANGE");
    ck_assert_str_eq(keel_status_name(KEEL_ERROR_OUT_OF_MEMORY), "KEEL_ERROR_OUT_OF_MEMORY");
    ck_assert_str_eq(keel_status_name(KEEL_ERROR_NOT_SUPPORTED), "KEEL_ERROR_NOT_SUPPORTED");
    ck_assert_str_eq(keel_status_name(KEEL_ERROR_NOT_READY), "KEEL_ERROR_NOT_READY");
    ck_assert_str_eq(keel_status_name(KEEL_ERROR_NOT_FOUND), "KEEL_ERROR_NOT_FOUND");
    ck_assert_str_eq(keel_status_name(KEEL_ERROR_BACKEND_UNAVAILABLE), "KEEL_ERROR_BACKEND_UNAVAILABLE");
    ck_assert_str_eq(keel_status_name(KEEL_ERROR_NO_DEVICE), "KEEL_ERROR_NO_DEVICE");
    ck_assert_str_eq(keel_status_name(KEEL_ERROR_ABI_MISMATCH), "KEEL_ERROR_ABI_MISMATCH");
    ck_assert_str_eq(keel_status_name(KEEL_ERROR_INVALID_ENVIRONMENT), "KEEL_ERROR_INVALID_ENVIRONMENT");
    ck_assert_str_eq(keel_status_name(KEEL_ERROR_DEVICE_MISMATCH), "KEEL_ERROR_DEVICE_MISMATCH");
    ck_assert_str_eq(keel_status_name(KEEL_ERROR_LAUNCH_FAILED), "KEEL_ERROR_LAUNCH_FAILED");
    ck_assert_str_eq(keel_status_name(KEEL_ERROR_COMPILE_FAILED), "KEEL_ERROR_COMPILE_FAILED");
    ck_assert_str_eq(keel_status_name(KEEL_ERROR_DEVICE_LOST), "KEEL_ERROR_DEVICE_LOST");
    ck_assert_str_eq(keel_status_name(KEEL_ERROR_BACKEND), "KEEL_ERROR_BACKEND");
    ck_assert_str_eq(keel_status_name(KEEL_ERROR_BUSY), "KEEL_ERROR_BUSY");
    ck_assert_str_eq(keel_status_name(KEEL_ERROR_INTERNAL), "KEEL_ERROR_INTERNAL");
}
END_TEST

START_TEST(unknown_status_values_have_strings)
{
    const int bad[] = {-1, KEEL_STATUS_COUNT, 1000, -2147483647};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_str_eq(keel_status_string((keel_status_t)bad[i]), "unknown status");
        const char *n = keel_status_name((keel_status_t)bad[i]);
        ck_assert_ptr_nonnull(n);
        ck_assert_msg(n[0] != '\0', "status %d has an empty name", bad[i]);
    }
}
END_TEST

START_TEST(version_matches_the_header)
{
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", KEEL_VERSION_MAJOR, KEEL_VERSION_MINOR, KEEL_VERSION_PATCH);
    ck_assert_str_eq(keel_version_string(), want);
    int ma = -1, mi = -1, pa = -1;
    keel_version(&ma, &mi, &pa);
    ck_assert_int_eq(ma, KEEL_VERSION_MAJOR);
    ck_assert_int_eq(mi, KEEL_VERSION_MINOR);
    ck_assert_int_eq(pa, KEEL_VERSION_PATCH);
    /* Each out-pointer may be NULL. */
    ma = -1;
    keel_version(&ma, NULL, NULL);
    ck_assert_int_eq(ma, KEEL_VERSION_MAJOR);
    pa = -1;
    keel_version(NULL, NULL, &pa);
    ck_assert_int_eq(pa, KEEL_VERSION_PATCH);
    keel_version(NULL, NULL, NULL);
}
END_TEST

START_TEST(last_error_records_failure_and_survives_success)
{
    keel_clear_error();
    ck_assert_str_eq(keel_last_error(), "");
    ck_assert_int_eq(keel_last_status(), KEEL_OK);
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_backend_count(NULL));
    KT_DETAIL_HAS("keel_backend_count");
    char saved[512];
    snprintf(saved, sizeof saved, "%s", keel_last_error());
    /* A successful call does not clear it. */
    int n = 0;
    KT_OK(keel_backend_count(&n));
    ck_assert_str_eq(keel_last_error(), saved);
    ck_assert_int_eq(keel_last_status(), KEEL_ERROR_INVALID_ARGUMENT);
    /* The next failure replaces it. */
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_backend_get(n, &(keel_backend_t *){NULL}));
    KT_DETAIL_HAS("keel_backend_get");
    keel_clear_error();
    ck_assert_str_eq(keel_last_error(), "");
    ck_assert_int_eq(keel_last_status(), KEEL_OK);
}
END_TEST

struct thread_errors {
    pthread_barrier_t *barrier;
    int which;
    char seen_before[256];
    char seen_after[256];
    keel_status_t status_after;
};

static void *error_thread(void *p)
{
    struct thread_errors *t = p;
    snprintf(t->seen_before, sizeof t->seen_before, "%s", keel_last_error());
    /* Thread 0 fails one way, thread 1 another, at the same time. */
    if (t->which == 0)
        keel_backend_count(NULL);
    else
        keel_backend_get(-5, &(keel_backend_t *){NULL});
    pthread_barrier_wait(t->barrier);
    pthread_barrier_wait(t->barrier);
    snprintf(t->seen_after, sizeof t->seen_after, "%s", keel_last_error());
    t->status_after = keel_last_status();
    return NULL;
}

START_TEST(last_error_is_thread_local)
{
    /* This thread's error must not leak into new threads, nor theirs into it. */
    keel_backend_info_t info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_backend_get_info(NULL, &info));
    char mine[512];
    snprintf(mine, sizeof mine, "%s", keel_last_error());
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, 3);
    struct thread_errors t[2] = {{&barrier, 0, "", "", KEEL_OK}, {&barrier, 1, "", "", KEEL_OK}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, error_thread, &t[i]);
    pthread_barrier_wait(&barrier);
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&barrier);
    ck_assert_str_eq(t[0].seen_before, "");
    ck_assert_str_eq(t[1].seen_before, "");
    ck_assert_int_eq(t[0].status_after, KEEL_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(t[1].status_after, KEEL_ERROR_OUT_OF_RANGE);
    ck_assert_msg(strstr(t[0].seen_after, "keel_backend_count") != NULL, "thread 0 sees \"%s\"", t[0].seen_after);
    ck_assert_msg(strstr(t[1].seen_after, "keel_backend_get") != NULL, "thread 1 sees \"%s\"", t[1].seen_after);
    ck_assert_str_eq(keel_last_error(), mine);
    ck_assert_int_eq(keel_last_status(), KEEL_ERROR_INVALID_HANDLE);
}
END_TEST

START_TEST(init_is_idempotent)
{
    keel_status_t first = keel_init();
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(keel_init(), first);
}
END_TEST

static void *init_thread(void *p)
{
    *(keel_status_t *)p = keel_init();
    return NULL;
}

START_TEST(init_from_many_threads_agrees)
{
    enum { N = 8 };
    keel_status_t st[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++)
        pthread_create(&th[i], NULL, init_thread, &st[i]);
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    for (int i = 1; i < N; i++)
        ck_assert_int_eq(st[i], st[0]);
    ck_assert_int_eq(keel_init(), st[0]);
}
END_TEST

START_TEST(log_level_set_get_and_clamp)
{
    keel_log_level_t old = keel_log_get_level();
    for (int l = KEEL_LOG_NONE; l <= KEEL_LOG_DEBUG; l++) {
        keel_log_set_level((keel_log_level_t)l);
        ck_assert_int_eq(keel_log_get_level(), l);
    }
    keel_log_set_level((keel_log_level_t)(KEEL_LOG_DEBUG + 7));
    ck_assert_int_eq(keel_log_get_level(), KEEL_LOG_DEBUG);
    keel_log_set_level(old);
    ck_assert_int_eq(keel_log_get_level(), old);
}
END_TEST

START_TEST(env_var_table_names_every_variable)
{
    const char *want[] = {"KEEL_BACKEND", "KEEL_DEVICE", "KEEL_BACKEND_PATH", "KEEL_LOG", "KEEL_CPU_DEVICES",
                          "KEEL_CPU_MEMORY_LIMIT", "KEEL_FAULT"};
    int found[7] = {0};
    int n = 0;
    for (;; n++) {
        const char *name = KT_SENTINEL, *desc = KT_SENTINEL;
        keel_status_t s = keel_env_var_get(n, &name, &desc);
        if (s == KEEL_ERROR_OUT_OF_RANGE) {
            ck_assert_ptr_eq(name, KT_SENTINEL);
            ck_assert_ptr_eq(desc, KT_SENTINEL);
            break;
        }
        ck_assert_msg(s == KEEL_OK, "keel_env_var_get(%d) -> %s", n, keel_status_name(s));
        ck_assert_msg(n < 100, "keel_env_var_get never ends");
        ck_assert_ptr_nonnull(name);
        ck_assert_ptr_nonnull(desc);
        ck_assert_msg(strncmp(name, "KEEL_", 5) == 0, "variable %d is \"%s\"", n, name);
        ck_assert_msg(desc[0] != '\0', "%s has no description", name);
        for (int i = 0; i < 7; i++)
            found[i] |= strcmp(name, want[i]) == 0;
    }
    for (int i = 0; i < 7; i++)
        ck_assert_msg(found[i], "%s is not in keel_env_var_get's table", want[i]);
    /* The count is where keel_env_var_get ends, so a tool need not run into its error. */
    int count = -1;
    KT_OK(keel_env_var_count(&count));
    ck_assert_int_eq(count, n);
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_env_var_count(NULL));
    /* Either output may be NULL. */
    KT_OK(keel_env_var_get(0, NULL, NULL));
    const char *name = KT_SENTINEL;
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_env_var_get(-1, &name, &name));
    ck_assert_ptr_eq(name, KT_SENTINEL);

    /* The value in force of each: what the environment holds now, and the name that set it. */
    const char *value = KT_SENTINEL, *set_by = KT_SENTINEL;
    for (int i = 0; i < n; i++) {
        KT_OK(keel_env_var_get(i, &name, NULL));
        if (strcmp(name, "KEEL_FAULT") != 0)
            continue;
        const char *old = getenv(name);
        char *saved = old ? strdup(old) : NULL;
        char fresh[32];
        snprintf(fresh, sizeof fresh, "probe%llu", (unsigned long long)(kt_rand64() % 1000000));
        setenv(name, fresh, 1);
        KT_OK(keel_env_var_value(i, &value, &set_by));
        ck_assert_msg(value && strcmp(value, fresh) == 0 && set_by && strcmp(set_by, name) == 0,
                      "%s=%s reads as %s (set by %s)", name, fresh, value ? value : "NULL", set_by ? set_by : "NULL");
        unsetenv(name);
        KT_OK(keel_env_var_value(i, &value, &set_by));
        ck_assert_msg(value == NULL && set_by == NULL, "unset %s reads as %s", name, value ? value : "NULL");
        KT_OK(keel_env_var_value(i, NULL, NULL));
        if (saved)
            setenv(name, saved, 1);
        free(saved);
    }
    value = set_by = KT_SENTINEL;
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_env_var_value(n, &value, &set_by));
    ck_assert_ptr_eq(value, KT_SENTINEL);
    ck_assert_ptr_eq(set_by, KT_SENTINEL);
}
END_TEST

/* A log callback may call Keel: a failing call inside it would log again;
 * that line is dropped instead of deadlocking on the logger's lock. The
 * fixture's watchdog turns a deadlock into a failure. */
static int callback_lines;
static void calling_callback(keel_log_level_t level, const char *message, void *user)
{
    (void)level;
    (void)message;
    (void)user;
    callback_lines++;
    keel_backend_t *b;
    keel_backend_find("no_such_backend_inside_callback", &b); /* fails, and logs at debug */
}

START_TEST(log_callback_may_call_keel)
{
    keel_log_level_t old = keel_log_get_level();
    keel_log_set_callback(calling_callback, NULL);
    keel_log_set_level(KEEL_LOG_DEBUG);
    callback_lines = 0;
    keel_backend_t *b;
    ck_assert_int_eq(keel_backend_find("no_such_backend_outside", &b), KEEL_ERROR_NOT_FOUND);
    keel_log_set_level(old);
    keel_log_set_callback(NULL, NULL);
    ck_assert_msg(callback_lines == 1, "the callback ran %d times for one failing call", callback_lines);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("status");
    TCase *tc = kt_tcase_create("status", 60);
    tcase_add_test(tc, status_strings_are_distinct_and_nonempty);
    tcase_add_test(tc, status_names_match_the_enum);
    tcase_add_test(tc, unknown_status_values_have_strings);
    tcase_add_test(tc, version_matches_the_header);
    tcase_add_test(tc, last_error_records_failure_and_survives_success);
    tcase_add_test(tc, last_error_is_thread_local);
    tcase_add_test(tc, init_is_idempotent);
    tcase_add_test(tc, init_from_many_threads_agrees);
    tcase_add_test(tc, log_level_set_get_and_clamp);
    tcase_add_test(tc, env_var_table_names_every_variable);
    tcase_add_test(tc, log_callback_may_call_keel);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return kt_main(argc, argv, suite(), 0, 0);
}
