/* SPDX-License-Identifier: MIT */
/* The portable kernel language's translator. It does not parse C: it skips
 * comments, strings and preprocessor lines, finds each keel_kernel and
 * keel_block_kernel at file scope, and reads the declaration that follows
 * (void, a name, a parameter list of "type name" entries, a body). What it
 * writes for a target changes only those declarations, on their own lines,
 * so a compiler's message names the user's line. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fault.h"
#include "runtime/kernel_source.h"

typedef struct scan {
    const char *s;
    size_t i, n;
    unsigned line;
} scan_t;

static int ident_start(int c)
{
    return isalpha(c) || c == '_';
}

static int ident_char(int c)
{
    return isalnum(c) || c == '_';
}

/* Skips spaces, comments and (at the start of a line) preprocessor lines. */
static void skip_space(scan_t *sc)
{
    int line_start = sc->i == 0 || sc->s[sc->i - 1] == '\n';
    while (sc->i < sc->n) {
        char c = sc->s[sc->i];
        if (c == '\n') {
            sc->line++;
            sc->i++;
            line_start = 1;
        } else if (isspace((unsigned char)c)) {
            sc->i++;
        } else if (c == '/' && sc->i + 1 < sc->n && sc->s[sc->i + 1] == '/') {
            while (sc->i < sc->n && sc->s[sc->i] != '\n')
                sc->i++;
        } else if (c == '/' && sc->i + 1 < sc->n && sc->s[sc->i + 1] == '*') {
            sc->i += 2;
            while (sc->i < sc->n && !(sc->s[sc->i] == '*' && sc->i + 1 < sc->n && sc->s[sc->i + 1] == '/')) {
                if (sc->s[sc->i] == '\n')
                    sc->line++;
                sc->i++;
            }
            sc->i = sc->i + 2 <= sc->n ? sc->i + 2 : sc->n;
        } else if (c == '#' && line_start) {
            /* A directive runs to an unescaped newline. */
            while (sc->i < sc->n && sc->s[sc->i] != '\n') {
                if (sc->s[sc->i] == '\\' && sc->i + 1 < sc->n && sc->s[sc->i + 1] == '\n') {
                    sc->line++;
                    sc->i++;
                }
                sc->i++;
            }
        } else {
            return;
        }
    }
}

/* Skips a string or character literal starting at the quote. */
static void skip_literal(scan_t *sc)
{
    char q = sc->s[sc->i++];
    while (sc->i < sc->n && sc->s[sc->i] != q && sc->s[sc->i] != '\n') {
        if (sc->s[sc->i] == '\\' && sc->i + 1 < sc->n)
            sc->i++;
        sc->i++;
    }
    if (sc->i < sc->n && sc->s[sc->i] == q)
        sc->i++;
}

/* Reads an identifier at the cursor into @p buf (truncated); 0 if none. */
static size_t read_ident(scan_t *sc, char *buf, size_t size)
{
    size_t start = sc->i;
    if (sc->i >= sc->n || !ident_start((unsigned char)sc->s[sc->i]))
        return 0;
    while (sc->i < sc->n && ident_char((unsigned char)sc->s[sc->i]))
        sc->i++;
    size_t len = sc->i - start;
    if (buf) {
        size_t k = len < size - 1 ? len : size - 1;
        memcpy(buf, sc->s + start, k);
        buf[k] = '\0';
    }
    return len;
}

static keel_status_t fail(char *err, size_t size, const char *name, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static keel_status_t fail(char *err, size_t size, const char *name, unsigned line, const char *fmt, ...)
{
    int k = snprintf(err, size, "%s:%u: ", name, line);
    if (k < 0 || (size_t)k >= size)
        return KEEL_ERROR_COMPILE_FAILED;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + k, size - (size_t)k, fmt, ap);
    va_end(ap);
    return KEEL_ERROR_COMPILE_FAILED;
}

/* The size of a scalar type written with the words of @p type (qualifiers
 * dropped), or 0 when unknown. Every target Keel supports is LP64. */
static size_t scalar_size(const char *type)
{
    static const struct {
        const char *words;
        size_t size;
    } known[] = {
        {"char", 1}, {"signed char", 1}, {"unsigned char", 1}, {"int8_t", 1}, {"uint8_t", 1}, {"_Bool", 1},
        {"bool", 1}, {"short", 2}, {"short int", 2}, {"signed short", 2}, {"unsigned short", 2},
        {"unsigned short int", 2}, {"int16_t", 2}, {"uint16_t", 2}, {"keel_half", 2}, {"keel_bf16", 2},
        {"int", 4}, {"signed", 4}, {"signed int", 4}, {"unsigned", 4}, {"unsigned int", 4}, {"int32_t", 4},
        {"uint32_t", 4}, {"float", 4}, {"long", 8}, {"long int", 8}, {"signed long", 8}, {"unsigned long", 8},
        {"unsigned long int", 8}, {"long long", 8}, {"long long int", 8}, {"unsigned long long", 8},
        {"unsigned long long int", 8}, {"int64_t", 8}, {"uint64_t", 8}, {"size_t", 8}, {"ptrdiff_t", 8},
        {"intptr_t", 8}, {"uintptr_t", 8}, {"double", 8},
    };
    char words[96] = "";
    size_t wl = 0;
    for (const char *p = type; *p;) {
        if (!ident_start((unsigned char)*p)) {
            p++;
            continue;
        }
        const char *b = p;
        while (ident_char((unsigned char)*p))
            p++;
        size_t len = (size_t)(p - b);
        static const char *const quals[] = {"const", "volatile", "restrict", "keel_restrict", "__restrict__",
                                            "__restrict"};
        int qual = 0;
        for (size_t q = 0; q < sizeof quals / sizeof quals[0]; q++)
            if (strlen(quals[q]) == len && memcmp(quals[q], b, len) == 0)
                qual = 1;
        if (qual)
            continue;
        if (wl + len + 2 >= sizeof words)
            return 0;
        if (wl)
            words[wl++] = ' ';
        memcpy(words + wl, b, len);
        wl += len;
        words[wl] = '\0';
    }
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
        if (strcmp(known[k].words, words) == 0)
            return known[k].size;
    return 0;
}

/* Parses one "type name" parameter from s[b, e). */
static keel_status_t parse_param(const char *src, size_t b, size_t e, keel__kparam_t *p, const char *name,
                                 unsigned line, const char *kernel, unsigned index, char *err, size_t err_size)
{
    /* A copy of the text with its comments blanked. */
    char s[512];
    if (e - b >= sizeof s)
        return fail(err, err_size, name, line, "kernel %s: parameter %u is too long", kernel, index + 1);
    for (size_t k = 0; k < e - b; k++)
        s[k] = src[b + k];
    e -= b;
    b = 0;
    for (size_t k = 0; k < e; k++) {
        if (s[k] == '/' && k + 1 < e && s[k + 1] == '/') {
            while (k < e && s[k] != '\n')
                s[k++] = ' ';
        } else if (s[k] == '/' && k + 1 < e && s[k + 1] == '*') {
            while (k < e && !(s[k] == '*' && k + 1 < e && s[k + 1] == '/'))
                s[k++] = ' ';
            if (k < e)
                s[k++] = ' ';
            if (k < e)
                s[k] = ' ';
        }
    }
    while (b < e && isspace((unsigned char)s[b]))
        b++;
    while (e > b && isspace((unsigned char)s[e - 1]))
        e--;
    if (b == e)
        return fail(err, err_size, name, line, "kernel %s: parameter %u is empty", kernel, index + 1);
    if (s[e - 1] == ']')
        return fail(err, err_size, name, line,
                    "kernel %s: parameter %u is declared as an array; declare it as a pointer", kernel, index + 1);
    size_t ne = e;
    if (!ident_char((unsigned char)s[ne - 1]))
        return fail(err, err_size, name, line, "kernel %s: parameter %u (%.*s) has no name", kernel, index + 1,
                    (int)(e - b), s + b);
    size_t nb = ne;
    while (nb > b && ident_char((unsigned char)s[nb - 1]))
        nb--;
    size_t te = nb;
    while (te > b && isspace((unsigned char)s[te - 1]))
        te--;
    if (te == b || !ident_start((unsigned char)s[nb]))
        return fail(err, err_size, name, line, "kernel %s: parameter %u (%.*s) needs a type and a name", kernel,
                    index + 1, (int)(e - b), s + b);
    for (size_t k = b; k < te; k++)
        if (s[k] == '(' || s[k] == ')' || s[k] == '[' || s[k] == '=')
            return fail(err, err_size, name, line,
                        "kernel %s: parameter %u (%.*s) is not a plain type and name; pass a pointer or a scalar",
                        kernel, index + 1, (int)(e - b), s + b);
    if (te - b >= sizeof p->type || ne - nb >= sizeof p->name)
        return fail(err, err_size, name, line, "kernel %s: parameter %u is too long", kernel, index + 1);
    /* The type, with runs of white space made one space. */
    size_t w = 0;
    for (size_t k = b; k < te; k++) {
        if (isspace((unsigned char)s[k])) {
            if (w && p->type[w - 1] != ' ')
                p->type[w++] = ' ';
        } else {
            p->type[w++] = s[k];
        }
    }
    p->type[w] = '\0';
    memcpy(p->name, s + nb, ne - nb);
    p->name[ne - nb] = '\0';
    p->size = strchr(p->type, '*') ? sizeof(void *) : scalar_size(p->type);
    return KEEL_OK;
}

/* Reads the declaration after keel_kernel / keel_block_kernel. */
static keel_status_t parse_kernel(scan_t *sc, keel__ksig_t *k, const char *name, char *err, size_t err_size)
{
    char word[128];
    skip_space(sc);
    unsigned line = sc->line;
    size_t wl = read_ident(sc, word, sizeof word);
    if (wl && strcmp(word, "keel_block_size") == 0) {
        /* keel_block_size(x, y, z): the one block shape the kernel runs with. */
        skip_space(sc);
        for (int d = 0; d < 3; d++) {
            if (sc->i >= sc->n || sc->s[sc->i] != (d == 0 ? '(' : ','))
                return fail(err, err_size, name, sc->line, "keel_block_size takes three numbers: (x, y, z)");
            sc->i++;
            skip_space(sc);
            unsigned long v = 0;
            size_t b = sc->i;
            while (sc->i < sc->n && isdigit((unsigned char)sc->s[sc->i]) && v <= 65536)
                v = v * 10 + (unsigned long)(sc->s[sc->i++] - '0');
            if (sc->i == b || v == 0 || v > 1024)
                return fail(err, err_size, name, sc->line,
                            "keel_block_size takes three whole numbers from 1 to 1024: (x, y, z)");
            k->block_size[d] = (unsigned)v;
            skip_space(sc);
        }
        if (sc->i >= sc->n || sc->s[sc->i] != ')')
            return fail(err, err_size, name, sc->line, "keel_block_size takes three numbers: (x, y, z)");
        sc->i++;
        if ((unsigned long)k->block_size[0] * k->block_size[1] * k->block_size[2] > 1024)
            return fail(err, err_size, name, sc->line, "keel_block_size(%u, %u, %u) is more than 1024 threads",
                        k->block_size[0], k->block_size[1], k->block_size[2]);
        skip_space(sc);
        line = sc->line;
        wl = read_ident(sc, word, sizeof word);
    }
    if (!wl || strcmp(word, "void") != 0)
        return fail(err, err_size, name, line, "a kernel returns void: write '%s void name(...)'",
                    k->block ? "keel_block_kernel" : "keel_kernel");
    skip_space(sc);
    k->line = sc->line;
    size_t len = read_ident(sc, k->name, sizeof k->name);
    if (!len)
        return fail(err, err_size, name, sc->line, "a kernel name must follow 'void'");
    if (len >= sizeof k->name)
        return fail(err, err_size, name, sc->line, "a kernel name of %zu characters is too long (at most %zu)", len,
                    sizeof k->name - 1);
    skip_space(sc);
    if (sc->i >= sc->n || sc->s[sc->i] != '(')
        return fail(err, err_size, name, sc->line, "kernel %s: '(' must follow its name", k->name);
    k->params_open = ++sc->i;
    /* Split at commas of depth one; a parameter cannot hold parentheses. */
    size_t b = sc->i;
    int depth = 1;
    unsigned n = 0;
    while (sc->i < sc->n && depth > 0) {
        char c = sc->s[sc->i];
        if (c == '\n')
            sc->line++;
        if (c == '/' && sc->i + 1 < sc->n && (sc->s[sc->i + 1] == '/' || sc->s[sc->i + 1] == '*')) {
            skip_space(sc);   /* a comment; parse_param blanks it */
            continue;
        }
        if (c == '(')
            depth++;
        else if (c == ')')
            depth--;
        if ((c == ',' && depth == 1) || depth == 0) {
            size_t e = sc->i;
            int blank = 1;
            for (size_t q = b; q < e; q++)
                blank &= isspace((unsigned char)sc->s[q]) != 0;
            int is_void = 0;
            if (n == 0 && depth == 0) {
                size_t q = b, r = e;
                while (q < r && isspace((unsigned char)sc->s[q]))
                    q++;
                while (r > q && isspace((unsigned char)sc->s[r - 1]))
                    r--;
                is_void = r - q == 4 && memcmp(sc->s + q, "void", 4) == 0;
            }
            if (!(n == 0 && depth == 0 && (blank || is_void))) {
                if (n == KEEL_MAX_KERNEL_ARGS)
                    return fail(err, err_size, name, sc->line, "kernel %s has more than %d parameters", k->name,
                                KEEL_MAX_KERNEL_ARGS);
                keel_status_t st =
                    parse_param(sc->s, b, e, &k->params[n], name, sc->line, k->name, n, err, err_size);
                if (st != KEEL_OK)
                    return st;
                n++;
            }
            b = sc->i + 1;
        }
        if (depth > 0)
            sc->i++;
    }
    if (depth > 0)
        return fail(err, err_size, name, sc->line, "kernel %s: its parameter list does not end", k->name);
    k->nparams = n;
    k->params_close = sc->i++;
    skip_space(sc);
    if (sc->i >= sc->n || sc->s[sc->i] != '{')
        return fail(err, err_size, name, sc->line, "kernel %s: its body '{' must follow the parameter list", k->name);
    k->body_open = ++sc->i;
    return KEEL_OK;
}

keel_status_t keel__ksource_parse(const char *source, const char *name, keel__ksource_t *out, char *err,
                                  size_t err_size)
{
    scan_t sc = {source, 0, strlen(source), 1};
    keel__ksource_t ks = {NULL, 0};
    size_t cap = 0;
    int depth = 0;
    keel_status_t st = KEEL_OK;
    while (sc.i < sc.n) {
        skip_space(&sc);
        if (sc.i >= sc.n)
            break;
        char c = sc.s[sc.i];
        if (c == '"' || c == '\'') {
            skip_literal(&sc);
            continue;
        }
        if (c == '{' || c == '(' || c == '[') {
            depth++;
            sc.i++;
            continue;
        }
        if (c == '}' || c == ')' || c == ']') {
            depth--;
            sc.i++;
            continue;
        }
        if (!ident_start((unsigned char)c)) {
            sc.i++;
            continue;
        }
        char word[32];
        unsigned line = sc.line;
        size_t len = read_ident(&sc, word, sizeof word);
        int block = len == 17 && strcmp(word, "keel_block_kernel") == 0;
        if (!block && !(len == 11 && strcmp(word, "keel_kernel") == 0))
            continue;
        if (depth != 0) {
            st = fail(err, err_size, name, line, "%s must stand at file scope", word);
            goto error;
        }
        if (ks.count == cap) {
            size_t ncap = cap ? 2 * cap : 4;
            keel__ksig_t *grown = keel__realloc(ks.kernels, ncap * sizeof *grown);
            if (!grown) {
                st = KEEL_ERROR_OUT_OF_MEMORY;
                snprintf(err, err_size, "%s: out of host memory", name);
                goto error;
            }
            ks.kernels = grown;
            cap = ncap;
        }
        keel__ksig_t *k = &ks.kernels[ks.count];
        memset(k, 0, sizeof *k);
        k->block = block;
        if ((st = parse_kernel(&sc, k, name, err, err_size)) != KEEL_OK)
            goto error;
        for (size_t j = 0; j < ks.count; j++)
            if (strcmp(ks.kernels[j].name, k->name) == 0) {
                st = fail(err, err_size, name, k->line, "kernel %s is defined twice (first on line %u)", k->name,
                          ks.kernels[j].line);
                goto error;
            }
        ks.count++;
        depth = 1;   /* inside the body just opened */
    }
    if (ks.count == 0) {
        st = fail(err, err_size, name, 1, "no kernel: declare one with 'keel_kernel void name(...)' or "
                                          "'keel_block_kernel void name(...)'");
        goto error;
    }
    *out = ks;
    return KEEL_OK;
error:
    free(ks.kernels);
    return st;
}

void keel__ksource_free(keel__ksource_t *ks)
{
    free(ks->kernels);
    ks->kernels = NULL;
    ks->count = 0;
}

const keel__ksig_t *keel__ksource_find(const keel__ksource_t *ks, const char *name)
{
    for (size_t i = 0; i < ks->count; i++)
        if (strcmp(ks->kernels[i].name, name) == 0)
            return &ks->kernels[i];
    return NULL;
}

void keel__ksig_format(const keel__ksig_t *sig, char *buf, size_t size)
{
    size_t w = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < sig->nparams && w < size; i++) {
        const char *t = sig->params[i].type;
        size_t tl = strlen(t);
        int k = snprintf(buf + w, size - w, "%s%s%s%s", i ? ", " : "", t, tl && t[tl - 1] != '*' ? " " : "",
                         sig->params[i].name);
        if (k < 0)
            break;
        w += (size_t)k;
    }
}

/* ---- output ---- */

typedef struct out {
    char *buf;
    size_t len, cap;
    int failed;
} out_t;

static void put(out_t *o, const char *s, size_t n)
{
    if (o->failed)
        return;
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        while (cap < o->len + n + 1)
            cap *= 2;
        char *grown = keel__realloc(o->buf, cap);
        if (!grown) {
            o->failed = 1;
            return;
        }
        o->buf = grown;
        o->cap = cap;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    o->buf[o->len] = '\0';
}

static void puts_(out_t *o, const char *s)
{
    put(o, s, strlen(s));
}

static void printf_(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void printf_(out_t *o, const char *fmt, ...)
{
    char tmp[1024], *big = NULL;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k >= 0 && (size_t)k >= sizeof tmp && (big = keel__malloc((size_t)k + 1)) != NULL) {
        va_start(ap, fmt);
        vsnprintf(big, (size_t)k + 1, fmt, ap);
        va_end(ap);
    }
    if (k < 0 || ((size_t)k >= sizeof tmp && !big))
        o->failed = 1;
    else
        put(o, big ? big : tmp, (size_t)k);
    free(big);
}

/* A #line directive naming @p name, with its quotes and backslashes escaped. */
static void line_directive(out_t *o, unsigned line, const char *name)
{
    printf_(o, "#line %u \"", line);
    for (const char *p = name; *p; p++) {
        if (*p == '"' || *p == '\\')
            put(o, "\\", 1);
        if (*p != '\n')
            put(o, p, 1);
    }
    puts_(o, "\"\n");
}

/* The CPU entries of one kernel. keel_cpu_blocks_NAME runs the blocks
 * [begin, end) of a launch (x fastest): it reads the arguments once, runs a
 * thread kernel of a one-dimensional launch as one loop over the global x
 * index (the loop the compiler vectorizes: no per-block prologue, and the
 * usual "if (i < n)" splits it at n), and otherwise runs each block: a block
 * kernel's body once, a thread kernel's in a loop over the block's threads,
 * x fastest. keel__run_NAME, the descriptor's one-block entry, calls it for
 * one block. */
static void cpu_wrapper(out_t *o, const keel__ksig_t *k, const char *name)
{
    line_directive(o, k->line, name);
    printf_(o,
            "__attribute__((visibility(\"default\"))) void " KEEL_CPU_BLOCKS_SYMBOL_PREFIX
            "%s(const keel__block_t *keel__ctx, void **keel__args, size_t keel__begin, size_t keel__end)\n{\n",
            k->name);
    if (k->block_size[0])
        /* The launch was checked against keel_block_size: with the shape a
         * constant, the compiler unrolls and vectorizes the regions fully. */
        printf_(o,
                "    keel__block_t keel__blk = {keel__ctx->grid_dim, {%u, %u, %u}, keel__ctx->block_idx,\n"
                "                               keel__ctx->shared_mem, keel__ctx->shared_bytes};\n",
                k->block_size[0], k->block_size[1], k->block_size[2]);
    else
        puts_(o, "    keel__block_t keel__blk = *keel__ctx;\n");
    puts_(o, "    (void)keel__args;\n");
    for (unsigned i = 0; i < k->nparams; i++)
        printf_(o, "    %s keel__a%u = *(%s *)keel__args[%u];\n", k->params[i].type, i, k->params[i].type, i);
    char args[KEEL_MAX_KERNEL_ARGS * 12 + 1] = "";
    size_t w = 0;
    for (unsigned i = 0; i < k->nparams; i++)
        w += (size_t)snprintf(args + w, sizeof args - w, ", keel__a%u", i);
    if (!k->block) {
        printf_(o,
                "    if (keel__blk.grid_dim.y == 1 && keel__blk.grid_dim.z == 1 && keel__blk.block_dim.y == 1 &&\n"
                "        keel__blk.block_dim.z == 1 && keel__end <= 2147483647u / keel__blk.block_dim.x) {\n"
                "        const int keel__bd = (int)keel__blk.block_dim.x, keel__g1 = (int)keel__end * keel__bd;\n"
                "        for (int keel__gx = (int)keel__begin * keel__bd; keel__gx < keel__g1; keel__gx++)\n"
                "            %s(&keel__blk, keel__gx %% keel__bd, keel__gx, 0, 0, keel__gx / keel__bd%s);\n"
                "        return;\n"
                "    }\n",
                k->name, args);
    }
    puts_(o, "    const size_t keel__gdx = keel__blk.grid_dim.x, keel__gdy = keel__blk.grid_dim.y;\n"
             "    keel__blk.block_idx.x = (unsigned)(keel__begin % keel__gdx);\n"
             "    keel__blk.block_idx.y = (unsigned)(keel__begin / keel__gdx % keel__gdy);\n"
             "    keel__blk.block_idx.z = (unsigned)(keel__begin / keel__gdx / keel__gdy);\n"
             "    for (size_t keel__i = keel__begin; keel__i < keel__end; keel__i++) {\n");
    if (k->block) {
        printf_(o, "        %s(&keel__blk%s);\n", k->name, args);
    } else {
        printf_(o,
                "        const int keel__bx = (int)keel__blk.block_idx.x;\n"
                "        for (int keel__z = 0; keel__z < (int)keel__blk.block_dim.z; keel__z++)\n"
                "            for (int keel__y = 0; keel__y < (int)keel__blk.block_dim.y; keel__y++)\n"
                "                for (int keel__x = 0, keel__gx = keel__bx * (int)keel__blk.block_dim.x;\n"
                "                     keel__x < (int)keel__blk.block_dim.x; keel__x++, keel__gx++)\n"
                "                    %s(&keel__blk, keel__x, keel__gx, keel__y, keel__z, keel__bx%s);\n",
                k->name, args);
    }
    puts_(o, "        if (++keel__blk.block_idx.x == keel__gdx) {\n"
             "            keel__blk.block_idx.x = 0;\n"
             "            if (++keel__blk.block_idx.y == keel__gdy) {\n"
             "                keel__blk.block_idx.y = 0;\n"
             "                keel__blk.block_idx.z++;\n"
             "            }\n"
             "        }\n"
             "    }\n}\n");
    printf_(o,
            "static void keel__run_%s(const keel__block_t *keel__ctx, void **keel__args)\n{\n"
            "    size_t keel__i = keel__ctx->block_idx.x + (size_t)keel__ctx->grid_dim.x *\n"
            "                     (keel__ctx->block_idx.y + (size_t)keel__ctx->grid_dim.y * keel__ctx->block_idx.z);\n"
            "    " KEEL_CPU_BLOCKS_SYMBOL_PREFIX "%s(keel__ctx, keel__args, keel__i, keel__i + 1);\n}\n",
            k->name, k->name);
    printf_(o,
            "__attribute__((visibility(\"default\"))) const keel__kernel_desc_t " KEEL_CPU_KERNEL_SYMBOL_PREFIX
            "%s = {%d, \"%s\", keel__run_%s, %u, {",
            k->name, KEEL_CPU_KERNEL_ABI, k->name, k->name, k->nparams);
    for (unsigned i = 0; i < k->nparams; i++)
        printf_(o, "%ssizeof(%s)", i ? ", " : "", k->params[i].type);
    puts_(o, "}};\n");
}

char *keel__ksource_generate(const keel__ksource_t *ks, const char *source, const char *name, keel__ktarget_t target)
{
    out_t o = {NULL, 0, 0, 0};
    line_directive(&o, 1, "keel/kernel_lang.h");
    puts_(&o, keel__kernel_lang_text);
    line_directive(&o, 1, name);
    size_t at = 0;
    for (size_t i = 0; i < ks->count; i++) {
        const keel__ksig_t *k = &ks->kernels[i];
        if (target == KEEL__KTARGET_CPU) {
            put(&o, source + at, k->params_open - at);
            puts_(&o, k->block ? "KEEL__BLOCK_PARAMS" : "KEEL__THREAD_PARAMS");
            if (k->nparams) {
                puts_(&o, ", ");
                put(&o, source + k->params_open, k->params_close - k->params_open);
            }
            at = k->params_close;
        }
        put(&o, source + at, k->body_open - at);
        puts_(&o, k->block ? " KEEL__BLOCK_BODY " : " KEEL__THREAD_BODY ");
        if (k->block_size[0] && k->block_size[1] == 1 && k->block_size[2] == 1)
            puts_(&o, "KEEL__ONE_DIM ");
        at = k->body_open;
    }
    puts_(&o, source + at);
    puts_(&o, "\n");
    if (target == KEEL__KTARGET_CPU)
        for (size_t i = 0; i < ks->count; i++)
            cpu_wrapper(&o, &ks->kernels[i], name);
    if (o.failed) {
        free(o.buf);
        return NULL;
    }
    return o.buf;
}

/* ---- the signature table of a module file ---- */

char *keel__ksource_serialize(const keel__ksource_t *ks)
{
    out_t o = {NULL, 0, 0, 0};
    for (size_t i = 0; i < ks->count; i++) {
        const keel__ksig_t *k = &ks->kernels[i];
        printf_(&o, "%s\t%d\t%u\t%u,%u,%u\t%u", k->name, k->block, k->line, k->block_size[0], k->block_size[1],
                k->block_size[2], k->nparams);
        for (unsigned p = 0; p < k->nparams; p++)
            printf_(&o, "\t%zu|%s|%s", k->params[p].size, k->params[p].type, k->params[p].name);
        puts_(&o, "\n");
    }
    if (o.failed || !o.buf) {
        free(o.buf);
        return NULL;
    }
    return o.buf;
}

/* Copies the field s[b, e) into @p dst of @p size; 0 if it does not fit. */
static int field(const char *s, size_t b, size_t e, char *dst, size_t size)
{
    if (e - b >= size)
        return 0;
    memcpy(dst, s + b, e - b);
    dst[e - b] = '\0';
    return 1;
}

keel_status_t keel__ksource_deserialize(const char *text, size_t size, keel__ksource_t *out)
{
    keel__ksource_t ks = {NULL, 0};
    size_t lines = 0;
    for (size_t i = 0; i < size; i++)
        lines += text[i] == '\n';
    if (lines == 0 || lines > 65536)
        return KEEL_ERROR_COMPILE_FAILED;
    ks.kernels = keel__calloc(lines, sizeof *ks.kernels);
    if (!ks.kernels)
        return KEEL_ERROR_OUT_OF_MEMORY;
    size_t i = 0;
    while (i < size) {
        size_t e = i;
        while (e < size && text[e] != '\n')
            e++;
        if (e == size)
            goto bad;   /* every line ends in a newline */
        keel__ksig_t *k = &ks.kernels[ks.count];
        /* Fields are tab-separated: name, block, line, block size "x,y,z",
         * nparams, then one a parameter. */
        size_t f[5 + KEEL_MAX_KERNEL_ARGS + 1], nf = 0, b = i;
        for (size_t q = i; q <= e; q++) {
            if (q == e || text[q] == '\t') {
                if (nf == sizeof f / sizeof f[0] - 1)
                    goto bad;
                f[nf++] = b;
                b = q + 1;
            }
        }
        f[nf] = e + 1;
        char num[40];
        if (nf < 5 || !field(text, f[0], f[1] - 1, k->name, sizeof k->name) || !k->name[0])
            goto bad;
        unsigned long v[3];
        static const int at[3] = {1, 2, 4};   /* block, line, nparams */
        for (int j = 0; j < 3; j++) {
            char *end;
            if (!field(text, f[at[j]], f[at[j] + 1] - 1, num, sizeof num) || !isdigit((unsigned char)num[0]))
                goto bad;
            v[j] = strtoul(num, &end, 10);
            if (*end)
                goto bad;
        }
        unsigned bs[3];
        char tail;
        if (!field(text, f[3], f[4] - 1, num, sizeof num) ||
            sscanf(num, "%u,%u,%u%c", &bs[0], &bs[1], &bs[2], &tail) != 3 || bs[0] > 1024 || bs[1] > 1024 ||
            bs[2] > 1024 || (bs[0] == 0) != (bs[1] == 0) || (bs[0] == 0) != (bs[2] == 0))
            goto bad;
        if (v[0] > 1 || v[2] > KEEL_MAX_KERNEL_ARGS || nf != 5 + v[2])
            goto bad;
        k->block = (int)v[0];
        k->line = (unsigned)v[1];
        memcpy(k->block_size, bs, sizeof bs);
        k->nparams = (unsigned)v[2];
        for (unsigned p = 0; p < k->nparams; p++) {
            size_t pb = f[5 + p], pe = f[6 + p] - 1;
            const char *bar1 = memchr(text + pb, '|', pe - pb);
            const char *bar2 = bar1 ? memchr(bar1 + 1, '|', (size_t)(text + pe - bar1 - 1)) : NULL;
            char *end;
            if (!bar2 || !field(text, pb, (size_t)(bar1 - text), num, sizeof num) || !isdigit((unsigned char)num[0]))
                goto bad;
            k->params[p].size = strtoul(num, &end, 10);
            if (*end || k->params[p].size > KEEL_MAX_KERNEL_ARG_BYTES ||
                !field(text, (size_t)(bar1 - text) + 1, (size_t)(bar2 - text), k->params[p].type,
                       sizeof k->params[p].type) ||
                !field(text, (size_t)(bar2 - text) + 1, pe, k->params[p].name, sizeof k->params[p].name))
                goto bad;
        }
        ks.count++;
        i = e + 1;
    }
    *out = ks;
    return KEEL_OK;
bad:
    free(ks.kernels);
    return KEEL_ERROR_COMPILE_FAILED;
}
