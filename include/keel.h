/* SPDX-License-Identifier: MIT */
/**
 * @file keel.h
 * @brief Keel: one portable device runtime for CUDA, HIP and the CPU.
 *
 * Include this header and link with -lkeel (pkg-config keel).
 */
#ifndef KEEL_H
#define KEEL_H

#include "keel/status.h"
#include "keel/device.h"
#include "keel/memory.h"
#include "keel/stream.h"
#include "keel/kernel.h"
#include "keel/graph.h"
#include "keel/log.h"
#include "keel/ops.h"

#endif /* KEEL_H */
