// CPU INT8 conv2d on Convoy's own kernels ("cpu.quantized_conv2d.gemm_nhwc", "..._avx2", "..._avx512"; one per
// instruction set the CPU runs, cpu_isa.h): exact on every x86-64 CPU, where oneDNN 2.6's INT8 convolutions are exact
// only with VNNI (quantized_conv2d_onednn.h). An implicit GEMM on NHWC: each output pixel's receptive field is widened
// into 16 bits less the source zero point (im2col, padding as 0), the filter is packed at plan time into blocks of 16
// output channels of 16-bit weight pairs, and pmaddwd sums each pair of products into 32 bits, which cannot saturate
// (quantized_gemm_tiles.h). Every QuantizedEpilogue and the fused add run on the 32-bit sums in the reference's FP32
// order, so its outputs equal reference::QuantizedConv2d bit for bit. Depthwise layers (a channel per group, windows
// of up to 64 taps, which includes the global average pools of QDQ plans) run per output pixel across the channels
// instead, pmaddwd summing pairs of taps (the filter packed as int16 [R*S/2][K][2]).
//
// Any geometry, groups and dilation, UINT8 or INT8 sources, UINT8, INT8 or FP32 outputs, the multipliers fixed in the
// problem or given at run time; reductions (R*S*C/groups) up to 65793. The rows are split across the context's
// threads in chunks whose widened receptive fields stay within 192 KiB (the workspace holds one chunk per thread);
// small layers are split by output channels as well.
//
// Scored below oneDNN (its first choice 0, its jit variant -1), widest instruction set first: on a CPU with VNNI
// oneDNN's kernels run the plans and tuning may still pick this one where it times faster; on a CPU without VNNI
// (AVX2 EPYCs, Skylake-SP Xeons), where oneDNN's INT8 convolutions decline, this is what runs a QDQ model in INT8.
#ifndef CONVOY_KERNELS_CPU_QUANTIZED_CONV2D_GEMM_H_
#define CONVOY_KERNELS_CPU_QUANTIZED_CONV2D_GEMM_H_

#include <string>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/registry/algorithm.h"
#include "kernels/registry/residual_in_output.h"

namespace convoy::cpu {

class QuantizedConv2dGemmNhwc final : public QuantizedConv2dAlgorithm {
 public:
  explicit QuantizedConv2dGemmNhwc(CpuIsa isa);
  absl::string_view name() const override { return name_; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const QuantizedConv2dProblem& problem) const override;
  int HeuristicScore(const QuantizedConv2dProblem& problem) const override;
  size_t WorkspaceBytes(const QuantizedConv2dProblem& problem) const override;
  size_t PackedFilterBytes(const QuantizedConv2dProblem& problem) const override;
  std::string PackedFilterLayout(const QuantizedConv2dProblem& problem) const override;
  absl::Status PackFilter(const QuantizedConv2dProblem& problem, const void* filter, void* packed,
                          const ExecutionContext& context) const override;
  absl::Status Run(const QuantizedConv2dProblem& problem, const QuantizedConv2dArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
  std::string LaunchSummary(const QuantizedConv2dProblem& problem) const override;

  // The largest reduction whose exact sum always fits int32 (255 * 128 per product).
  static constexpr int64_t kMaxReduction = ((int64_t{1} << 31) - 1) / (255 * 128);

 private:
  CpuIsa isa_;
  std::string name_;
};

// The same exact INT8 convolution on the AMX tiles ("cpu.quantized_conv2d.amx_1x1_nhwc"), for 1x1, stride-1,
// unpadded, ungrouped NHWC layers with input channels in multiples of 64 and output channels in multiples of 16 (a
// ResNet's 1x1 layers and classifier): the source rows as they lie are the tiles' left operand (TDPBUSD / TDPBSSD,
// exact int32 sums of u8 x s8 or s8 x s8 products), the source zero point a per-channel compensation folded into the
// bias at Run, the filter packed at plan time into 1 KiB tiles (quantized_amx_tiles.h); blocks of 32 output pixels x
// 32 channels in four accumulator tiles, each stored and finished by the AVX-512 epilogue of the kernels above, so the
// outputs equal reference::QuantizedConv2d bit for bit with every epilogue and fused add. Only where the CPU runs AMX
// INT8 and the OS grants the tile state (Sapphire Rapids and later Xeons). Scored below oneDNN's first choice (-1): only
// tuning picks it, per layer and batch size, where it times faster.
// It reads each residual (and fused add operand) element before it writes that output element, so a plan may give it
// the residual's buffer as the output (ResidualInOutput).
class QuantizedConv2dAmx1x1Nhwc final : public QuantizedConv2dAlgorithm, public ResidualInOutput {
 public:
  bool AccumulatesOntoOutput(const Conv2dProblem&) const override { return false; }
  bool AccumulatesOntoOutput(const QuantizedConv2dProblem& problem) const override {
    return problem.epilogue.residual != ResidualMode::kNone || problem.fused_add != QuantizedFusedAdd::kNone;
  }
  absl::string_view name() const override { return "cpu.quantized_conv2d.amx_1x1_nhwc"; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const QuantizedConv2dProblem& problem) const override;
  int HeuristicScore(const QuantizedConv2dProblem& problem) const override { return -1; }
  size_t WorkspaceBytes(const QuantizedConv2dProblem& problem) const override;
  size_t PackedFilterBytes(const QuantizedConv2dProblem& problem) const override;
  std::string PackedFilterLayout(const QuantizedConv2dProblem& problem) const override {
    return "K/16,C/64,16c4,16k,4c int8 + K int32 sums";
  }
  absl::Status PackFilter(const QuantizedConv2dProblem& problem, const void* filter, void* packed,
                          const ExecutionContext& context) const override;
  absl::Status Run(const QuantizedConv2dProblem& problem, const QuantizedConv2dArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
};

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_QUANTIZED_CONV2D_GEMM_H_
