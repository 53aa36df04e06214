/* SPDX-License-Identifier: MIT */
// hipcc builds the shared GPU kernels (kernels/gpu/ops_kernels.cu) for AMD targets
// through this file: its own name gives the HIP objects their own suffix rule.
#include "kernels/gpu/ops_kernels.cu"
