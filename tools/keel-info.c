/* SPDX-License-Identifier: MIT */
/* keel-info: what Keel sees on this machine. Version, every backend it knows
 * (usable or why not), every device of the usable ones with all their
 * properties, the default device, and the environment variables in effect.
 *
 * Exit status: 0 when Keel initialized; 2 when keel_init() reported an
 * environment or selection error (e.g. KEEL_BACKEND names a backend that
 * cannot be used), or when --backend names a backend that is not usable;
 * 1 for usage errors and unexpected failures. Everything that can be listed
 * is listed in every case, so the output explains the exit status. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <keel.h>
#include <keel/backend.h> /* KEEL_BACKEND_ABI_VERSION, to compare with each plugin's */

#ifndef KEEL_PLUGIN_DIR
#define KEEL_PLUGIN_DIR "(unknown)"
#endif

enum { EXIT_USAGE = 1, EXIT_SELECTION = 2 };

/* Values longer than this are cut, with "...", so the descriptions stay in one column. */
enum { ENV_VALUE_SHOWN = 40 };

static int json_mode;
static int list_mode;
static const char *only_backend;

/* ---- small output helpers -------------------------------------------------- */

static void json_string(const char *s)
{
    if (s == NULL) {
        fputs("null", stdout);
        return;
    }
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", stdout); break;
        case '\\': fputs("\\\\", stdout); break;
        case '\n': fputs("\\n", stdout); break;
        case '\r': fputs("\\r", stdout); break;
        case '\t': fputs("\\t", stdout); break;
        default:
            if (*p < 0x20)
                printf("\\u%04x", *p);
            else
                putchar(*p);
        }
    }
    putchar('"');
}

/* "151.0 GiB" for humans; the exact byte count is printed next to it. */
static const char *human_bytes(size_t bytes, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%zu B", bytes);
    else
        snprintf(buf, len, "%.1f %s", v, units[u]);
    return buf;
}

/* One "label : value" line of the human output, labels aligned. */
static void field(int indent, const char *label, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void field(int indent, const char *label, const char *fmt, ...)
{
    va_list ap;
    printf("%*s%-26s: ", indent, "", label);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

static const char *yes_no(int v)
{
    return v ? "yes" : "no";
}

static const char *device_type_name(keel_device_type_t t)
{
    switch (t) {
    case KEEL_DEVICE_TYPE_CPU: return "cpu";
    case KEEL_DEVICE_TYPE_GPU: return "gpu";
    }
    return "unknown";
}

/* ---- sections ----------------------------------------------------------------- */

static void print_version(void)
{
    int major = 0, minor = 0, patch = 0;
    keel_version(&major, &minor, &patch);
    if (json_mode) {
        printf("  \"version\": ");
        json_string(keel_version_string());
        printf(",\n  \"header_version\": \"%d.%d.%d\",\n", KEEL_VERSION_MAJOR, KEEL_VERSION_MINOR,
               KEEL_VERSION_PATCH);
        printf("  \"plugin_dir\": ");
        json_string(KEEL_PLUGIN_DIR);
        const char *path = NULL;
        printf(",\n  \"plugin_search_path\": ");
        json_string(keel_backend_search_path(&path, NULL) == KEEL_OK ? path : NULL);
        printf(",\n");
        return;
    }
    printf("Keel %s", keel_version_string());
    /* A keel-info built against other headers than the library it runs with
     * is worth saying: it is the usual cause of odd struct_size effects. */
    if (major != KEEL_VERSION_MAJOR || minor != KEEL_VERSION_MINOR || patch != KEEL_VERSION_PATCH)
        printf(" (keel-info built against headers %d.%d.%d)", KEEL_VERSION_MAJOR, KEEL_VERSION_MINOR,
               KEEL_VERSION_PATCH);
    printf("\n");
    field(2, "plugin directory", "%s (configured)", KEEL_PLUGIN_DIR);
    const char *path = NULL;
    if (keel_backend_search_path(&path, NULL) == KEEL_OK)
        field(2, "plugin search path", "%s", path);
    else
        field(2, "plugin search path", "unknown: %s", keel_last_error());
}

static void print_init(keel_status_t init_status, const char *init_detail)
{
    if (json_mode) {
        printf("  \"init\": {\"status\": ");
        json_string(keel_status_name(init_status));
        printf(", \"detail\": ");
        json_string(init_detail);
        printf("},\n");
        return;
    }
    if (init_status == KEEL_OK)
        field(2, "initialization", "ok");
    else
        field(2, "initialization", "FAILED: %s (%s): %s", keel_status_name(init_status),
              keel_status_string(init_status), init_detail);
}

static const char *blas_kind_name(keel_blas_kind_t k)
{
    switch (k) {
    case KEEL_BLAS_VENDOR: return "vendor";
    case KEEL_BLAS_PORTABLE: return "portable";
    case KEEL_BLAS_NONE: return "none";
    }
    return "unknown";
}

static void print_device_properties(keel_device_t *dev, int first)
{
    keel_device_properties_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    keel_status_t st = keel_device_get_properties(dev, &p);
    const char *dname = keel_device_name(dev);
    char b1[32], b2[32], b3[32];

    if (json_mode) {
        printf("%s      {\"name\": ", first ? "" : ",\n");
        json_string(dname);
        if (st != KEEL_OK) {
            printf(", \"error\": ");
            json_string(keel_status_name(st));
            printf(", \"detail\": ");
            json_string(keel_last_error());
            printf("}");
            return;
        }
        printf(", \"device_name\": ");
        json_string(p.name);
        printf(", \"vendor\": ");
        json_string(p.vendor);
        printf(", \"architecture\": ");
        json_string(p.architecture);
        printf(", \"backend\": ");
        json_string(p.backend);
        printf(", \"type\": \"%s\", \"index\": %d", device_type_name(p.type), p.index);
        printf(", \"total_memory\": %zu, \"free_memory\": %zu", p.total_memory, p.free_memory);
        printf(", \"compute_units\": %d, \"max_threads_per_block\": %d", p.compute_units,
               p.max_threads_per_block);
        printf(", \"max_block_dim\": [%d, %d, %d], \"max_grid_dim\": [%d, %d, %d]", p.max_block_dim[0],
               p.max_block_dim[1], p.max_block_dim[2], p.max_grid_dim[0], p.max_grid_dim[1], p.max_grid_dim[2]);
        printf(", \"warp_size\": %d, \"shared_memory_per_block\": %zu, \"clock_rate_khz\": %d", p.warp_size,
               p.shared_memory_per_block, p.clock_rate_khz);
        printf(", \"compute_capability\": [%d, %d], \"pci_bus_id\": %d", p.compute_capability_major,
               p.compute_capability_minor, p.pci_bus_id);
        printf(", \"unified_addressing\": %s, \"managed_memory\": %s, \"concurrent_managed_access\": %s",
               p.unified_addressing ? "true" : "false", p.managed_memory ? "true" : "false",
               p.concurrent_managed_access ? "true" : "false");
        printf(", \"stream_priorities\": %s, \"stream_ordered_alloc\": %s, \"async_engines\": %d",
               p.stream_priorities ? "true" : "false", p.stream_ordered_alloc ? "true" : "false",
               p.async_engines);
        keel_blas_kind_t kind = KEEL_BLAS_NONE;
        char blas[1024];
        if (keel_device_get_blas_info(dev, &kind, blas, sizeof blas) == KEEL_OK) {
            printf(", \"blas\": {\"kind\": \"%s\", \"description\": ", blas_kind_name(kind));
            json_string(blas);
            printf("}");
        } else {
            printf(", \"blas\": {\"error\": ");
            json_string(keel_last_error());
            printf("}");
        }
        printf("}");
        return;
    }

    printf("\n  %s\n", dname);
    if (st != KEEL_OK) {
        field(4, "error", "%s: %s", keel_status_name(st), keel_last_error());
        return;
    }
    field(4, "name", "%s", p.name);
    field(4, "vendor", "%s", p.vendor);
    field(4, "architecture", "%s", p.architecture);
    field(4, "type", "%s", device_type_name(p.type));
    field(4, "backend / index", "%s / %d", p.backend, p.index);
    field(4, "total memory", "%s (%zu bytes)", human_bytes(p.total_memory, b1, sizeof b1), p.total_memory);
    field(4, "free memory", "%s (%zu bytes)", human_bytes(p.free_memory, b2, sizeof b2), p.free_memory);
    field(4, "compute units", "%d", p.compute_units);
    field(4, "max threads per block", "%d", p.max_threads_per_block);
    field(4, "max block dims", "%d x %d x %d", p.max_block_dim[0], p.max_block_dim[1], p.max_block_dim[2]);
    field(4, "max grid dims", "%d x %d x %d", p.max_grid_dim[0], p.max_grid_dim[1], p.max_grid_dim[2]);
    field(4, "warp size", "%d", p.warp_size);
    field(4, "shared memory per block", "%s (%zu bytes)", human_bytes(p.shared_memory_per_block, b3, sizeof b3),
          p.shared_memory_per_block);
    if (p.clock_rate_khz > 0)
        field(4, "clock rate", "%d MHz", p.clock_rate_khz / 1000);
    else
        field(4, "clock rate", "unknown");
    if (p.compute_capability_major > 0)
        field(4, "compute capability", "%d.%d", p.compute_capability_major, p.compute_capability_minor);
    else
        field(4, "compute capability", "n/a");
    if (p.pci_bus_id >= 0)
        field(4, "PCI bus id", "%d (0x%02x)", p.pci_bus_id, (unsigned)p.pci_bus_id);
    else
        field(4, "PCI bus id", "n/a");
    field(4, "unified addressing", "%s", yes_no(p.unified_addressing));
    field(4, "managed memory", "%s", yes_no(p.managed_memory));
    field(4, "concurrent managed access", "%s", yes_no(p.concurrent_managed_access));
    field(4, "stream priorities", "%s", yes_no(p.stream_priorities));
    {
        int least = 0, greatest = 0;
        if (keel_device_stream_priority_range(dev, &least, &greatest) == KEEL_OK)
            field(4, "stream priority range", "%d (least) .. %d (greatest)", least, greatest);
    }
    field(4, "stream-ordered allocation", "%s", p.stream_ordered_alloc ? "yes (pool)" : "emulated");
    if (p.async_engines > 0)
        field(4, "async copy engines", "%d", p.async_engines);
    else
        field(4, "async copy engines", "unknown");
    /* what runs keel_gemm, keel_gemv and keel_dense here */
    char blas[1024];
    if (keel_device_get_blas_info(dev, NULL, blas, sizeof blas) == KEEL_OK)
        field(4, "blas", "%s", blas);
    else
        field(4, "blas", "unknown: %s", keel_last_error());
}

/* Backend i and its info: 1 when it is to be shown, 0 when --backend names
 * another, -1 when it could not be read (said on stderr). */
static int backend_listed(int i, keel_backend_t **b, keel_backend_info_t *info)
{
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    keel_status_t st;
    if ((st = keel_backend_get(i, b)) != KEEL_OK || (st = keel_backend_get_info(*b, info)) != KEEL_OK) {
        fprintf(stderr, "keel-info: backend %d: %s: %s\n", i, keel_status_name(st), keel_last_error());
        return -1;
    }
    return !only_backend || strcmp(only_backend, info->name) == 0;
}

/* Lists backends and, for each usable one, its devices. Returns 0, or
 * EXIT_SELECTION when --backend named one that is not usable. */
static int print_backends(void)
{
    int count = 0;
    keel_status_t st = keel_backend_count(&count);
    if (st != KEEL_OK) {
        fprintf(stderr, "keel-info: keel_backend_count: %s: %s\n", keel_status_name(st), keel_last_error());
        return EXIT_USAGE;
    }

    int rc = 0, shown = 0;
    if (json_mode)
        printf("  \"backends\": [");
    else
        printf("\nBackends (%d known)\n", count);

    for (int i = 0; i < count; i++) {
        keel_backend_t *b = NULL;
        keel_backend_info_t info;
        int got = backend_listed(i, &b, &info);
        if (got < 0)
            rc = EXIT_USAGE;
        if (got <= 0)
            continue;
        if (only_backend && !info.usable)
            rc = EXIT_SELECTION;

        if (json_mode) {
            printf("%s\n    {\"name\": ", shown ? "," : "");
            json_string(info.name);
            printf(", \"usable\": %s, \"status\": ", info.usable ? "true" : "false");
            json_string(keel_status_name(info.status));
            printf(", \"reason\": ");
            json_string(info.reason);
            printf(", \"description\": ");
            json_string(info.description);
            printf(", \"plugin_path\": ");
            json_string(info.plugin_path);
            printf(", \"abi_version\": %d, \"device_count\": %d,\n     \"devices\": [\n", info.abi_version,
                   info.device_count);
        } else {
            printf("\n  %-8s %s\n", info.name, info.usable ? "usable" : "NOT USABLE");
            if (!info.usable)
                field(4, "why not", "%s (%s)", info.reason && *info.reason ? info.reason : "(no reason given)",
                      keel_status_name(info.status));
            if (info.description && *info.description)
                field(4, "description", "%s", info.description);
            field(4, "plugin", "%s", info.plugin_path ? info.plugin_path : "(not found)");
            if (info.abi_version > 0)
                field(4, "plugin ABI version", "%d (this Keel: %d)", info.abi_version, KEEL_BACKEND_ABI_VERSION);
            else
                field(4, "plugin ABI version", "- (never loaded)");
            field(4, "devices", "%d", info.device_count);
        }
        shown++;

        for (int d = 0; info.usable && d < info.device_count; d++) {
            keel_device_t *dev = NULL;
            st = keel_backend_get_device(b, d, &dev);
            if (st != KEEL_OK) {
                if (json_mode) {
                    printf("%s      {\"index\": %d, \"error\": ", d ? ",\n" : "", d);
                    json_string(keel_status_name(st));
                    printf(", \"detail\": ");
                    json_string(keel_last_error());
                    printf("}");
                } else {
                    printf("\n  %s:%d\n", info.name, d);
                    field(4, "error", "%s: %s", keel_status_name(st), keel_last_error());
                }
                continue;
            }
            print_device_properties(dev, d == 0);
        }
        if (json_mode)
            printf("\n     ]}");
    }
    if (json_mode)
        printf("\n  ],\n");
    if (only_backend && shown == 0) {
        keel_backend_t *b;
        keel_status_t fst = keel_backend_find(only_backend, &b);
        fprintf(stderr, "keel-info: --backend %s: %s: %s\n", only_backend, keel_status_name(fst),
                keel_last_error());
        rc = EXIT_USAGE;
    }
    return rc;
}

/* --list: one line a backend, one a device under it, like clinfo -l. */
static int print_list(void)
{
    int count = 0, rc = 0, shown = 0;
    keel_status_t st = keel_backend_count(&count);
    if (st != KEEL_OK) {
        fprintf(stderr, "keel-info: keel_backend_count: %s: %s\n", keel_status_name(st), keel_last_error());
        return EXIT_USAGE;
    }
    for (int i = 0; i < count; i++) {
        keel_backend_t *b = NULL;
        keel_backend_info_t info;
        int got = backend_listed(i, &b, &info);
        if (got < 0)
            rc = EXIT_USAGE;
        if (got <= 0)
            continue;
        shown++;
        if (!info.usable) {
            printf("%s: not usable: %s\n", info.name,
                   info.reason && *info.reason ? info.reason : keel_status_name(info.status));
            if (only_backend)
                rc = EXIT_SELECTION;
            continue;
        }
        printf("%s: %d device%s\n", info.name, info.device_count, info.device_count == 1 ? "" : "s");
        for (int d = 0; d < info.device_count; d++) {
            keel_device_t *dev = NULL;
            keel_device_properties_t p;
            memset(&p, 0, sizeof p);
            p.struct_size = sizeof p;
            if ((st = keel_backend_get_device(b, d, &dev)) != KEEL_OK ||
                (st = keel_device_get_properties(dev, &p)) != KEEL_OK) {
                printf("  %s:%d  error: %s: %s\n", info.name, d, keel_status_name(st), keel_last_error());
                continue;
            }
            printf("  %s  %s\n", keel_device_name(dev), p.name);
        }
    }
    if (only_backend && shown == 0) {
        fprintf(stderr, "keel-info: --backend %s: no such backend\n", only_backend);
        rc = EXIT_USAGE;
    }
    return rc;
}

static void print_default_device(void)
{
    keel_device_t *dev = NULL;
    keel_status_t st = keel_device_default(&dev);
    const char *sel = getenv("KEEL_BACKEND");
    if (json_mode) {
        printf("  \"default_device\": ");
        if (st == KEEL_OK) {
            json_string(keel_device_name(dev));
            printf(",\n");
        } else {
            printf("null,\n  \"default_device_error\": {\"status\": ");
            json_string(keel_status_name(st));
            printf(", \"detail\": ");
            json_string(keel_last_error());
            printf("},\n");
        }
        return;
    }
    printf("\nDefault device\n");
    field(2, "KEEL_BACKEND", "%s", sel ? sel : "(unset: cuda,hip,cpu)");
    if (st == KEEL_OK) {
        keel_device_properties_t p;
        memset(&p, 0, sizeof p);
        p.struct_size = sizeof p;
        if (keel_device_get_properties(dev, &p) == KEEL_OK)
            field(2, "selected", "%s, %s", keel_device_name(dev), p.name);
        else
            field(2, "selected", "%s", keel_device_name(dev));
    } else {
        field(2, "selected", "none: %s: %s", keel_status_name(st), keel_last_error());
    }
}

static void print_environment(void)
{
    if (json_mode)
        printf("  \"environment\": [");
    else
        printf("\nEnvironment (read once, at initialization)\n");
    /* Counted, not iterated until keel_env_var_get fails: that failure
     * would be an error of its own, which KEEL_LOG=debug prints. */
    int count = 0, width = 0, vwidth = 7; /* the longest name and value, so the columns line up */
    (void)keel_env_var_count(&count);
    for (int i = 0; i < count; i++) {
        const char *name = NULL;
        if (keel_env_var_get(i, &name, NULL) != KEEL_OK)
            continue;
        if ((int)strlen(name) > width)
            width = (int)strlen(name);
        const char *value = NULL;
        (void)keel_env_var_value(i, &value, NULL);
        int vlen = value ? (int)strlen(value) + 2 : 7;
        if (vlen > vwidth)
            vwidth = vlen > ENV_VALUE_SHOWN + 5 ? ENV_VALUE_SHOWN + 5 : vlen;
    }
    for (int i = 0; i < count; i++) {
        const char *name = NULL, *desc = NULL, *value = NULL, *set_by = NULL;
        if (keel_env_var_get(i, &name, &desc) != KEEL_OK || keel_env_var_value(i, &value, &set_by) != KEEL_OK)
            continue;
        /* A value set through an older name says which. */
        const char *alias = value && strcmp(set_by, name) != 0 ? set_by : NULL;
        if (json_mode) {
            printf("%s\n    {\"name\": ", i ? "," : "");
            json_string(name);
            printf(", \"value\": ");
            json_string(value);
            if (alias) {
                printf(", \"set_by\": ");
                json_string(alias);
            }
            printf(", \"description\": ");
            json_string(desc);
            printf("}");
        } else {
            char shown[ENV_VALUE_SHOWN + 8];
            if (value == NULL)
                snprintf(shown, sizeof shown, "(unset)");
            else
                snprintf(shown, sizeof shown, "\"%.*s\"%s", ENV_VALUE_SHOWN, value,
                         strlen(value) > ENV_VALUE_SHOWN ? "..." : "");
            printf("  %-*s  %-*s  %s", width, name, vwidth, shown, desc ? desc : "");
            if (alias)
                printf(" [set by %s]", alias);
            printf("\n");
        }
    }
    if (json_mode)
        printf("\n  ]\n");
}

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: keel-info [--backend NAME] [--list | --json] [--help] [--version]\n"
            "\n"
            "Print what Keel sees on this machine: its version, every backend it knows\n"
            "(usable or why not), every device of the usable backends with its\n"
            "properties, the default device, and the KEEL_* environment variables.\n"
            "\n"
            "  --backend NAME  only show backend NAME (cpu, cuda, hip, ...) and its devices\n"
            "  -l, --list      one line per backend and per device, nothing else\n"
            "  --json          machine-readable output\n"
            "  --version       print Keel's version and exit\n"
            "  --help          this text\n"
            "\n"
            "Exit status: 0 when Keel initialized; 2 when the KEEL_* environment is invalid,\n"
            "KEEL_BACKEND names no usable backend, or --backend NAME is not usable;\n"
            "1 for usage errors.\n");
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--version") == 0 || strcmp(argv[i], "-V") == 0) {
            printf("keel-info (Keel) %s\n", keel_version_string());
            return 0;
        } else if (strcmp(argv[i], "--json") == 0) {
            json_mode = 1;
        } else if (strcmp(argv[i], "--list") == 0 || strcmp(argv[i], "-l") == 0) {
            list_mode = 1;
        } else if (strcmp(argv[i], "--backend") == 0 || strcmp(argv[i], "-b") == 0) {
            if (++i >= argc) {
                fprintf(stderr, "keel-info: --backend needs a name\n");
                usage(stderr);
                return EXIT_USAGE;
            }
            only_backend = argv[i];
        } else if (strncmp(argv[i], "--backend=", 10) == 0) {
            only_backend = argv[i] + 10;
        } else {
            fprintf(stderr, "keel-info: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return EXIT_USAGE;
        }
    }

    if (list_mode && json_mode) {
        fprintf(stderr, "keel-info: --list and --json cannot be combined\n");
        return EXIT_USAGE;
    }

    keel_status_t init = keel_init();
    /* Copy the detail now: the listing below makes calls that may overwrite it. */
    char init_detail[2048] = "";
    if (init != KEEL_OK)
        snprintf(init_detail, sizeof init_detail, "%s", keel_last_error());

    int rc = 0;
    if (init == KEEL_ERROR_INVALID_ENVIRONMENT || init == KEEL_ERROR_BACKEND_UNAVAILABLE ||
        init == KEEL_ERROR_NO_DEVICE)
        rc = EXIT_SELECTION;
    else if (init != KEEL_OK)
        rc = EXIT_USAGE;

    if (list_mode) {
        int lrc = print_list();
        if (init != KEEL_OK)
            fprintf(stderr, "keel-info: keel_init failed: %s: %s\n", keel_status_name(init), init_detail);
        return rc != 0 ? rc : lrc;
    }
    if (json_mode)
        printf("{\n");
    print_version();
    print_init(init, init_detail);
    int brc = print_backends();
    if (brc != 0 && rc == 0)
        rc = brc;
    print_default_device();
    print_environment();
    if (json_mode)
        printf("}\n");

    if (init != KEEL_OK)
        fprintf(stderr, "keel-info: keel_init failed: %s: %s\n", keel_status_name(init), init_detail);
    if (fflush(stdout) != 0 && rc == 0) {
        fprintf(stderr, "keel-info: writing output: %s\n", strerror(errno));
        rc = EXIT_USAGE;
    }
    return rc;
}
