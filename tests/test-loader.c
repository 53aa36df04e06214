/* SPDX-License-Identifier: MIT */
/* test-loader: the plugin loader's paths, with the check-only fake plugins of
 * tests/plugins (one that works, one built for another ABI, one without the
 * init symbol, one whose probe finds no device, one whose init returns NULL,
 * one whose registration is incomplete)
 * and files made here: a text file and an empty file named like plugins, a
 * working plugin under a name that is not its own, truncated copies of one
 * and files of noise. Every setting runs in a fresh child
 * (tests/keel-env-probe); this process never calls Keel. */
#include <dirent.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fixture.h"
#include "keel/backend.h" /* KEEL_BACKEND_ABI_VERSION */

#define FAKE_DIR KT_BUILDDIR "/tests/plugins/.libs"
#define CMDS(...) ((const char *const[]){__VA_ARGS__, NULL})

static char tmpdir[256];
static char path_env[1024];

static void write_file(const char *name, const void *data, size_t len)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_msg(fd >= 0, "cannot create %s", p);
    ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
    close(fd);
}

static void copy_file(const char *from, const char *to_name)
{
    FILE *f = fopen(from, "rb");
    ck_assert_msg(f != NULL, "cannot open %s (were the fake plugins built?)", from);
    char *buf = malloc(1 << 22);
    size_t n = fread(buf, 1, 1 << 22, f);
    fclose(f);
    write_file(to_name, buf, n);
    free(buf);
}

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/keel-test-loader-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    static const char text[] = "this is a text file, not a shared object\n";
    write_file("keel-broken.so", text, sizeof text - 1);
    write_file("keel-empty.so", "", 0);
    copy_file(FAKE_DIR "/keel-fakeok.so", "keel-renamed.so");
    snprintf(path_env, sizeof path_env, "KEEL_BACKEND_PATH=%s:%s", tmpdir, FAKE_DIR);
}

static void teardown(void)
{
    DIR *d = opendir(tmpdir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            char p[512];
            snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(tmpdir);
}

typedef struct {
    kt_child_result_t r;
    char what[256];
} probe_t;

static probe_t run2(const char *backend, const char *path, const char *const *cmds)
{
    probe_t p;
    snprintf(p.what, sizeof p.what, "KEEL_BACKEND=%s", backend ? backend : "(unset)");
    char benv[256];
    snprintf(benv, sizeof benv, "KEEL_BACKEND=%s", backend ? backend : "");
    const char *env[] = {path, benv, NULL};
    p.r = kt_run_probe(env, 0, cmds);
    ck_assert_msg(p.r.status == 0, "[%s] probe exited %d; stderr: %s", p.what, p.r.status, p.r.err ? p.r.err : "");
    return p;
}

static probe_t run(const char *backend, const char *const *cmds)
{
    return run2(backend, path_env, cmds);
}

static char *line(probe_t *p, const char *key)
{
    char *v = kt_line_value(p->r.out, key);
    ck_assert_msg(v != NULL, "[%s] no line %s in:\n%s", p->what, key, p->r.out);
    return v;
}

/* "abi=N " and "N" as the probe prints them (the fakeabi plugin claims this
 * version + 1000). Each call has its own buffer: a test uses two at most. */
static const char *abi_text(const char *fmt, int version)
{
    static char bufs[4][32];
    static int next;
    char *b = bufs[next++ % 4];
    snprintf(b, sizeof bufs[0], fmt, version);
    return b;
}
#define abi_is(v) abi_text("abi=%d ", (v))
#define abi_number(v) abi_text("%d", (v))

#define EXPECT_LINE_HAS(p, key, needle)                                                                        \
    do {                                                                                                       \
        char *v_ = line(&(p), (key));                                                                          \
        ck_assert_msg(strstr(v_, (needle)) != NULL, "[%s] %s: \"%s\" lacks \"%s\"", (p).what, (key), v_, (needle)); \
        free(v_);                                                                                              \
    } while (0)

#define EXPECT_LINE_STARTS(p, key, prefix)                                                                      \
    do {                                                                                                        \
        char *v_ = line(&(p), (key));                                                                           \
        ck_assert_msg(strncmp(v_, (prefix), strlen(prefix)) == 0, "[%s] %s: \"%s\", expected \"%s...\"", (p).what, \
                      (key), v_, (prefix));                                                                     \
        free(v_);                                                                                               \
    } while (0)

START_TEST(working_plugin_loads_probes_and_runs)
{
    probe_t p = run("fakeok", CMDS("init", "backends", "default", "roundtrip:fakeok", "find:fakeok"));
    EXPECT_LINE_STARTS(p, "init", "OK");
    EXPECT_LINE_HAS(p, "backend:fakeok", "usable=1");
    EXPECT_LINE_HAS(p, "backend:fakeok", "status=KEEL_OK");
    EXPECT_LINE_HAS(p, "backend:fakeok", "devices=1");
    EXPECT_LINE_HAS(p, "backend:fakeok", abi_is(KEEL_BACKEND_ABI_VERSION));
    EXPECT_LINE_HAS(p, "backend:fakeok", "/keel-fakeok.so");
    EXPECT_LINE_HAS(p, "backend:fakeok", "reason=");
    EXPECT_LINE_STARTS(p, "default", "OK fakeok:0");
    EXPECT_LINE_STARTS(p, "roundtrip:fakeok", "OK");
    EXPECT_LINE_STARTS(p, "find:fakeok", "OK");
    kt_child_free(&p.r);
}
END_TEST

START_TEST(wrong_abi_is_refused_with_abi_mismatch)
{
    probe_t p = run("fakeabi,cpu", CMDS("init", "backends", "default", "get:fakeabi:0"));
    EXPECT_LINE_STARTS(p, "init", "OK");
    EXPECT_LINE_HAS(p, "backend:fakeabi", "usable=0");
    EXPECT_LINE_HAS(p, "backend:fakeabi", "status=KEEL_ERROR_ABI_MISMATCH");
    EXPECT_LINE_HAS(p, "backend:fakeabi", "devices=0");
    EXPECT_LINE_HAS(p, "backend:fakeabi", abi_number(KEEL_BACKEND_ABI_VERSION + 1000)); /* the version it claims */
    EXPECT_LINE_STARTS(p, "default", "OK cpu:0");
    EXPECT_LINE_STARTS(p, "get:fakeabi:0", "KEEL_ERROR_BACKEND_UNAVAILABLE");
    EXPECT_LINE_HAS(p, "get:fakeabi:0", abi_number(KEEL_BACKEND_ABI_VERSION + 1000));
    kt_child_free(&p.r);
    /* Named alone, it is an error that says why; never a switch to the CPU. */
    p = run("fakeabi", CMDS("init", "default", "count"));
    EXPECT_LINE_STARTS(p, "init", "KEEL_ERROR_BACKEND_UNAVAILABLE");
    EXPECT_LINE_HAS(p, "init", "fakeabi");
    EXPECT_LINE_HAS(p, "init", "ABI");
    EXPECT_LINE_STARTS(p, "default", "KEEL_ERROR_BACKEND_UNAVAILABLE");
    EXPECT_LINE_STARTS(p, "count", "OK");
    kt_child_free(&p.r);
}
END_TEST

START_TEST(missing_init_symbol_is_refused)
{
    probe_t p = run("fakenosym,cpu", CMDS("init", "backends", "default"));
    EXPECT_LINE_STARTS(p, "init", "OK");
    EXPECT_LINE_HAS(p, "backend:fakenosym", "usable=0");
    EXPECT_LINE_HAS(p, "backend:fakenosym", "status=KEEL_ERROR_BACKEND_UNAVAILABLE");
    EXPECT_LINE_HAS(p, "backend:fakenosym", "keel_backend_init");
    EXPECT_LINE_STARTS(p, "default", "OK cpu:0");
    kt_child_free(&p.r);
}
END_TEST

START_TEST(probe_without_devices_is_no_device)
{
    probe_t p = run("fakenodev,cpu", CMDS("init", "backends", "default", "get:fakenodev:0"));
    EXPECT_LINE_STARTS(p, "init", "OK");
    EXPECT_LINE_HAS(p, "backend:fakenodev", "usable=0");
    EXPECT_LINE_HAS(p, "backend:fakenodev", "status=KEEL_ERROR_NO_DEVICE");
    EXPECT_LINE_HAS(p, "backend:fakenodev", "the fake probe found no device");
    EXPECT_LINE_HAS(p, "backend:fakenodev", abi_is(KEEL_BACKEND_ABI_VERSION));
    EXPECT_LINE_STARTS(p, "default", "OK cpu:0");
    EXPECT_LINE_STARTS(p, "get:fakenodev:0", "KEEL_ERROR_BACKEND_UNAVAILABLE");
    kt_child_free(&p.r);
    p = run("fakenodev", CMDS("init"));
    EXPECT_LINE_STARTS(p, "init", "KEEL_ERROR_BACKEND_UNAVAILABLE");
    EXPECT_LINE_HAS(p, "init", "the fake probe found no device");
    kt_child_free(&p.r);
}
END_TEST

START_TEST(init_returning_null_is_refused)
{
    probe_t p = run("fakenull,cpu", CMDS("init", "backends", "default"));
    EXPECT_LINE_STARTS(p, "init", "OK");
    EXPECT_LINE_HAS(p, "backend:fakenull", "usable=0");
    EXPECT_LINE_HAS(p, "backend:fakenull", "status=KEEL_ERROR_BACKEND_UNAVAILABLE");
    char *v = line(&p, "backend:fakenull");
    ck_assert_msg(strstr(v, "reason=") && strstr(v, "reason=")[7] != '\0', "no reason: %s", v);
    free(v);
    EXPECT_LINE_STARTS(p, "default", "OK cpu:0");
    kt_child_free(&p.r);
}
END_TEST

START_TEST(incomplete_registration_is_refused)
{
    probe_t p = run("fakeincomplete,cpu", CMDS("init", "backends", "default", "get:fakeincomplete:0"));
    EXPECT_LINE_STARTS(p, "init", "OK");
    EXPECT_LINE_HAS(p, "backend:fakeincomplete", "usable=0");
    char *v = line(&p, "backend:fakeincomplete");
    ck_assert_msg(strstr(v, "status=KEEL_OK") == NULL, "incomplete plugin has status OK: %s", v);
    ck_assert_msg(strstr(v, "reason=") && strstr(v, "reason=")[7] != '\0', "no reason: %s", v);
    free(v);
    EXPECT_LINE_STARTS(p, "default", "OK cpu:0");
    EXPECT_LINE_STARTS(p, "get:fakeincomplete:0", "KEEL_ERROR_BACKEND_UNAVAILABLE");
    kt_child_free(&p.r);
}
END_TEST

START_TEST(short_family_table_is_refused)
{
    probe_t p = run("fakeshort,cpu", CMDS("init", "backends", "default", "get:fakeshort:0"));
    EXPECT_LINE_STARTS(p, "init", "OK");
    EXPECT_LINE_HAS(p, "backend:fakeshort", "usable=0");
    EXPECT_LINE_HAS(p, "backend:fakeshort", "lacks entries every plugin must provide");
    EXPECT_LINE_STARTS(p, "default", "OK cpu:0");
    EXPECT_LINE_STARTS(p, "get:fakeshort:0", "KEEL_ERROR_BACKEND_UNAVAILABLE");
    kt_child_free(&p.r);
}
END_TEST

START_TEST(files_that_are_not_shared_objects_are_refused)
{
    probe_t p = run("broken,empty,cpu", CMDS("init", "backends", "default"));
    EXPECT_LINE_STARTS(p, "init", "OK");
    const char *names[] = {"backend:broken", "backend:empty"};
    for (int i = 0; i < 2; i++) {
        EXPECT_LINE_HAS(p, names[i], "usable=0");
        EXPECT_LINE_HAS(p, names[i], "status=KEEL_ERROR_BACKEND_UNAVAILABLE");
        EXPECT_LINE_HAS(p, names[i], tmpdir); /* the file it tried */
        char *v = line(&p, names[i]);
        ck_assert_msg(strstr(v, "reason=") && strstr(v, "reason=")[7] != '\0', "no reason: %s", v);
        free(v);
    }
    EXPECT_LINE_STARTS(p, "default", "OK cpu:0");
    kt_child_free(&p.r);
}
END_TEST

/* The bytes of a real plugin, and where its segments end and where the
 * last PT_LOAD's first page begins, from its program headers. */
static unsigned char *read_plugin(const char *from, size_t *len, size_t *seg_end, size_t *last_load_page)
{
    FILE *f = fopen(from, "rb");
    ck_assert_msg(f != NULL, "cannot open %s (were the fake plugins built?)", from);
    unsigned char *buf = malloc(1 << 22);
    *len = fread(buf, 1, 1 << 22, f);
    fclose(f);
    ElfW(Ehdr) eh;
    ck_assert_uint_ge(*len, sizeof eh);
    memcpy(&eh, buf, sizeof eh);
    ck_assert_msg(memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0, "%s is not an ELF file", from);
    *seg_end = *last_load_page = 0;
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        ElfW(Phdr) ph;
        ck_assert_uint_le(eh.e_phoff + (i + 1) * sizeof ph, *len);
        memcpy(&ph, buf + eh.e_phoff + i * sizeof ph, sizeof ph);
        if (ph.p_filesz && ph.p_offset + ph.p_filesz > *seg_end)
            *seg_end = ph.p_offset + ph.p_filesz;
        if (ph.p_type == PT_LOAD && ph.p_filesz)
            *last_load_page = ph.p_offset & ~(size_t)4095;
    }
    ck_assert_msg(*last_load_page > 0 && *seg_end <= *len, "%s: segments end at %zu of %zu bytes, last PT_LOAD page %zu",
                  from, *seg_end, *len, *last_load_page);
    return buf;
}

/* dlopen maps a truncated file's segments past its end, and the first touch
 * of those pages is a SIGBUS: the loader checks the file first, whichever
 * backend is selected, as soon as the backends are listed. */
START_TEST(truncated_or_garbage_files_are_refused_with_the_reason)
{
    size_t len, seg_end, last_page;
    unsigned char *so = read_plugin(FAKE_DIR "/keel-fakeok.so", &len, &seg_end, &last_page);
    /* Cut where its last PT_LOAD begins: that segment lies past the end. */
    write_file("keel-truncated.so", so, last_page);
    /* One byte short of its last segment's end: nothing past the end but that byte. */
    write_file("keel-short.so", so, seg_end - 1);
    /* The ELF magic number and a valid identification, then noise. */
    unsigned char noise[4096];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof noise; i++) {
        x = x * 1103515245u + 12345u;
        noise[i] = (unsigned char)(x >> 16);
    }
    noise[0] = 0x42; /* never the first byte of ELFMAG */
    write_file("keel-garbage.so", noise, sizeof noise);
    memcpy(noise, so, EI_NIDENT + 4); /* the ident, e_type and e_machine of a real plugin */
    write_file("keel-elfnoise.so", noise, sizeof noise);
    free(so);

    probe_t p = run("cpu", CMDS("init", "backends", "default", "get:truncated:0"));
    EXPECT_LINE_STARTS(p, "init", "OK");
    EXPECT_LINE_STARTS(p, "default", "OK cpu:0");
    const struct {
        const char *key, *why;
    } files[] = {{"backend:truncated", "truncated"}, {"backend:short", "truncated"},
                 {"backend:garbage", "not an ELF file"}, {"backend:elfnoise", NULL}, {"backend:empty", "empty"}};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        EXPECT_LINE_HAS(p, files[i].key, "usable=0");
        EXPECT_LINE_HAS(p, files[i].key, "status=KEEL_ERROR_BACKEND_UNAVAILABLE");
        EXPECT_LINE_HAS(p, files[i].key, tmpdir);
        if (files[i].why)
            EXPECT_LINE_HAS(p, files[i].key, files[i].why);
        char *v = line(&p, files[i].key);
        ck_assert_msg(strstr(v, "reason=") && strstr(v, "reason=")[7] != '\0', "no reason: %s", v);
        free(v);
    }
    EXPECT_LINE_HAS(p, "backend:truncated", "PT_LOAD");
    EXPECT_LINE_STARTS(p, "get:truncated:0", "KEEL_ERROR_BACKEND_UNAVAILABLE");
    EXPECT_LINE_HAS(p, "get:truncated:0", "truncated");
    kt_child_free(&p.r);
    /* Named alone: the selection fails and says why. */
    p = run("truncated", CMDS("init", "default"));
    EXPECT_LINE_STARTS(p, "init", "KEEL_ERROR_BACKEND_UNAVAILABLE");
    EXPECT_LINE_HAS(p, "init", "truncated");
    kt_child_free(&p.r);
}
END_TEST

START_TEST(plugin_whose_name_differs_from_its_file_is_refused)
{
    probe_t p = run("renamed,cpu", CMDS("init", "backends", "default"));
    EXPECT_LINE_STARTS(p, "init", "OK");
    EXPECT_LINE_HAS(p, "backend:renamed", "usable=0");
    EXPECT_LINE_HAS(p, "backend:renamed", "fakeok");
    EXPECT_LINE_STARTS(p, "default", "OK cpu:0");
    kt_child_free(&p.r);
}
END_TEST

START_TEST(every_bad_plugin_at_once_never_crashes_the_loader)
{
    probe_t p = run("fakeabi,fakenosym,fakenodev,fakenull,fakeincomplete,broken,empty,renamed,fakeok,cpu",
                    CMDS("init", "backends", "default", "roundtrip:fakeok", "roundtrip:cpu"));
    EXPECT_LINE_STARTS(p, "init", "OK");
    EXPECT_LINE_STARTS(p, "default", "OK fakeok:0");
    EXPECT_LINE_STARTS(p, "roundtrip:fakeok", "OK");
    EXPECT_LINE_STARTS(p, "roundtrip:cpu", "OK");
    kt_child_free(&p.r);
}
END_TEST

/* Files keel-<name>.so on the path make their backends known even when
 * KEEL_BACKEND does not name them (docs/environment.md); they are not
 * selected by default. */
START_TEST(plugins_on_the_path_are_listed_but_not_selected_by_default)
{
    probe_t p = run(NULL, CMDS("init", "backends", "default", "find:fakeok", "get:fakeok:0"));
    EXPECT_LINE_STARTS(p, "init", "OK");
    EXPECT_LINE_HAS(p, "backend:fakeok", "usable=1");
    EXPECT_LINE_HAS(p, "backend:fakeabi", "status=KEEL_ERROR_ABI_MISMATCH");
    EXPECT_LINE_HAS(p, "backend:broken", "usable=0");
    char *d = line(&p, "default");
    ck_assert_msg(strstr(d, "fake") == NULL, "a fake plugin became the default device: %s", d);
    free(d);
    EXPECT_LINE_STARTS(p, "find:fakeok", "OK");
    EXPECT_LINE_STARTS(p, "get:fakeok:0", "OK fakeok:0");
    kt_child_free(&p.r);
    /* An unknown name's detail lists the plugins found too. */
    p = run("bogus", CMDS("init"));
    EXPECT_LINE_STARTS(p, "init", "KEEL_ERROR_BACKEND_UNAVAILABLE");
    EXPECT_LINE_HAS(p, "init", "fakeok");
    kt_child_free(&p.r);
}
END_TEST

START_TEST(first_directory_on_the_path_wins)
{
    char path[1024];
    /* tmpdir has a text file named keel-fakeok.so; whichever comes first is loaded. */
    static const char text[] = "not a plugin\n";
    write_file("keel-fakeok.so", text, sizeof text - 1);
    snprintf(path, sizeof path, "KEEL_BACKEND_PATH=%s:%s", FAKE_DIR, tmpdir);
    probe_t p = run2("fakeok", path, CMDS("init", "backends"));
    EXPECT_LINE_STARTS(p, "init", "OK");
    EXPECT_LINE_HAS(p, "backend:fakeok", FAKE_DIR "/keel-fakeok.so");
    kt_child_free(&p.r);
    snprintf(path, sizeof path, "KEEL_BACKEND_PATH=%s:%s", tmpdir, FAKE_DIR);
    p = run2("fakeok", path, CMDS("init", "backends"));
    EXPECT_LINE_STARTS(p, "init", "KEEL_ERROR_BACKEND_UNAVAILABLE");
    EXPECT_LINE_HAS(p, "backend:fakeok", tmpdir);
    EXPECT_LINE_HAS(p, "backend:fakeok", "usable=0");
    kt_child_free(&p.r);
}
END_TEST

/* Device memory of two plugin backends cannot meet in one copy; the CPU
 * backend's memory is host memory to the others, so copies with it work. */
START_TEST(memory_of_two_backends_does_not_mix)
{
    probe_t p = run("fakeok,cpu", CMDS("init", "cross:fakeok:fakeok2", "cross:fakeok2:fakeok", "cross:fakeok:cpu",
                                       "cross:cpu:fakeok", "peer:fakeok:cpu", "peer:cpu:fakeok",
                                       "peer:fakeok:fakeok2"));
    EXPECT_LINE_STARTS(p, "cross:fakeok:fakeok2", "KEEL_ERROR_DEVICE_MISMATCH");
    EXPECT_LINE_STARTS(p, "cross:fakeok2:fakeok", "KEEL_ERROR_DEVICE_MISMATCH");
    EXPECT_LINE_STARTS(p, "cross:fakeok:cpu", "OK");
    EXPECT_LINE_STARTS(p, "cross:cpu:fakeok", "OK");
    EXPECT_LINE_STARTS(p, "peer:fakeok:fakeok2", "OK 0");
    EXPECT_LINE_STARTS(p, "peer:fakeok:cpu", "OK 0");
    EXPECT_LINE_STARTS(p, "peer:cpu:fakeok", "OK 0");
    kt_child_free(&p.r);
}
END_TEST

/* A probe with KEEL_BACKEND=fakeok2,cpu and up to two more variables. */
static probe_t run_env(const char *var1, const char *var2, const char *const *cmds)
{
    probe_t p;
    snprintf(p.what, sizeof p.what, "KEEL_BACKEND=fakeok2,cpu %s %s", var1 ? var1 : "", var2 ? var2 : "");
    const char *env[] = {path_env, "KEEL_BACKEND=fakeok2,cpu", var1, var2, NULL};
    if (!var1)
        env[2] = var2, env[3] = NULL;
    p.r = kt_run_probe(env, 0, cmds);
    ck_assert_msg(p.r.status == 0, "[%s] probe exited %d; stderr: %s", p.what, p.r.status, p.r.err ? p.r.err : "");
    return p;
}

/* A plugin's environment table: listed after the core's variables, its
 * values (or an older name's) read by the plugin, and a value that does not
 * parse makes the backend unusable with a reason that names the values. */
START_TEST(plugin_environment_table_is_checked_read_and_listed)
{
    probe_t p = run_env(NULL, NULL, CMDS("init", "desc:fakeok2", "envvars"));
    EXPECT_LINE_STARTS(p, "desc:fakeok2", "OK fake backend with mode=(unset) count=(unset)");
    EXPECT_LINE_HAS(p, "env:KEEL_FAKE_MODE", "fakeok2 plugin: the fake backend's mode (a or b; default a; also read as KEEL_FAKE_OLD_MODE)");
    EXPECT_LINE_HAS(p, "env:KEEL_FAKE_COUNT", "(auto or a whole number from 1 to 9; default auto)");
    EXPECT_LINE_HAS(p, "env:KEEL_FAKE_TEXT", "any text");
    EXPECT_LINE_HAS(p, "env:KEEL_BACKEND", "backends"); /* the core's come first, still there */
    kt_child_free(&p.r);

    p = run_env("KEEL_FAKE_MODE=B", "KEEL_FAKE_COUNT=7", CMDS("init", "desc:fakeok2", "default"));
    EXPECT_LINE_STARTS(p, "desc:fakeok2", "OK fake backend with mode=B count=7");
    EXPECT_LINE_STARTS(p, "default", "OK fakeok2:0");
    kt_child_free(&p.r);

    p = run_env("KEEL_FAKE_OLD_MODE=a", "KEEL_FAKE_COUNT=auto", CMDS("init", "desc:fakeok2"));
    EXPECT_LINE_STARTS(p, "desc:fakeok2", "OK fake backend with mode=a count=auto");
    kt_child_free(&p.r);
    /* the name wins over the alias */
    p = run_env("KEEL_FAKE_OLD_MODE=a", "KEEL_FAKE_MODE=b", CMDS("init", "desc:fakeok2"));
    EXPECT_LINE_STARTS(p, "desc:fakeok2", "OK fake backend with mode=b");
    kt_child_free(&p.r);

    static const struct {
        const char *set, *reason;
    } bad[] = {
        {"KEEL_FAKE_MODE=c", "KEEL_FAKE_MODE=\"c\": expected a or b"},
        {"KEEL_FAKE_OLD_MODE=zz", "KEEL_FAKE_OLD_MODE=\"zz\" (read as KEEL_FAKE_MODE): expected a or b"},
        {"KEEL_FAKE_COUNT=10", "KEEL_FAKE_COUNT=\"10\": expected auto or a whole number from 1 to 9"},
        {"KEEL_FAKE_COUNT=0", "expected auto or a whole number from 1 to 9"},
        {"KEEL_FAKE_COUNT=3x", "expected auto or a whole number from 1 to 9"},
        {"KEEL_FAKE_COUNT=-1", "expected auto or a whole number from 1 to 9"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p = run_env(bad[i].set, NULL, CMDS("init", "backends", "default"));
        EXPECT_LINE_HAS(p, "backend:fakeok2", "usable=0");
        EXPECT_LINE_HAS(p, "backend:fakeok2", "status=KEEL_ERROR_INVALID_ENVIRONMENT");
        EXPECT_LINE_HAS(p, "backend:fakeok2", bad[i].reason);
        /* garbage in the environment is an error, not a quiet fall back to the next backend */
        EXPECT_LINE_STARTS(p, "default", "KEEL_ERROR_INVALID_ENVIRONMENT");
        EXPECT_LINE_HAS(p, "default", bad[i].reason);
        kt_child_free(&p.r);
    }
}
END_TEST

START_TEST(log_info_reports_each_plugin_failure)
{
    char path[1100];
    snprintf(path, sizeof path, "%s", path_env);
    const char *env[] = {path, "KEEL_BACKEND=fakeabi,fakenosym,fakenodev,broken,cpu", "KEEL_LOG=info", NULL};
    kt_child_result_t r = kt_run_probe(env, 0, CMDS("init"));
    ck_assert_int_eq(r.status, 0);
    const char *names[] = {"fakeabi", "fakenosym", "fakenodev", "broken"};
    for (int i = 0; i < 4; i++)
        ck_assert_msg(strstr(r.err, names[i]) != NULL, "KEEL_LOG=info does not mention %s:\n%s", names[i], r.err);
    kt_child_free(&r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("loader");
    TCase *tc = tcase_create("loader");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, working_plugin_loads_probes_and_runs);
    tcase_add_test(tc, plugin_environment_table_is_checked_read_and_listed);
    tcase_add_test(tc, wrong_abi_is_refused_with_abi_mismatch);
    tcase_add_test(tc, missing_init_symbol_is_refused);
    tcase_add_test(tc, probe_without_devices_is_no_device);
    tcase_add_test(tc, init_returning_null_is_refused);
    tcase_add_test(tc, incomplete_registration_is_refused);
    tcase_add_test(tc, short_family_table_is_refused);
    tcase_add_test(tc, files_that_are_not_shared_objects_are_refused);
    tcase_add_test(tc, truncated_or_garbage_files_are_refused_with_the_reason);
    tcase_add_test(tc, plugin_whose_name_differs_from_its_file_is_refused);
    tcase_add_test(tc, every_bad_plugin_at_once_never_crashes_the_loader);
    tcase_add_test(tc, plugins_on_the_path_are_listed_but_not_selected_by_default);
    tcase_add_test(tc, first_directory_on_the_path_wins);
    tcase_add_test(tc, memory_of_two_backends_does_not_mix);
    tcase_add_test(tc, log_info_reports_each_plugin_failure);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return kt_main(argc, argv, suite(), 0, 0);
}
