/* SPDX-License-Identifier: MIT */
/* A fake plugin whose device table is shorter than this ABI version's
 * (its struct_size stops before stream_priority_range): refused, never called. */
#define FAKE_NAME "fakeshort"
#define FAKE_ABI_VERSION KEEL_BACKEND_ABI_VERSION
#define FAKE_PROBE_NODEV 0
#define FAKE_INIT_SYMBOL keel_backend_init
#define FAKE_INIT_NULL 0
#define FAKE_INCOMPLETE 0
#define FAKE_SHORT_TABLE 1
#include "fake_backend.h"
