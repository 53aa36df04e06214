/* SPDX-License-Identifier: MIT */
/* A stand-in for librocblas, for test-rocblas-load only: it exports the
 * names keel-hip resolves, so that the test can check where each one lands
 * in the table. Nothing calls them, so they take nothing and do nothing.
 * Built with -DFAKE_ROCBLAS_NO_DGEMV it lacks rocblas_dgemv. */
#define FAKE(name)                                         \
    __attribute__((visibility("default"))) int name(void); \
    int name(void)                                         \
    {                                                      \
        return 0;                                          \
    }

FAKE(rocblas_create_handle)
FAKE(rocblas_destroy_handle)
FAKE(rocblas_set_stream)
FAKE(rocblas_set_pointer_mode)
FAKE(rocblas_gemm_ex)
FAKE(rocblas_gemm_strided_batched_ex)
FAKE(rocblas_sgemv)
#ifndef FAKE_ROCBLAS_NO_DGEMV
FAKE(rocblas_dgemv)
#endif
