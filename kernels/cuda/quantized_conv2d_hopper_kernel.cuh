// The INT8 Hopper (sm_90a) 1x1 convolution behind cuda.quantized_conv2d.hopper_gemm_1x1_* (quantized_conv2d_hopper.cu):
// conv2d_hopper_kernel.cuh's warp-specialized pipeline (the producer thread's 2D bulk tensor copies into 128-byte
// swizzled stages on full / empty mbarriers, the consumer warpgroups' wgmma main loop, the setmaxnreg split) with
// 8-bit operands and the integer wgmma:
//
//   acc[m, k] = sum_c X[m, c] * Wp[k, c]        wgmma.mma_async.m64nNk32.s32.{u8|s8}.s8, exact int32
//   y[m, k]   = StoreQuantizedOutput(acc[m, k])  the mma.sync INT8 kernel's epilogue (quantized_conv2d_implicit_gemm_
//                                                kernel.cuh): + compensation + bias, * multiplier, residual, ReLU,
//                                                rounding, zero point, saturation, the fused add
//
// m over N*H*W pixels (a 1x1, stride-1, unpadded convolution is this GEMM), X the NHWC input as a [N*H*W, C] byte
// matrix, Wp the packed filter's [K, Cp] rows (Cp = C: C is a multiple of 16 here). A 128-byte stage row is 128
// channels, 4 wgmmas of k32; channels past C read as zeros on both sides (the copies' out-of-bounds fill), so they add
// nothing, and no tap lies outside the image, so the per-channel compensation (-zero_point * sum of the filter's
// weights) is the whole zero-point correction. Both operands are K-major, as the ISA requires for 8-bit wgmma.
//
// Each consumer thread requantizes its accumulator fragment element by element (register v: row 16*warp + lane/4 +
// 8*((v/2)%2), column 8*(v/4) + 2*(lane%4) + v%2) straight to y: an element reads its residual before writing, so y
// may be the residual's buffer.
#ifndef CONVOY_KERNELS_CUDA_QUANTIZED_CONV2D_HOPPER_KERNEL_CUH_
#define CONVOY_KERNELS_CUDA_QUANTIZED_CONV2D_HOPPER_KERNEL_CUH_

#include <cstdint>

#include "kernels/cuda/conv2d_hopper_kernel.cuh"
#include "kernels/cuda/quantized_conv2d_implicit_gemm_kernel.cuh"
#include "kernels/cuda_emulation/cuda_compat.cuh"
#include "kernels/cuda_emulation/hopper.cuh"

namespace convoy::cuda {

// The INT8 kernel's parameters: the main loop's fields under the names HopperProduce reads, then the epilogue's.
struct HopperQuantizedGemmParams {
  CUtensorMap a_map;        // 2D over X [N*H*W, C] bytes, box 128 x kM
  CUtensorMap b_map;        // 2D over the packed filter [K, Cp] bytes, box 128 x kN
  ImplicitGemmShape shape;  // gemm_m = N*H*W, k = K (p, q set: the producer's block origin divides by them)
  int k_iterations = 0;     // ceil(C / 128)
  int channel_blocks = 1;   // the same (one 1x1 tap)
  QuantizedImplicitGemmParams quantized;  // what StoreQuantizedOutput reads (y, compensation, multipliers, ...)
};

template <typename Tile, bool kUnsignedSrc>
__device__ __forceinline__ void QuantizedHopperConsume(const HopperQuantizedGemmParams& params, const uint8_t* stages,
                                                       uint64_t* full, uint64_t* empty, int consumer, int thread) {
  constexpr WgmmaType kType = kUnsignedSrc ? WgmmaType::kU8S8 : WgmmaType::kS8S8;
  WgmmaAccumulator<Tile::kN, int32_t> acc;  // 64 x kN sums of this warpgroup
  HopperConsumeMainloop<kType, Tile>(acc, params.k_iterations, stages, full, empty, consumer);

  const ImplicitGemmShape& shape = params.shape;
  const int warp = thread / 32, lane = thread % 32;
  const int block_m = blockIdx.x * Tile::kM + consumer * 64;
  const int block_n = blockIdx.y * Tile::kN;
#pragma unroll
  for (int v = 0; v < WgmmaAccumulator<Tile::kN, int32_t>::kRegisters; ++v) {
    const int m = block_m + 16 * warp + lane / 4 + 8 * ((v >> 1) & 1);          // [N*H*W]
    const int channel = block_n + 8 * (v >> 2) + 2 * (lane % 4) + (v & 1);  // [K]
    if (m >= shape.gemm_m || channel >= shape.k) continue;
    StoreQuantizedOutput(params.quantized, static_cast<int64_t>(m) * shape.k + channel, channel,
                         static_cast<uint32_t>(acc[v]));
  }
}

template <typename Tile, bool kUnsignedSrc>
__global__ void __launch_bounds__(Tile::kThreads, 1)
    QuantizedHopperGemmKernel(const __grid_constant__ HopperQuantizedGemmParams params) {
  CONVOY_DYNAMIC_SHARED(uint8_t, dynamic_smem);
  CONVOY_SHARED_ARRAY(uint64_t, full, [Tile::kStages]);   // copies of stage s landed
  CONVOY_SHARED_ARRAY(uint64_t, empty, [Tile::kStages]);  // consumers done with stage s
  uint8_t* stages = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(dynamic_smem) + 1023) & ~uintptr_t{1023});
  RunHopperBlock<Tile>(
      full, empty, [&] { HopperProduce<int8_t, Tile, false>(params, stages, full, empty); },
      [&](int consumer, int thread) {
        QuantizedHopperConsume<Tile, kUnsignedSrc>(params, stages, full, empty, consumer, thread);
      });
}

template <typename Tile, bool kUnsignedSrc>
cudaError_t LaunchQuantizedHopperGemm(const HopperQuantizedGemmParams& params, cudaStream_t stream) {
  return LaunchHopperTiles<Tile>(QuantizedHopperGemmKernel<Tile, kUnsignedSrc>, params, stream);
}

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_QUANTIZED_CONV2D_HOPPER_KERNEL_CUH_
