// The INT8 tensor-core convolution algorithms over quantized_conv2d_implicit_gemm_kernel.cuh, one per tile shape and
// gather: CudaQuantizedConv2dImplicitGemm<Tile, kVectorGather>, registered by quantized_conv2d_implicit_gemm.cu as
//   cuda.quantized_conv2d.implicit_gemm_<M>x<N>            16-byte cp.async gather: C and C/groups multiples of 16
//   cuda.quantized_conv2d.implicit_gemm_bytewise_<M>x<N>   byte-by-byte gather: every other channel count (the
//                                                           3-channel stem, depthwise and narrow grouped layers)
//
// CanImplement: NHWC; UINT8 or INT8 input (Validate), UINT8 / INT8 / FP32 output, any groups, every epilogue of
// QuantizedEpilogue with the multipliers either in args.scale or fixed in epilogue.scales (a plan's QDQ folds), and a
// residual add fused after the requantization in either operand order (fused_add; args.residual the other operand);
// N*P*Q, N*H*W*C and K*R*S*Cp below 2^31 and R*S*C/groups at most kMaxQuantizedReduction (so the int32 sums cannot
// overflow). The vector variant also needs C and C/groups multiples of 16; the bytewise one declines those (the vector
// variant is the same tiles with cheaper copies).
//
// Packed filter (PackFilter, a plan-time kernel on the context's stream, device to device): the OHWI filter
// [K, R, S, C/groups] with each tap's channels padded with zeros to Cp = C/groups rounded up to 16, then, 16-byte
// aligned, int32 compensation[K] = -src_zero_point * (sum of filter k's weights), then, when the problem fixes them,
// the FP32 multipliers[K] (epilogue.scales, copied from the host on the same stream), which the epilogue then reads
// instead of args.scale. PackedFilterLayout names the zero point folded in and whether the multipliers are. Run takes
// that packed filter in args.w (16-byte aligned) and needs no workspace.
//
// CheckQuantizedConv2dLimits and CheckQuantizedConv2dArguments are CanImplement's limits and Run's operand checks,
// shared with the wgmma kernels and the direct kernel (quantized_conv2d_simt.cu).
#ifndef CONVOY_KERNELS_CUDA_QUANTIZED_CONV2D_IMPLICIT_GEMM_ALGORITHM_CUH_
#define CONVOY_KERNELS_CUDA_QUANTIZED_CONV2D_IMPLICIT_GEMM_ALGORITHM_CUH_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/problems.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/conv2d_implicit_gemm_algorithm.cuh"
#include "kernels/cuda/gpu_model.cuh"
#include "kernels/cuda/quantized_conv2d_implicit_gemm_kernel.cuh"
#include "kernels/cuda_emulation/cuda_compat.cuh"
#include "kernels/cuda_emulation/cuda_status.h"
#include "kernels/registry/algorithm.h"

namespace convoy::cuda {

// Largest reduction (R*S*C/groups) whose exact sum always fits int32: 255 * 128 per product.
inline constexpr int64_t kMaxQuantizedReduction = ((int64_t{1} << 31) - 1) / (255 * 128);

// The packed filter's pieces for a problem.
struct QuantizedPackedFilterLayout {
  int c_padded = 16;              // C/groups rounded up to 16
  int64_t filter_bytes = 0;       // K * R * S * c_padded
  int64_t compensation_offset = 0;  // filter_bytes rounded up to 16
  int64_t multipliers_offset = 0;   // compensation_offset + 4 * K: FP32 [K] when the problem fixes the multipliers
  int64_t total_bytes = 0;          // multipliers_offset (+ 4 * K with the multipliers)

  static QuantizedPackedFilterLayout Of(const QuantizedConv2dProblem& problem) {
    QuantizedPackedFilterLayout layout;
    layout.c_padded = (problem.c_per_group() + 15) / 16 * 16;
    layout.filter_bytes = int64_t{problem.k} * problem.r * problem.s * layout.c_padded;
    layout.compensation_offset = (layout.filter_bytes + 15) / 16 * 16;
    layout.multipliers_offset = layout.compensation_offset + 4 * int64_t{problem.k};
    layout.total_bytes = layout.multipliers_offset + (problem.epilogue.scales.empty() ? 0 : 4 * int64_t{problem.k});
    return layout;
  }
};

// Launches the packing kernel (quantized_conv2d_implicit_gemm.cu) on `stream`.
cudaError_t LaunchPackQuantizedFilter(const QuantizedConv2dProblem& problem, const int8_t* filter, void* packed,
                                      cudaStream_t stream);

// The plain operands of one INT8 convolution as the kernels read them (shape, packed filter, compensation, multipliers
// from the packed filter or args.scale, the epilogue's constants and the fused add's).
inline QuantizedImplicitGemmParams MakeQuantizedImplicitGemmParams(const QuantizedConv2dProblem& problem,
                                                                   const QuantizedConv2dArgs& args) {
  const QuantizedPackedFilterLayout packed = QuantizedPackedFilterLayout::Of(problem);
  QuantizedImplicitGemmParams params;
  SetConvGeometry(problem, params);
  params.c_group = problem.c_per_group();
  params.c_padded = packed.c_padded;
  params.k_group = problem.k_per_group();
  params.gemm_m = problem.n * params.p * params.q;
  params.gemm_k = problem.r * problem.s * packed.c_padded;
  params.x = args.x;
  params.filter = args.w;
  params.compensation =
      reinterpret_cast<const int32_t*>(reinterpret_cast<const char*>(args.w) + packed.compensation_offset);
  params.bias = problem.epilogue.has_bias ? args.bias : nullptr;
  params.scale = problem.epilogue.scales.empty()
                     ? args.scale
                     : reinterpret_cast<const float*>(reinterpret_cast<const char*>(args.w) +
                                                      packed.multipliers_offset);
  params.residual = problem.epilogue.residual != ResidualMode::kNone ? args.residual : nullptr;
  params.y = args.y;
  params.output = problem.dst_type == DataType::kUInt8  ? QuantizedOutput::kUInt8
                  : problem.dst_type == DataType::kInt8 ? QuantizedOutput::kInt8
                                                        : QuantizedOutput::kFloat32;
  params.src_zero_point = problem.epilogue.src_zero_point;
  params.dst_zero_point = problem.epilogue.dst_zero_point;
  params.relu = problem.epilogue.relu;
  params.residual_scale = problem.epilogue.residual_scale;
  params.residual_zero_point = problem.epilogue.residual_zero_point;
  if (problem.fused_add != QuantizedFusedAdd::kNone) {
    const bool conv_is_a = problem.fused_add == QuantizedFusedAdd::kConvIsA;
    params.fused_add = conv_is_a ? 1 : 2;
    params.conv_output = problem.conv_type() == DataType::kUInt8 ? QuantizedOutput::kUInt8 : QuantizedOutput::kInt8;
    params.add_operand = args.residual;
    params.add_operand_unsigned = (conv_is_a ? problem.add.b_type : problem.add.a_type) == DataType::kUInt8;
    params.add = MakeQuantizedAddConstants(problem.add);
  }
  return params;
}

// The launch-cost model's GEMM of an INT8 convolution: the groups' GEMMs side by side, the reduction over the packed
// channel pitch.
inline GemmShape QuantizedGemmShapeOf(const QuantizedConv2dProblem& problem) {
  GemmShape shape;
  shape.m = int64_t{problem.n} * problem.p() * problem.q() * problem.groups;
  shape.n = problem.k_per_group();
  shape.k = int64_t{problem.r} * problem.s * QuantizedPackedFilterLayout::Of(problem).c_padded;
  shape.input_bytes = 1;
  shape.output_bytes = static_cast<int>(DataTypeSize(problem.dst_type));
  shape.residual = problem.epilogue.residual != ResidualMode::kNone || problem.fused_add != QuantizedFusedAdd::kNone;
  return shape;
}

// CanImplement's part every CUDA INT8 convolution shares: a valid NHWC problem, N*P*Q, N*H*W*C and K*R*S*Cp below
// 2^31 and R*S*C/groups at most kMaxQuantizedReduction.
inline absl::Status CheckQuantizedConv2dLimits(const QuantizedConv2dProblem& problem) {
  if (absl::Status valid = problem.Validate(); !valid.ok()) return valid;
  if (problem.layout != Layout::kNHWC) return absl::UnimplementedError("needs NHWC");
  const QuantizedPackedFilterLayout packed = QuantizedPackedFilterLayout::Of(problem);
  if (int64_t{problem.n} * problem.p() * problem.q() >= (int64_t{1} << 31) ||
      int64_t{problem.n} * problem.h * problem.w * problem.c >= (int64_t{1} << 31) ||
      packed.filter_bytes >= (int64_t{1} << 31)) {
    return absl::UnimplementedError("N*P*Q, N*H*W*C or K*R*S*Cp does not fit in 32 bits");
  }
  const int64_t reduction = int64_t{problem.r} * problem.s * problem.c_per_group();
  if (reduction > kMaxQuantizedReduction) {
    return absl::UnimplementedError(absl::StrCat("R*S*C/groups = ", reduction, " exceeds ", kMaxQuantizedReduction,
                                                 " (the int32 sum could overflow)"));
  }
  return absl::OkStatus();
}

// Run's checks of the operands (after CanImplement), in `algorithm`'s words: x, w and y set, the multipliers from
// somewhere, the bias, residual and fused-add operand when the problem uses them; w 16-byte aligned when
// w_aligned_16 (a packed filter), x too when x_aligned_16.
inline absl::Status CheckQuantizedConv2dArguments(absl::string_view algorithm, const QuantizedConv2dProblem& problem,
                                                  const QuantizedConv2dArgs& args, bool w_aligned_16,
                                                  bool x_aligned_16) {
  if (args.x == nullptr || args.w == nullptr || args.y == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(algorithm, ": x, w and y must be set"));
  }
  if (problem.epilogue.scales.empty() && args.scale == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(algorithm, ": args.scale is null and the problem fixes no multipliers (epilogue.scales)"));
  }
  if (problem.epilogue.has_bias && args.bias == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(algorithm, ": has_bias but args.bias is null"));
  }
  if (problem.epilogue.residual != ResidualMode::kNone && args.residual == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(algorithm, ": the epilogue has a residual but args.residual is null"));
  }
  if (problem.fused_add != QuantizedFusedAdd::kNone && args.residual == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(algorithm, ": an add is fused but args.residual (its other operand) is null"));
  }
  if ((w_aligned_16 && !IsAligned(args.w, 16)) || (x_aligned_16 && !IsAligned(args.x, 16))) {
    return absl::InvalidArgumentError(absl::StrCat(algorithm, x_aligned_16 ? ": x and the packed w" : ": the packed w",
                                                   " must be 16-byte aligned"));
  }
  return absl::OkStatus();
}

// What every CUDA INT8 convolution over the packed filter above shares (the mma.sync kernels here, the wgmma ones of
// quantized_conv2d_hopper.cu): the name and the filter packing.
class CudaQuantizedConv2dPackedAlgorithm : public QuantizedConv2dAlgorithm {
 public:
  explicit CudaQuantizedConv2dPackedAlgorithm(std::string name) : name_(std::move(name)) {}

  absl::string_view name() const override { return name_; }
  Backend backend() const override { return Backend::kCuda; }

  size_t PackedFilterBytes(const QuantizedConv2dProblem& problem) const override {
    return static_cast<size_t>(QuantizedPackedFilterLayout::Of(problem).total_bytes);
  }
  std::string PackedFilterLayout(const QuantizedConv2dProblem& problem) const override {
    return absl::StrCat("OHWI16+compensation(zp ", problem.epilogue.src_zero_point, ")",
                        problem.epilogue.scales.empty() ? "" : "+multipliers");
  }
  absl::Status PackFilter(const QuantizedConv2dProblem& problem, const void* filter, void* packed,
                          const ExecutionContext& context) const override {
    if (absl::Status can = CanImplement(problem); !can.ok()) return can;
    if (filter == nullptr || packed == nullptr || !IsAligned(packed, 16)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name_, ": PackFilter needs a filter and a 16-byte aligned output"));
    }
    return CudaStatus(LaunchPackQuantizedFilter(problem, static_cast<const int8_t*>(filter), packed,
                                                static_cast<cudaStream_t>(context.cuda_stream)),
                      "LaunchPackQuantizedFilter");
  }

 protected:
  std::string name_;
};

template <typename Tile, bool kVectorGather>
class CudaQuantizedConv2dImplicitGemm final : public CudaQuantizedConv2dPackedAlgorithm {
 public:
  CudaQuantizedConv2dImplicitGemm()
      : CudaQuantizedConv2dPackedAlgorithm(absl::StrCat("cuda.quantized_conv2d.implicit_gemm_",
                                                        kVectorGather ? "" : "bytewise_", Tile::kM, "x", Tile::kN)) {}

  absl::Status CanImplement(const QuantizedConv2dProblem& problem) const override {
    CONVOY_RETURN_IF_ERROR(CheckQuantizedConv2dLimits(problem));
    const bool vector_channels = problem.c % 16 == 0 && problem.c_per_group() % 16 == 0;
    if (kVectorGather && !vector_channels) {
      return absl::UnimplementedError(absl::StrCat("the 16-byte gather needs C and C/groups multiples of 16, got C = ",
                                                   problem.c, ", C/groups = ", problem.c_per_group()));
    }
    if (!kVectorGather && vector_channels) {
      return absl::UnimplementedError("C and C/groups are multiples of 16: the 16-byte gather's (same tiles)");
    }
    return absl::OkStatus();
  }

  absl::Status Run(const QuantizedConv2dProblem& problem, const QuantizedConv2dArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override {
    CONVOY_RETURN_IF_ERROR(CanImplement(problem));
    CONVOY_RETURN_IF_ERROR(CheckQuantizedConv2dArguments(name_, problem, args, /*w_aligned_16=*/true, kVectorGather));
    const QuantizedImplicitGemmParams params = MakeQuantizedImplicitGemmParams(problem, args);
    const auto stream = static_cast<cudaStream_t>(context.cuda_stream);
    const cudaError_t error =
        problem.src_type == DataType::kUInt8
            ? LaunchQuantizedImplicitGemm<Tile, true, kVectorGather>(params, problem.groups, stream)
            : LaunchQuantizedImplicitGemm<Tile, false, kVectorGather>(params, problem.groups, stream);
    return CudaStatus(error, "LaunchQuantizedImplicitGemm");
  }

  int HeuristicScore(const QuantizedConv2dProblem& problem) const override { return kTensorCoreScore; }
  double EstimatedMicroseconds(const QuantizedConv2dProblem& problem) const override {
    return Estimate(problem).total_us;
  }
  std::string LaunchSummary(const QuantizedConv2dProblem& problem) const override {
    return absl::StrCat("tile ", Tile::kM, "x", Tile::kN, " (", Tile::kWarps, " warps, ", Tile::kStepBytes,
                        "-element k-step, ", kVectorGather ? "16-byte" : "bytewise", " gather): ",
                        Estimate(problem).ToString());
  }

 private:
  static LaunchEstimate Estimate(const QuantizedConv2dProblem& problem) {
    const GpuModel& gpu = CurrentGpuModel();
    const GemmKernelDescription kernel = QuantizedImplicitGemmDescription<Tile>(gpu);
    return EstimateGemmLaunch(kernel, QuantizedGemmShapeOf(problem), OccupancyBlocksPerSm(kernel.resources, gpu), gpu);
  }
};

// The explicit instances live in quantized_conv2d_implicit_gemm_instances_{vector,bytewise}.cu (nvcc builds them in
// parallel); files that launch them see these declarations instead of instantiating the kernels again.
#define CONVOY_QUANTIZED_IMPLICIT_GEMM_INSTANCE(PREFIX, TILE, UNSIGNED, VECTOR)                            \
  PREFIX template cudaError_t LaunchQuantizedImplicitGemm<TILE, UNSIGNED, VECTOR>(                         \
      const QuantizedImplicitGemmParams&, int, cudaStream_t);
#define CONVOY_QUANTIZED_IMPLICIT_GEMM_INSTANCES_OF(PREFIX, VECTOR)                          \
  CONVOY_QUANTIZED_IMPLICIT_GEMM_INSTANCE(PREFIX, ImplicitGemmTile128x128, true, VECTOR)  \
  CONVOY_QUANTIZED_IMPLICIT_GEMM_INSTANCE(PREFIX, ImplicitGemmTile128x128, false, VECTOR) \
  CONVOY_QUANTIZED_IMPLICIT_GEMM_INSTANCE(PREFIX, ImplicitGemmTile128x64, true, VECTOR)   \
  CONVOY_QUANTIZED_IMPLICIT_GEMM_INSTANCE(PREFIX, ImplicitGemmTile128x64, false, VECTOR)  \
  CONVOY_QUANTIZED_IMPLICIT_GEMM_INSTANCE(PREFIX, ImplicitGemmTile64x64, true, VECTOR)    \
  CONVOY_QUANTIZED_IMPLICIT_GEMM_INSTANCE(PREFIX, ImplicitGemmTile64x64, false, VECTOR)

#if !defined(CONVOY_QUANTIZED_IMPLICIT_GEMM_DEFINE_INSTANCES)
CONVOY_QUANTIZED_IMPLICIT_GEMM_INSTANCES_OF(extern, true)
CONVOY_QUANTIZED_IMPLICIT_GEMM_INSTANCES_OF(extern, false)
#endif

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_QUANTIZED_CONV2D_IMPLICIT_GEMM_ALGORITHM_CUH_
