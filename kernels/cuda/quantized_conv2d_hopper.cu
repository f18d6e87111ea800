// INT8 conv2d on Hopper (sm_90a): the 1x1 case as a wgmma GEMM fed by bulk tensor copies (quantized_conv2d_hopper_
// kernel.cuh), u8 or s8 activations x s8 weights into int32 with the mma.sync INT8 kernel's fused epilogue, registered
// per tile:
//   cuda.quantized_conv2d.hopper_gemm_1x1_{128x128,128x64,64x64}   NHWC, 1x1, stride 1, no padding, groups 1, C a
//                                                                    multiple of 16; compute capability 9.0 only
// The packed filter, its packing kernel, the operand checks and the epilogue are the mma.sync algorithms'
// (quantized_conv2d_implicit_gemm_algorithm.cuh), so a plan packs the filter the same way for either. No workspace.
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/conv2d_hopper_algorithm.cuh"
#include "kernels/cuda/quantized_conv2d_hopper_kernel.cuh"
#include "kernels/cuda/quantized_conv2d_implicit_gemm_algorithm.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

template <typename Tile>
class CudaQuantizedConv2dHopperGemm1x1 final : public CudaQuantizedConv2dPackedAlgorithm {
 public:
  CudaQuantizedConv2dHopperGemm1x1()
      : CudaQuantizedConv2dPackedAlgorithm(
            absl::StrCat("cuda.quantized_conv2d.hopper_gemm_1x1_", Tile::kM, "x", Tile::kN)) {}

  absl::Status CanImplement(const QuantizedConv2dProblem& problem) const override {
    CONVOY_RETURN_IF_ERROR(CheckQuantizedLimits(problem));
    if (problem.groups != 1) return absl::UnimplementedError("needs groups == 1");
    if (problem.r != 1 || problem.s != 1 || problem.stride_h != 1 || problem.stride_w != 1 || problem.pad_top != 0 ||
        problem.pad_bottom != 0 || problem.pad_left != 0 || problem.pad_right != 0) {
      return absl::UnimplementedError("the 1x1 GEMM needs a 1x1 filter, stride 1 and no padding");
    }
    if (problem.c % 16 != 0) {
      return absl::UnimplementedError(
          absl::StrCat("C = ", problem.c, " is not a multiple of 16 (the bulk copy's row pitch)"));
    }
    return HopperDeviceSupported();
  }

  absl::Status Run(const QuantizedConv2dProblem& problem, const QuantizedConv2dArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override {
    CONVOY_RETURN_IF_ERROR(CanImplement(problem));
    CONVOY_RETURN_IF_ERROR(CheckRunArguments(problem, args, /*x_aligned_16=*/true));
    // Thread-local rather than on the stack: the tensor maps need 64-byte alignment, which ASan's fake stack frames
    // (detect_stack_use_after_return) do not keep. Every field is set below; the launch copies the parameters.
    static thread_local HopperQuantizedGemmParams params;
    params.quantized = MakeQuantizedImplicitGemmParams(problem, args);
    ImplicitGemmShape& shape = params.shape;
    shape = ImplicitGemmShape{};
    shape.n = problem.n, shape.h = problem.h, shape.w = problem.w, shape.c = problem.c;
    shape.k = problem.k;
    shape.p = problem.p(), shape.q = problem.q();
    shape.gemm_m = params.quantized.gemm_m;
    shape.gemm_k = problem.c;
    params.channel_blocks = (problem.c + Tile::kRowBytes - 1) / Tile::kRowBytes;
    params.k_iterations = params.channel_blocks;
    CONVOY_RETURN_IF_ERROR(EncodeMatrixMap<uint8_t>(&params.a_map, args.x, shape.gemm_m, problem.c, Tile::kM, "x"));
    CONVOY_RETURN_IF_ERROR(EncodeMatrixMap<uint8_t>(&params.b_map, args.w, problem.k,
                                                    QuantizedPackedFilterLayout::Of(problem).c_padded, Tile::kN, "w"));
    const auto stream = static_cast<cudaStream_t>(context.cuda_stream);
    const cudaError_t error = problem.src_type == DataType::kUInt8
                                  ? LaunchQuantizedHopperGemm<Tile, true>(params, stream)
                                  : LaunchQuantizedHopperGemm<Tile, false>(params, stream);
    return CudaStatus(error, "LaunchQuantizedHopperGemm");
  }

  // Competes with the mma.sync INT8 kernels by the launch-cost model's estimate at the wgmma rate (both at the model's
  // FP16 rate: the INT8 tensor-core rate is twice that on both paths, so the comparison stands).
  int HeuristicScore(const QuantizedConv2dProblem& problem) const override { return kTensorCoreScore; }
  double EstimatedMicroseconds(const QuantizedConv2dProblem& problem) const override {
    return HopperEstimate<Tile>(DataType::kInt8, QuantizedGemmShapeOf(problem)).total_us;
  }
  std::string LaunchSummary(const QuantizedConv2dProblem& problem) const override {
    return HopperLaunchSummary<Tile>(DataType::kInt8, QuantizedGemmShapeOf(problem));
  }
};

using QuantizedHopperGemm1x1_128x128 = CudaQuantizedConv2dHopperGemm1x1<HopperTile128x128>;
using QuantizedHopperGemm1x1_128x64 = CudaQuantizedConv2dHopperGemm1x1<HopperTile128x64>;
using QuantizedHopperGemm1x1_64x64 = CudaQuantizedConv2dHopperGemm1x1<HopperTile64x64>;

CONVOY_REGISTER_ALGORITHM(QuantizedConv2dOp, QuantizedHopperGemm1x1_128x128);
CONVOY_REGISTER_ALGORITHM(QuantizedConv2dOp, QuantizedHopperGemm1x1_128x64);
CONVOY_REGISTER_ALGORITHM(QuantizedConv2dOp, QuantizedHopperGemm1x1_64x64);

}  // namespace
}  // namespace convoy::cuda
