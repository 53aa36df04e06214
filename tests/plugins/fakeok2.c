/* SPDX-License-Identifier: MIT */
/* A second working fake plugin, so that two non-built-in backends can meet (copies between them are refused). */
#define FAKE_NAME "fakeok2"
#define FAKE_ABI_VERSION KEEL_BACKEND_ABI_VERSION
#define FAKE_PROBE_NODEV 0
#define FAKE_INIT_SYMBOL keel_backend_init
#define FAKE_INIT_NULL 0
#include "fake_backend.h"
