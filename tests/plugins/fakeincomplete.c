/* SPDX-License-Identifier: MIT */
/* A fake plugin whose registration is incomplete (no memory table, a struct_size of 16): refused, never called. */
#define FAKE_NAME "fakeincomplete"
#define FAKE_ABI_VERSION KEEL_BACKEND_ABI_VERSION
#define FAKE_PROBE_NODEV 0
#define FAKE_INIT_SYMBOL keel_backend_init
#define FAKE_INIT_NULL 0
#define FAKE_INCOMPLETE 1
#include "fake_backend.h"
