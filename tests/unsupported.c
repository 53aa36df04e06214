/* SPDX-License-Identifier: MIT */
/* What each backend is expected not to support, and why.
 *
 * A suite that calls something a backend may lack passes the call's status
 * to kt_unsupported(): a KEEL_ERROR_NOT_SUPPORTED that this table expects
 * ends the test quietly (with a line saying why), one it does not expect
 * fails the test, and so does success where the table expects
 * NOT_SUPPORTED, so that the table stays true in both directions. A backend
 * that regresses to NOT_SUPPORTED therefore fails its suites instead of
 * passing them with nothing checked. */
#include <stdlib.h>
#include "fixture.h"

static int no_managed_memory(keel_device_t *dev)
{
    keel_device_properties_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    KT_OK(keel_device_get_properties(dev, &p));
    return !p.managed_memory;
}

typedef struct expected {
    kt_feature_t feature;
    const char *backend;
    /* NULL: never supported on this backend; else whether this device lacks it. */
    int (*lacks)(keel_device_t *dev);
    const char *why;
} expected_t;

static const expected_t expected[] = {
    {KT_MANAGED_MEMORY, "cuda", no_managed_memory, "the device reports no managed memory (cudaDevAttrManagedMemory)"},
    {KT_MANAGED_MEMORY, "hip", no_managed_memory, "the device reports no managed memory (hipDeviceAttributeManagedMemory)"},
    {KT_KERNEL_PARAM_COUNT, "hip", NULL, "HIP has no counterpart of cuKernelGetParamInfo"},
};

static const char *const feature_names[KT_FEATURE_COUNT] = {
    [KT_MANAGED_MEMORY] = "managed memory",
    [KT_HOST_REGISTER] = "registering host memory",
    [KT_GRAPHS] = "graphs",
    [KT_RUNTIME_COMPILE] = "run-time compilation",
    [KT_OCCUPANCY] = "occupancy queries",
    [KT_DYNAMIC_SHARED] = "raising a kernel's dynamic shared memory",
    [KT_KERNEL_PARAM_COUNT] = "a kernel's parameter count",
};

const char *kt_feature_name(kt_feature_t f)
{
    return f >= 0 && f < KT_FEATURE_COUNT && feature_names[f] ? feature_names[f] : "(unknown feature)";
}

const char *kt_expected_unsupported(keel_device_t *dev, kt_feature_t f)
{
    const char *backend = kt_backend_name(dev);
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
        if (expected[i].feature == f && strcmp(expected[i].backend, backend) == 0 &&
            (!expected[i].lacks || expected[i].lacks(dev)))
            return expected[i].why;
    return NULL;
}

kt_verdict_t kt_unsupported_verdict(keel_device_t *dev, kt_feature_t f, keel_status_t st, char *msg, size_t size)
{
    const char *why = kt_expected_unsupported(dev, f);
    if (st == KEEL_ERROR_NOT_SUPPORTED && why) {
        snprintf(msg, size, "%s is not supported on %s: %s", kt_feature_name(f), kt_backend_name(dev), why);
        return KT_VERDICT_STOP;
    }
    if (st == KEEL_ERROR_NOT_SUPPORTED) {
        snprintf(msg, size,
                 "%s answered KEEL_ERROR_NOT_SUPPORTED on the %s backend, which is expected to support it (%s); if "
                 "that changed on purpose, say why in tests/unsupported.c",
                 kt_feature_name(f), kt_backend_name(dev), keel_last_error());
        return KT_VERDICT_WRONG;
    }
    if (why) {
        snprintf(msg, size,
                 "%s answered %s on the %s backend, where tests/unsupported.c expects KEEL_ERROR_NOT_SUPPORTED (%s): "
                 "the table is out of date",
                 kt_feature_name(f), keel_status_name(st), kt_backend_name(dev), why);
        return KT_VERDICT_WRONG;
    }
    msg[0] = '\0';
    return KT_VERDICT_GO_ON;
}

int kt_unsupported(keel_device_t *dev, kt_feature_t f, keel_status_t st)
{
    char msg[512];
    kt_verdict_t v = kt_unsupported_verdict(dev, f, st, msg, sizeof msg);
    ck_assert_msg(v != KT_VERDICT_WRONG, "%s%s", kt_where(), msg);
    if (v == KT_VERDICT_STOP)
        printf("%sskipped: %s\n", kt_where(), msg);
    return v == KT_VERDICT_STOP;
}
