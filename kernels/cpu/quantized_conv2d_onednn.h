// CPU INT8 conv2d on oneDNN 2.6's convolution primitive ("cpu.quantized_conv2d.onednn_nhwc"), NHWC only: oneDNN 2.6
// has only its reference kernel for INT8 convolutions in NCHW and nChw8c (checked on an AVX-512 VNNI Xeon).
// UINT8 or INT8 activations times symmetric INT8 weights with exact INT32 accumulation, on CPUs with VNNI (AVX512_VNNI
// or AVX_VNNI) only: without it oneDNN 2.6 sums pairs of products in saturating 16-bit arithmetic (vpmaddubsw), and
// CanImplement declines (onednn::CheckExactInt8Products), which leaves a QDQ plan's layers in FP32 with the
// quantization simulated. QuantizedEpilogue (problems.h) fused: the INT32 bias, the per-output-channel
// requantization multipliers as the primitive's output scales when the problem fixes them (epilogue.scales, what
// plans do), else as a per-channel binary multiply post-op (2.6 has no convolution with run-time output scales; the
// post-op is the slower of the two), the residual as a sum post-op with its own scale and zero point, ReLU as an
// eltwise post-op. The destination zero point is a post-op too (a round, then an eltwise_linear adding it: exact on
// the rounded integer), and the source zero point, on an unpadded convolution, is folded into the bias
// (sum (x - zp) w = sum x w - zp sum w, the second term per output channel, computed at PackFilter and added to the
// bias at Run), both instead of oneDNN's zero-point attributes: with either attribute oneDNN 2.6 does not take its
// brgconv kernels, and the convolutions that carry them ran 1.3-2.2x slower (docs/kernels.md, "INT8"). A padded
// convolution keeps the source zero point as an attribute (padding must read as the zero point).
// The output is UINT8, INT8 or FP32.
//
// As conv2d_onednn: the filter is reordered at plan time into the layout the primitive chose (PackFilter; for a
// UINT8/INT8 source oneDNN appends the compensation terms its kernels need to the packed filter), the primitive is
// made once per problem by Prepare, and Run executes it with the scratchpad in the workspace. A residual not already
// in y is copied there first (the sum post-op reads the destination). CanImplement declines oneDNN's reference
// implementation.
#ifndef CONVOY_KERNELS_CPU_QUANTIZED_CONV2D_ONEDNN_H_
#define CONVOY_KERNELS_CPU_QUANTIZED_CONV2D_ONEDNN_H_

#include <cmath>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>

#include "absl/status/statusor.h"
#include "kernels/common/mutex.h"
#include "kernels/cpu/onednn_support.h"
#include "kernels/registry/algorithm.h"
#include "kernels/registry/residual_in_output.h"

namespace convoy::cpu {

struct OnednnQuantizedConvDescriptor;

class QuantizedConv2dOnednnNhwc : public QuantizedConv2dAlgorithm, public ResidualInOutput {
 public:
  QuantizedConv2dOnednnNhwc() = default;
  // The sum post-op (the residual sum, and the fused add) reads the residual from the output buffer.
  bool AccumulatesOntoOutput(const Conv2dProblem&) const override { return false; }
  bool AccumulatesOntoOutput(const QuantizedConv2dProblem& problem) const override {
    return problem.epilogue.residual != ResidualMode::kNone || problem.fused_add != QuantizedFusedAdd::kNone;
  }
  absl::string_view name() const override;
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const QuantizedConv2dProblem& problem) const override;
  size_t WorkspaceBytes(const QuantizedConv2dProblem& problem) const override;
  size_t PackedFilterBytes(const QuantizedConv2dProblem& problem) const override;
  std::string PackedFilterLayout(const QuantizedConv2dProblem& problem) const override;
  absl::Status PackFilter(const QuantizedConv2dProblem& problem, const void* filter, void* packed,
                          const ExecutionContext& context) const override;
  absl::StatusOr<std::unique_ptr<AlgorithmState>> Prepare(const QuantizedConv2dProblem& problem,
                                                          const ExecutionContext& context) const override;
  absl::Status Run(const QuantizedConv2dProblem& problem, const QuantizedConv2dArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
  // The oneDNN implementation the problem's primitive got ("oneDNN <impl>"), for `convoy inspect`.
  std::string LaunchSummary(const QuantizedConv2dProblem& problem) const override;

  // Whether a fused add runs with the conv's zero point folded into its constants (no binary post-op; see
  // FoldConvZeroPoint in the .cc) rather than added by a binary post-op.
  bool FoldsConvZeroPoint(const QuantizedConv2dProblem& problem) const {
    return problem.fused_add != QuantizedFusedAdd::kNone && !std::isnan(FusedAddFormCached(problem).folded);
  }

  // The oneDNN implementation chosen for the problem ("brg:avx512_core_vnni", "jit_int8:avx512_core_vnni", ...).
  absl::StatusOr<std::string> Implementation(const QuantizedConv2dProblem& problem) const;

 protected:
  // Takes the first implementation whose name starts with `implementation_prefix` instead of oneDNN's first choice.
  explicit QuantizedConv2dOnednnNhwc(std::string implementation_prefix, bool as_matmul = false)
      : implementation_prefix_(std::move(implementation_prefix)), as_matmul_(as_matmul) {}

 private:
  absl::StatusOr<std::shared_ptr<const OnednnQuantizedConvDescriptor>> Describe(
      const QuantizedConv2dProblem& problem) const;

  // How a fused add becomes post-ops, per add quantization (QuantizedAddProblem less its count) and conv operand:
  // `folded`, the constant that folds the conv's zero point into the chain (no binary post-op), or NaN when no FP32
  // constant reproduces the add exactly; then `unfolded` says whether the chain with the zero point as a binary add
  // reproduces it (with the conv as the add's first operand the FMAs come in the other order). Both checks try every
  // pair of 8-bit operands (65536), and a plan asks for every batch size of every fused layer, several times each
  // (planning ResNet-50 took 2.1 s with such a check uncached, against 0.8 s before the fusion).
  struct FusedAddForm {
    float folded = 0.f;
    absl::Status unfolded;
  };
  FusedAddForm FusedAddFormCached(const QuantizedConv2dProblem& problem) const;

  const std::string implementation_prefix_;  // empty: oneDNN's first choice
  const bool as_matmul_ = false;              // the matmul primitive (1x1 convolutions only)
  onednn::DescriptorCache<QuantizedConv2dProblem, OnednnQuantizedConvDescriptor> descriptors_;
  mutable convoy::Mutex forms_mu_;
  mutable std::unordered_map<std::pair<QuantizedAddProblem, QuantizedFusedAdd>, FusedAddForm,
                             absl::Hash<std::pair<QuantizedAddProblem, QuantizedFusedAdd>>>
      fused_add_forms_ ABSL_GUARDED_BY(forms_mu_);
};

// The same convolution on oneDNN 2.6's older direct INT8 kernels ("cpu.quantized_conv2d.onednn_nhwc_jit": the first
// implementation named jit_int8, jit_int8_1x1 for 1x1 layers), which oneDNN ranks after its first choice (brgconv on
// most layers) but which can be faster on some layers and batch sizes (`int8_conv_implementations` in
// kernels/benchmarks times every implementation of ResNet-50's and MobileNetV2's layers). Scored below the first
// choice, so only tuning (`convoy tune`, `--tune`) picks it, per layer and batch size, where it times faster.
// Declines problems whose first choice already is a jit_int8 kernel, and problems no jit_int8 kernel takes.
class QuantizedConv2dOnednnNhwcJit final : public QuantizedConv2dOnednnNhwc {
 public:
  QuantizedConv2dOnednnNhwcJit() : QuantizedConv2dOnednnNhwc("jit_int8") {}
  absl::string_view name() const override { return "cpu.quantized_conv2d.onednn_nhwc_jit"; }
  int HeuristicScore(const QuantizedConv2dProblem& problem) const override { return -1; }
};

// A 1x1, stride-1, unpadded, ungrouped convolution as oneDNN 2.6's matmul primitive
// ("cpu.quantized_conv2d.onednn_matmul_nhwc"): the NHWC source is a [pixels, channels] matrix as it lies, the filter
// its [channels, k] right-hand side, with the same attributes (output scales, bias, the post-op chains) and so the
// same outputs. On AMX its brgemm kernels run the post-op chains the INT8 plans need (the destination zero point's
// round, the fused add) in 0.8-0.9 of brgconv_1x1's time on ResNet-50's large 1x1 layers, and the plain ones in
// 0.7-1.3 (docs/kernels.md, "INT8 1x1 convolutions as a matmul"). Scored below the first choice, so only tuning picks
// it, per layer and batch size, where it times faster. Declines every other shape.
class QuantizedConv2dOnednnMatmulNhwc final : public QuantizedConv2dOnednnNhwc {
 public:
  QuantizedConv2dOnednnMatmulNhwc() : QuantizedConv2dOnednnNhwc("", /*as_matmul=*/true) {}
  absl::string_view name() const override { return "cpu.quantized_conv2d.onednn_matmul_nhwc"; }
  int HeuristicScore(const QuantizedConv2dProblem& problem) const override { return -1; }
};

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_QUANTIZED_CONV2D_ONEDNN_H_
