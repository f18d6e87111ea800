// CPU 1x1 conv2d (stride 1, no padding, any groups) as a direct OpenBLAS sgemm on the input, no im2col:
// NCHW Y[K, HW] = W[K, C] x X[C, HW] per image, NHWC Y[NHW, K] = X[NHW, C] x W[K, C]^T. FP16/BF16 in FP32.
// Registered as "cpu.conv2d.gemm_1x1_nchw" and "cpu.conv2d.gemm_1x1_nhwc". Tiling, threading and the fused epilogue
// are in conv2d_gemm_common.h.
#ifndef CONVOY_KERNELS_CPU_CONV2D_1X1_GEMM_H_
#define CONVOY_KERNELS_CPU_CONV2D_1X1_GEMM_H_

#include "kernels/registry/algorithm.h"

namespace convoy {
namespace cpu {

template <Layout kLayout>
class Conv2d1x1Gemm final : public Conv2dAlgorithm {
 public:
  absl::string_view name() const override;
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const Conv2dProblem& problem) const override;
  size_t WorkspaceBytes(const Conv2dProblem& problem) const override;
  size_t PackedFilterBytes(const Conv2dProblem& problem) const override;
  absl::Status PackFilter(const Conv2dProblem& problem, const void* filter, void* packed,
                          const ExecutionContext& context) const override;
  absl::Status Run(const Conv2dProblem& problem, const Conv2dArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
  // Above im2col, which does the same GEMM plus a copy of the input.
  int HeuristicScore(const Conv2dProblem& problem) const override { return 20; }
};

using Conv2d1x1GemmNchw = Conv2d1x1Gemm<Layout::kNCHW>;
using Conv2d1x1GemmNhwc = Conv2d1x1Gemm<Layout::kNHWC>;

}  // namespace cpu
}  // namespace convoy

#endif  // CONVOY_KERNELS_CPU_CONV2D_1X1_GEMM_H_
