/* SPDX-License-Identifier: MIT */
/* The GPU plugins' environment variables, as a table the core checks before
 * probe (keel_env_decl_t, docs/backend-authors.md) and lists in keel-info.
 * Variables that apply to both plugins have GPU names; the KEEL_CUDA_* names
 * they had before stay as aliases. The launch mode and the cuBLASLt setting
 * are CUDA's alone. */
#include <stddef.h>
#include <stdlib.h>
#include "gpu_internal.h"
#ifndef KEEL_GPU_HIP
#include "backends/cuda/cuda_internal.h" /* KEEL_CUDA_LT_ALGO_MAX */
#endif

#define STR_(x) #x
#define STR(x) STR_(x)

const keel_env_decl_t keel__gpu_env_table[] = {
    {"KEEL_GPU_HOST_FUNCS", "KEEL_CUDA_HOST_FUNCS", KEEL_ENV_CHOICE,
#ifdef KEEL_GPU_HIP
     "keel|hip|cuda",
#else
     "keel|cuda",
#endif
     0, 0, "keel",
     "where host functions run: keel, a thread per stream; " KEEL_GPU_BACKEND_NAME ", the " KEEL_GPU_RUNTIME
     " runtime's own thread"},
    {"KEEL_GPU_COPY_THREADS", "KEEL_CUDA_COPY_THREADS", KEEL_ENV_UINT, NULL, 1, 16, "half the cores, at most 8",
     "host threads that stage pageable copies"},
    {"KEEL_GPU_STAGING_CHUNK_KB", "KEEL_CUDA_STAGING_CHUNK_KB", KEEL_ENV_UINT, NULL, 256, 256 << 10, "4096",
     "the staging chunk of pageable copies, in KiB"},
#ifndef KEEL_GPU_HIP
    {"KEEL_CUDA_LAUNCH", NULL, KEEL_ENV_CHOICE, "kernel|function", 0, 0, "kernel",
     "launches of context-free CUkernels (kernel) or of CUfunctions (function)"},
    {"KEEL_CUDA_LT_ALGO", NULL, KEEL_ENV_UINT, "tune", 0, KEEL_CUDA_LT_ALGO_MAX, "tune",
     "the cuBLASLt algorithm of a plan: tune times the candidates, a number picks that candidate"},
#endif
    {NULL, NULL, KEEL_ENV_TEXT, NULL, 0, 0, NULL, NULL},
};

const char *keel__gpu_env(const char *name)
{
    const keel_host_api_t *h = keel__gpu_host;
    if (h && h->struct_size >= offsetof(keel_host_api_t, env_value) + sizeof h->env_value && h->env_value)
        return h->env_value(name);
    /* A core without env_value: the name as it is set. */
    const char *v = getenv(name);
    return v && v[0] ? v : NULL;
}
