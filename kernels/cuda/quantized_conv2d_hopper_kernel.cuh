// The INT8 Hopper (sm_90a) convolutions behind cuda.quantized_conv2d.hopper_gemm_1x1_* and
// cuda.quantized_conv2d.hopper_implicit_gemm_* (quantized_conv2d_hopper.cu): conv2d_hopper_kernel.cuh's
// warp-specialized pipeline (the producer thread's bulk tensor copies into 128-byte swizzled stages on full / empty
// mbarriers, the consumer warpgroups' wgmma main loop, the setmaxnreg split) with 8-bit operands and the integer wgmma:
//
//   acc[m, k] = sum_kk A[m, kk] * Wp[k, kk]               wgmma.mma_async.m64nNk32.s32.{u8|s8}.s8, exact int32
//   y[m, k]   = StoreQuantizedOutput(acc[m, k] + border)   the mma.sync INT8 kernel's epilogue (quantized_conv2d_
//                                                          implicit_gemm_kernel.cuh): + compensation + bias,
//                                                          * multiplier, residual, ReLU, rounding, zero point,
//                                                          saturation, the fused add
//
// m over N*P*Q output pixels, Wp the packed filter ([K][R*S][Cp], Cp = C: C is a multiple of 16 here). kIm2col: A is
// the im2col bulk copy over the NHWC input (tap (r, s) and 128 channels per stage, as the FP16 Hopper conv), else
// (1x1, stride 1, unpadded) the input as a [N*H*W, C] byte matrix in 2D tiles. A 128-byte stage row is 128 channels,
// 4 wgmmas of k32; channels past C read as zeros on both sides (the copies' out-of-bounds fill), so they add nothing.
// Both operands are K-major, as the ISA requires for 8-bit wgmma.
//
// Zero points: the packed compensation is -zero_point * (sum of all of filter k's weights), which assumes every tap
// reads x - zero_point. The im2col copy fills taps outside the image with 0, not the zero point (the mma.sync gather
// writes the zero point there), so those taps contributed 0 where the reference has (zp - zp) * w = 0 and the
// compensation took zp * w off too much: the epilogue adds border = sum over the pixel's outside taps of
// border_sums[k][tap] = zero_point * (sum of filter k's weights of that tap), packed after the filter (null when
// the zero point is 0 or no tap can fall outside).
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
  CUtensorMap a_map;        // im2col 4D over X [N, H, W, C], or 2D over X [N*H*W, C] (box 128 x kM)
  CUtensorMap b_map;        // 3D over the packed filter [K][R*S][Cp] (box 128 x 1 x kN), or 2D over [K, Cp]
  ImplicitGemmShape shape;  // the convolution (gemm_m = N*P*Q, k = K)
  int k_iterations = 0;     // R*S*channel_blocks
  int channel_blocks = 1;   // ceil(C / 128)
  const int32_t* border_sums = nullptr;   // [K][R*S] zero_point * tap weight sums, or null (see above)
  QuantizedImplicitGemmParams quantized;  // what StoreQuantizedOutput reads (y, compensation, multipliers, ...)
};

// What the zero-point compensation took off too much for output pixel m (its taps outside the image), channel k.
__device__ __forceinline__ uint32_t BorderCorrection(const HopperQuantizedGemmParams& params, int m, int channel) {
  const ImplicitGemmShape& shape = params.shape;
  const int pq = m % (shape.p * shape.q);
  const int h0 = (pq / shape.q) * shape.stride_h - shape.pad_h, w0 = (pq % shape.q) * shape.stride_w - shape.pad_w;
  const int32_t* sums = params.border_sums + static_cast<int64_t>(channel) * shape.r * shape.s;  // [R*S]
  uint32_t border = 0;
  for (int r = 0; r < shape.r; ++r) {
    const int h = h0 + r * shape.dilation_h;
    const bool row_inside = h >= 0 && h < shape.h;
    for (int s = 0; s < shape.s; ++s) {
      const int w = w0 + s * shape.dilation_w;
      if (!row_inside || w < 0 || w >= shape.w) border += static_cast<uint32_t>(sums[r * shape.s + s]);
    }
  }
  return border;
}

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
    const int m = block_m + 16 * warp + lane / 4 + 8 * ((v >> 1) & 1);          // [N*P*Q]
    const int channel = block_n + 8 * (v >> 2) + 2 * (lane % 4) + (v & 1);  // [K]
    if (m >= shape.gemm_m || channel >= shape.k) continue;
    uint32_t sum = static_cast<uint32_t>(acc[v]);
    if (params.border_sums != nullptr) sum += BorderCorrection(params, m, channel);
    StoreQuantizedOutput(params.quantized, static_cast<int64_t>(m) * shape.k + channel, channel, sum);
  }
}

template <typename Tile, bool kUnsignedSrc, bool kIm2col>
__global__ void __launch_bounds__(Tile::kThreads, 1)
    QuantizedHopperGemmKernel(const __grid_constant__ HopperQuantizedGemmParams params) {
  CONVOY_DYNAMIC_SHARED(uint8_t, dynamic_smem);
  CONVOY_SHARED_ARRAY(uint64_t, full, [Tile::kStages]);   // copies of stage s landed
  CONVOY_SHARED_ARRAY(uint64_t, empty, [Tile::kStages]);  // consumers done with stage s
  uint8_t* stages = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(dynamic_smem) + 1023) & ~uintptr_t{1023});
  RunHopperBlock<Tile>(
      full, empty, [&] { HopperProduce<int8_t, Tile, kIm2col>(params, stages, full, empty); },
      [&](int consumer, int thread) {
        QuantizedHopperConsume<Tile, kUnsignedSrc>(params, stages, full, empty, consumer, thread);
      });
}

template <typename Tile, bool kUnsignedSrc, bool kIm2col>
cudaError_t LaunchQuantizedHopperGemm(const HopperQuantizedGemmParams& params, cudaStream_t stream) {
  return LaunchHopperTiles<Tile>(QuantizedHopperGemmKernel<Tile, kUnsignedSrc, kIm2col>, params, stream);
}

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_QUANTIZED_CONV2D_HOPPER_KERNEL_CUH_
