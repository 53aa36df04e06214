/* SPDX-License-Identifier: MIT */
/* What the parts of keel-bench-ops-cuda share (bench_ops_cuda.c): the
 * device and the two streams, the alternating-batch comparison, the time
 * budget and row filters, random data that the host can recompute at any
 * index, 16-bit conversions, and the check of a matrix product against a
 * float64 reference. For the benchmark program alone. */
#ifndef KEEL_BENCH_OPS_CUDA_H
#define KEEL_BENCH_OPS_CUDA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime.h>
#include "keel.h"

#include "bench/bench_cuda.h"
#include "bench/bench_summary.h"
#include "keel/ops.h"


extern keel_device_t *bo_dev;
extern keel_stream_t *bo_ks; /* Keel's side: the device's default stream */
extern cudaStream_t bo_cs;   /* the alternative's side */
extern int bo_quick;

/* Parses the command line (--quick, row filters) and the environment
 * (KEEL_BENCH_BUDGET, KEEL_BENCH_SEED), and prints the seed. Exits 3 on a
 * bad argument. */
void bo_init(int argc, char **argv);
double bo_elapsed(void);

/* Prints the summary of every row recorded (bench/bench_summary.h keeps
 * the rows of this file's calls) and returns the exit status. */
int bo_finish(void);

/* One call of one side; on_keel says which stream a batch synchronizes. */
typedef void (*bo_fn)(void *ctx);

/* Whether the row called name is to run: the filters given on the command
 * line, then the time budget (a row past it is recorded as SKIP). */
int bo_wanted(const char *name);
/* Whether the filters select the row called name (no budget, no record). */
int bo_selected(const char *name);

/* Keel's side kf against the alternative af on the same ctx, in
 * alternating batches of about 10 ms (Keel first in every other pair).
 * alt_on_keel: the alternative enqueues on Keel's stream. work / time is
 * printed in unit. ratio = alternative time / Keel time, higher is better;
 * target: the lowest ratio allowed (0: none). Records the row. */
void bo_compare(const char *name, const char *alt_label, double work, const char *unit, bo_fn kf, bo_fn af,
                void *ctx, int alt_on_keel, double target);

/* Records a row whose result was wrong (not timed). */
void bo_wrong(const char *name, double target);

/* Uniform in [-scale, scale), a function of (seed, i) alone, so that the
 * host recomputes any input element without keeping a copy; 24 random bits,
 * exact in f32. */
float bo_rand(uint64_t seed, size_t i, float scale);

/* A fresh seed for one buffer (from the run's seed, printed at start). */
uint64_t bo_seed(void);

/* Fills n elements of dtype at the device pointer dst with bo_rand(seed, i,
 * scale), rounded to the dtype (to nearest even). */
void bo_upload_random(void *dst, keel_dtype_t dt, size_t n, uint64_t seed, float scale);

uint16_t bo_f32_to_bf16(float f);
uint16_t bo_f32_to_f16(float f);
float bo_bf16_to_f32(uint16_t h);
float bo_f16_to_f32(uint16_t h);
/* f rounded to dtype and back (f itself for f32). */
float bo_round_to(keel_dtype_t dt, float f);
/* Element i of a host array of dtype, as a double. */
double bo_value(const void *p, keel_dtype_t dt, size_t i);

/* count elements of es bytes, stride elements apart, from device to host. */
void bo_download(void *host, const void *dev, size_t es, size_t count, size_t stride);

/* How the check of a product reads its operands: element (i, p) of op(A)
 * at A[i * a_si + p * a_sp], (p, j) of B at B[p * b_sp + j * b_sj], (i, j)
 * of C at C[i * c_si + j * c_sj]. */
typedef struct {
    const void *a, *b, *bias; /* bias: m elements of in_dt, or NULL */
    const void *a_host;       /* a copy of A in host memory, or NULL: A's rows are read from the device */
    const void *c;
    size_t m, n, k;
    size_t a_si, a_sp, b_sp, b_sj, c_si, c_sj;
    keel_dtype_t in_dt, out_dt;
    int tf32;                 /* the products may round the inputs to tf32 */
    keel_activation_t act;
} bo_product_t;

/* Checks C = act(op(A) B + bias) at points (the four corners and random
 * ones) against a float64 reference within the tolerance of the dtypes.
 * Prints what it found under label; returns 1 when every point holds. */
int bo_check_product(const char *label, const bo_product_t *p, int points);

/* The bound on |computed - exact| of one element ref = act(pre) of a
 * product whose terms (and bias) have magnitudes summing to sum_abs. */
double bo_product_tol(const bo_product_t *p, double ref, double pre, double sum_abs);

/* The dense rows against cuBLASLt (bench_ops_cuda_dense.c). */
void bo_dense_rows(void);

#endif /* KEEL_BENCH_OPS_CUDA_H */
