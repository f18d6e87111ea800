// CPU conv2d by im2col + OpenBLAS sgemm: the algorithm that implements every conv2d (any filter, stride, dilation,
// padding, groups; FP32, FP16 and BF16 computed in FP32; NCHW and NHWC). Registered as
// "cpu.conv2d.im2col_gemm_nchw" and "cpu.conv2d.im2col_gemm_nhwc"; the heuristic's fallback. Tiling, threading and
// the fused epilogue are in conv2d_gemm_common.h.
#ifndef CONVOY_KERNELS_CPU_CONV2D_IM2COL_GEMM_H_
#define CONVOY_KERNELS_CPU_CONV2D_IM2COL_GEMM_H_

#include "kernels/registry/algorithm.h"

namespace convoy {
namespace cpu {

template <Layout kLayout>
class Conv2dIm2colGemm final : public Conv2dAlgorithm {
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
  // Low: it can do everything, the specialised algorithms should win where they apply.
  int HeuristicScore(const Conv2dProblem& problem) const override { return 10; }
};

using Conv2dIm2colGemmNchw = Conv2dIm2colGemm<Layout::kNCHW>;
using Conv2dIm2colGemmNhwc = Conv2dIm2colGemm<Layout::kNHWC>;

}  // namespace cpu
}  // namespace convoy

#endif  // CONVOY_KERNELS_CPU_CONV2D_IM2COL_GEMM_H_
