// cuda.quantized_conv2d.simt: the direct INT8 convolution, one thread per output element, that the tensor-core INT8
// algorithms (cuda.quantized_conv2d.implicit_gemm_*, hopper_*) are verified against on a device
// (kernels/registry/verification.h). It implements every problem they do (NHWC, UINT8 / INT8 input, any geometry and
// groups, every QuantizedEpilogue, the fused add) and shares as little with them as it can: it reads the filter as
// the problem gives it ([K, R, S, C/groups], no packing, no zero-point compensation), skips the taps outside the image
// and sums (x - src_zero_point) * w exactly in int32 (CheckQuantizedConv2dLimits bounds the reduction), then hands
// the sum to the one INT8 epilogue every CUDA INT8 kernel uses (StoreQuantizedSum in
// quantized_conv2d_implicit_gemm_kernel.cuh), so its outputs equal the CPU reference bit for bit.
//
// Packed filter: none when the multipliers come in args.scale; when the problem fixes them (epilogue.scales), the
// filter as it is followed, 16-byte aligned, by the FP32 multipliers[K] (copied from the host at plan time), which Run
// reads instead of args.scale. No workspace. The lowest heuristic score: never a plan's pick where a tensor-core
// kernel implements the problem.
#include <cstdint>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/conv2d_direct_common.cuh"
#include "kernels/cuda/quantized_conv2d_implicit_gemm_algorithm.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

template <bool kUnsignedSrc>
__global__ void __launch_bounds__(256) QuantizedConv2dSimtKernel(QuantizedImplicitGemmParams params) {
  using Source = std::conditional_t<kUnsignedSrc, uint8_t, int8_t>;
  const Source* x = static_cast<const Source*>(params.x);  // [N, H, W, C]
  const int64_t outputs = int64_t{params.gemm_m} * params.k;
  const int filter_row = params.r * params.s * params.c_group;  // one output channel's weights [R, S, C/groups]
  for (int64_t index = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; index < outputs;
       index += int64_t{gridDim.x} * blockDim.x) {
    const int channel = static_cast<int>(index % params.k);  // output [N, P, Q, K]: k
    const int64_t pixel = index / params.k;                   // [N*P*Q]
    const int image = static_cast<int>(pixel / (params.p * params.q));
    const int pq = static_cast<int>(pixel - int64_t{image} * params.p * params.q);
    const int p = pq / params.q, q = pq - p * params.q;  // [P], [Q]
    const int group = channel / params.k_group;
    const int8_t* filter = params.filter + int64_t{channel} * filter_row;  // [R, S, C/groups]
    int32_t sum = 0;
    for (int r = 0; r < params.r; ++r) {
      const int h = p * params.stride_h - params.pad_h + r * params.dilation_h;  // [H]
      if (h < 0 || h >= params.h) continue;
      for (int s = 0; s < params.s; ++s) {
        const int w = q * params.stride_w - params.pad_w + s * params.dilation_w;  // [W]
        if (w < 0 || w >= params.w) continue;
        const Source* x_tap = x + ((int64_t{image} * params.h + h) * params.w + w) * params.c +
                              int64_t{group} * params.c_group;              // the group's channels [C/groups]
        const int8_t* w_tap = filter + (r * params.s + s) * params.c_group;  // [C/groups]
        for (int c = 0; c < params.c_group; ++c) {
          sum += (static_cast<int32_t>(x_tap[c]) - params.src_zero_point) * static_cast<int32_t>(w_tap[c]);
        }
      }
    }
    StoreQuantizedSum(params, index, channel, static_cast<uint32_t>(sum));
  }
}

// Where the fixed multipliers start in the packed filter: after the filter, 16-byte aligned.
int64_t MultipliersOffset(const QuantizedConv2dProblem& problem) { return (problem.filter_elements() + 15) / 16 * 16; }

class CudaQuantizedConv2dSimt final : public QuantizedConv2dAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.quantized_conv2d.simt"; }
  Backend backend() const override { return Backend::kCuda; }

  absl::Status CanImplement(const QuantizedConv2dProblem& problem) const override {
    return CheckQuantizedConv2dLimits(problem);
  }

  size_t PackedFilterBytes(const QuantizedConv2dProblem& problem) const override {
    if (problem.epilogue.scales.empty()) return 0;
    return static_cast<size_t>(MultipliersOffset(problem) + 4 * int64_t{problem.k});
  }
  std::string PackedFilterLayout(const QuantizedConv2dProblem& problem) const override {
    return problem.epilogue.scales.empty() ? "" : "OHWI+multipliers";
  }
  absl::Status PackFilter(const QuantizedConv2dProblem& problem, const void* filter, void* packed,
                          const ExecutionContext& context) const override {
    CONVOY_RETURN_IF_ERROR(CanImplement(problem));
    if (filter == nullptr || packed == nullptr || !IsAligned(packed, 16)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name(), ": PackFilter needs a filter and a 16-byte aligned output"));
    }
    const auto stream = static_cast<cudaStream_t>(context.cuda_stream);
    CONVOY_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(packed, filter, static_cast<size_t>(problem.filter_elements()),
                                                      cudaMemcpyDeviceToDevice, stream),
                                      "cudaMemcpyAsync (filter)"));
    if (problem.epilogue.scales.empty()) return absl::OkStatus();
    // From pageable host memory the copy returns once the source is staged: the problem's vector may go away after.
    return CudaStatus(cudaMemcpyAsync(static_cast<char*>(packed) + MultipliersOffset(problem),
                                      problem.epilogue.scales.data(), problem.epilogue.scales.size() * sizeof(float),
                                      cudaMemcpyHostToDevice, stream),
                      "cudaMemcpyAsync (multipliers)");
  }

  absl::Status Run(const QuantizedConv2dProblem& problem, const QuantizedConv2dArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override {
    CONVOY_RETURN_IF_ERROR(CanImplement(problem));
    const bool fixed_multipliers = !problem.epilogue.scales.empty();
    CONVOY_RETURN_IF_ERROR(CheckQuantizedConv2dArguments(name(), problem, args, /*w_aligned_16=*/fixed_multipliers,
                                                         /*x_aligned_16=*/false));
    // The implicit GEMM's parameters carry the geometry and the epilogue's operands; the filter is the raw one and
    // there is no compensation (the kernel subtracts the zero point itself).
    QuantizedImplicitGemmParams params = MakeQuantizedImplicitGemmParams(problem, args);
    params.compensation = nullptr;
    params.scale = fixed_multipliers ? reinterpret_cast<const float*>(reinterpret_cast<const char*>(args.w) +
                                                                      MultipliersOffset(problem))
                                     : args.scale;
    const auto stream = static_cast<cudaStream_t>(context.cuda_stream);
    const dim3 grid = DirectConvGrid(int64_t{params.gemm_m} * params.k);
    const cudaError_t error =
        problem.src_type == DataType::kUInt8
            ? CONVOY_LAUNCH_KERNEL(QuantizedConv2dSimtKernel<true>, grid, dim3(256), 0, stream, params)
            : CONVOY_LAUNCH_KERNEL(QuantizedConv2dSimtKernel<false>, grid, dim3(256), 0, stream, params);
    return CudaStatus(error, "QuantizedConv2dSimtKernel");
  }

  int HeuristicScore(const QuantizedConv2dProblem& problem) const override { return 1; }
  // One thread per output, the exact integer sum: what the other CUDA INT8 algorithms are verified against.
  bool TrustedForVerification() const override { return true; }
};

CONVOY_REGISTER_ALGORITHM(QuantizedConv2dOp, CudaQuantizedConv2dSimt);

}  // namespace
}  // namespace convoy::cuda
