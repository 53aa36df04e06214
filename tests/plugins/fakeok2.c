/* SPDX-License-Identifier: MIT */
/* A second working fake plugin, so that two non-built-in backends can meet
 * (copies between them are refused), with an environment table. */
#define FAKE_NAME "fakeok2"
#define FAKE_ABI_VERSION KEEL_BACKEND_ABI_VERSION
#define FAKE_PROBE_NODEV 0
#define FAKE_INIT_SYMBOL keel_backend_init
#define FAKE_INIT_NULL 0
/* Its environment table: a choice with an older name, and a number that
 * also takes a word. */
#define FAKE_ENV 1
#include "keel/backend.h"
static const keel_env_decl_t fake_env[] = {
    {"KEEL_FAKE_MODE", "KEEL_FAKE_OLD_MODE", KEEL_ENV_CHOICE, "a|b", 0, 0, "a", "the fake backend's mode"},
    {"KEEL_FAKE_COUNT", NULL, KEEL_ENV_UINT, "auto", 1, 9, "auto", "how many of something"},
    {"KEEL_FAKE_TEXT", NULL, KEEL_ENV_TEXT, NULL, 0, 0, "unset", "any text"},
    {NULL, NULL, 0, NULL, 0, 0, NULL, NULL},
};
#include "fake_backend.h"
