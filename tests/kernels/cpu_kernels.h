/* SPDX-License-Identifier: MIT */
/* Types shared by the test kernels and test-kernel. */
#ifndef KEEL_TESTS_CPU_KERNELS_H
#define KEEL_TESTS_CPU_KERNELS_H

/* An argument of odd size passed by value (24 bytes with padding). */
typedef struct kt_params {
    double scale;
    int offset;
    char tag[3];
} kt_params_t;

#endif
