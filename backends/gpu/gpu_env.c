/* SPDX-License-Identifier: MIT */
/* The GPU plugins' own environment variables, checked once at probe so that
 * garbage in them is an error naming the valid values, not a silent default.
 * Both plugins read the KEEL_CUDA_* names (the cuBLASLt setting is CUDA's
 * alone). Words match without regard to case, as in the core's variables. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "gpu_internal.h"
#ifndef KEEL_GPU_HIP
#include "backends/cuda/cuda_internal.h" /* KEEL_CUDA_LT_ALGO_MAX */
#endif

static int one_of(const char *v, const char *a, const char *b)
{
    return strcasecmp(v, a) == 0 || strcasecmp(v, b) == 0;
}

static int number_in(const char *v, unsigned long long lo, unsigned long long hi)
{
    if (v[0] < '0' || v[0] > '9')
        return 0;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    return *end == '\0' && x >= lo && x <= hi;
}

keel_status_t keel__gpu_check_env(void)
{
    const char *v;
    if ((v = getenv("KEEL_CUDA_LAUNCH")) && v[0] && !one_of(v, "kernel", "function"))
        return keel__gpu_host->set_error(KEEL_ERROR_INVALID_ENVIRONMENT,
                                         "KEEL_CUDA_LAUNCH=\"%s\": expected kernel (the default) or function", v);
    if ((v = getenv("KEEL_CUDA_HOST_FUNCS")) && v[0] && !one_of(v, "keel", "cuda"))
        return keel__gpu_host->set_error(KEEL_ERROR_INVALID_ENVIRONMENT,
                                         "KEEL_CUDA_HOST_FUNCS=\"%s\": expected keel (the default) or cuda", v);
    if ((v = getenv("KEEL_CUDA_COPY_THREADS")) && v[0] && !number_in(v, 1, 16))
        return keel__gpu_host->set_error(KEEL_ERROR_INVALID_ENVIRONMENT,
                                         "KEEL_CUDA_COPY_THREADS=\"%s\": expected a whole number from 1 to 16", v);
    if ((v = getenv("KEEL_CUDA_STAGING_CHUNK_KB")) && v[0] && !number_in(v, 256, 256 << 10))
        return keel__gpu_host->set_error(KEEL_ERROR_INVALID_ENVIRONMENT,
                                         "KEEL_CUDA_STAGING_CHUNK_KB=\"%s\": expected a whole number from 256 to 262144",
                                         v);
#ifndef KEEL_GPU_HIP /* cuBLASLt plans (backends/cuda/cuda_lt_plan.h) */
    if ((v = getenv("KEEL_CUDA_LT_ALGO")) && v[0] && strcasecmp(v, "tune") != 0 && !number_in(v, 0, KEEL_CUDA_LT_ALGO_MAX))
        return keel__gpu_host->set_error(KEEL_ERROR_INVALID_ENVIRONMENT,
                                         "KEEL_CUDA_LT_ALGO=\"%s\": expected tune (the default) or a candidate "
                                         "number from 0 to %d",
                                         v, KEEL_CUDA_LT_ALGO_MAX);
#endif
    return KEEL_OK;
}
