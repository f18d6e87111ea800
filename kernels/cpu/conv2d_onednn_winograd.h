// CPU conv2d on oneDNN 2.6's Winograd convolution (`convolution_winograd`, its F(2x2,3x3) / F(4x4,3x3) AVX-512
// kernels) for NHWC plans: 3x3, stride 1, dilation 1, one group, FP32, channel counts that are multiples of 16.
//
// oneDNN has Winograd kernels only for the nChw16c activation layout and only on AVX-512 CPUs (avx512_core: F(2x2,3x3)
// `jit_fp32_wino_2x3` at batch 1-2, F(4x4,3x3) `jit_wino_4x3` from batch 3 on, by its own choice); asked for
// NHWC activations it offers none. So "cpu.conv2d.onednn_winograd_nhwc" takes an NHWC problem and, in one run on the
// backend's threads, reorders the input into nChw16c in its workspace, (with a residual: reorders the residual into
// the nChw16c output, which oneDNN's sum post-op adds onto), runs the Winograd primitive with the rest of the epilogue
// as post-ops (bias as the primitive's bias, the activation as eltwise), and reorders the output back to NHWC. On an
// Intel Xeon with AVX-512 (docs/performance.md) that is 0.65-0.8x brgconv's time on ResNet's 3x3 layers on 56x56 to
// 14x14 pixels at batch 1 and a tie on 7x7, and 0.5-0.6x on every one at batch 8, reorders included; the autotuner
// times it against brgconv per layer and batch size. The price is memory: the F(4x4) filter is 4x the filter's size
// (and its blocking, so its packed copy, changes with the batch), and its scratchpad reaches 48 MB.
//
// Registered only where oneDNN dispatches its AVX-512 kernels (onednn::HasAvx512Kernels). The filter is packed at
// plan time into oneDNN's Winograd weights format (the transformed filter U = G g G^T, opaque to Convoy), which
// PackedFilterLayout names in full because it may change with the batch. Winograd's transforms round differently
// from the direct sum; the results stay within the FP32 tolerance of the cross-backend suite (docs/kernels.md).
#ifndef CONVOY_KERNELS_CPU_CONV2D_ONEDNN_WINOGRAD_H_
#define CONVOY_KERNELS_CPU_CONV2D_ONEDNN_WINOGRAD_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/cpu/onednn_support.h"
#include "kernels/registry/algorithm.h"

namespace convoy::cpu {

// The primitive descriptor of one problem and the workspace's layout (conv2d_onednn_winograd.cc).
struct OnednnWinogradDescriptor;

class Conv2dOnednnWinogradNhwc final : public Conv2dAlgorithm {
 public:
  absl::string_view name() const override { return "cpu.conv2d.onednn_winograd_nhwc"; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const Conv2dProblem& problem) const override;
  // oneDNN's scratchpad, then the input and the output in nChw16c.
  size_t WorkspaceBytes(const Conv2dProblem& problem) const override;
  size_t PackedFilterBytes(const Conv2dProblem& problem) const override;
  std::string PackedFilterLayout(const Conv2dProblem& problem) const override;
  absl::Status PackFilter(const Conv2dProblem& problem, const void* filter, void* packed,
                          const ExecutionContext& context) const override;
  // The Winograd primitive and the reorders around it, made once per plan step and batch size.
  absl::StatusOr<std::unique_ptr<AlgorithmState>> Prepare(const Conv2dProblem& problem,
                                                          const ExecutionContext& context) const override;
  absl::Status Run(const Conv2dProblem& problem, const Conv2dArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
  std::string LaunchSummary(const Conv2dProblem& problem) const override;
  // 45 (above brgconv's 40) for oneDNN's F(2x2,3x3) kernel (what it picks at batch 1-2) on outputs of 14x14 and
  // more, where it measured 0.65-0.8x brgconv's time; 35 elsewhere. On 7x7 F(2x2) measured a tie. oneDNN's F(4x4,3x3)
  // kernel (batch 3 and more) measured 0.5-0.6x brgconv's time at batch 8, but its packed filter is 4x the filter's
  // size and its blocking changes with the batch (one packed copy per layout): with 45 for it, an untuned 8-batch
  // ResNet-18 plan held 382 MiB of weights instead of 89. So it runs where the autotuner timed it faster, at the batch
  // sizes a model is tuned for, and not by default at every batch size a plan covers.
  int HeuristicScore(const Conv2dProblem& problem) const override;

  // The oneDNN implementation chosen for the problem ("jit_fp32_wino_2x3:avx512_core", ...).
  absl::StatusOr<std::string> Implementation(const Conv2dProblem& problem) const;

 private:
  absl::StatusOr<std::shared_ptr<const OnednnWinogradDescriptor>> Describe(const Conv2dProblem& problem) const;

  onednn::DescriptorCache<Conv2dProblem, OnednnWinogradDescriptor> descriptors_;
};

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_CONV2D_ONEDNN_WINOGRAD_H_
