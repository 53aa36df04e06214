/* SPDX-License-Identifier: MIT */
/* A fake plugin whose keel_backend_init returns NULL. */
#define FAKE_NAME "fakenull"
#define FAKE_ABI_VERSION KEEL_BACKEND_ABI_VERSION
#define FAKE_PROBE_NODEV 0
#define FAKE_INIT_SYMBOL keel_backend_init
#define FAKE_INIT_NULL 1
#include "fake_backend.h"
