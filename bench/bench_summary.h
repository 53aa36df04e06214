/* SPDX-License-Identifier: MIT */
/* The verdict table of a GPU benchmark: one row per measurement (name,
 * measured ratio with the spread of its pairs, target, verdict), printed at
 * the end between a "# summary:" line and a "# N row(s) failed" line, which
 * is what scripts/gpu-run.sh collects, and the exit status that follows from
 * it. Header-only, for the benchmark programs alone.
 *
 * Verdicts: PASS and FAIL against a target; WRONG when a result was checked
 * and found wrong (the row is not timed, and counts as a failure); INFO for a
 * row with no target; SKIP for a row left out for the time budget.
 * Exit status (bench_exit_status): 0 every row met its target, 1 a target was
 * missed or a result was wrong, 2 none missed but rows were skipped. An error
 * that stops a benchmark exits 3 (its own CHECK macros); no device, 77.
 * The rows are static: a program of several files records and prints them
 * from one of its files. */
#ifndef KEEL_BENCH_SUMMARY_H
#define KEEL_BENCH_SUMMARY_H

#include <math.h>
#include <stdio.h>

enum { BENCH_PASS, BENCH_FAIL, BENCH_WRONG, BENCH_INFO, BENCH_SKIP };

typedef struct bench_row {
    char name[72];
    double measured, lo, hi; /* the median ratio and the smallest and largest of the pairs' ratios */
    char target[16];
    int verdict;
} bench_row_t;

#define BENCH_MAX_ROWS 256
static bench_row_t bench_rows[BENCH_MAX_ROWS];
static int bench_nrows;

static inline const char *bench_verdict_name(int v)
{
    static const char *const names[] = {"PASS", "FAIL", "WRONG", "INFO", "SKIP"};
    return v >= 0 && v <= BENCH_SKIP ? names[v] : "?";
}

/* The verdict of a measured ratio against a target: higher_better says
 * whether the ratio must be at least (1) or at most (0) the target; a
 * target of 0 means none (INFO). */
static inline int bench_judge(double measured, int higher_better, double target)
{
    if (target <= 0)
        return BENCH_INFO;
    if (isnan(measured))
        return BENCH_FAIL;
    return (higher_better ? measured >= target : measured <= target) ? BENCH_PASS : BENCH_FAIL;
}

/* Records a row. lo and hi may be NAN when the row has no spread. */
static inline void bench_record(const char *name, double measured, double lo, double hi, int higher_better,
                                double target, int verdict)
{
    if (bench_nrows == BENCH_MAX_ROWS) {
        fprintf(stderr, "bench_summary: more than %d rows; row \"%s\" is not in the summary\n", BENCH_MAX_ROWS, name);
        return;
    }
    bench_row_t *r = &bench_rows[bench_nrows++];
    snprintf(r->name, sizeof r->name, "%s", name);
    r->measured = measured;
    r->lo = lo;
    r->hi = hi;
    if (target > 0)
        snprintf(r->target, sizeof r->target, "%s %.3g", higher_better ? ">=" : "<=", target);
    else
        snprintf(r->target, sizeof r->target, "-");
    r->verdict = verdict;
}

/* Prints the summary table; what says how to read the measured column. */
static inline void bench_print_summary(const char *what, double seconds)
{
    int fails = 0, skips = 0;
    printf("\n# summary: name, measured [min..max of the pairs], target, verdict (%s)\n", what);
    for (int i = 0; i < bench_nrows; i++) {
        const bench_row_t *r = &bench_rows[i];
        char spread[40] = "";
        if (!isnan(r->lo) && !isnan(r->hi))
            snprintf(spread, sizeof spread, "[%.3f..%.3f]", r->lo, r->hi);
        printf("%-56s %9.3f %-15s %-9s %s\n", r->name, r->measured, spread, r->target, bench_verdict_name(r->verdict));
        fails += r->verdict == BENCH_FAIL || r->verdict == BENCH_WRONG;
        skips += r->verdict == BENCH_SKIP;
    }
    printf("# %d row(s) failed, %d skipped for the budget, %.0f s in all\n", fails, skips, seconds);
    fflush(stdout);
}

static inline int bench_exit_status(void)
{
    int fails = 0, skips = 0;
    for (int i = 0; i < bench_nrows; i++) {
        fails += bench_rows[i].verdict == BENCH_FAIL || bench_rows[i].verdict == BENCH_WRONG;
        skips += bench_rows[i].verdict == BENCH_SKIP;
    }
    return fails ? 1 : skips ? 2 : 0;
}

#endif /* KEEL_BENCH_SUMMARY_H */
