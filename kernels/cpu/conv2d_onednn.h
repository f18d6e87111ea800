// CPU conv2d on oneDNN's convolution primitive: direct, depthwise and grouped, any stride, padding (asymmetric) and
// dilation, FP32 and BF16 (BF16 with FP32 accumulation, where the CPU has a BF16 kernel), with the whole fused
// epilogue as post-ops (scale and bias as per-channel binary post-ops or the primitive's bias, the residual as an
// add before or after the activation, every activation of epilogue.h as eltwise post-ops).
//
// The residual is a full-tensor binary_add post-op, or oneDNN's sum post-op where that buys its brgconv kernels
// (AVX-512 CPUs, NHWC: oneDNN 2.6's brgconv declines the binary_add). The sum adds what the output buffer holds, so
// Run copies the residual there first, unless the plan gave the output the residual's storage
// (AccumulatesOntoOutput; docs/kernels.md, "brgconv").
//
// One algorithm per activation layout: "cpu.conv2d.onednn_nchw", "cpu.conv2d.onednn_nhwc" and
// "cpu.conv2d.onednn_nchw8c" (the blocked layout its AVX2 kernels prefer). The filter is reordered at plan time into
// the layout the primitive chose for the problem (PackFilter; PackedFilterLayout names it, because oneDNN's brgconv
// kernels on AVX-512 choose a different one for some batch sizes); the primitive itself, with its JIT code, is made
// once per problem by Prepare and owned by the plan; Run wraps the pointers and executes it with the scratchpad in the
// workspace.
// CanImplement declines when oneDNN has only its reference implementation for the problem on this CPU (e.g. BF16
// without AVX512-BF16/AMX), so the own algorithms stay the candidates there.
#ifndef CONVOY_KERNELS_CPU_CONV2D_ONEDNN_H_
#define CONVOY_KERNELS_CPU_CONV2D_ONEDNN_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/cpu/onednn_support.h"
#include "kernels/registry/algorithm.h"
#include "kernels/registry/residual_in_output.h"

namespace convoy::cpu {

// The primitive descriptor of one problem (conv2d_onednn.cc); made once per problem and remembered.
struct OnednnConvDescriptor;

template <Layout kLayout>
class Conv2dOnednn final : public Conv2dAlgorithm, public ResidualInOutput {
 public:
  // Which post-op carries the residual. kSumWhereBrgconv (what the registry holds) takes the sum post-op where that
  // makes oneDNN pick a brgconv kernel and binary_add would not, binary_add everywhere else: the sum costs a copy of
  // the residual into the output where the plan could not place it there, and elsewhere buys nothing. kBinaryAdd
  // and kSum force a form wherever oneDNN implements it (kSum falls back to binary_add where oneDNN has only its
  // reference kernel with sum), so tests check both on any CPU.
  enum class ResidualForm { kSumWhereBrgconv, kBinaryAdd, kSum };
  explicit Conv2dOnednn(ResidualForm residual_form = ResidualForm::kSumWhereBrgconv) : residual_form_(residual_form) {}

  absl::string_view name() const override;
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const Conv2dProblem& problem) const override;
  size_t WorkspaceBytes(const Conv2dProblem& problem) const override;
  size_t PackedFilterBytes(const Conv2dProblem& problem) const override;
  // The filter in the layout the primitive chose for this problem (format `any`): brgconv's choice changes with the
  // batch (and the thread count the descriptor was made with), so a plan step packs once per layout, not once.
  std::string PackedFilterLayout(const Conv2dProblem& problem) const override;
  absl::Status PackFilter(const Conv2dProblem& problem, const void* filter, void* packed,
                          const ExecutionContext& context) const override;
  absl::StatusOr<std::unique_ptr<AlgorithmState>> Prepare(const Conv2dProblem& problem,
                                                          const ExecutionContext& context) const override;
  absl::Status Run(const Conv2dProblem& problem, const Conv2dArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
  // The oneDNN implementation the problem's primitive got ("oneDNN <impl>"), for `convoy inspect`.
  std::string LaunchSummary(const Conv2dProblem& problem) const override;
  // True where the residual is the sum post-op: Run adds it onto the output buffer (copying it there first when
  // args.residual is another buffer). See residual_in_output.h.
  bool AccumulatesOntoOutput(const Conv2dProblem& problem) const override;
  // Above every own algorithm where oneDNN has a JIT kernel for the layout; below them where it would fall back to
  // its GEMM-based convolution (plain NCHW on AVX2), which the own kernels beat.
  int HeuristicScore(const Conv2dProblem& problem) const override;

  // The oneDNN implementation chosen for the problem ("jit:avx2", "jit_1x1:avx2", "jit_dw:avx2", ...).
  absl::StatusOr<std::string> Implementation(const Conv2dProblem& problem) const;

 private:
  absl::StatusOr<std::shared_ptr<const OnednnConvDescriptor>> Describe(const Conv2dProblem& problem) const;

  ResidualForm residual_form_;
  onednn::DescriptorCache<Conv2dProblem, OnednnConvDescriptor> descriptors_;
};

using Conv2dOnednnNchw = Conv2dOnednn<Layout::kNCHW>;
using Conv2dOnednnNhwc = Conv2dOnednn<Layout::kNHWC>;
using Conv2dOnednnNchw8c = Conv2dOnednn<Layout::kNCHW8c>;

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_CONV2D_ONEDNN_H_
