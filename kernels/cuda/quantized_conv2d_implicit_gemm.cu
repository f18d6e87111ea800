// INT8 conv2d on tensor cores (mma.sync m16n8k32, u8 x s8 or s8 x s8 into int32; NHWC, any groups, the whole
// QuantizedEpilogue fused), registered as one algorithm per tile and gather
// (quantized_conv2d_implicit_gemm_algorithm.cuh):
//   cuda.quantized_conv2d.implicit_gemm_{128x128,128x64,64x64}            C and C/groups multiples of 16
//   cuda.quantized_conv2d.implicit_gemm_bytewise_{128x128,128x64,64x64}   any other channel count
// and the plan-time filter packing kernel. The kernel is quantized_conv2d_implicit_gemm_kernel.cuh (instances in
// quantized_conv2d_implicit_gemm_instances_{vector,bytewise}.cu).
#include "kernels/cuda/quantized_conv2d_implicit_gemm_algorithm.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

// One thread per output channel k: copies filter k ([R, S, C/groups], OHWI) into its packed row ([R, S, Cp], the
// channels past C/groups zero) and writes compensation[k] = -zero_point * (sum of its weights). Plan-time only.
__global__ void PackQuantizedFilterKernel(const int8_t* __restrict__ filter, int8_t* __restrict__ packed,
                                          int32_t* __restrict__ compensation, int k, int taps, int c_group,
                                          int c_padded, int zero_point) {
  const int channel = blockIdx.x * blockDim.x + threadIdx.x;  // [K]
  if (channel >= k) return;
  const int8_t* source = filter + static_cast<int64_t>(channel) * taps * c_group;  // [R*S][C/groups]
  int8_t* destination = packed + static_cast<int64_t>(channel) * taps * c_padded;  // [R*S][Cp]
  int32_t sum = 0;
  for (int tap = 0; tap < taps; ++tap) {
    for (int c = 0; c < c_padded; ++c) {
      const int8_t value = c < c_group ? source[tap * c_group + c] : int8_t{0};
      destination[tap * c_padded + c] = value;
      sum += value;
    }
  }
  compensation[channel] = -zero_point * sum;
}

using QuantizedImplicitGemm128x128 = CudaQuantizedConv2dImplicitGemm<ImplicitGemmTile128x128, true>;
using QuantizedImplicitGemm128x64 = CudaQuantizedConv2dImplicitGemm<ImplicitGemmTile128x64, true>;
using QuantizedImplicitGemm64x64 = CudaQuantizedConv2dImplicitGemm<ImplicitGemmTile64x64, true>;
using QuantizedImplicitGemmBytewise128x128 = CudaQuantizedConv2dImplicitGemm<ImplicitGemmTile128x128, false>;
using QuantizedImplicitGemmBytewise128x64 = CudaQuantizedConv2dImplicitGemm<ImplicitGemmTile128x64, false>;
using QuantizedImplicitGemmBytewise64x64 = CudaQuantizedConv2dImplicitGemm<ImplicitGemmTile64x64, false>;

CONVOY_REGISTER_ALGORITHM(QuantizedConv2dOp, QuantizedImplicitGemm128x128);
CONVOY_REGISTER_ALGORITHM(QuantizedConv2dOp, QuantizedImplicitGemm128x64);
CONVOY_REGISTER_ALGORITHM(QuantizedConv2dOp, QuantizedImplicitGemm64x64);
CONVOY_REGISTER_ALGORITHM(QuantizedConv2dOp, QuantizedImplicitGemmBytewise128x128);
CONVOY_REGISTER_ALGORITHM(QuantizedConv2dOp, QuantizedImplicitGemmBytewise128x64);
CONVOY_REGISTER_ALGORITHM(QuantizedConv2dOp, QuantizedImplicitGemmBytewise64x64);

}  // namespace

cudaError_t LaunchPackQuantizedFilter(const QuantizedConv2dProblem& problem, const int8_t* filter, void* packed,
                                      cudaStream_t stream) {
  const QuantizedPackedFilterLayout layout = QuantizedPackedFilterLayout::Of(problem);
  auto* packed_filter = static_cast<int8_t*>(packed);
  auto* compensation = reinterpret_cast<int32_t*>(static_cast<char*>(packed) + layout.compensation_offset);
  constexpr int kThreads = 128;
  const cudaError_t launched =
      CONVOY_LAUNCH_KERNEL(PackQuantizedFilterKernel, dim3((problem.k + kThreads - 1) / kThreads), dim3(kThreads), 0,
                           stream, filter, packed_filter, compensation, problem.k, problem.r * problem.s,
                           problem.c_per_group(), layout.c_padded, problem.epilogue.src_zero_point);
  if (launched != cudaSuccess || problem.epilogue.scales.empty()) return launched;
  // The fixed multipliers after the compensation. From pageable host memory the copy returns once the source is
  // staged, so the problem's vector may go away after this call.
  return cudaMemcpyAsync(static_cast<char*>(packed) + layout.multipliers_offset, problem.epilogue.scales.data(),
                         problem.epilogue.scales.size() * sizeof(float), cudaMemcpyHostToDevice, stream);
}

}  // namespace convoy::cuda
