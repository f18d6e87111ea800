// The accuracy Convoy states for each precision: how far a kernel's output may be from the exact (double-precision)
// result, per output element, for an op that sums `reduction` products into each output. One definition shared by
// the cross-backend test suite (kernels/testing) and the on-device verification of chosen algorithms
// (kernels/registry/verification.h):
//
//   |actual - expected| <= absolute + relative * |expected|
//   FP32 (1e-4, 1e-5 * sqrt(reduction))   FP32 with allow_tf32 (2e-3, 1e-3 * sqrt(reduction))
//   FP16 (1e-2, 2e-3 * sqrt(reduction))   BF16 (3e-2, 1.6e-2 * sqrt(reduction))
//
// The absolute term grows with the square root of the reduction size: rounding errors of a long sum of products of
// O(1) inputs add up like a random walk.
#ifndef CONVOY_KERNELS_COMMON_TOLERANCE_H_
#define CONVOY_KERNELS_COMMON_TOLERANCE_H_

#include "kernels/common/dtype.h"

namespace convoy {

struct Tolerance {
  double relative = 1e-5;
  double absolute = 1e-6;
};

// The tolerance for an output of `dtype` produced by summing `reduction` terms per element.
Tolerance ToleranceFor(DataType dtype, double reduction, bool allow_tf32 = false);

}  // namespace convoy

#endif  // CONVOY_KERNELS_COMMON_TOLERANCE_H_
