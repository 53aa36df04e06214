/* SPDX-License-Identifier: MIT */
/* A kernel that faults leaves the CUDA context unusable: Keel must report
 * KEEL_ERROR_DEVICE_LOST, with CUDA's error name, on that call and on the
 * calls after it, instead of hiding it. Its own process, since nothing of
 * the device works afterwards. Exit 77 when CUDA is not usable. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "keel.h"

static const char ptx[] =
    ".version 7.8\n.target sm_80\n.address_size 64\n"
    ".visible .entry poke(.param .u64 p)\n{\n\t.reg .b64 %rd<2>;\n"
    "\tld.param.u64 %rd1, [p];\n\tst.global.u32 [%rd1], 1;\n\tret;\n}\n";

static int fails = 0;

static void expect(const char *what, keel_status_t got, keel_status_t want, const char *needle)
{
    int ok = got == want && (needle == NULL || strstr(keel_last_error(), needle) != NULL);
    printf("%s %s: %s (%s)\n", ok ? "ok  " : "FAIL", what, keel_status_name(got), keel_last_error());
    fails += !ok;
}

int main(void)
{
    keel_device_t *dev;
    if (keel_device_get("cuda", 0, &dev) != KEEL_OK) {
        printf("SKIP: the CUDA backend is not usable: %s\n", keel_last_error());
        return 77;
    }
    keel_stream_t *s;
    keel_module_t *m;
    keel_kernel_t *k;
    void *good;
    if (keel_stream_create(dev, 0, 0, &s) != KEEL_OK || keel_module_load_data(dev, ptx, sizeof ptx, &m) != KEEL_OK ||
        keel_module_get_kernel(m, "poke", &k) != KEEL_OK || keel_malloc(dev, 4096, &good) != KEEL_OK) {
        printf("FAIL setup: %s\n", keel_last_error());
        return 1;
    }
    void *bad = (void *)(uintptr_t)0x8;
    void *args[] = {&bad};
    expect("launch", keel_launch_kernel(k, (keel_dim3_t){1, 1, 1}, (keel_dim3_t){1, 1, 1}, 0, s, args), KEEL_OK,
           NULL);
    expect("synchronize after the fault", keel_stream_synchronize(s), KEEL_ERROR_DEVICE_LOST, "cudaErrorIllegalAddress");
    expect("a later memset", keel_memset(good, 0, 4096), KEEL_ERROR_DEVICE_LOST, NULL);
    return fails ? 1 : 0;
}
