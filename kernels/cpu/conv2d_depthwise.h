// CPU depthwise conv2d computed directly (groups == C == K; any filter size, stride, dilation and padding):
//
//   NCHW ("cpu.conv2d.depthwise_nchw"): one (image, channel) plane per task.
//        3x3, dilation 1, horizontal stride 1 or 2 (MobileNet's shapes): the plane is copied into a zero-padded FP32
//        plane in the workspace (the borders handled there, once), then a row kernel with no bounds checks keeps
//        three input rows in flight and produces four output columns per step with SSE (4 x 9 multiply-adds, the
//        stride-2 taps deinterleaved with shuffles). Other shapes: for each output row the taps are accumulated as
//        whole-row multiply-adds over the valid output columns, a loop the compiler vectorizes.
//   NHWC ("cpu.conv2d.depthwise_nhwc", and "..._avx2" / "..._avx512" where the CPU runs them, cpu_isa.h): one output
//        row per task; the filter is packed once to [R, S, C]. FP32 with at most 64 taps: the row kernel compiled for
//        the instruction set (depthwise_nhwc_rows.h) keeps a 3x3 or 5x5 filter's taps in vector registers over the
//        row's interior pixels, four pixels at a time, and lists each edge pixel's taps inside the input (the padding
//        skipped there). FP16/BF16 (every version): the taps over a converted pixel, accumulated in a scratch row.
//
// The epilogue: when it is affine + a clamp (identity, relu, clip/relu6; bias, scale, residual before or after) and
// the output is FP32, it is applied to the accumulators in registers before the single store. NHWC FP32 with another
// activation (sigmoid, SiLU, ...; no residual after it): the affine part in registers, then the activation over each
// output row while it is in cache. Otherwise (FP16/BF16, NCHW) the raw sums are stored and ApplyChannelEpilogue /
// ApplyPixelEpilogue finish each row or pixel while it is in L1. FP16/BF16 problems compute in FP32 (the packed filter is FP32; inputs are converted as
// they are read). Without SSE2 the same paths run scalar.
#ifndef CONVOY_KERNELS_CPU_CONV2D_DEPTHWISE_H_
#define CONVOY_KERNELS_CPU_CONV2D_DEPTHWISE_H_

#include <string>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/registry/algorithm.h"

namespace convoy {
namespace cpu {

template <Layout kLayout>
class Conv2dDepthwise final : public Conv2dAlgorithm {
 public:
  // NCHW has one version (kBaseline); NHWC one per instruction set.
  explicit Conv2dDepthwise(CpuIsa isa = CpuIsa::kBaseline);
  absl::string_view name() const override { return name_; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const Conv2dProblem& problem) const override;
  size_t WorkspaceBytes(const Conv2dProblem& problem) const override;
  size_t PackedFilterBytes(const Conv2dProblem& problem) const override;
  absl::Status PackFilter(const Conv2dProblem& problem, const void* filter, void* packed,
                          const ExecutionContext& context) const override;
  absl::Status Run(const Conv2dProblem& problem, const Conv2dArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
  // Highest: a GEMM formulation of depthwise has a reduction of only R*S. The wider versions first.
  int HeuristicScore(const Conv2dProblem& problem) const override { return 30 + static_cast<int>(isa_); }

 private:
  CpuIsa isa_;
  std::string name_;
};

using Conv2dDepthwiseNchw = Conv2dDepthwise<Layout::kNCHW>;
using Conv2dDepthwiseNhwc = Conv2dDepthwise<Layout::kNHWC>;

}  // namespace cpu
}  // namespace convoy

#endif  // CONVOY_KERNELS_CPU_CONV2D_DEPTHWISE_H_
