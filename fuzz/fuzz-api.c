/* SPDX-License-Identifier: MIT */
/* fuzz-api: a libFuzzer harness that turns its input into a sequence of
 * Keel API calls on emulated CPU devices (KEEL_BACKEND=cpu,
 * KEEL_CPU_DEVICES=3), over a small table of handles: allocations of every
 * kind, copies and memsets (whole, sub-ranges, past the end, through freed
 * and one-past-the-end pointers), streams, events, waits, host functions,
 * graphs, built-in operations and portable kernels.
 *
 * What it checks: every call returns KEEL_OK or a named error with a
 * non-empty keel_last_error() (never KEEL_ERROR_INTERNAL); an out-parameter
 * is left alone on failure; calls the API promises to refuse (a freed
 * pointer, an interior pointer to keel_free, a destroyed handle) are
 * refused; a memset read back gives its bytes; every host function
 * enqueued has run once the devices are synchronized; and, with ASan, UBSan
 * and LeakSanitizer, that nothing touches freed memory and every input ends
 * with everything released.
 *
 * The harness itself keeps the API's rules for what a program must do
 * (a kernel gets pointers of its own device and a count within them, work
 * of other streams is ordered before keel_free_async, a graph is not
 * launched after memory it uses is freed), so that whatever goes wrong is
 * Keel's fault. */
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "keel.h"

#define NDEV 3
#define NBUF 8
#define NSTREAM 4
#define NSID (NSTREAM + NDEV)   /* table streams, then each device's default stream */
#define NEVENT 4
#define NGRAPH 2
#define NEXEC 2
#define NSTALE 4
#define NDANGLING 4
#define MAX_CALLS 64
#define HOST_BYTES 65536
#define SMALL_BYTES 32768
#define MEMORY_LIMIT "16M"
#define LIMIT_BYTES ((size_t)16 << 20)
#define PAST_LIMIT ((size_t)17 << 20)
#define HOLD_MAX ((size_t)1 << 20)  /* freed blocks up to this size stay remembered (memory.h) */

/* ---- failures ---- */

static const char *current_call = "";

static void fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz-api: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (in %s; last error: \"%s\")\n", current_call, keel_last_error());
    abort();
}

/* The status of a call that has just returned: KEEL_OK, NOT_READY, or a
 * named error with its detail. */
static int trace;   /* FUZZ_API_TRACE=1: print every call and its status */

static keel_status_t checked(keel_status_t st, const char *call)
{
    current_call = call;
    if (trace)
        fprintf(stderr, "%s -> %s %s\n", call, keel_status_name(st), st ? keel_last_error() : "");
    if (st == KEEL_OK || st == KEEL_ERROR_NOT_READY)
        return st;
    if ((unsigned)st >= KEEL_STATUS_COUNT || st == KEEL_ERROR_INTERNAL || st == KEEL_ERROR_DEVICE_LOST)
        fail("status %d (%s)", (int)st, keel_status_name(st));
    const char *e = keel_last_error();
    if (!e || !e[0])
        fail("%s without a detail", keel_status_name(st));
    if (keel_last_status() != st)
        fail("returned %s but keel_last_status() is %s", keel_status_name(st), keel_status_name(keel_last_status()));
    return st;
}

#define CALL(expr) (keel_clear_error(), checked((expr), #expr))
#define MUST_FAIL(expr)                                                                                     \
    do {                                                                                                    \
        if (CALL(expr) == KEEL_OK)                                                                          \
            fail("accepted a call the API promises to refuse");                                            \
    } while (0)
#define MUST_OK(expr)                                                                                       \
    do {                                                                                                    \
        keel_status_t must_ = CALL(expr);                                                                   \
        if (must_ != KEEL_OK)                                                                               \
            fail("%s where KEEL_OK was due", keel_status_name(must_));                                      \
    } while (0)

/* ---- input ---- */

typedef struct {
    const uint8_t *p;
    size_t n;
} input_t;

static unsigned u8(input_t *in)
{
    if (!in->n)
        return 0;
    in->n--;
    return *in->p++;
}

static unsigned u16(input_t *in)
{
    unsigned lo = u8(in);
    return lo | u8(in) << 8;
}

static uint32_t u32(input_t *in)
{
    uint32_t lo = u16(in);
    return lo | (uint32_t)u16(in) << 16;
}

/* ---- the process's devices and kernels (LLVMFuzzerInitialize) ---- */

static keel_device_t *dev[NDEV];
static keel_module_t *module[NDEV];
enum { K_AXPY, K_INDEX3, K_BLOCK_SUM, K_FIXED, NKERNEL };
static keel_kernel_t *kernel[NDEV][NKERNEL];
static const char *const kernel_names[NKERNEL] = {"fz_axpy", "fz_index3", "fz_block_sum", "fz_fixed"};

static const char kernel_source[] =
    "keel_kernel void fz_axpy(int n, float a, const float *x, float *y)\n"
    "{\n"
    "    int i = keel_global_x();\n"
    "    if (i < n)\n"
    "        y[i] = a * x[i] + y[i];\n"
    "}\n"
    "keel_kernel void fz_index3(int nx, int ny, int nz, int *out)\n"
    "{\n"
    "    int x = keel_global_x(), y = keel_global_y(), z = keel_global_z();\n"
    "    if (x < nx && y < ny && z < nz)\n"
    "        out[(z * ny + y) * nx + x] = x + 7 * y + 31 * z;\n"
    "}\n"
    "keel_block_kernel void fz_block_sum(int n, int cap, const float *x, float *sums)\n"
    "{\n"
    "    float *part = keel_dynamic_shared(float);\n"
    "    keel_threads {\n"
    "        int t = keel_thread_x(), i = keel_global_x();\n"
    "        if (t < cap)\n"
    "            part[t] = i < n ? x[i] : 0.0f;\n"
    "    }\n"
    "    keel_barrier();\n"
    "    keel_threads {\n"
    "        if (keel_thread_x() == 0 && keel_thread_y() == 0 && keel_thread_z() == 0) {\n"
    "            int m = keel_block_dim_x() < cap ? keel_block_dim_x() : cap;\n"
    "            float s = 0.0f;\n"
    "            for (int i = 0; i < m; i++)\n"
    "                s += part[i];\n"
    "            sums[keel_block_x()] = s;\n"
    "        }\n"
    "    }\n"
    "}\n"
    "keel_kernel keel_block_size(64, 1, 1) void fz_fixed(int n, float *y)\n"
    "{\n"
    "    int i = keel_global_x();\n"
    "    if (i < n)\n"
    "        y[i] = (float)i;\n"
    "}\n";

static _Atomic unsigned long host_fn_runs;
static void host_fn(void *user_data)
{
    atomic_fetch_add((_Atomic unsigned long *)user_data, 1);
}

/* A CPU kernel registered from a pointer: y[i] += 1 for i < n. */
static void cpu_inc(const keel_cpu_kernel_ctx_t *ctx, void **args)
{
    int n = *(const int *)args[0];
    float *y = *(float **)args[1];
    KEEL_CPU_FOR_EACH_THREAD(ctx, t) {
        size_t i = (size_t)ctx->block_idx.x * ctx->block_dim.x + t.x;
        if (t.y == 0 && t.z == 0 && i < (size_t)n)
            y[i] += 1.0f;
    }
}
static const keel_cpu_kernel_desc_t cpu_inc_desc = {KEEL_CPU_KERNEL_ABI, "fz_cpu_inc", cpu_inc, 2,
                                                     {sizeof(int), sizeof(float *)}};

/* Host memory the copies read and write (pageable: Keel cannot check it, so
 * the harness keeps every host range inside). */
static unsigned char host_mem[2][HOST_BYTES];
/* Readable memory that is no handle of any type. */
static uint64_t not_a_handle[16];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    trace = getenv("FUZZ_API_TRACE") && atoi(getenv("FUZZ_API_TRACE")) > 0;
    setenv("KEEL_BACKEND", "cpu", 1);
    setenv("KEEL_CPU_DEVICES", "3", 1);
    setenv("KEEL_CPU_THREADS", "2", 1);
    /* Allocations past it fail in Keel, before the sanitizer's allocator
     * would take a huge request for a bug. */
    setenv("KEEL_CPU_MEMORY_LIMIT", MEMORY_LIMIT, 1);
    if (keel_init() != KEEL_OK) {
        fprintf(stderr, "fuzz-api: keel_init: %s\n", keel_last_error());
        exit(1);
    }
    for (int d = 0; d < NDEV; d++) {
        if (keel_device_get("cpu", d, &dev[d]) != KEEL_OK ||
            keel_module_build(dev[d], kernel_source, "fuzz.kc", NULL, 0, &module[d]) != KEEL_OK) {
            fprintf(stderr, "fuzz-api: cpu:%d: %s\n", d, keel_last_error());
            exit(1);
        }
        for (int k = 0; k < NKERNEL; k++)
            if (keel_module_get_kernel(module[d], kernel_names[k], &kernel[d][k]) != KEEL_OK) {
                fprintf(stderr, "fuzz-api: %s: %s\n", kernel_names[k], keel_last_error());
                exit(1);
            }
    }
    memset(not_a_handle, 0xAB, sizeof not_a_handle);
    return 0;
}

/* ---- the table of one input ---- */

enum { KIND_DEVICE, KIND_PINNED, KIND_MANAGED, KIND_ASYNC, NKIND };

typedef struct {
    void *p;           /* NULL: free slot */
    size_t size;
    int kind, dev;
    unsigned serial;   /* tells a slot's allocations apart, for graphs */
    uint32_t used;     /* streams (sid bits) that were handed it and may still use it */
} buf_t;

typedef struct {
    keel_stream_t *s;
    int dev;
    int capturing;
    unsigned refs[NBUF]; /* serials of the buffers captured so far (0: none) */
} stream_t;

typedef struct {
    void *h;           /* keel_graph_t * or keel_graph_exec_t * */
    int dev;           /* -1: unknown (a capture of a stream no longer there) */
    unsigned refs[NBUF];
} graph_t;

typedef struct {
    keel_event_t *e;
    int dev;
} event_t;

static struct {
    buf_t buf[NBUF];
    stream_t stream[NSID];   /* [NSTREAM + d]: device d's default stream */
    event_t event[NEVENT];
    graph_t graph[NGRAPH], exec[NEXEC];
    keel_kernel_t *cpu_kernel[NDEV];
    void *dangling[NDANGLING];   /* freed blocks Keel still remembers */
    int ndangling;
    void *stale[NSTALE];         /* destroyed handles of any type */
    int nstale;
    unsigned serial;
    unsigned long host_fns;      /* host functions enqueued outside a capture */
    /* Bytes each device may have in use: live blocks, and every block freed
     * since the input began (Keel may hold them). */
    size_t live[NDEV], freed[NDEV];
} t;

static void reset_table(void)
{
    memset(&t, 0, sizeof t);
    for (int d = 0; d < NDEV; d++) {
        stream_t *s = &t.stream[NSTREAM + d];
        if (keel_device_default_stream(dev[d], &s->s) != KEEL_OK)
            fail("no default stream");
        s->dev = d;
    }
}

static void add_stale(void *h)
{
    t.stale[t.nstale++ % NSTALE] = h;
}

/* A destroyed handle, unless Keel has handed its memory to a live one. */
static void *stale_handle(input_t *in)
{
    int n = t.nstale < NSTALE ? t.nstale : NSTALE;
    if (!n)
        return NULL;
    void *h = t.stale[u8(in) % n];
    for (int i = 0; i < NSID; i++)
        if (t.stream[i].s == h)
            return NULL;
    for (int i = 0; i < NEVENT; i++)
        if (t.event[i].e == h)
            return NULL;
    for (int i = 0; i < NGRAPH; i++)
        if (t.graph[i].h == h)
            return NULL;
    for (int i = 0; i < NEXEC; i++)
        if (t.exec[i].h == h)
            return NULL;
    for (int i = 0; i < NDEV; i++)
        if (t.cpu_kernel[i] == h)
            return NULL;
    return h;
}

/* Mark buffer b as used by stream sid (and captured, if it is capturing). */
static void use(int b, int sid)
{
    if (b < 0 || !t.buf[b].p || sid < 0)
        return;
    t.buf[b].used |= 1u << sid;
    if (t.stream[sid].capturing)
        t.stream[sid].refs[b] = t.buf[b].serial;
}

/* Whether a graph (or exec) refers to no buffer that has been freed since. */
static int graph_live(const graph_t *g)
{
    for (int b = 0; b < NBUF; b++)
        if (g->refs[b] && (!t.buf[b].p || t.buf[b].serial != g->refs[b]))
            return 0;
    return 1;
}

static void forget_dangling(void)
{
    t.ndangling = 0;
}

/* ---- choosing handles ---- */

static int pick_dev(input_t *in)
{
    return (int)(u8(in) % NDEV);
}

/* A stream id of a live stream, or -1 for a handle that is none. */
static int pick_sid(input_t *in, keel_stream_t **s)
{
    unsigned v = u8(in);
    if (v >= 240) {
        switch (v % 4) {
        case 0: *s = NULL; break;
        case 1: *s = (keel_stream_t *)not_a_handle; break;
        case 2: *s = (keel_stream_t *)(t.event[0].e ? (void *)t.event[0].e : (void *)not_a_handle); break;
        default: *s = stale_handle(in); break;
        }
        return -1;
    }
    int sid = (int)(v % NSID);
    if (!t.stream[sid].s)
        sid = NSTREAM + sid % NDEV;
    *s = t.stream[sid].s;
    return sid;
}

static keel_event_t *pick_event(input_t *in, int *slot)
{
    unsigned v = u8(in);
    *slot = -1;
    if (v >= 240)
        return v % 3 == 0 ? NULL : v % 3 == 1 ? (keel_event_t *)not_a_handle : stale_handle(in);
    *slot = (int)(v % NEVENT);
    return t.event[*slot].e;
}

/* A pointer for a copy, a memset or an operation. *room is how many bytes
 * the harness lets a call touch from it: all of a Keel allocation (Keel
 * checks), the rest of a host array (Keel cannot), anything for pointers
 * Keel must refuse. *bad says the pointer is one Keel must refuse for a
 * nonzero size. */
typedef struct {
    void *p;
    int buf;      /* table slot, or -1 */
    int host;     /* pageable host memory of the harness */
    int bad;
    size_t room;
} ptr_t;

static ptr_t pick_ptr(input_t *in)
{
    ptr_t r = {NULL, -1, 0, 0, 0};
    unsigned v = u8(in);
    unsigned off = u16(in);
    if (v < 176) {   /* a buffer, at an offset within it or at its end */
        int b = (int)(v % NBUF);
        if (!t.buf[b].p)
            for (b = 0; b < NBUF && !t.buf[b].p; b++)
                ;
        if (b < NBUF) {
            size_t o = (v & 0x40) ? 0 : off % (t.buf[b].size + 1);
            r.p = (char *)t.buf[b].p + o;
            r.buf = b;
            r.room = t.buf[b].size - o;
            return r;
        }
    }
    if (v < 224) {   /* host memory */
        size_t o = off % HOST_BYTES;
        r.p = host_mem[v & 1] + o;
        r.host = 1;
        r.room = HOST_BYTES - o;
        return r;
    }
    if (v < 236 && t.ndangling) {   /* a block freed and remembered */
        int n = t.ndangling < NDANGLING ? t.ndangling : NDANGLING;
        r.p = (char *)t.dangling[off % n];
        r.bad = 1;
        r.room = SIZE_MAX;
        return r;
    }
    if (v < 248) {   /* the end of a live buffer */
        for (int b = 0; b < NBUF; b++) {
            int i = (b + (int)off) % NBUF;
            if (t.buf[i].p) {
                r.p = (char *)t.buf[i].p + t.buf[i].size;
                r.bad = 1;
                r.room = SIZE_MAX;
                return r;
            }
        }
    }
    r.bad = 1;   /* NULL */
    r.room = SIZE_MAX;
    return r;
}

/* A byte count: mostly small, at times past any allocation. */
static size_t pick_bytes(input_t *in)
{
    unsigned v = u16(in);
    switch (v >> 14) {
    case 0: return v & 0xff;
    case 1: return v & 0x3fff;
    case 2: return (v & 0x3fff) * 4;
    default:   /* past the cap, but for one size past what keel_free keeps remembered */
        return (v & 1) ? SIZE_MAX - (v & 0xff) : (v & 0x3e) ? (size_t)1 << (25 + (v & 0x1f)) : (size_t)2 << 20;
    }
}

/* A size that the host side of a copy can take (the API cannot check it). */
static size_t fit(size_t bytes, const ptr_t *a, const ptr_t *b)
{
    if (a->host && bytes > a->room)
        bytes = a->room;
    if (b && b->host && bytes > b->room)
        bytes = b->room;
    return bytes;
}

/* ---- memory ---- */

static void op_alloc(input_t *in)
{
    int slot = (int)(u8(in) % NBUF), kind = (int)(u8(in) % NKIND), d = pick_dev(in);
    if (t.buf[slot].p)
        return;
    size_t bytes = pick_bytes(in);
    void *p = (void *)&p;
    keel_status_t st;
    keel_stream_t *s = NULL;
    int sid = -1;
    /* An allocation that may pass the cap makes Keel give back the freed
     * blocks it holds, which it then no longer remembers: from here on,
     * copies through them would touch freed memory (the program's fault). */
    for (int e = 0; e < NDEV; e++)
        if (bytes > LIMIT_BYTES || t.live[e] + t.freed[e] + bytes + (1u << 20) > LIMIT_BYTES)
            forget_dangling();
    switch (kind) {
    case KIND_DEVICE: st = CALL(keel_malloc(dev[d], bytes, &p)); break;
    case KIND_PINNED: st = CALL(keel_malloc_host(dev[d], bytes, &p)); break;
    case KIND_MANAGED: st = CALL(keel_malloc_managed(dev[d], bytes, &p)); break;
    default:
        sid = pick_sid(in, &s);
        st = CALL(keel_malloc_async(s, bytes, &p));
        if (sid >= 0)
            d = t.stream[sid].dev;
        break;
    }
    if (st != KEEL_OK) {
        if (p != (void *)&p)
            fail("wrote its out-parameter on failure");
        if (st == KEEL_ERROR_OUT_OF_MEMORY)
            forget_dangling();   /* Keel gives remembered blocks back first */
        if (bytes > 0 && bytes <= SMALL_BYTES && (kind != KIND_ASYNC || sid >= 0) && kind != KIND_MANAGED &&
            st != KEEL_ERROR_OUT_OF_MEMORY && st != KEEL_ERROR_BUSY)
            fail("refused %zu bytes", bytes);
        return;
    }
    if (!p || bytes == 0)
        fail("KEEL_OK with %p for %zu bytes", p, bytes);
    buf_t *b = &t.buf[slot];
    t.live[d] += bytes;
    b->p = p;
    b->size = bytes;
    b->kind = kind;
    b->dev = d;
    b->serial = ++t.serial;
    b->used = sid >= 0 ? 1u << sid : 0;
}

/* Orders the work of every other stream that used buffer b before stream
 * sid, as keel_free_async requires; 0 when it cannot (a capture). */
static int order_before(int b, int sid)
{
    for (int o = 0; o < NSID; o++) {
        if (o == sid || !(t.buf[b].used & (1u << o)))
            continue;
        if (t.stream[o].capturing || !t.stream[o].s)
            return 0;
        keel_event_t *e = NULL;
        if (CALL(keel_event_create(dev[t.stream[o].dev], KEEL_EVENT_DISABLE_TIMING, &e)) != KEEL_OK)
            return 0;
        int ok = CALL(keel_event_record(e, t.stream[o].s)) == KEEL_OK &&
                 CALL(keel_stream_wait_event(t.stream[sid].s, e)) == KEEL_OK;
        MUST_OK(keel_event_destroy(e));
        if (!ok)
            return 0;
    }
    return 1;
}

static void remember_freed(buf_t *b)
{
    t.live[b->dev] -= b->size;
    t.freed[b->dev] += b->size;
    if (b->kind != KIND_ASYNC && b->size <= HOLD_MAX)
        t.dangling[t.ndangling++ % NDANGLING] = b->p;
}

static void op_free(input_t *in)
{
    int slot = (int)(u8(in) % NBUF);
    unsigned how = u8(in);
    buf_t *b = &t.buf[slot];
    if (!b->p) {
        ptr_t q = pick_ptr(in);
        if (q.p && (q.bad || q.host || (q.buf >= 0 && q.p != t.buf[q.buf].p)))
            MUST_FAIL(keel_free(q.p));   /* freed, past the end, host or interior */
        else if (!q.p)
            MUST_OK(keel_free(NULL));
        return;
    }
    if (b->kind == KIND_ASYNC && (how & 1)) {
        keel_stream_t *s;
        int sid = pick_sid(in, &s);
        if (sid >= 0 && t.stream[sid].dev == b->dev && !t.stream[sid].capturing && !order_before(slot, sid))
            return;
        if (sid >= 0 && t.stream[sid].dev != b->dev)
            sid = -1;   /* refused (another device): the harness does not order it */
        if (CALL(keel_free_async(b->p, s)) == KEEL_OK) {
            if (sid < 0)
                fail("freed stream-ordered memory on a stream that is none or of another device");
            t.live[b->dev] -= b->size;
            t.freed[b->dev] += b->size;
            b->p = NULL;
        }
        return;
    }
    if (CALL(keel_free(b->p)) == KEEL_OK) {
        remember_freed(b);
        b->p = NULL;
    }
}

static void op_copy(input_t *in, int async)
{
    ptr_t dst = pick_ptr(in), src = pick_ptr(in);
    size_t bytes = fit(pick_bytes(in), &dst, &src);
    keel_stream_t *s = NULL;
    int sid = async ? pick_sid(in, &s) : -1;
    keel_status_t st = async ? CALL(keel_memcpy_async(dst.p, src.p, bytes, s)) : CALL(keel_memcpy(dst.p, src.p, bytes));
    if (st != KEEL_OK)
        return;
    if (!dst.p || !src.p)
        fail("copied with a NULL pointer");
    if (bytes && (dst.bad || src.bad))
        fail("copied %zu bytes through a freed or past-the-end pointer", bytes);
    if ((dst.buf >= 0 && bytes > dst.room) || (src.buf >= 0 && bytes > src.room))
        fail("copied %zu bytes past an allocation", bytes);
    if (async) {
        use(dst.buf, sid);
        use(src.buf, sid);
    }
}

static void op_memset(input_t *in, int async)
{
    ptr_t p = pick_ptr(in);
    int value = (int)u8(in) - 64;
    size_t bytes = pick_bytes(in);
    keel_stream_t *s = NULL;
    int sid = async ? pick_sid(in, &s) : -1;
    keel_status_t st = async ? CALL(keel_memset_async(p.p, value, bytes, s)) : CALL(keel_memset(p.p, value, bytes));
    if (st != KEEL_OK)
        return;
    if (!p.p || p.host || (bytes && p.bad) || (p.buf >= 0 && bytes > p.room))
        fail("set %zu bytes at %p, which no allocation holds", bytes, p.p);
    if (async)
        use(p.buf, sid);
}

/* Everything done: memset a buffer, read it back, compare. */
static void op_verify(input_t *in)
{
    int slot = (int)(u8(in) % NBUF);
    unsigned char value = (unsigned char)u8(in);
    buf_t *b = &t.buf[slot];
    if (!b->p)
        return;
    for (int i = 0; i < NSID; i++)
        if (t.stream[i].capturing)
            return;
    for (int d = 0; d < NDEV; d++)
        if (CALL(keel_device_synchronize(dev[d])) != KEEL_OK)
            return;
    size_t n = b->size < HOST_BYTES ? b->size : HOST_BYTES;
    MUST_OK(keel_memset(b->p, value, b->size));
    memset(host_mem[1], value ^ 0x5A, n);
    MUST_OK(keel_memcpy(host_mem[1], b->p, n));
    for (size_t i = 0; i < n; i++)
        if (host_mem[1][i] != value)
            fail("byte %zu of %zu reads %u after a memset to %u", i, b->size, host_mem[1][i], value);
    if (atomic_load(&host_fn_runs) < t.host_fns)
        fail("%lu host functions enqueued, %lu ran after synchronizing every device", t.host_fns,
             atomic_load(&host_fn_runs));
}

static void op_pointer_info(input_t *in)
{
    ptr_t p = pick_ptr(in);
    keel_pointer_info_t info;
    memset(&info, 0x5A, sizeof info);
    info.struct_size = (u8(in) & 7) ? sizeof info : u8(in);
    if (CALL(keel_pointer_get_info(p.p, &info)) != KEEL_OK || info.struct_size != sizeof info)
        return;
    if (p.buf >= 0) {
        const buf_t *b = &t.buf[p.buf];
        size_t off = (size_t)((char *)p.p - (char *)b->p);
        if (off < b->size && (info.base != b->p || info.size != b->size || info.offset != off))
            fail("pointer info of %p: base %p size %zu offset %zu", p.p, info.base, info.size, info.offset);
    }
    if (p.host && info.kind != KEEL_MEMORY_HOST)
        fail("host memory reported as kind %d", (int)info.kind);
}

/* ---- streams and events ---- */

static void op_stream_create(input_t *in)
{
    int slot = (int)(u8(in) % NSTREAM), d = pick_dev(in);
    unsigned flags = (u8(in) & 0xf0) ? 0 : u8(in);
    int priority = (int)(int8_t)u8(in);
    if (t.stream[slot].s)
        return;
    keel_stream_t *s = (keel_stream_t *)not_a_handle;
    if (CALL(keel_stream_create(dev[d], flags, priority, &s)) != KEEL_OK) {
        if (s != (keel_stream_t *)not_a_handle)
            fail("wrote its out-parameter on failure");
        return;
    }
    if (flags)
        fail("accepted flags %#x", flags);
    memset(&t.stream[slot], 0, sizeof t.stream[slot]);
    t.stream[slot].s = s;
    t.stream[slot].dev = d;
}

static void end_capture(int sid, int keep, input_t *in);

static void op_stream_destroy(input_t *in)
{
    keel_stream_t *s;
    int sid = pick_sid(in, &s);
    if (sid >= NSTREAM) {
        MUST_FAIL(keel_stream_destroy(s));   /* a default stream */
        return;
    }
    if (sid >= 0 && t.stream[sid].capturing && (u8(in) & 1))
        end_capture(sid, 1, in);
    keel_status_t st = CALL(keel_stream_destroy(s));
    if (st != KEEL_OK) {
        if (sid >= 0 && !t.stream[sid].capturing)
            fail("a live stream not destroyed");
        return;
    }
    if (sid < 0)
        fail("destroyed a stream handle that is none");
    add_stale(s);
    memset(&t.stream[sid], 0, sizeof t.stream[sid]);
    for (int b = 0; b < NBUF; b++)
        t.buf[b].used &= ~(1u << sid);
}

static void op_stream_query(input_t *in)
{
    keel_stream_t *s;
    int sid = pick_sid(in, &s);
    switch (u8(in) % 5) {
    case 0: {
        keel_status_t st = CALL(keel_stream_synchronize(s));
        if (st == KEEL_OK && sid >= 0)
            for (int b = 0; b < NBUF; b++)
                t.buf[b].used &= ~(1u << sid);
        break;
    }
    case 1: CALL(keel_stream_query(s)); break;
    case 2: {
        keel_device_t *d = (keel_device_t *)not_a_handle;
        if (CALL(keel_stream_get_device(s, &d)) == KEEL_OK && sid >= 0 && d != dev[t.stream[sid].dev])
            fail("stream of the wrong device");
        break;
    }
    case 3: {
        int prio = 12345;
        if (CALL(keel_stream_get_priority(s, &prio)) != KEEL_OK && prio != 12345)
            fail("wrote its out-parameter on failure");
        break;
    }
    default: {
        int cap = -1;
        if (CALL(keel_stream_is_capturing(s, &cap)) == KEEL_OK && sid >= 0 && cap != t.stream[sid].capturing)
            fail("is_capturing says %d", cap);
        break;
    }
    }
}

static void op_event(input_t *in)
{
    int slot;
    unsigned what = u8(in) % 8;
    keel_event_t *e = pick_event(in, &slot);
    switch (what) {
    case 0: {   /* create */
        if (slot < 0 || e)
            return;
        int d = pick_dev(in);
        unsigned flags = u8(in);
        flags = flags < 200 ? flags & 3 : flags;
        keel_event_t *ne = (keel_event_t *)not_a_handle;
        if (CALL(keel_event_create(dev[d], flags, &ne)) == KEEL_OK) {
            if (flags > 3)
                fail("accepted flags %#x", flags);
            t.event[slot].e = ne;
            t.event[slot].dev = d;
        } else if (ne != (keel_event_t *)not_a_handle) {
            fail("wrote its out-parameter on failure");
        }
        return;
    }
    case 1:   /* destroy */
        if (CALL(keel_event_destroy(e)) == KEEL_OK) {
            if (slot < 0 || !e)
                fail("destroyed an event handle that is none");
            add_stale(e);
            t.event[slot].e = NULL;
        } else if (slot >= 0 && e) {
            fail("a live event not destroyed");
        }
        return;
    case 2: case 3: {   /* record */
        keel_stream_t *s;
        int sid = pick_sid(in, &s);
        keel_status_t st = CALL(keel_event_record(e, s));
        if (st == KEEL_OK && (sid < 0 || slot < 0 || !e))
            fail("recorded with a handle that is none");
        if (st == KEEL_OK && t.stream[sid].dev != t.event[slot].dev)
            fail("recorded an event of one device on a stream of another");
        return;
    }
    case 4: CALL(keel_event_synchronize(e)); return;
    case 5: CALL(keel_event_query(e)); return;
    case 6: {
        int slot2;
        keel_event_t *e2 = pick_event(in, &slot2);
        float ms = -1.0f;
        keel_status_t st = CALL(keel_event_elapsed_time(e, e2, &ms));
        if (st == KEEL_OK && !isfinite(ms))
            fail("elapsed time %f", ms);
        if (st != KEEL_OK && ms != -1.0f)
            fail("wrote its out-parameter on failure");
        return;
    }
    default: {
        keel_stream_t *s;
        pick_sid(in, &s);
        CALL(keel_stream_wait_event(s, e));
        return;
    }
    }
}

static void op_host_fn(input_t *in)
{
    keel_stream_t *s;
    int sid = pick_sid(in, &s);
    int null_fn = u8(in) == 255;
    keel_status_t st = CALL(keel_stream_launch_host_func(s, null_fn ? NULL : host_fn, &host_fn_runs));
    if (st == KEEL_OK && (sid < 0 || null_fn))
        fail("enqueued a host function with a bad handle or none");
    if (st == KEEL_OK && !t.stream[sid].capturing)
        t.host_fns++;
}

/* ---- graphs ---- */

static void op_begin_capture(input_t *in)
{
    keel_stream_t *s;
    int sid = pick_sid(in, &s);
    if (CALL(keel_stream_begin_capture(s)) != KEEL_OK)
        return;
    if (sid < 0 || t.stream[sid].capturing)
        fail("began a capture on a handle that is none, or twice");
    t.stream[sid].capturing = 1;
    memset(t.stream[sid].refs, 0, sizeof t.stream[sid].refs);
}

/* Ends the capture of stream sid; keeps the graph in a slot when keep. */
static void end_capture(int sid, int keep, input_t *in)
{
    stream_t *st = &t.stream[sid];
    keel_graph_t *g = (keel_graph_t *)not_a_handle;
    if (CALL(keel_stream_end_capture(st->s, &g)) != KEEL_OK) {
        if (st->capturing)
            fail("a capture did not end");
        return;
    }
    if (!st->capturing)
        fail("ended a capture that was not running");
    st->capturing = 0;
    int slot = in ? (int)(u8(in) % NGRAPH) : 0;
    if (!keep || t.graph[slot].h) {
        MUST_OK(keel_graph_destroy(g));
        add_stale(g);
        return;
    }
    t.graph[slot].h = g;
    t.graph[slot].dev = st->dev;
    memcpy(t.graph[slot].refs, st->refs, sizeof st->refs);
}

static void op_end_capture(input_t *in)
{
    keel_stream_t *s;
    int sid = pick_sid(in, &s);
    if (sid < 0) {
        keel_graph_t *g = (keel_graph_t *)not_a_handle;
        MUST_FAIL(keel_stream_end_capture(s, &g));
        return;
    }
    end_capture(sid, 1, in);
}

static void op_graph(input_t *in)
{
    unsigned what = u8(in) % 5;
    int gs = (int)(u8(in) % NGRAPH), xs = (int)(u8(in) % NEXEC);
    graph_t *g = &t.graph[gs], *x = &t.exec[xs];
    switch (what) {
    case 0: {   /* instantiate */
        if (x->h)
            return;
        keel_graph_exec_t *e = (keel_graph_exec_t *)not_a_handle;
        keel_graph_t *h = g->h ? g->h : (u8(in) & 1) ? (keel_graph_t *)stale_handle(in) : NULL;
        if (CALL(keel_graph_instantiate(h, &e)) != KEEL_OK)
            return;
        if (!g->h)
            fail("instantiated a graph handle that is none");
        *x = *g;
        x->h = e;
        return;
    }
    case 1: {   /* launch */
        keel_stream_t *s;
        int sid = pick_sid(in, &s);
        if (x->h && !graph_live(x))
            return;   /* memory it uses was freed: the program must not launch it */
        keel_status_t st = CALL(keel_graph_launch(x->h, s));
        if (st != KEEL_OK)
            return;
        if (!x->h || sid < 0)
            fail("launched a handle that is none");
        if (t.stream[sid].dev != x->dev)
            fail("launched a graph of cpu:%d on a stream of cpu:%d", x->dev, t.stream[sid].dev);
        for (int b = 0; b < NBUF; b++)
            if (x->refs[b])
                use(b, sid);
        return;
    }
    case 2:
        if (CALL(keel_graph_destroy(g->h)) == KEEL_OK) {
            add_stale(g->h);
            memset(g, 0, sizeof *g);
        } else if (g->h) {
            fail("a live graph not destroyed");
        }
        return;
    case 3:
        if (CALL(keel_graph_exec_destroy(x->h)) == KEEL_OK) {
            add_stale(x->h);
            memset(x, 0, sizeof *x);
        } else if (x->h) {
            fail("a live graph exec not destroyed");
        }
        return;
    default: {
        void *h = stale_handle(in);
        if (h) {
            MUST_FAIL(keel_graph_destroy(h));
            MUST_FAIL(keel_graph_exec_destroy(h));
        }
        return;
    }
    }
}

/* ---- built-in operations ---- */

static const double scalars[] = {1.0, 0.0, -0.5, 2.0, 1e-3, NAN, INFINITY, -INFINITY};

static keel_dtype_t pick_dtype(input_t *in)
{
    unsigned v = u8(in);
    return v < 248 ? (keel_dtype_t)(1 + v % 4) : (keel_dtype_t)(v - 248 == 0 ? 0 : 4 + (v - 248));
}

static size_t dim(input_t *in)
{
    unsigned v = u8(in);
    return v < 240 ? v % 24 : v == 255 ? SIZE_MAX / 2 : (size_t)(v - 230) * 100;
}

/* A leading dimension near @p cols: mostly cols, sometimes more or less. */
static size_t ld_of(input_t *in, size_t cols)
{
    unsigned v = u8(in);
    return v < 160 ? cols : v < 230 ? cols + v % 5 : v < 250 ? (cols ? cols - 1 : 0) : SIZE_MAX / 4;
}

static void op_builtin(input_t *in)
{
    unsigned what = u8(in) % 13;
    keel_stream_t *s;
    int sid = pick_sid(in, &s);
    keel_dtype_t dt = pick_dtype(in), dt2 = pick_dtype(in);
    size_t rows = dim(in), cols = dim(in), k = dim(in);
    ptr_t a = pick_ptr(in), b = pick_ptr(in), c = pick_ptr(in);
    double alpha = scalars[u8(in) % 8], beta = scalars[u8(in) % 8];
    size_t lda = ld_of(in, cols), ldb = ld_of(in, cols), ldc = ld_of(in, cols);
    unsigned sub = u8(in);
    keel_status_t st;
    switch (what) {
    case 0: st = CALL(keel_fill(s, dt, a.p, rows * cols, alpha)); break;
    case 1: st = CALL(keel_cast(s, dt, a.p, dt2, b.p, rows)); break;
    case 2: st = CALL(keel_copy_2d(s, dt, rows, cols, a.p, lda, b.p, ldb)); break;
    case 3: st = CALL(keel_transpose(s, dt, rows, cols, a.p, lda, b.p, ld_of(in, rows))); break;
    case 4: st = CALL(keel_unary(s, (keel_unary_op_t)(sub % 13), dt, rows, a.p, (sub & 0x80) ? a.p : b.p)); break;
    case 5:
        st = CALL(keel_binary(s, (keel_binary_op_t)(sub % 8), dt, rows, cols, alpha, a.p, lda, beta, b.p, ldb,
                              (keel_broadcast_t)((sub >> 3) % 4), (sub & 0x80) ? a.p : c.p, ldc));
        break;
    case 6:
        st = CALL(keel_reduce(s, (keel_reduce_op_t)(sub % 7), dt, rows, cols, a.p, lda,
                              (keel_reduce_axis_t)((sub >> 3) % 4), b.p));
        break;
    case 7: st = CALL(keel_argmax_rows(s, dt, rows, cols, a.p, lda, (int64_t *)b.p)); break;
    case 8: st = CALL(keel_softmax_rows(s, dt, rows, cols, a.p, lda, (sub & 1) ? a.p : b.p, lda, sub & 2)); break;
    case 9:
        st = CALL(keel_layernorm_rows(s, dt, rows, cols, a.p, lda, (sub & 1) ? c.p : NULL, (sub & 2) ? c.p : NULL,
                                      (sub & 4) ? 1e-5 : beta, b.p, ldb));
        break;
    case 10: {
        keel_gemm_params_t g;
        memset(&g, 0, sizeof g);
        g.struct_size = (sub & 0x40) ? sub : sizeof g;
        g.layout = (keel_layout_t)(sub & 1);
        g.transa = (keel_transpose_op_t)((sub >> 1) & 1);
        g.transb = (keel_transpose_op_t)((sub >> 2) & 1);
        g.m = rows, g.n = cols, g.k = k, g.alpha = alpha, g.beta = beta;
        g.a_type = dt, g.b_type = (sub & 0x80) ? dt2 : dt, g.c_type = (sub & 8) ? KEEL_F32 : dt;
        g.compute = (keel_compute_t)((sub >> 4) % 5);
        g.a = a.p, g.b = b.p, g.c = c.p;
        g.lda = ld_of(in, k), g.ldb = ld_of(in, cols), g.ldc = ldc;
        g.batch_count = u8(in) % 4;
        g.stride_a = rows * k, g.stride_b = k * cols, g.stride_c = (sub & 0x20) ? 0 : rows * cols;
        st = CALL(keel_gemm(s, &g));
        break;
    }
    case 11:
        st = CALL(keel_gemv(s, dt, (keel_layout_t)(sub & 1), (keel_transpose_op_t)((sub >> 1) & 1), rows, cols, alpha,
                            a.p, lda, b.p, 1 + (sub >> 5), beta, c.p, 1 + ((sub >> 2) & 3)));
        break;
    default: {
        keel_dense_params_t p;
        memset(&p, 0, sizeof p);
        p.struct_size = (sub & 0x40) ? sub : sizeof p;
        p.layout = (keel_layout_t)(sub & 1);
        p.transw = (keel_transpose_op_t)((sub >> 1) & 1);
        p.m = rows, p.n = cols, p.k = k, p.dtype = dt;
        p.compute = (keel_compute_t)((sub >> 2) % 4);
        p.act = (keel_activation_t)((sub >> 4) % 5);
        p.w = a.p, p.x = b.p, p.bias = (sub & 0x80) ? NULL : c.p, p.y = pick_ptr(in).p;
        p.ldw = ld_of(in, k), p.ldx = ld_of(in, cols), p.ldy = ld_of(in, cols);
        st = CALL(keel_dense(s, &p));
        break;
    }
    }
    if (st != KEEL_OK)
        return;
    if (sid < 0)
        fail("an operation enqueued on a handle that is none");
    use(a.buf, sid);
    use(b.buf, sid);
    use(c.buf, sid);
    if (what == 12) /* the dense layer's output came from another pick */
        for (int i = 0; i < NBUF; i++)
            use(i, t.buf[i].dev == t.stream[sid].dev ? sid : -1);
}

/* ---- kernels ---- */

static keel_dim3_t pick_dim3(input_t *in, int is_grid, int *huge)
{
    unsigned v = u8(in);
    keel_dim3_t d = {1 + (v & 7) * (1 + (u8(in) & 3)), 1 + ((v >> 3) & 3), 1 + ((v >> 5) & 1)};
    if ((v & 0xc0) == 0xc0) {   /* a launch the device must refuse */
        switch (u8(in) % 4) {
        case 0: d.x = 0; break;
        case 1: d.y = 0; break;
        case 2: if (is_grid) d.y = 65536; else d.x = 2048; break;
        default: d.z = 100000; break;
        }
        *huge = 1;
    }
    return d;
}

/* A buffer of device d with at least one float, or -1. */
static int buffer_of(input_t *in, int d)
{
    int start = (int)u8(in);
    for (int i = 0; i < NBUF; i++) {
        int b = (start + i) % NBUF;
        if (t.buf[b].p && t.buf[b].dev == d && t.buf[b].size >= sizeof(float))
            return b;
    }
    return -1;
}

static void op_kernel(input_t *in)
{
    unsigned what = u8(in);
    int d = pick_dev(in), kk = (int)(what % NKERNEL);
    keel_stream_t *s;
    int sid = pick_sid(in, &s);
    int bad = 0, block_bad = 0;
    keel_dim3_t grid = pick_dim3(in, 1, &bad), block = pick_dim3(in, 0, &block_bad);
    size_t shared = (u8(in) & 3) == 0 ? (size_t)u16(in) * 4 : 0;
    if (u8(in) == 255)
        shared = SIZE_MAX / 2, bad = 1;
    int x = buffer_of(in, d), y = buffer_of(in, d);
    if (x < 0 || y < 0)
        return;
    int nx = (int)(t.buf[x].size / sizeof(float)), ny = (int)(t.buf[y].size / sizeof(float));
    int n = (int)(u16(in) % (unsigned)(nx < ny ? nx : ny) + 1);
    float alpha = (float)scalars[u8(in) % 5];
    void *px = t.buf[x].p, *py = t.buf[y].p;
    keel_kernel_t *kern = kernel[d][kk];
    keel_status_t st;
    int ix = 1, iy = 1, iz = 1, cap = (int)(shared / sizeof(float));
    unsigned mode = u8(in) % 4;
    switch (kk) {
    case K_AXPY: {
        void *args[] = {&n, &alpha, &px, &py};
        size_t sizes[] = {sizeof n, sizeof alpha, sizeof px, sizeof py};
        if (mode == 0) {
            st = CALL(keel_launch_kernel(kern, grid, block, shared, s, args));
        } else if (mode == 1) {   /* a wrong count or size: refused */
            unsigned na = u8(in) % 4;
            sizes[u8(in) % 4] += 4;
            MUST_FAIL(keel_launch(kern, grid, block, shared, s, na, args, sizes));
            return;
        } else {
            st = CALL(KEEL_LAUNCH(kern, grid, block, shared, s, n, alpha, (const float *)px, (float *)py));
        }
        break;
    }
    case K_INDEX3: {
        /* out[(z*ny+y)*nx+x]: the extent must fit the buffer */
        ix = 1 + (int)(u8(in) % 16), iy = 1 + (int)(u8(in) % 4), iz = 1 + (int)(u8(in) % 2);
        while (ix * iy * iz > ny)
            ix > 1 ? ix-- : iy > 1 ? iy-- : iz--;
        int *out = py;
        st = CALL(KEEL_LAUNCH(kern, grid, block, shared, s, ix, iy, iz, out));
        break;
    }
    case K_BLOCK_SUM: {
        /* one sum per block of x: grid.x must fit y */
        if (grid.x > (unsigned)ny)
            grid.x = (unsigned)ny;
        st = CALL(KEEL_LAUNCH(kern, grid, block, shared, s, n, cap, (const float *)px, (float *)py));
        break;
    }
    default:
        if (mode & 1)
            block = (keel_dim3_t){64, 1, 1}, block_bad = 0;
        st = CALL(KEEL_LAUNCH(kern, grid, block, shared, s, n, (float *)py));
        break;
    }
    if (st != KEEL_OK)
        return;
    if (bad || block_bad)
        fail("launched grid %ux%ux%u block %ux%ux%u shared %zu", grid.x, grid.y, grid.z, block.x, block.y, block.z,
             shared);
    if (sid < 0 || t.stream[sid].dev != d)
        fail("launched a kernel of cpu:%d on a stream that is none or of another device", d);
    if (kk == K_FIXED && (block.x != 64 || block.y != 1 || block.z != 1))
        fail("launched a keel_block_size(64, 1, 1) kernel with block %ux%ux%u", block.x, block.y, block.z);
    use(x, sid);
    use(y, sid);
}

static void op_cpu_kernel(input_t *in)
{
    int d = pick_dev(in);
    unsigned what = u8(in) % 4;
    keel_kernel_t **k = &t.cpu_kernel[d];
    if (what == 0) {
        if (*k)
            return;
        keel_cpu_kernel_desc_t desc = cpu_inc_desc;
        if (u8(in) == 255)
            desc.abi_version = 7, desc.num_args = KEEL_MAX_KERNEL_ARGS + 1;
        keel_kernel_t *nk = (keel_kernel_t *)not_a_handle;
        if (CALL(keel_kernel_register_cpu(dev[d], &desc, &nk)) == KEEL_OK) {
            if (desc.abi_version != KEEL_CPU_KERNEL_ABI)
                fail("registered a descriptor of ABI %u", desc.abi_version);
            *k = nk;
        }
        return;
    }
    if (what == 1) {   /* release, possibly with launches pending */
        keel_kernel_t *h = *k ? *k : (u8(in) & 1) ? kernel[d][0] : NULL;
        if (CALL(keel_kernel_release(h)) == KEEL_OK) {
            if (!*k)
                fail("released a module's kernel or none");
            add_stale(*k);
            *k = NULL;
        }
        return;
    }
    if (what == 2) {   /* attributes */
        keel_kernel_t *h = *k ? *k : kernel[d][u8(in) % NKERNEL];
        int v = -7;
        keel_kernel_attribute_t attr = (keel_kernel_attribute_t)(u8(in) % 8);
        if (CALL(keel_kernel_get_attribute(h, attr, &v)) != KEEL_OK && v != -7)
            fail("wrote its out-parameter on failure");
        int threads = (u8(in) & 1) ? (int)u16(in) - 100 : (int)u32(in);
        size_t shared = (u8(in) & 1) ? u16(in) : SIZE_MAX - u8(in);
        int blocks = -7;
        if (CALL(keel_kernel_max_active_blocks(h, threads, shared, &blocks)) == KEEL_OK &&
            (threads > 1024 || threads <= 0 || shared > 65536) && blocks != 0)
            fail("max_active_blocks(%d threads, %zu bytes) answers %d", threads, shared, blocks);
        if (*k)
            CALL(keel_kernel_set_max_dynamic_shared(*k, (u8(in) & 1) ? 1024 : SIZE_MAX - 1));
        if (!keel_kernel_name(h))
            fail("a kernel without a name");
        keel_kernel_t *found = NULL;
        char name[8];
        snprintf(name, sizeof name, "fz_%c", 'a' + u8(in) % 26);
        MUST_FAIL(keel_module_get_kernel(module[d], name, &found));
        return;
    }
    keel_stream_t *s;
    int sid = pick_sid(in, &s);
    int b = buffer_of(in, d);
    if (!*k || b < 0)
        return;
    int n = (int)(t.buf[b].size / sizeof(float));
    void *p = t.buf[b].p;
    void *args[] = {&n, &p};
    keel_dim3_t grid = {1 + u8(in) % 8, 1, 1}, block = {1 + u8(in) % 128, 1, 1};
    if (CALL(keel_launch_kernel(*k, grid, block, 0, s, args)) == KEEL_OK) {
        if (sid < 0 || t.stream[sid].dev != d)
            fail("launched a CPU kernel of cpu:%d on a stream that is none or of another device", d);
        use(b, sid);
    }
}

/* ---- devices ---- */

static void op_device(input_t *in)
{
    int d = pick_dev(in), e = pick_dev(in);
    switch (u8(in) % 5) {
    case 0: {
        keel_device_properties_t p;
        memset(&p, 0x5A, sizeof p);
        p.struct_size = (u8(in) & 3) ? sizeof p : u8(in);
        CALL(keel_device_get_properties(dev[d], &p));
        break;
    }
    case 1: {
        size_t fr = 0, tot = 0;
        if (CALL(keel_device_memory_info(dev[d], &fr, &tot)) == KEEL_OK && fr > tot)
            fail("%zu bytes free of %zu", fr, tot);
        break;
    }
    case 2:
        if (CALL(keel_device_synchronize(dev[d])) == KEEL_OK)
            for (int i = 0; i < NSID; i++)
                if (t.stream[i].s && t.stream[i].dev == d)
                    for (int b = 0; b < NBUF; b++)
                        t.buf[b].used &= ~(1u << i);
        break;
    case 3: {
        int can = -1;
        MUST_OK(keel_device_can_access_peer(dev[d], dev[e], &can));
        break;
    }
    default: {
        int lo = 0, hi = 0;
        MUST_OK(keel_device_stream_priority_range(dev[d], &lo, &hi));
        MUST_FAIL(keel_device_synchronize((keel_device_t *)not_a_handle));
        break;
    }
    }
}

/* ---- the end of every input: release everything ---- */

static void release_all(void)
{
    for (int i = 0; i < NSID; i++)
        if (t.stream[i].capturing)
            end_capture(i, 0, NULL);
    for (int i = 0; i < NEXEC; i++)
        if (t.exec[i].h)
            MUST_OK(keel_graph_exec_destroy(t.exec[i].h));
    for (int i = 0; i < NGRAPH; i++)
        if (t.graph[i].h)
            MUST_OK(keel_graph_destroy(t.graph[i].h));
    /* Asynchronous errors are reported once; after them, this holds. */
    for (int d = 0; d < NDEV; d++)
        if (CALL(keel_device_synchronize(dev[d])) != KEEL_OK)
            MUST_OK(keel_device_synchronize(dev[d]));
    if (atomic_load(&host_fn_runs) < t.host_fns)
        fail("%lu host functions enqueued, %lu ran", t.host_fns, atomic_load(&host_fn_runs));
    for (int b = 0; b < NBUF; b++)
        if (t.buf[b].p)
            MUST_OK(keel_free(t.buf[b].p));
    for (int i = 0; i < NEVENT; i++)
        if (t.event[i].e)
            MUST_OK(keel_event_destroy(t.event[i].e));
    for (int i = 0; i < NSTREAM; i++)
        if (t.stream[i].s)
            MUST_OK(keel_stream_destroy(t.stream[i].s));
    for (int d = 0; d < NDEV; d++)
        if (t.cpu_kernel[d])
            MUST_OK(keel_kernel_release(t.cpu_kernel[d]));
    /* An allocation past the cap makes Keel give back what it keeps (the
     * freed blocks it remembers, the blocks streams keep for reuse), so
     * that an input leaves no allocation behind and LeakSanitizer can
     * check every input. */
    for (int d = 0; d < NDEV; d++) {
        void *p = NULL;
        keel_status_t st = CALL(keel_malloc(dev[d], PAST_LIMIT, &p));
        if (st != KEEL_ERROR_OUT_OF_MEMORY)
            fail("%zu bytes past a cap of %s: %s", PAST_LIMIT, MEMORY_LIMIT, keel_status_name(st));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    input_t in = {data, size};
    reset_table();
    atomic_store(&host_fn_runs, 0);
    for (int calls = 0; in.n && calls < MAX_CALLS; calls++) {
        switch (u8(&in) % 24) {
        case 0: case 1: op_alloc(&in); break;
        case 2: op_free(&in); break;
        case 3: op_copy(&in, 0); break;
        case 4: case 5: op_copy(&in, 1); break;
        case 6: op_memset(&in, 0); break;
        case 7: op_memset(&in, 1); break;
        case 8: op_stream_create(&in); break;
        case 9: op_stream_destroy(&in); break;
        case 10: op_stream_query(&in); break;
        case 11: case 12: op_event(&in); break;
        case 13: op_host_fn(&in); break;
        case 14: op_begin_capture(&in); break;
        case 15: op_end_capture(&in); break;
        case 16: op_graph(&in); break;
        case 17: case 18: op_builtin(&in); break;
        case 19: case 20: op_kernel(&in); break;
        case 21: op_cpu_kernel(&in); break;
        case 22: op_verify(&in); break;
        default:
            if (u8(&in) & 1)
                op_device(&in);
            else
                op_pointer_info(&in);
            break;
        }
    }
    release_all();
    return 0;
}
