/* SPDX-License-Identifier: MIT */
/* What the stand-in for libhipblaslt (fake_hipblaslt.c) answers and what it
 * saw, shared with test-hipblaslt, which finds the state through the
 * fake's fake_hipblaslt_state(). */
#ifndef KEEL_FAKE_HIPBLASLT_H
#define KEEL_FAKE_HIPBLASLT_H

#include <stddef.h>
#include <stdint.h>
#include "hip_hipblaslt.h"

/* A matmul descriptor as the fake keeps it; -1 for an attribute not set. */
typedef struct {
    int compute_type, scale_type;
    int transa, transb, epilogue, bias_type;
    const void *bias;
} fake_hlt_desc_t;

typedef struct {
    int type;
    uint64_t rows, cols;
    int64_t ld;
} fake_hlt_layout_t;

typedef struct {
    /* The answers; fake_hipblaslt_reset() sets those of a ROCm 6.2 library
     * that finds one algorithm needing no workspace, and clears the rest. */
    int version;                /* hipblasLtGetVersion's value */
    int version_status;
    int heuristic_status;       /* hipblasLtMatmulAlgoGetHeuristic's return */
    int heuristic_count;        /* results it writes (at most the number asked for) */
    int heuristic_state;        /* their state */
    size_t heuristic_ws;        /* their workspaceSize */
    int matmul_status;          /* hipblasLtMatmul's return; with SUCCESS it computes D (f32 only) */
    /* What it saw. */
    int creates, destroys;
    int live_descs, live_layouts, live_prefs;
    int heuristics, matmuls;
    int bad;                    /* calls the real library would reject: bad_why names the first */
    char bad_why[256];
    int requested;              /* the last heuristic's requestedAlgoCount */
    uint64_t pref_ws;           /* and its preference's MAX_WORKSPACE_BYTES */
    fake_hlt_desc_t hdesc;      /* and its descriptor */
    fake_hlt_layout_t ha, hb, hc, hd;
    struct {                    /* the last matmul */
        keel__hipblaslt_handle_t handle;
        fake_hlt_desc_t desc;
        float alpha, beta;
        const void *a, *b, *c;
        void *d;
        fake_hlt_layout_t la, lb, lc, ld;
        int c_is_d_layout;      /* Cdesc == Ddesc */
        keel__hlt_algo_t algo;
        void *workspace;
        size_t workspace_bytes;
        void *stream;
    } mm;
} fake_hlt_state_t;

/* The bytes the fake's heuristic writes into data[] of algorithm i. */
#define FAKE_HLT_ALGO_TAG 0xa5

typedef fake_hlt_state_t *(*fake_hipblaslt_state_fn)(void);
typedef void (*fake_hipblaslt_reset_fn)(void);

#endif /* KEEL_FAKE_HIPBLASLT_H */
