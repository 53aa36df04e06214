/* SPDX-License-Identifier: MIT */
/* A fake plugin that loads and probes fine, with one device. */
#define FAKE_NAME "fakeok"
#define FAKE_ABI_VERSION KEEL_BACKEND_ABI_VERSION
#define FAKE_PROBE_NODEV 0
#define FAKE_INIT_SYMBOL keel_backend_init
#define FAKE_INIT_NULL 0
#include "fake_backend.h"
