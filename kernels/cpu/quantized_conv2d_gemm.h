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

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_QUANTIZED_CONV2D_GEMM_H_
