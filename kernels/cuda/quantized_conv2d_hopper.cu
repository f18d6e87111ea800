// INT8 conv2d on Hopper (sm_90a): wgmma fed by bulk tensor copies (quantized_conv2d_hopper_kernel.cuh), u8 or s8
// activations x s8 weights into int32 with the mma.sync INT8 kernel's fused epilogue, registered per tile:
//   cuda.quantized_conv2d.hopper_implicit_gemm_{128x128,128x64,64x64}   any R x S, stride, dilation, padding within
//                                                                         the im2col copy's limits (im2col copies)
//   cuda.quantized_conv2d.hopper_gemm_1x1_{128x128,128x64,64x64}        1x1, stride 1, no padding (2D tiled copies)
// both NHWC, groups 1, C a multiple of 16, compute capability 9.0 only. The packed filter, its packing kernel, the
// operand checks and the epilogue are the mma.sync algorithms' (quantized_conv2d_implicit_gemm_algorithm.cuh), so a
// plan packs the filter the same way for either; the im2col form appends the border sums when the zero point and the
// padding need them (see the kernel's header). No workspace.
//
// Until the GPU check (tests/gpu) has verified them on a Hopper GPU, these kernels are candidates on a real device only
// where CONVOY_CUDA_HOPPER_INT8=1 is set (run_gpu_check.sh sets it); under the CPU emulation always.
#include <cstdint>
#include <cstdlib>
#include <cstring>
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

// OK under the emulation, and on a GPU where the operator opted in with CONVOY_CUDA_HOPPER_INT8=1.
absl::Status HopperInt8Enabled() {
#if defined(CONVOY_CUDA_EMULATION)
  return absl::OkStatus();
#else
  const char* enabled = std::getenv("CONVOY_CUDA_HOPPER_INT8");
  if (enabled != nullptr && std::strcmp(enabled, "1") == 0) return absl::OkStatus();
  return absl::UnimplementedError(
      "the INT8 wgmma kernels are verified under the CPU emulation only so far; CONVOY_CUDA_HOPPER_INT8=1 enables them");
#endif
}

// One thread per (output channel k, tap): border_sums[k][tap] = zero_point * (sum of the packed filter's weights of
// that tap). Plan-time only, after the filter is packed (same stream).
__global__ void BorderSumsKernel(const int8_t* __restrict__ packed, int32_t* __restrict__ border_sums, int k,
                                 int taps, int c_padded, int zero_point) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;  // [K * R*S]
  if (index >= k * taps) return;
  const int8_t* weights = packed + static_cast<int64_t>(index) * c_padded;  // [K][R*S][Cp]: row `index`
  int32_t sum = 0;
  for (int c = 0; c < c_padded; ++c) sum += weights[c];
  border_sums[index] = zero_point * sum;
}

template <typename Tile, bool kIm2col>
class CudaQuantizedConv2dHopper final : public CudaQuantizedConv2dPackedAlgorithm {
 public:
  CudaQuantizedConv2dHopper()
      : CudaQuantizedConv2dPackedAlgorithm(absl::StrCat(kIm2col ? "cuda.quantized_conv2d.hopper_implicit_gemm_"
                                                                : "cuda.quantized_conv2d.hopper_gemm_1x1_",
                                                        Tile::kM, "x", Tile::kN)) {}

  absl::Status CanImplement(const QuantizedConv2dProblem& problem) const override {
    CONVOY_RETURN_IF_ERROR(CheckQuantizedConv2dLimits(problem));
    if (problem.groups != 1) return absl::UnimplementedError("needs groups == 1");
    if (problem.c % 16 != 0) {
      return absl::UnimplementedError(
          absl::StrCat("C = ", problem.c, " is not a multiple of 16 (the bulk copy's row pitch)"));
    }
    if (kIm2col) {
      CONVOY_RETURN_IF_ERROR(Im2colLimits(problem));
    } else if (problem.r != 1 || problem.s != 1 || problem.stride_h != 1 || problem.stride_w != 1 ||
               problem.pad_top != 0 || problem.pad_bottom != 0 || problem.pad_left != 0 || problem.pad_right != 0) {
      return absl::UnimplementedError("the 1x1 GEMM needs a 1x1 filter, stride 1 and no padding");
    }
    CONVOY_RETURN_IF_ERROR(HopperDeviceSupported());
    return HopperInt8Enabled();
  }

  // The mma.sync kernels' packed filter, then (im2col, a nonzero zero point and padding) the border sums.
  size_t PackedFilterBytes(const QuantizedConv2dProblem& problem) const override {
    const size_t base = CudaQuantizedConv2dPackedAlgorithm::PackedFilterBytes(problem);
    return NeedsBorderSums(problem) ? BorderSumsOffset(problem) + 4 * BorderSumsCount(problem) : base;
  }
  std::string PackedFilterLayout(const QuantizedConv2dProblem& problem) const override {
    return absl::StrCat(CudaQuantizedConv2dPackedAlgorithm::PackedFilterLayout(problem),
                        NeedsBorderSums(problem) ? "+border_sums" : "");
  }
  absl::Status PackFilter(const QuantizedConv2dProblem& problem, const void* filter, void* packed,
                          const ExecutionContext& context) const override {
    CONVOY_RETURN_IF_ERROR(CudaQuantizedConv2dPackedAlgorithm::PackFilter(problem, filter, packed, context));
    if (!NeedsBorderSums(problem)) return absl::OkStatus();
    constexpr int kThreads = 128;
    const int64_t count = BorderSumsCount(problem);
    return CudaStatus(
        CONVOY_LAUNCH_KERNEL(BorderSumsKernel, dim3(static_cast<unsigned>((count + kThreads - 1) / kThreads)),
                             dim3(kThreads), 0, static_cast<cudaStream_t>(context.cuda_stream),
                             static_cast<const int8_t*>(packed),
                             reinterpret_cast<int32_t*>(static_cast<char*>(packed) + BorderSumsOffset(problem)),
                             problem.k, problem.r * problem.s, QuantizedPackedFilterLayout::Of(problem).c_padded,
                             problem.epilogue.src_zero_point),
        "BorderSumsKernel");
  }

  absl::Status Run(const QuantizedConv2dProblem& problem, const QuantizedConv2dArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override {
    CONVOY_RETURN_IF_ERROR(CanImplement(problem));
    CONVOY_RETURN_IF_ERROR(CheckQuantizedConv2dArguments(name_, problem, args, /*w_aligned_16=*/true,
                                                         /*x_aligned_16=*/true));
    // Thread-local rather than on the stack: the tensor maps need 64-byte alignment, which ASan's fake stack frames
    // (detect_stack_use_after_return) do not keep. Every field is set below; the launch copies the parameters.
    static thread_local HopperQuantizedGemmParams params;
    params.quantized = MakeQuantizedImplicitGemmParams(problem, args);
    ImplicitGemmShape& shape = params.shape;
    SetConvGeometry(problem, shape);
    shape.gemm_m = params.quantized.gemm_m;
    shape.gemm_k = params.quantized.gemm_k;
    params.channel_blocks = (problem.c + Tile::kRowBytes - 1) / Tile::kRowBytes;
    params.k_iterations = problem.r * problem.s * params.channel_blocks;
    params.border_sums =
        NeedsBorderSums(problem)
            ? reinterpret_cast<const int32_t*>(reinterpret_cast<const char*>(args.w) + BorderSumsOffset(problem))
            : nullptr;
    if (kIm2col) {
      CONVOY_RETURN_IF_ERROR((EncodeConvMaps<int8_t, Tile>(shape, problem.pad_right, problem.pad_bottom, args.x,
                                                           args.w, &params)));
    } else {
      CONVOY_RETURN_IF_ERROR(EncodeMatrixMap<uint8_t>(&params.a_map, args.x, shape.gemm_m, problem.c, Tile::kM, "x"));
      CONVOY_RETURN_IF_ERROR(EncodeMatrixMap<uint8_t>(&params.b_map, args.w, problem.k, problem.c, Tile::kN, "w"));
    }
    const auto stream = static_cast<cudaStream_t>(context.cuda_stream);
    const cudaError_t error = problem.src_type == DataType::kUInt8
                                  ? LaunchQuantizedHopperGemm<Tile, true, kIm2col>(params, stream)
                                  : LaunchQuantizedHopperGemm<Tile, false, kIm2col>(params, stream);
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

 private:
  // Taps can fall outside the image only with padding; they need a correction only with a nonzero zero point.
  static bool NeedsBorderSums(const QuantizedConv2dProblem& problem) {
    return kIm2col && problem.epilogue.src_zero_point != 0 &&
           (problem.pad_top > 0 || problem.pad_bottom > 0 || problem.pad_left > 0 || problem.pad_right > 0);
  }
  static int64_t BorderSumsOffset(const QuantizedConv2dProblem& problem) {
    return (QuantizedPackedFilterLayout::Of(problem).total_bytes + 15) / 16 * 16;
  }
  static int64_t BorderSumsCount(const QuantizedConv2dProblem& problem) {
    return int64_t{problem.k} * problem.r * problem.s;
  }
};

using QuantizedHopperImplicitGemm128x128 = CudaQuantizedConv2dHopper<HopperTile128x128, true>;
using QuantizedHopperImplicitGemm128x64 = CudaQuantizedConv2dHopper<HopperTile128x64, true>;
using QuantizedHopperImplicitGemm64x64 = CudaQuantizedConv2dHopper<HopperTile64x64, true>;
using QuantizedHopperGemm1x1_128x128 = CudaQuantizedConv2dHopper<HopperTile128x128, false>;
using QuantizedHopperGemm1x1_128x64 = CudaQuantizedConv2dHopper<HopperTile128x64, false>;
using QuantizedHopperGemm1x1_64x64 = CudaQuantizedConv2dHopper<HopperTile64x64, false>;

CONVOY_REGISTER_ALGORITHM(QuantizedConv2dOp, QuantizedHopperImplicitGemm128x128);
CONVOY_REGISTER_ALGORITHM(QuantizedConv2dOp, QuantizedHopperImplicitGemm128x64);
CONVOY_REGISTER_ALGORITHM(QuantizedConv2dOp, QuantizedHopperImplicitGemm64x64);
CONVOY_REGISTER_ALGORITHM(QuantizedConv2dOp, QuantizedHopperGemm1x1_128x128);
CONVOY_REGISTER_ALGORITHM(QuantizedConv2dOp, QuantizedHopperGemm1x1_128x64);
CONVOY_REGISTER_ALGORITHM(QuantizedConv2dOp, QuantizedHopperGemm1x1_64x64);

}  // namespace
}  // namespace convoy::cuda
