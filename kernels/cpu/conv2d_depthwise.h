// CPU depthwise conv2d computed directly (groups == C == K; any filter size, stride, dilation and padding):
//
//   NCHW ("cpu.conv2d.depthwise_nchw"): one (image, channel) plane per task; for each output row the taps are
//        accumulated as whole-row multiply-adds over the valid output columns, a loop the compiler vectorizes.
//   NHWC ("cpu.conv2d.depthwise_nhwc"): one output row per task; each output pixel accumulates channel vectors,
//        with the filter packed once to [R, S, C] so the channel loop is contiguous in both operands.
//
// The epilogue is applied to each finished output row while it is in L1. FP16/BF16 problems compute in FP32 (the
// packed filter is FP32; input planes/pixels are converted as they are read).
#ifndef CONVOY_KERNELS_CPU_CONV2D_DEPTHWISE_H_
#define CONVOY_KERNELS_CPU_CONV2D_DEPTHWISE_H_

#include "kernels/registry/algorithm.h"

namespace convoy {
namespace cpu {

template <Layout kLayout>
class Conv2dDepthwise final : public Conv2dAlgorithm {
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
  // Highest: a GEMM formulation of depthwise has a reduction of only R*S.
  int HeuristicScore(const Conv2dProblem& problem) const override { return 30; }
};

using Conv2dDepthwiseNchw = Conv2dDepthwise<Layout::kNCHW>;
using Conv2dDepthwiseNhwc = Conv2dDepthwise<Layout::kNHWC>;

}  // namespace cpu
}  // namespace convoy

#endif  // CONVOY_KERNELS_CPU_CONV2D_DEPTHWISE_H_
