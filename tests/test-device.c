/* SPDX-License-Identifier: MIT */
/* test-device: the backend list and its reasons, devices, properties, the
 * default device, keel_device_get, memory info, peer access, and the error
 * paths of every function of keel/device.h. */
#include <stddef.h>
#include <stdlib.h>
#include "fixture.h"
#include "keel/backend.h"

/* Memory that is no Keel handle: a handle check must refuse it, not crash. */
static uint64_t not_a_handle[64];

static keel_backend_info_t info_of(keel_backend_t *be)
{
    keel_backend_info_t info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    KT_OK(keel_backend_get_info(be, &info));
    return info;
}

START_TEST(backend_list_has_cpu_cuda_hip_with_reasons)
{
    int n = -1;
    KT_OK(keel_backend_count(&n));
    ck_assert_int_ge(n, 3);
    int seen_cpu = 0, seen_cuda = 0, seen_hip = 0;
    for (int i = 0; i < n; i++) {
        keel_backend_t *be = NULL, *again = NULL, *found = NULL;
        KT_OK(keel_backend_get(i, &be));
        ck_assert_ptr_nonnull(be);
        KT_OK(keel_backend_get(i, &again));
        ck_assert_ptr_eq(be, again);
        keel_backend_info_t info = info_of(be);
        ck_assert_ptr_nonnull(info.name);
        ck_assert_msg(info.name[0] != '\0', "backend %d has no name", i);
        ck_assert_ptr_nonnull(info.reason);
        KT_OK(keel_backend_find(info.name, &found));
        ck_assert_ptr_eq(found, be);
        for (int j = 0; j < i; j++) {
            keel_backend_t *other = NULL;
            KT_OK(keel_backend_get(j, &other));
            ck_assert_msg(strcmp(info_of(other).name, info.name) != 0, "two backends named %s", info.name);
        }
        if (info.usable) {
            ck_assert_int_eq(info.status, KEEL_OK);
            ck_assert_str_eq(info.reason, "");
            ck_assert_int_ge(info.device_count, 1);
            ck_assert_ptr_nonnull(info.description);
        } else {
            ck_assert_msg(info.status != KEEL_OK, "%s is unusable with status KEEL_OK", info.name);
            ck_assert_msg(info.reason[0] != '\0', "%s is unusable without a reason", info.name);
            ck_assert_int_eq(info.device_count, 0);
            keel_device_t *dev = KT_SENTINEL;
            KT_FAIL(KEEL_ERROR_BACKEND_UNAVAILABLE, keel_backend_get_device(be, 0, &dev));
            ck_assert_ptr_eq(dev, KT_SENTINEL);
        }
        if (strcmp(info.name, "cpu") == 0) {
            seen_cpu = 1;
            ck_assert_msg(info.usable, "the CPU backend is not usable: %s", info.reason);
            ck_assert_ptr_nonnull(info.plugin_path);
            ck_assert_str_eq(info.plugin_path, "(built in)");
            ck_assert_int_eq(info.abi_version, KEEL_BACKEND_ABI_VERSION);
        }
        seen_cuda |= strcmp(info.name, "cuda") == 0;
        seen_hip |= strcmp(info.name, "hip") == 0;
    }
    ck_assert_msg(seen_cpu && seen_cuda && seen_hip, "cpu %d cuda %d hip %d", seen_cpu, seen_cuda, seen_hip);
}
END_TEST

START_TEST(backend_get_and_find_reject_bad_input)
{
    int n = 0;
    KT_OK(keel_backend_count(&n));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_backend_count(NULL));
    keel_backend_t *be = KT_SENTINEL;
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_backend_get(n, &be));
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_backend_get(-1, &be));
    ck_assert_ptr_eq(be, KT_SENTINEL);
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_backend_get(0, NULL));
    KT_FAIL(KEEL_ERROR_NOT_FOUND, keel_backend_find("bogus", &be));
    ck_assert_ptr_eq(be, KT_SENTINEL);
    /* The detail lists the names that would have worked. */
    KT_DETAIL_HAS("cpu");
    KT_DETAIL_HAS("cuda");
    KT_DETAIL_HAS("hip");
    KT_FAIL(KEEL_ERROR_NOT_FOUND, keel_backend_find("", &be));
    KT_FAIL(KEEL_ERROR_NOT_FOUND, keel_backend_find("CPU", &be));
    ck_assert_ptr_eq(be, KT_SENTINEL);
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_backend_find(NULL, &be));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_backend_find("cpu", NULL));
}
END_TEST

START_TEST(backend_get_info_rejects_bad_input_and_respects_struct_size)
{
    keel_backend_t *cpu = NULL;
    KT_OK(keel_backend_find("cpu", &cpu));
    keel_backend_info_t info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_backend_get_info(NULL, &info));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_backend_get_info((keel_backend_t *)not_a_handle, &info));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_backend_get_info(cpu, NULL));
    /* An older, shorter struct: the fields past its size stay untouched. */
    memset(&info, 0x5A, sizeof info);
    info.struct_size = offsetof(keel_backend_info_t, plugin_path);
    KT_OK(keel_backend_get_info(cpu, &info));
    ck_assert_str_eq(info.name, "cpu");
    ck_assert_ptr_nonnull(info.description);
    unsigned char *tail = (unsigned char *)&info + offsetof(keel_backend_info_t, plugin_path);
    for (size_t i = 0; i < sizeof info - offsetof(keel_backend_info_t, plugin_path); i++)
        ck_assert_msg(tail[i] == 0x5A, "byte %zu past struct_size was written",
                      i + offsetof(keel_backend_info_t, plugin_path));
    memset(&info, 0x5A, sizeof info);
    info.struct_size = 0;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_backend_get_info(cpu, &info));
    ck_assert_msg(((unsigned char *)&info)[sizeof(size_t)] == 0x5A, "a refused call wrote the struct");
}
END_TEST

START_TEST(backend_get_device_rejects_bad_index)
{
    keel_backend_t *cpu = NULL;
    KT_OK(keel_backend_find("cpu", &cpu));
    keel_backend_info_t info = info_of(cpu);
    keel_device_t *dev = KT_SENTINEL;
    KT_FAIL(KEEL_ERROR_NO_DEVICE, keel_backend_get_device(cpu, info.device_count, &dev));
    ck_assert_ptr_eq(dev, KT_SENTINEL);
    keel_clear_error();
    ck_assert_int_ne(keel_backend_get_device(cpu, -1, &dev), KEEL_OK);
    ck_assert_ptr_eq(dev, KT_SENTINEL);
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_backend_get_device(NULL, 0, &dev));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_backend_get_device((keel_backend_t *)not_a_handle, 0, &dev));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_backend_get_device(cpu, 0, NULL));
    ck_assert_ptr_eq(dev, KT_SENTINEL);
}
END_TEST

START_TEST(device_get_matches_backend_get_device)
{
    keel_backend_t *cpu = NULL;
    KT_OK(keel_backend_find("cpu", &cpu));
    keel_backend_info_t info = info_of(cpu);
    for (int i = 0; i < info.device_count; i++) {
        keel_device_t *a = NULL, *b = NULL;
        KT_OK(keel_device_get("cpu", i, &a));
        KT_OK(keel_backend_get_device(cpu, i, &b));
        ck_assert_ptr_eq(a, b);
        char want[32];
        snprintf(want, sizeof want, "cpu:%d", i);
        ck_assert_str_eq(keel_device_name(a), want);
    }
    keel_device_t *dev = KT_SENTINEL;
    KT_FAIL(KEEL_ERROR_NOT_FOUND, keel_device_get("bogus", 0, &dev));
    KT_FAIL(KEEL_ERROR_NO_DEVICE, keel_device_get("cpu", info.device_count, &dev));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_device_get(NULL, 0, &dev));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_device_get("cpu", 0, NULL));
    ck_assert_ptr_eq(dev, KT_SENTINEL);
}
END_TEST

START_TEST(default_device_follows_the_preference_order)
{
    keel_device_t *dev = NULL;
    KT_OK(keel_device_default(&dev));
    ck_assert_ptr_nonnull(dev);
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_device_default(NULL));
    const char *env_backend = getenv("KEEL_BACKEND");
    const char *env_device = getenv("KEEL_DEVICE");
    if ((env_backend && *env_backend) || (env_device && *env_device))
        return; /* test-env checks the selection variables one by one */
    /* Unset KEEL_BACKEND means cuda,hip,cpu: the first usable one, device 0. */
    const char *order[] = {"cuda", "hip", "cpu"};
    for (int i = 0; i < 3; i++) {
        keel_backend_t *be = NULL;
        if (keel_backend_find(order[i], &be) != KEEL_OK || !info_of(be).usable)
            continue;
        keel_device_t *want = NULL;
        KT_OK(keel_backend_get_device(be, 0, &want));
        ck_assert_msg(dev == want, "default device is %s, expected %s", keel_device_name(dev),
                      keel_device_name(want));
        return;
    }
    ck_abort_msg("no usable backend among cuda, hip, cpu");
}
END_TEST

KT_DEVICE_TEST(device_properties_are_sane)
{
    keel_device_properties_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    KT_OK(keel_device_get_properties(dev, &p));
    keel_backend_t *be = NULL;
    int idx = -1;
    KT_OK(keel_device_get_backend(dev, &be));
    KT_OK(keel_device_get_index(dev, &idx));
    keel_backend_info_t info = info_of(be);
    ck_assert_str_eq(p.backend, info.name);
    ck_assert_int_eq(p.index, idx);
    ck_assert_msg(p.name[0] != '\0' && memchr(p.name, '\0', sizeof p.name), "bad name");
    ck_assert_msg(memchr(p.vendor, '\0', sizeof p.vendor) != NULL, "vendor is not terminated");
    ck_assert_msg(memchr(p.architecture, '\0', sizeof p.architecture) != NULL, "architecture is not terminated");
    char want_name[48];
    snprintf(want_name, sizeof want_name, "%s:%d", info.name, idx);
    ck_assert_str_eq(keel_device_name(dev), want_name);
    ck_assert_int_gt(p.total_memory, 0);
    ck_assert_msg(p.free_memory <= p.total_memory, "free %zu > total %zu", p.free_memory, p.total_memory);
    ck_assert_int_ge(p.compute_units, 1);
    ck_assert_int_ge(p.max_threads_per_block, 1);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_ge(p.max_block_dim[i], 1);
        ck_assert_int_ge(p.max_grid_dim[i], 1);
    }
    ck_assert_int_le(p.max_block_dim[0], p.max_threads_per_block);
    ck_assert_int_ge(p.warp_size, 1);
    ck_assert_int_gt(p.shared_memory_per_block, 0);
    ck_assert_int_ge(p.clock_rate_khz, 0);
    ck_assert_int_ge(p.async_engines, 0);
    ck_assert(p.unified_addressing == 0 || p.unified_addressing == 1);
    ck_assert(p.managed_memory == 0 || p.managed_memory == 1);
    if (kt_is_cpu(dev)) {
        ck_assert_int_eq(p.type, KEEL_DEVICE_TYPE_CPU);
        ck_assert_int_eq(p.warp_size, 1);
        ck_assert_int_eq(p.pci_bus_id, -1);
        ck_assert_int_eq(p.compute_capability_major, 0);
        ck_assert_int_eq(p.unified_addressing, 1);
        ck_assert_int_eq(p.managed_memory, 1);
    } else {
        ck_assert_int_eq(p.type, KEEL_DEVICE_TYPE_GPU);
    }
    if (strcmp(info.name, "cuda") == 0) {
        ck_assert_int_eq(p.warp_size, 32);
        ck_assert_int_ge(p.compute_capability_major, 5);
        ck_assert_str_eq(p.vendor, "NVIDIA");
    }
}

KT_DEVICE_TEST(device_properties_respect_struct_size_and_reject_bad_input)
{
    keel_device_properties_t p;
    memset(&p, 0x5A, sizeof p);
    size_t cut = offsetof(keel_device_properties_t, vendor);
    p.struct_size = cut;
    KT_OK(keel_device_get_properties(dev, &p));
    ck_assert_msg(memchr(p.name, '\0', sizeof p.name) != NULL && p.name[0] != '\0', "name not filled");
    const unsigned char *b = (const unsigned char *)&p;
    for (size_t i = cut; i < sizeof p; i++)
        ck_assert_msg(b[i] == 0x5A, "byte %zu past struct_size %zu was written", i, cut);
    /* A struct_size of 0 (never set) is refused, the struct untouched. */
    memset(&p, 0x5A, sizeof p);
    p.struct_size = 0;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_device_get_properties(dev, &p));
    ck_assert_msg(b[sizeof(size_t)] == 0x5A, "a refused call wrote the struct");
    /* A newer caller's larger struct: Keel writes only what it knows. */
    struct {
        keel_device_properties_t p;
        unsigned char more[64];
    } big;
    memset(&big, 0x5A, sizeof big);
    big.p.struct_size = sizeof big;
    KT_OK(keel_device_get_properties(dev, &big.p));
    ck_assert_msg(big.p.name[0] != '\0', "name not filled");
    for (size_t i = 0; i < sizeof big.more; i++)
        ck_assert_msg(big.more[i] == 0x5A, "byte %zu past sizeof(keel_device_properties_t) was written", i);
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_device_get_properties(NULL, &p));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_device_get_properties((keel_device_t *)not_a_handle, &p));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_device_get_properties(dev, NULL));
}

KT_DEVICE_TEST(device_memory_info_is_consistent)
{
    size_t f = 0, t = 0;
    KT_OK(keel_device_memory_info(dev, &f, &t));
    ck_assert_int_gt(t, 0);
    ck_assert_msg(f <= t, "free %zu > total %zu", f, t);
    size_t t2 = 0;
    KT_OK(keel_device_memory_info(dev, NULL, &t2));
    ck_assert_int_eq(t2, t);
    size_t f2 = 0;
    KT_OK(keel_device_memory_info(dev, &f2, NULL));
    ck_assert_msg(f2 <= t, "free %zu > total %zu", f2, t);
    KT_OK(keel_device_memory_info(dev, NULL, NULL));
    keel_device_properties_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    KT_OK(keel_device_get_properties(dev, &p));
    ck_assert_int_eq(p.total_memory, t);
    size_t keep = 12345;
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_device_memory_info(NULL, &keep, &keep));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_device_memory_info((keel_device_t *)not_a_handle, &keep, &keep));
    ck_assert_int_eq(keep, 12345);
}

KT_DEVICE_TEST(device_backend_index_and_name_round_trip)
{
    keel_backend_t *be = NULL;
    int idx = -1;
    KT_OK(keel_device_get_backend(dev, &be));
    KT_OK(keel_device_get_index(dev, &idx));
    keel_device_t *again = NULL;
    KT_OK(keel_backend_get_device(be, idx, &again));
    ck_assert_ptr_eq(again, dev);
    keel_device_get(info_of(be).name, idx, &again);
    ck_assert_ptr_eq(again, dev);
    /* The name is static: the same pointer every time. */
    ck_assert_ptr_eq(keel_device_name(dev), keel_device_name(dev));
    keel_backend_t *be_keep = KT_SENTINEL;
    int idx_keep = 4242;
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_device_get_backend(NULL, &be_keep));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_device_get_index(NULL, &idx_keep));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_device_get_index((keel_device_t *)not_a_handle, &idx_keep));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_device_get_backend(dev, NULL));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_device_get_index(dev, NULL));
    ck_assert_ptr_eq(be_keep, KT_SENTINEL);
    ck_assert_int_eq(idx_keep, 4242);
}

/* The name functions never return NULL, so a printf of them is always safe. */
KT_DEVICE_TEST(device_name_of_a_bad_handle_is_a_string)
{
    const char *n = keel_device_name(NULL);
    ck_assert_ptr_nonnull(n);
    ck_assert_msg(n[0] != '\0', "keel_device_name(NULL) is empty");
    n = keel_device_name((keel_device_t *)not_a_handle);
    ck_assert_ptr_nonnull(n);
    ck_assert_msg(strcmp(n, keel_device_name(dev)) != 0, "a bad handle got the name of %s", n);
    n = keel_kernel_name(NULL);
    ck_assert_ptr_nonnull(n);
}

KT_DEVICE_TEST(device_synchronize_works_and_rejects_bad_handles)
{
    KT_OK(keel_device_synchronize(dev));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_device_synchronize(NULL));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_device_synchronize((keel_device_t *)not_a_handle));
}

KT_DEVICE_TEST(peer_access_queries)
{
    int can = -7;
    keel_device_t *other = kt_other_device(dev);
    if (other != NULL) {
        KT_OK(keel_device_can_access_peer(dev, other, &can));
        ck_assert_msg(can == 0 || can == 1, "can_access = %d", can);
        if (kt_is_cpu(dev))
            ck_assert_msg(can == 1, "CPU devices share one memory, yet can_access is 0");
    }
    keel_device_t *foreign = kt_foreign_device(dev);
    if (foreign != NULL) {
        can = -7;
        KT_OK(keel_device_can_access_peer(dev, foreign, &can));
        ck_assert_int_eq(can, 0);
    }
    can = -7;
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_device_can_access_peer(NULL, dev, &can));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_device_can_access_peer(dev, NULL, &can));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_device_can_access_peer(dev, (keel_device_t *)not_a_handle, &can));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_device_can_access_peer(dev, dev, NULL));
    ck_assert_int_eq(can, -7);
}

START_TEST(cpu_device_count_follows_keel_cpu_devices)
{
    const char *env = getenv("KEEL_CPU_DEVICES");
    keel_backend_t *cpu = NULL;
    KT_OK(keel_backend_find("cpu", &cpu));
    int want = env && *env ? atoi(env) : 1;
    ck_assert_int_eq(info_of(cpu).device_count, want);
}
END_TEST

/* keel_device_count agrees with the backend list: each backend's usable
 * devices (0 for one that is not usable), NULL for the default device's. */
START_TEST(device_count_matches_each_backend)
{
    int nb = 0;
    KT_OK(keel_backend_count(&nb));
    for (int i = 0; i < nb; i++) {
        keel_backend_t *b = NULL;
        KT_OK(keel_backend_get(i, &b));
        keel_backend_info_t info = info_of(b);
        int n = -1;
        KT_OK(keel_device_count(info.name, &n));
        ck_assert_msg(n == (info.usable ? info.device_count : 0), "backend %s: keel_device_count %d, info %d (usable %d)",
                      info.name, n, info.device_count, info.usable);
    }
    keel_device_t *def = NULL;
    if (keel_device_default(&def) == KEEL_OK) {
        keel_backend_t *b = NULL;
        KT_OK(keel_device_get_backend(def, &b));
        int n = -1;
        KT_OK(keel_device_count(NULL, &n));
        ck_assert_int_eq(n, info_of(b).device_count);
    }
    int n = 12345;
    KT_FAIL(KEEL_ERROR_NOT_FOUND, keel_device_count("nosuchbackend", &n));
    KT_DETAIL_HAS("nosuchbackend");
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_device_count("cpu", NULL));
    ck_assert_int_eq(n, 12345);
}
END_TEST

/* The plugin search path: KEEL_BACKEND_PATH's directories first, the
 * configured plugin directory last, every one separated by ':'. */
START_TEST(backend_search_path_lists_the_directories)
{
    const char *path = NULL;
    int n = 0;
    KT_OK(keel_backend_search_path(&path, &n));
    ck_assert_msg(path != NULL && path[0] == '/' && n >= 1, "search path \"%s\", %d directories", path ? path : "",
                  n);
    int colons = 0;
    for (const char *c = path; *c; c++)
        colons += *c == ':';
    ck_assert_int_eq(colons, n - 1);
    const char *env = getenv("KEEL_BACKEND_PATH");
    if (env && *env) { /* the harness sets it to directories that exist */
        size_t first = strcspn(env, ":");
        ck_assert_msg(strncmp(path, env, first) == 0, "search path \"%s\" does not start with KEEL_BACKEND_PATH's "
                      "first directory (%s)", path, env);
    }
    KT_OK(keel_backend_search_path(&path, NULL)); /* count is optional */
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_backend_search_path(NULL, &n));
}
END_TEST

/* The fixture's table of expected NOT_SUPPORTED answers judges both ways:
 * an unexpected NOT_SUPPORTED and a success where NOT_SUPPORTED is expected
 * are both wrong. */
KT_DEVICE_TEST(unsupported_table_judges_both_ways)
{
    char msg[512];
    for (int f = 0; f < KT_FEATURE_COUNT; f++) {
        kt_feature_t ft = (kt_feature_t)f;
        const char *why = kt_expected_unsupported(dev, ft);
        const char *name = kt_feature_name(ft);
        kt_verdict_t v = kt_unsupported_verdict(dev, ft, KEEL_ERROR_NOT_SUPPORTED, msg, sizeof msg);
        ck_assert_msg(v == (why ? KT_VERDICT_STOP : KT_VERDICT_WRONG), "%s: NOT_SUPPORTED judged %d (%s)", name,
                      (int)v, msg);
        ck_assert_msg(strstr(msg, name) != NULL, "%s: the message names the feature: %s", name, msg);
        v = kt_unsupported_verdict(dev, ft, KEEL_OK, msg, sizeof msg);
        ck_assert_msg(v == (why ? KT_VERDICT_WRONG : KT_VERDICT_GO_ON), "%s: KEEL_OK judged %d (%s)", name, (int)v,
                      msg);
        if (why)
            ck_assert_msg(strstr(msg, "out of date") != NULL, "%s: the message says the table is stale: %s", name,
                          msg);
        v = kt_unsupported_verdict(dev, ft, KEEL_ERROR_INVALID_ARGUMENT, msg, sizeof msg);
        ck_assert_msg(v == (why ? KT_VERDICT_WRONG : KT_VERDICT_GO_ON), "%s: another error judged %d (%s)", name,
                      (int)v, msg);
    }
    /* The CPU backend supports everything the table names. */
    if (kt_is_cpu(dev))
        for (int f = 0; f < KT_FEATURE_COUNT; f++)
            ck_assert_msg(kt_expected_unsupported(dev, (kt_feature_t)f) == NULL, "cpu is expected to lack %s",
                          kt_feature_name(f));
}

static Suite *suite(void)
{
    Suite *s = suite_create("device");
    TCase *tc = kt_tcase_create("backends", 60);
    tcase_add_test(tc, backend_list_has_cpu_cuda_hip_with_reasons);
    tcase_add_test(tc, backend_get_and_find_reject_bad_input);
    tcase_add_test(tc, backend_get_info_rejects_bad_input_and_respects_struct_size);
    tcase_add_test(tc, backend_get_device_rejects_bad_index);
    tcase_add_test(tc, device_get_matches_backend_get_device);
    tcase_add_test(tc, default_device_follows_the_preference_order);
    tcase_add_test(tc, cpu_device_count_follows_keel_cpu_devices);
    tcase_add_test(tc, device_count_matches_each_backend);
    tcase_add_test(tc, backend_search_path_lists_the_directories);
    suite_add_tcase(s, tc);
    TCase *td = kt_tcase_create("devices", 60);
    kt_add_device_test(td, device_properties_are_sane);
    kt_add_device_test(td, device_properties_respect_struct_size_and_reject_bad_input);
    kt_add_device_test(td, device_memory_info_is_consistent);
    kt_add_device_test(td, device_backend_index_and_name_round_trip);
    kt_add_device_test(td, device_synchronize_works_and_rejects_bad_handles);
    kt_add_device_test(td, device_name_of_a_bad_handle_is_a_string);
    kt_add_device_test(td, peer_access_queries);
    kt_add_device_test(td, unsupported_table_judges_both_ways);
    suite_add_tcase(s, td);
    return s;
}

int main(int argc, char **argv)
{
    return kt_main(argc, argv, suite(), 1, 1);
}
