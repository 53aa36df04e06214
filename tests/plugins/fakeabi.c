/* SPDX-License-Identifier: MIT */
/* A fake plugin built for another plugin ABI: the loader must refuse it (KEEL_ERROR_ABI_MISMATCH). */
#define FAKE_NAME "fakeabi"
#define FAKE_ABI_VERSION (KEEL_BACKEND_ABI_VERSION + 1000)
#define FAKE_PROBE_NODEV 0
#define FAKE_INIT_SYMBOL keel_backend_init
#define FAKE_INIT_NULL 0
#include "fake_backend.h"
