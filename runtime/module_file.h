/* SPDX-License-Identifier: MIT */
/* The module file keel-cc writes and keel_module_load_file reads: one file
 * holding a kernel source's code for every backend. Little-endian:
 *
 *   header   "KEELMOD\0", u32 version, u32 entry count
 *   entries  count x {char kind[16], char target[48], u64 offset, u64 size}
 *   payloads at their offsets
 *
 * Kinds: "signatures" (the kernels' parameters, keel__ksource_serialize),
 * "source" (the portable source, for a device the file has no code for),
 * "cuda" (a fatbin: cubins and PTX), "hip" (a code object bundle), "cpu" (a
 * shared object; target: the machine, as uname -m says). */
#ifndef KEEL_CORE_MODULE_FILE_H
#define KEEL_CORE_MODULE_FILE_H

#include <stdint.h>

#define KEEL__MODFILE_MAGIC "KEELMOD"
#define KEEL__MODFILE_VERSION 1u
#define KEEL__MODFILE_MAX_ENTRIES 64u

typedef struct keel__modfile_header {
    char magic[8];
    uint32_t version;
    uint32_t count;
} keel__modfile_header_t;

typedef struct keel__modfile_entry {
    char kind[16];
    char target[48];
    uint64_t offset;
    uint64_t size;
} keel__modfile_entry_t;

#endif /* KEEL_CORE_MODULE_FILE_H */
