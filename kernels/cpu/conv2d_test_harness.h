// Test support for the CPU conv2d and GEMM algorithms: runs one algorithm on a problem with fresh random inputs
// (bias, scale and residual too), NaN-poisoned output, the packed filter when the algorithm asks for one, and a
// workspace of exactly WorkspaceBytes(); then compares against reference::Conv2d / reference::Gemm with the given
// tolerance. Used by the conv2d_*_test.cc and gemm_*_test.cc files next to it.
#ifndef CONVOY_KERNELS_CPU_CONV2D_TEST_HARNESS_H_
#define CONVOY_KERNELS_CPU_CONV2D_TEST_HARNESS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kernels/common/problems.h"
#include "kernels/registry/algorithm.h"
#include "kernels/testing/test_tensors.h"

namespace convoy::cpu::testing {

// Where a conv check puts the residual: in a buffer of its own, or already in the output buffer (args.residual ==
// args.y), as a plan arranges for an algorithm that AccumulatesOntoOutput. In the output, the output starts as the
// residual instead of NaN: an element the algorithm does not write still differs from the reference.
enum class ResidualPlacement { kOwnBuffer, kInOutput };

// OK when the algorithm's output matches the reference within `tolerance`; otherwise the mismatch, naming the
// problem. `threads` sizes the pool the algorithm runs on.
absl::Status CheckConv2dAgainstReference(const Conv2dAlgorithm& algorithm, const Conv2dProblem& problem,
                                         const convoy::testing::Tolerance& tolerance, uint32_t seed, int threads = 2,
                                         ResidualPlacement placement = ResidualPlacement::kOwnBuffer);
absl::Status CheckGemmAgainstReference(const GemmAlgorithm& algorithm, const GemmProblem& problem,
                                       const convoy::testing::Tolerance& tolerance, uint32_t seed, int threads = 2);

// A problem builder for compact test tables: Conv(n, c, h, w, k, r, s, stride, pad, dilation, groups, layout).
Conv2dProblem Conv(int n, int c, int h, int w, int k, int r, int s, int stride, int pad, int dilation = 1,
                   int groups = 1, Layout layout = Layout::kNCHW);

// The epilogues every algorithm test runs each shape with: none, bias+relu, scale+bias+residual-before-relu,
// bias+relu6+residual-after, scale+silu.
std::vector<Epilogue> EpiloguesToTest();

// CheckConv2dAgainstReference on every problem with every EpiloguesToTest() epilogue, seeds counting up from `seed`:
// one status per check, in order, so a test reports every failing case (EXPECT_THAT(..., Each(IsOk()))).
std::vector<absl::Status> CheckEveryEpilogue(const Conv2dAlgorithm& algorithm, std::vector<Conv2dProblem> problems,
                                             const convoy::testing::Tolerance& tolerance, uint32_t seed);

}  // namespace convoy::cpu::testing

#endif  // CONVOY_KERNELS_CPU_CONV2D_TEST_HARNESS_H_
