/* SPDX-License-Identifier: MIT */
/* A fake plugin whose probe finds no device (KEEL_ERROR_NO_DEVICE). */
#define FAKE_NAME "fakenodev"
#define FAKE_ABI_VERSION KEEL_BACKEND_ABI_VERSION
#define FAKE_PROBE_NODEV 1
#define FAKE_INIT_SYMBOL keel_backend_init
#define FAKE_INIT_NULL 0
#include "fake_backend.h"
