/* SPDX-License-Identifier: MIT */
/* The portable kernel language's translator: finds the kernels of a source
 * (keel/kernel_lang.h), reads their signatures, and writes the source each
 * target compiles. Shared by libkeel (keel_module_build) and keel-cc. */
#ifndef KEEL_CORE_KERNEL_SOURCE_H
#define KEEL_CORE_KERNEL_SOURCE_H

#include <stddef.h>
#include "keel/kernel.h"

#ifndef KEEL_HIDDEN
#define KEEL_HIDDEN __attribute__((visibility("hidden")))
#endif

typedef enum keel__ktarget {
    KEEL__KTARGET_CPU = 0,   /* C for the system C compiler, with the CPU wrappers */
    KEEL__KTARGET_GPU = 1    /* CUDA C++ for NVRTC/nvcc, HIP C++ for hipRTC/hipcc */
} keel__ktarget_t;

/* One parameter of a kernel: its type as written and its size in bytes, or 0
 * when the translator cannot know it (a struct: the backend may). */
typedef struct keel__kparam {
    char type[96];
    char name[64];
    size_t size;
} keel__kparam_t;

/* One kernel of a source, with where its declaration stands. */
typedef struct keel__ksig {
    char name[128];
    int block;                 /* keel_block_kernel rather than keel_kernel */
    unsigned line;             /* of the kernel's name */
    unsigned block_size[3];    /* keel_block_size(x, y, z), or zeros */
    unsigned nparams;
    keel__kparam_t params[KEEL_MAX_KERNEL_ARGS];
    size_t params_open;        /* offset just past the '(' */
    size_t params_close;       /* offset of the ')' */
    size_t body_open;          /* offset just past the body's '{' */
} keel__ksig_t;

typedef struct keel__ksource {
    keel__ksig_t *kernels;
    size_t count;
} keel__ksource_t;

/* The text of keel/kernel_lang.h, embedded at build time. */
KEEL_HIDDEN extern const char keel__kernel_lang_text[];

/* Parses @p source. On failure writes a message naming @p name and the line
 * to @p err and returns KEEL_ERROR_COMPILE_FAILED (or OUT_OF_MEMORY). */
KEEL_HIDDEN keel_status_t keel__ksource_parse(const char *source, const char *name, keel__ksource_t *out, char *err,
                                              size_t err_size);
KEEL_HIDDEN void keel__ksource_free(keel__ksource_t *ks);

/* The source for @p target: the language header, the user's source with the
 * kernels' declarations completed on the same lines (so the compilers' line
 * numbers are the user's), and for the CPU one wrapper and descriptor per
 * kernel. Returns NULL when out of memory; the caller frees it. */
KEEL_HIDDEN char *keel__ksource_generate(const keel__ksource_t *ks, const char *source, const char *name,
                                         keel__ktarget_t target);

/* Looks up a kernel by name; NULL when there is none. */
KEEL_HIDDEN const keel__ksig_t *keel__ksource_find(const keel__ksource_t *ks, const char *name);

/* Writes "int n, float a, const float *x" for messages. */
KEEL_HIDDEN void keel__ksig_format(const keel__ksig_t *sig, char *buf, size_t size);

/* The signature table that keel-cc stores in a module file: one line a
 * kernel, tab-separated "name block line x,y,z nparams size|type|name ...". */
KEEL_HIDDEN char *keel__ksource_serialize(const keel__ksource_t *ks);
KEEL_HIDDEN keel_status_t keel__ksource_deserialize(const char *text, size_t size, keel__ksource_t *out);

#endif /* KEEL_CORE_KERNEL_SOURCE_H */
