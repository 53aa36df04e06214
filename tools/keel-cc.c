/* SPDX-License-Identifier: MIT */
/* keel-cc: compiles a portable kernel file ahead of time into one module
 * file (runtime/module_file.h) that keel_module_load_file() opens on any
 * backend: the kernels' signatures, the source (for a device the file has
 * no code for), a shared object for this machine's CPU, a fatbin for CUDA
 * and a code object bundle for HIP. It runs the same translator as
 * keel_module_build(), so the code is what a run-time build would make and
 * the compilers' messages name the user's file and lines. docs/keel-cc.md
 * is its manual. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "runtime/kernel_source.h"
#include "runtime/module_file.h"
#include "runtime/spawn.h"

#ifndef KEEL_CPU_CC_DEFAULT
#define KEEL_CPU_CC_DEFAULT "cc"
#endif
/* No -march=native: a module file may be copied to another machine of the
 * same architecture, whose CPU may lack this one's vector extensions. */
#define CPU_FLAGS_DEFAULT "-O3 -fno-math-errno -fno-trapping-math"
#define CUDA_ARCH_DEFAULT "sm_80,sm_90,compute_90"
#define HIP_ARCH_DEFAULT "gfx90a,gfx1030"
#define MAX_SOURCE_BYTES (16u << 20)
#define MAX_WORDS 64
#define MAX_PP 256
#define MAX_ARCHS 32
#define LOG_BYTES (256 * 1024)

static const char *prog = "keel-cc";
static int verbose;

/* ---- the temporary build directory, removed on exit and on a signal ---- */

static char tmp_dir[4096];
static char tmp_files[8][4200];
static int ntmp_files;
static char tmp_out[4200];   /* the output's temporary name, until renamed */

static void cleanup(void)
{
    for (int i = 0; i < ntmp_files; i++)
        (void)unlink(tmp_files[i]);
    if (tmp_dir[0])
        (void)rmdir(tmp_dir);
    if (tmp_out[0])
        (void)unlink(tmp_out);
}

static void on_signal(int sig)
{
    cleanup();   /* unlink and rmdir are async-signal-safe */
    signal(sig, SIG_DFL);
    raise(sig);
}

/* A path in the build directory, removed at exit. */
static const char *tmp_path(const char *leaf)
{
    char *p = tmp_files[ntmp_files++];
    snprintf(p, sizeof tmp_files[0], "%s/%s", tmp_dir, leaf);
    return p;
}

static int make_tmp_dir(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(tmp_dir, sizeof tmp_dir, "%s/keel-cc-XXXXXX", t && t[0] ? t : "/tmp");
    if (!mkdtemp(tmp_dir)) {
        fprintf(stderr, "%s: cannot make a build directory %s: %s\n", prog, tmp_dir, strerror(errno));
        tmp_dir[0] = '\0';
        return 0;
    }
    return 1;
}

/* ---- files ---- */

static char *read_all(const char *path, size_t max, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
        return NULL;
    }
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        if (n == cap) {
            if (cap >= max)
                break;
            cap = 2 * cap < max ? 2 * cap : max;
            char *grown = realloc(buf, cap + 1);
            if (!grown) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = grown;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0)
            break;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf || err || n > max || (n == cap && cap >= max)) {
        fprintf(stderr, "%s: %s: %s\n", prog, path,
                !buf ? "out of memory" : err ? "read error" : "too large");
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *size = n;
    return buf;
}

static int write_all(int fd, const void *data, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, (const char *)data + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return 0;
        done += (size_t)w;
    }
    return 1;
}

static int write_text(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || !write_all(fd, text, strlen(text)) || close(fd) != 0) {
        fprintf(stderr, "%s: cannot write %s: %s\n", prog, path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return 0;
    }
    return 1;
}

/* ---- the module file ---- */

typedef struct part {
    const char *kind;
    char target[sizeof(((keel__modfile_entry_t *)0)->target)];
    char *data;
    size_t size;
} part_t;

static part_t parts[8];
static int nparts;

static void add_part(const char *kind, const char *target, char *data, size_t size)
{
    part_t *p = &parts[nparts++];
    p->kind = kind;
    snprintf(p->target, sizeof p->target, "%s", target);
    p->data = data;
    p->size = size;
}

/* Payloads start at multiples of 64 bytes, so an image read into a malloc'd
 * buffer is aligned as a loader expects (a fatbin needs 8 bytes). */
static uint64_t align64(uint64_t x)
{
    return (x + 63) & ~(uint64_t)63;
}

/* Writes the module file beside @p out under a temporary name and renames
 * it, so a reader never sees half a file and a failed run leaves none. */
static int write_module(const char *out)
{
    keel__modfile_header_t h;
    keel__modfile_entry_t e[8];
    memset(&h, 0, sizeof h);
    memset(e, 0, sizeof e);
    memcpy(h.magic, KEEL__MODFILE_MAGIC, sizeof h.magic);
    h.version = KEEL__MODFILE_VERSION;
    h.count = (uint32_t)nparts;
    uint64_t at = align64(sizeof h + (uint64_t)nparts * sizeof e[0]);
    for (int i = 0; i < nparts; i++) {
        snprintf(e[i].kind, sizeof e[i].kind, "%s", parts[i].kind);
        memcpy(e[i].target, parts[i].target, sizeof e[i].target);
        e[i].offset = at;
        e[i].size = parts[i].size;
        at = align64(at + parts[i].size);
    }
    snprintf(tmp_out, sizeof tmp_out, "%s.tmp-XXXXXX", out);
    int fd = mkstemp(tmp_out);
    if (fd < 0) {
        fprintf(stderr, "%s: cannot write %s: %s\n", prog, tmp_out, strerror(errno));
        tmp_out[0] = '\0';
        return 0;
    }
    /* mkstemp makes the file private; a module file is as readable as any
     * other output. */
    mode_t mask = umask(0);
    umask(mask);
    int ok = fchmod(fd, 0666 & ~mask) == 0 && write_all(fd, &h, sizeof h) &&
             write_all(fd, e, (size_t)nparts * sizeof e[0]);
    static const char zeros[64];
    uint64_t pos = sizeof h + (uint64_t)nparts * sizeof e[0];
    for (int i = 0; ok && i < nparts; i++) {
        ok = write_all(fd, zeros, (size_t)(e[i].offset - pos)) && write_all(fd, parts[i].data, parts[i].size);
        pos = e[i].offset + parts[i].size;
    }
    if (close(fd) != 0)
        ok = 0;
    if (ok && rename(tmp_out, out) != 0)
        ok = 0;
    if (!ok) {
        fprintf(stderr, "%s: cannot write %s: %s\n", prog, out, strerror(errno));
        return 0;
    }
    tmp_out[0] = '\0';
    return 1;
}

/* ---- running compilers ---- */

typedef struct cmd {
    char *argv[3 * MAX_WORDS + MAX_PP + MAX_ARCHS + 16];
    int n;
} cmd_t;

static void cmd_add(cmd_t *c, const char *word)
{
    if (c->n < (int)(sizeof c->argv / sizeof c->argv[0]) - 1)
        c->argv[c->n++] = (char *)word;
    c->argv[c->n] = NULL;
}

/* Runs @p c; prints its output (warnings too: the user should see them),
 * and on failure says which compiler failed. */
static int run(cmd_t *c, const char *what)
{
    static char log[LOG_BYTES];
    if (verbose) {
        static char line[16384];
        keel__join_words(c->argv, c->n, line, sizeof line);
        fprintf(stderr, "%s\n", line);
    }
    int rc = keel__run_capture(c->argv, log, sizeof log);
    if (log[0])
        fprintf(stderr, "%s%s", log, log[strlen(log) - 1] == '\n' ? "" : "\n");
    if (rc == 0)
        return 1;
    if (rc < 0)
        fprintf(stderr, "%s: %s: could not run %s\n", prog, what, c->argv[0]);
    else if (rc > 128)
        fprintf(stderr, "%s: %s: %s ended by signal %d\n", prog, what, c->argv[0], rc - 128);
    else
        fprintf(stderr, "%s: %s: %s failed (exit status %d)\n", prog, what, c->argv[0], rc);
    return 0;
}

/* Reads a compiler's output into a new part. */
static int take_output(const char *path, const char *kind, const char *target)
{
    size_t size = 0;
    char *data = read_all(path, (size_t)1 << 30, &size);
    if (!data)
        return 0;
    if (size == 0) {
        fprintf(stderr, "%s: %s: the compiler wrote an empty %s\n", prog, kind, path);
        free(data);
        return 0;
    }
    add_part(kind, target, data, size);
    return 1;
}

/* ---- options ---- */

/* The version of the language the embedded header declares. */
static int lang_version(void)
{
    const char *p = strstr(keel__kernel_lang_text, "#define KEEL_KERNEL_LANG_VERSION ");
    return p ? atoi(p + strlen("#define KEEL_KERNEL_LANG_VERSION ")) : 0;
}

typedef struct options {
    const char *input, *output;
    const char *pp[MAX_PP];          /* -D, -U and -I, for every compiler */
    int npp;
    const char *cpu_flags, *cuda_arch, *hip_arch;
    int cpu, cuda, hip;              /* 0: no, 1: if its compiler is found, 2: required */
} options_t;

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: %s [options] KERNEL-FILE\n"
            "Compiles a portable kernel file into one module file for keel_module_load_file():\n"
            "its kernels' signatures, its source, and code for the CPU, CUDA and HIP.\n"
            "\n"
            "  -o FILE            the module file (default: KERNEL-FILE with the suffix .keelmod)\n"
            "  -DNAME[=VALUE], -UNAME, -IDIR\n"
            "                     passed to every compiler\n"
            "  --cpu-flags FLAGS  C compiler flags of the CPU code (default: %s);\n"
            "                     the compiler is $KEEL_CPU_CC, else %s\n"
            "  --cuda-arch LIST   CUDA targets, sm_NN (code) or compute_NN (PTX) (default: %s);\n"
            "                     nvcc is $NVCC, else the one configure found, else nvcc on PATH\n"
            "  --hip-arch LIST    AMD GPU targets (default: %s); hipcc is $HIPCC, else the one\n"
            "                     configure found, else hipcc on PATH\n"
            "  --no-cpu, --no-cuda, --no-hip\n"
            "                     leave that code out (a device without code compiles the source)\n"
            "  --cuda, --hip      fail when nvcc or hipcc is missing, instead of leaving it out\n"
            "  -v                 print each compiler command\n"
            "  --help, --version\n",
            prog, CPU_FLAGS_DEFAULT, KEEL_CPU_CC_DEFAULT, CUDA_ARCH_DEFAULT, HIP_ARCH_DEFAULT);
}

static int bad_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "%s: ", prog);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry '%s --help'.\n", prog);
    return 0;
}

/* The value of an option written "--name VALUE", "--name=VALUE" or, for a
 * short one, "-xVALUE"; NULL when @p argv[*i] is not that option. */
static const char *value_of(int argc, char **argv, int *i, const char *name, int *missing)
{
    const char *a = argv[*i];
    size_t len = strlen(name);
    if (strncmp(a, name, len) != 0)
        return NULL;
    if (a[len] == '\0') {
        if (*i + 1 >= argc) {
            *missing = 1;
            return NULL;
        }
        return argv[++*i];
    }
    if (name[1] != '-')
        return a + len;   /* -DNAME, -Idir, -ofile */
    if (a[len] == '=')
        return a + len + 1;
    return NULL;
}

static int parse_options(int argc, char **argv, options_t *o)
{
    static char pp_buf[MAX_PP][4200];
    memset(o, 0, sizeof *o);
    o->cpu = o->cuda = o->hip = 1;
    o->cpu_flags = CPU_FLAGS_DEFAULT;
    o->cuda_arch = CUDA_ARCH_DEFAULT;
    o->hip_arch = HIP_ARCH_DEFAULT;
    int no_more = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int missing = 0;
        if (no_more || a[0] != '-') {
            if (o->input)
                return bad_usage("one kernel file at a time (%s is a second one)", a);
            o->input = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            no_more = 1;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(a, "--version") == 0) {
            printf("keel-cc (Keel) %s\nkernel language version %d, module file version %u\n", PACKAGE_VERSION,
                   lang_version(), KEEL__MODFILE_VERSION);
            exit(0);
        } else if (strcmp(a, "-v") == 0) {
            verbose = 1;
        } else if (strcmp(a, "--no-cpu") == 0) {
            o->cpu = 0;
        } else if (strcmp(a, "--no-cuda") == 0) {
            o->cuda = 0;
        } else if (strcmp(a, "--no-hip") == 0) {
            o->hip = 0;
        } else if (strcmp(a, "--cuda") == 0) {
            o->cuda = 2;
        } else if (strcmp(a, "--hip") == 0) {
            o->hip = 2;
        } else if ((v = value_of(argc, argv, &i, "-o", &missing)) != NULL) {
            o->output = v;
        } else if ((v = value_of(argc, argv, &i, "--cpu-flags", &missing)) != NULL) {
            o->cpu_flags = v;
        } else if ((v = value_of(argc, argv, &i, "--cuda-arch", &missing)) != NULL) {
            o->cuda_arch = v;
        } else if ((v = value_of(argc, argv, &i, "--hip-arch", &missing)) != NULL) {
            o->hip_arch = v;
        } else if (a[1] == 'D' || a[1] == 'U' || a[1] == 'I') {
            char flag[3] = {'-', a[1], '\0'};
            if ((v = value_of(argc, argv, &i, flag, &missing)) == NULL || !v[0])
                return bad_usage("%s needs a value", flag);
            if (o->npp == MAX_PP)
                return bad_usage("more than %s -D, -U and -I options", "256");
            if ((size_t)snprintf(pp_buf[o->npp], sizeof pp_buf[0], "%s%s", flag, v) >= sizeof pp_buf[0])
                return bad_usage("option %s is too long", flag);
            o->pp[o->npp] = pp_buf[o->npp];
            o->npp++;
        } else {
            return bad_usage(missing ? "option %s needs a value" : "unknown option %s", a);
        }
        if (missing)
            return bad_usage("option %s needs a value", a);
    }
    if (!o->input)
        return bad_usage("no kernel file%s", "");
    return 1;
}

/* Splits a comma list into @p items (pointers into @p buf); each must be
 * made of letters, digits, '_', ':', '+' and '-'. */
static int split_list(const char *list, const char *what, char *buf, size_t size, char **items)
{
    if ((size_t)snprintf(buf, size, "%s", list) >= size) {
        fprintf(stderr, "%s: %s is too long\n", prog, what);
        return -1;
    }
    int n = 0;
    for (char *p = buf;;) {
        char *e = strchr(p, ',');
        if (e)
            *e = '\0';
        if (!p[0] || n == MAX_ARCHS || strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789_:+-") != strlen(p)) {
            fprintf(stderr, "%s: %s '%s': %s\n", prog, what, list,
                    n == MAX_ARCHS ? "too many targets" : "expected a comma list of targets");
            return -1;
        }
        items[n++] = p;
        if (!e)
            break;
        p = e + 1;
    }
    return n;
}

/* The compiler a GPU part needs: $ENV, else configure's, else @p name on
 * PATH. 1 when found; 0 with @p why set when not. */
static int find_gpu_compiler(const char *env, const char *configured, const char *name, char *path, size_t size,
                             char *why, size_t why_size)
{
    struct stat st;
    const char *e = getenv(env);
    if (e && e[0]) {
        if (keel__find_program(e, path, size, &st))
            return 1;
        snprintf(why, why_size, "$%s (%s) is not an executable", env, e);
        return 0;
    }
    if (configured && configured[0] && keel__find_program(configured, path, size, &st))
        return 1;
    if (keel__find_program(name, path, size, &st))
        return 1;
    snprintf(why, why_size, "no %s found (set %s to its path)", name, env);
    return 0;
}

/* The directory of @p file, for quoted #includes next to it: the compilers
 * read a copy in the build directory, not the file itself. */
static void dir_of(const char *file, char *dir, size_t size)
{
    const char *slash = strrchr(file, '/');
    if (!slash)
        snprintf(dir, size, "-I.");
    else if (slash == file)
        snprintf(dir, size, "-I/");
    else
        snprintf(dir, size, "-I%.*s", (int)(slash - file), file);
}

/* ---- the parts ---- */

static int build_cpu(const options_t *o, const char *text, const char *include_dir)
{
    static char cc_buf[4096], flags_buf[4096], compiler[4096];
    char *cc[MAX_WORDS], *flags[MAX_WORDS];
    const char *env = getenv("KEEL_CPU_CC");
    const char *cc_s = env && env[0] ? env : KEEL_CPU_CC_DEFAULT;
    int ncc = keel__split_words(cc_s, cc_buf, sizeof cc_buf, cc, MAX_WORDS);
    int nflags = keel__split_words(o->cpu_flags, flags_buf, sizeof flags_buf, flags, MAX_WORDS);
    if (ncc <= 0) {
        fprintf(stderr, "%s: KEEL_CPU_CC='%s' names no compiler\n", prog, cc_s);
        return 0;
    }
    if (nflags < 0) {
        fprintf(stderr, "%s: --cpu-flags has more than %d words\n", prog, MAX_WORDS);
        return 0;
    }
    struct stat st;
    if (!keel__find_program(cc[0], compiler, sizeof compiler, &st)) {
        fprintf(stderr, "%s: no C compiler for the CPU code: '%s' (%s) is not an executable; set KEEL_CPU_CC, or "
                        "leave the CPU code out with --no-cpu\n",
                prog, cc[0], env && env[0] ? "KEEL_CPU_CC" : "the compiler configure found");
        return 0;
    }
    cc[0] = compiler;
    struct utsname u;
    if (uname(&u) != 0) {
        fprintf(stderr, "%s: uname: %s\n", prog, strerror(errno));
        return 0;
    }
    const char *src = tmp_path("kernel.c"), *so = tmp_path("kernel.so");
    if (!write_text(src, text))
        return 0;
    cmd_t c = {{NULL}, 0};
    for (int i = 0; i < ncc; i++)
        cmd_add(&c, cc[i]);
    /* As the CPU backend compiles at run time (backends/cpu/cpu_compile.c). */
    cmd_add(&c, "-std=gnu11");
    cmd_add(&c, "-fPIC");
    cmd_add(&c, "-shared");
    for (int i = 0; i < nflags; i++)
        cmd_add(&c, flags[i]);
    for (int i = 0; i < o->npp; i++)
        cmd_add(&c, o->pp[i]);
    cmd_add(&c, include_dir);
    cmd_add(&c, "-o");
    cmd_add(&c, so);
    cmd_add(&c, src);
    cmd_add(&c, "-lm");
    return run(&c, "CPU code") && take_output(so, "cpu", u.machine);
}

/* The nvcc and hipcc options of --cuda-arch and --hip-arch, checked before
 * any compiler runs. */
static char gencode[MAX_ARCHS][128], offload[MAX_ARCHS][128];
static int ngencode, noffload;

static int prepare_targets(const options_t *o)
{
    static char cuda_buf[1024], hip_buf[1024];
    char *arch[MAX_ARCHS];
    ngencode = split_list(o->cuda_arch, "--cuda-arch", cuda_buf, sizeof cuda_buf, arch);
    if (ngencode < 0)
        return 0;
    for (int i = 0; i < ngencode; i++) {
        /* sm_NN: code for that GPU; compute_NN: PTX, which the driver
         * compiles for any later GPU. */
        const char *num = strncmp(arch[i], "sm_", 3) == 0        ? arch[i] + 3
                          : strncmp(arch[i], "compute_", 8) == 0 ? arch[i] + 8
                                                                 : NULL;
        if (!num || num[0] < '0' || num[0] > '9') {
            fprintf(stderr, "%s: --cuda-arch: '%s' is neither sm_NN nor compute_NN\n", prog, arch[i]);
            return 0;
        }
        snprintf(gencode[i], sizeof gencode[i], "-gencode=arch=compute_%s,code=%s", num, arch[i]);
    }
    noffload = split_list(o->hip_arch, "--hip-arch", hip_buf, sizeof hip_buf, arch);
    if (noffload < 0)
        return 0;
    for (int i = 0; i < noffload; i++)
        snprintf(offload[i], sizeof offload[i], "--offload-arch=%s", arch[i]);
    return 1;
}

static int build_cuda(const options_t *o, const char *nvcc, const char *text, const char *include_dir)
{
    const char *src = tmp_path("kernel.cu"), *fatbin = tmp_path("kernel.fatbin");
    if (!write_text(src, text))
        return 0;
    cmd_t c = {{NULL}, 0};
    cmd_add(&c, nvcc);
    cmd_add(&c, "-fatbin");
    for (int i = 0; i < ngencode; i++)
        cmd_add(&c, gencode[i]);
    for (int i = 0; i < o->npp; i++)
        cmd_add(&c, o->pp[i]);
    cmd_add(&c, include_dir);
    cmd_add(&c, "-o");
    cmd_add(&c, fatbin);
    cmd_add(&c, src);
    return run(&c, "CUDA code") && take_output(fatbin, "cuda", o->cuda_arch);
}

static int build_hip(const options_t *o, const char *hipcc, const char *text, const char *include_dir)
{
    const char *src = tmp_path("kernel.hip"), *bundle = tmp_path("kernel.hipfb");
    if (!write_text(src, text))
        return 0;
    cmd_t c = {{NULL}, 0};
    cmd_add(&c, hipcc);
    cmd_add(&c, "--genco");
    cmd_add(&c, "-O3");
    for (int i = 0; i < noffload; i++)
        cmd_add(&c, offload[i]);
    for (int i = 0; i < o->npp; i++)
        cmd_add(&c, o->pp[i]);
    cmd_add(&c, include_dir);
    cmd_add(&c, "-o");
    cmd_add(&c, bundle);
    cmd_add(&c, src);
    return run(&c, "HIP code") && take_output(bundle, "hip", o->hip_arch);
}

/* The source as a device without code compiles it at load time: the text
 * as given, after the -D and -U options as directives (they decide what the
 * kernels are, and a load knows no options), with a #line that keeps the
 * compilers' line numbers and file name the user's. -I directories are not
 * kept: they need not exist where the file is loaded. */
static char *stored_source(const options_t *o, const char *source, size_t *size)
{
    size_t need = strlen(source) + 64 + 2 * strlen(o->input);
    for (int i = 0; i < o->npp; i++)
        need += strlen(o->pp[i]) + 16;
    char *s = malloc(need);
    if (!s)
        return NULL;
    size_t w = 0;
    int any = 0;
    for (int i = 0; i < o->npp; i++) {
        const char *d = o->pp[i] + 2;
        if (o->pp[i][1] == 'I')
            continue;
        any = 1;
        if (o->pp[i][1] == 'U') {
            w += (size_t)sprintf(s + w, "#undef %s\n", d);
        } else {
            const char *eq = strchr(d, '=');
            if (eq)
                w += (size_t)sprintf(s + w, "#define %.*s %s\n", (int)(eq - d), d, eq + 1);
            else
                w += (size_t)sprintf(s + w, "#define %s 1\n", d);
        }
    }
    if (any) {
        w += (size_t)sprintf(s + w, "#line 1 \"");
        for (const char *p = o->input; *p; p++) {
            if (*p == '"' || *p == '\\')
                s[w++] = '\\';
            if (*p != '\n')
                s[w++] = *p;
        }
        w += (size_t)sprintf(s + w, "\"\n");
    }
    size_t n = strlen(source);
    memcpy(s + w, source, n);
    *size = w + n;
    return s;
}

static char *default_output(const char *input)
{
    const char *base = strrchr(input, '/');
    base = base ? base + 1 : input;
    const char *dot = strrchr(base, '.');
    size_t stem = dot && dot != base ? (size_t)(dot - input) : strlen(input);
    char *out = malloc(stem + sizeof ".keelmod");
    if (out)
        sprintf(out, "%.*s.keelmod", (int)stem, input);
    return out;
}

int main(int argc, char **argv)
{
    options_t o;
    if (!parse_options(argc, argv, &o))
        return 2;
    if (!prepare_targets(&o)) {
        fprintf(stderr, "Try '%s --help'.\n", prog);
        return 2;
    }
    int ok = 0;
    keel__ksource_t ks = {NULL, 0};
    size_t size = 0;
    char *default_out = o.output ? NULL : default_output(o.input);
    const char *output = o.output ? o.output : default_out;
    char *source = output ? read_all(o.input, MAX_SOURCE_BYTES, &size) : NULL;
    char err[1024];
    if (!output) {
        fprintf(stderr, "%s: out of memory\n", prog);
        goto done;
    }
    if (!source)
        goto done;
    if (strlen(source) != size) {
        fprintf(stderr, "%s: %s holds a NUL byte: it is not kernel source\n", prog, o.input);
        goto done;
    }
    if (keel__ksource_parse(source, o.input, &ks, err, sizeof err) != KEEL_OK) {
        fprintf(stderr, "%s\n", err);
        goto done;
    }

    /* Which GPU compilers there are, before any work. */
    char nvcc[4096] = "", hipcc[4096] = "", why[4600];
#ifdef KEEL_CC_NVCC
    const char *nvcc_configured = KEEL_CC_NVCC;
#else
    const char *nvcc_configured = NULL;
#endif
#ifdef KEEL_CC_HIPCC
    const char *hipcc_configured = KEEL_CC_HIPCC;
#else
    const char *hipcc_configured = NULL;
#endif
    if (o.cuda && !find_gpu_compiler("NVCC", nvcc_configured, "nvcc", nvcc, sizeof nvcc, why, sizeof why)) {
        if (o.cuda == 2) {
            fprintf(stderr, "%s: --cuda: %s\n", prog, why);
            goto done;
        }
        fprintf(stderr, "%s: note: no CUDA code in %s: %s; --no-cuda leaves it out quietly\n", prog, output, why);
        o.cuda = 0;
    }
    if (o.hip && !find_gpu_compiler("HIPCC", hipcc_configured, "hipcc", hipcc, sizeof hipcc, why, sizeof why)) {
        if (o.hip == 2) {
            fprintf(stderr, "%s: --hip: %s\n", prog, why);
            goto done;
        }
        fprintf(stderr, "%s: note: no HIP code in %s: %s; --no-hip leaves it out quietly\n", prog, output, why);
        o.hip = 0;
    }

    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_signal);
    atexit(cleanup);
    if (!make_tmp_dir())
        goto done;

    char include_dir[4200];
    dir_of(o.input, include_dir, sizeof include_dir);
    char *sigs = keel__ksource_serialize(&ks);
    size_t stored_size = 0;
    char *stored = stored_source(&o, source, &stored_size);
    if (!sigs || !stored) {
        free(sigs);
        free(stored);
        fprintf(stderr, "%s: out of memory\n", prog);
        goto done;
    }
    add_part("signatures", "", sigs, strlen(sigs));
    add_part("source", "", stored, stored_size);

    ok = 1;
    if (o.cpu) {
        char *text = keel__ksource_generate(&ks, source, o.input, KEEL__KTARGET_CPU);
        if (!text)
            fprintf(stderr, "%s: out of memory\n", prog);
        ok = text && build_cpu(&o, text, include_dir);
        free(text);
    }
    if (ok && (o.cuda || o.hip)) {
        char *text = keel__ksource_generate(&ks, source, o.input, KEEL__KTARGET_GPU);
        if (!text)
            fprintf(stderr, "%s: out of memory\n", prog);
        ok = text != NULL;
        if (ok && o.cuda)
            ok = build_cuda(&o, nvcc, text, include_dir);
        if (ok && o.hip)
            ok = build_hip(&o, hipcc, text, include_dir);
        free(text);
    }
    if (ok)
        ok = write_module(output);
    if (ok && verbose) {
        fprintf(stderr, "%s: wrote %s:", prog, output);
        for (int i = 0; i < nparts; i++)
            fprintf(stderr, " %s%s%s (%zu bytes)", parts[i].kind, parts[i].target[0] ? " " : "", parts[i].target,
                    parts[i].size);
        fprintf(stderr, "\n");
    }
done:
    for (int i = 0; i < nparts; i++)
        free(parts[i].data);
    keel__ksource_free(&ks);
    free(source);
    free(default_out);
    return ok ? 0 : 1;
}
