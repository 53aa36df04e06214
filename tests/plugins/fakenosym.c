/* SPDX-License-Identifier: MIT */
/* A fake plugin that lacks the keel_backend_init symbol. */
#define FAKE_NAME "fakenosym"
#define FAKE_ABI_VERSION KEEL_BACKEND_ABI_VERSION
#define FAKE_PROBE_NODEV 0
#define FAKE_INIT_SYMBOL keel_backend_init_misspelt
#define FAKE_INIT_NULL 0
#include "fake_backend.h"
