// The INT8 tensor-core implicit-GEMM convolution behind the cuda.quantized_conv2d.implicit_gemm_* algorithms
// (quantized_conv2d_implicit_gemm.cu). For an NHWC QuantizedConv2dProblem it computes, per group g and output pixel m:
//
//   acc[m, k] = sum_kk A[m, kk] * B[k, kk] + compensation[k]        (exact, int32)
//   y[m, k]   = QuantizedEpilogue(acc[m, k] + bias[k])               (what reference::QuantizedConv2d computes)
//
// with kk = (r, s, c) over R x S x Cp, Cp = C/groups rounded up to 16 (the packed filter's channel pitch).
//
// Zero points: the activations go into the mma as they are, u8 x s8 (mma .s32.u8.s8.s32) or s8 x s8, not shifted.
// sum (x - zp) * w = sum x * w - zp * sum w, so the packed filter carries compensation[k] = -zp * sum of filter k's
// weights; a tap outside the image must then contribute (zp - zp) * w = 0, so the gather writes the zero point
// there (not 0) and the compensation stays one number per output channel, borders included. Channels past C/groups
// have zero weights (the packing pads them), so whatever A holds there adds nothing. The int32 arithmetic wraps
// (mma without .satfinite, the additions on unsigned), so the result is exact whenever the true sum fits in 32 bits
// (|sum| < 2^31: R*S*C/groups below 2^31 / (255 * 128), about 65000).
//
// The mainloop is conv2d_implicit_gemm_kernel.cuh's (the same tiles, ImplicitGemmTile, cp.async stages, ldmatrix
// fragments double-buffered in registers) with 8-bit elements: a 16-byte chunk is 16 channels, a 64-byte stage row
// 64 reduction elements = two m16n8k32 steps. It is a separate kernel rather than a new element type of that
// template because everything around the mainloop differs: the gather fills borders with the zero point and has a
// bytewise form for channel counts that are not whole 16-byte chunks (the 3-channel stem, grouped and depthwise
// layers), groups run as blockIdx.z, the accumulators are int32, the epilogue requantizes into another type than the
// input's, and there is no split-K (its partials are FP32); folding that in would touch the FP16/BF16/TF32 kernels'
// code paths, which only a GPU run can re-verify.
//
// The epilogue stages the int32 accumulators through shared memory (as the FP16 kernel stages its floats); each
// thread then takes 4 consecutive output channels of a row and applies, per element and in this order, in FP32 with
// explicitly rounded operations (no FMA contraction, matching the CPU reference bit for bit):
//   v = float(acc + bias) * scale[k];  v = v + residual_scale * (residual - residual_zero_point);  v = max(v, 0);
//   quantized outputs: q = clamp(rint(v) + dst_zero_point, qmin, qmax) (rint: half to even);
//   a fused residual add (QuantizedConv2dProblem::fused_add): q, in the convolution's own 8-bit type, is one operand
//   of the add and the residual byte at the same position the other; y = the add's result in its output type
//   (quantized_add_arithmetic.cuh, bit for bit cpu.quantized_add.elementwise). y may be the residual's buffer: each
//   element reads its residual before writing.
//
// Template parameters: the tile; kUnsignedSrc (u8 activations, else s8); kVectorGather (16-byte cp.async copies of
// the input: needs C and C/groups multiples of 16 and x 16-byte aligned) or the bytewise gather (any C).
#ifndef CONVOY_KERNELS_CUDA_QUANTIZED_CONV2D_IMPLICIT_GEMM_KERNEL_CUH_
#define CONVOY_KERNELS_CUDA_QUANTIZED_CONV2D_IMPLICIT_GEMM_KERNEL_CUH_

#include <cstdint>

#include "kernels/cuda/conv2d_implicit_gemm_kernel.cuh"
#include "kernels/cuda/launch_cost_model.h"
#include "kernels/cuda/quantized_add_arithmetic.cuh"
#include "kernels/cuda_emulation/cuda_compat.cuh"

namespace convoy::cuda {

// The output element type of the INT8 epilogue.
enum class QuantizedOutput : int { kUInt8 = 0, kInt8 = 1, kFloat32 = 2 };

// Run-time shape and operands of one INT8 implicit GEMM, passed by value.
struct QuantizedImplicitGemmParams {
  int n = 1, h = 1, w = 1, c = 1;  // input [N, H, W, C]
  int k = 1, r = 1, s = 1;         // filter [K, R, S, C/groups]; output [N, P, Q, K]
  int p = 1, q = 1;
  int pad_h = 0, pad_w = 0;
  int stride_h = 1, stride_w = 1;
  int dilation_h = 1, dilation_w = 1;
  int c_group = 1;         // C / groups: the channels one output channel reads
  int c_padded = 16;       // c_group rounded up to 16: the packed filter's channel pitch
  int k_group = 1;         // K / groups: the output channels of one group (blockIdx.z)
  int gemm_m = 1;          // N * P * Q
  int gemm_k = 16;         // R * S * c_padded
  const void* x = nullptr;               // [N, H, W, C] u8 or s8
  const int8_t* filter = nullptr;        // packed [K, R, S, c_padded], 16-byte aligned
  const int32_t* compensation = nullptr; // [K]: -zero_point * sum of filter k
  const int32_t* bias = nullptr;         // [K] or null
  const float* scale = nullptr;          // [K]
  const void* residual = nullptr;        // [N, P, Q, K] of the output type, or null
  void* y = nullptr;                     // [N, P, Q, K]
  QuantizedOutput output = QuantizedOutput::kUInt8;
  int src_zero_point = 0;     // written for taps outside the image
  int dst_zero_point = 0;
  bool relu = false;
  float residual_scale = 1.0f;
  int residual_zero_point = 0;
  // A fused add: 0 none, 1 the convolution is operand a, 2 operand b. Then `conv_output` is the convolution's own
  // 8-bit type (rounded and saturated into it first), `add_operand` the other operand [N, P, Q, K] (UINT8 when
  // add_operand_unsigned, else INT8), and `output` the add's.
  int fused_add = 0;
  QuantizedOutput conv_output = QuantizedOutput::kUInt8;
  const void* add_operand = nullptr;
  bool add_operand_unsigned = true;
  QuantizedAddConstants add;
};

// Bytes of dynamic shared memory of the INT8 kernel for Tile: the pipeline stages (the epilogue's staging fits).
template <typename Tile>
constexpr int QuantizedImplicitGemmSharedBytes() {
  return Tile::kStages * (Tile::kM + Tile::kN) * (Tile::kStepBytes + 16);
}

// One 16-byte chunk of 8-bit values with each byte `value`.
__device__ __forceinline__ uint4 ReplicatedBytes(int value) {
  const uint32_t word = (static_cast<uint32_t>(value) & 0xFFu) * 0x01010101u;
  return make_uint4(word, word, word, word);
}

// The epilogue of one output element (see the file comment) from its exact sum of (x - src_zero_point) * w (mod
// 2^32); y_offset indexes y and the residual. The mma.sync and wgmma kernels reach it through StoreQuantizedOutput,
// the direct kernel (quantized_conv2d_simt.cu), which subtracts the zero point as it sums, directly.
__device__ __forceinline__ void StoreQuantizedSum(const QuantizedImplicitGemmParams& params, int64_t y_offset,
                                                  int channel, uint32_t sum) {
  uint32_t total = sum;
  if (params.bias != nullptr) total += static_cast<uint32_t>(params.bias[channel]);
  float v = __fmul_rn(__int2float_rn(static_cast<int32_t>(total)), params.scale[channel]);
  if (params.residual != nullptr) {
    float r;
    if (params.output == QuantizedOutput::kUInt8) {
      r = static_cast<float>(static_cast<const uint8_t*>(params.residual)[y_offset]);
    } else if (params.output == QuantizedOutput::kInt8) {
      r = static_cast<float>(static_cast<const int8_t*>(params.residual)[y_offset]);
    } else {
      r = static_cast<const float*>(params.residual)[y_offset];
    }
    v = __fadd_rn(v, __fmul_rn(params.residual_scale, __fsub_rn(r, static_cast<float>(params.residual_zero_point))));
  }
  if (params.relu && v < 0.0f) v = 0.0f;
  if (params.output == QuantizedOutput::kFloat32) {
    static_cast<float*>(params.y)[y_offset] = v;
    return;
  }
  const QuantizedOutput conv_output = params.fused_add == 0 ? params.output : params.conv_output;
  const float qmin = conv_output == QuantizedOutput::kUInt8 ? 0.0f : -128.0f;
  const float qmax = conv_output == QuantizedOutput::kUInt8 ? 255.0f : 127.0f;
  float quantized = __fadd_rn(rintf(v), static_cast<float>(params.dst_zero_point));
  quantized = quantized < qmin ? qmin : quantized;
  quantized = quantized > qmax ? qmax : quantized;
  if (params.fused_add != 0) {
    const float other = params.add_operand_unsigned
                            ? static_cast<float>(static_cast<const uint8_t*>(params.add_operand)[y_offset])
                            : static_cast<float>(static_cast<const int8_t*>(params.add_operand)[y_offset]);
    quantized = params.fused_add == 1 ? QuantizedAddValue(quantized, other, params.add)
                                      : QuantizedAddValue(other, quantized, params.add);
  }
  if (params.output == QuantizedOutput::kUInt8) {
    static_cast<uint8_t*>(params.y)[y_offset] = static_cast<uint8_t>(static_cast<int>(quantized));
  } else {
    static_cast<int8_t*>(params.y)[y_offset] = static_cast<int8_t>(static_cast<int>(quantized));
  }
}

// The same from a sum of x * w over the packed filter: the zero point comes in through the compensation.
__device__ __forceinline__ void StoreQuantizedOutput(const QuantizedImplicitGemmParams& params, int64_t y_offset,
                                                     int channel, uint32_t acc) {
  StoreQuantizedSum(params, y_offset, channel, acc + static_cast<uint32_t>(params.compensation[channel]));
}

template <typename Tile, bool kUnsignedSrc, bool kVectorGather>
__global__ void __launch_bounds__(Tile::kThreads, Tile::kMinBlocksPerSm)
    QuantizedImplicitGemmKernel(QuantizedImplicitGemmParams params) {
  constexpr int kVec = 16;                             // 8-bit elements per 16-byte chunk
  constexpr int kChunksPerRow = Tile::kStepBytes / 16;  // chunks per stage row
  constexpr int kBlockK = Tile::kStepBytes;            // reduction elements per stage
  constexpr int kRowStride = kBlockK + kVec;           // shared row pitch in bytes, padded by 16 (no bank conflicts)
  constexpr int kMmaK = 32;                            // m16n8k32
  constexpr int kSteps = kBlockK / kMmaK;              // mma k-steps per stage
  constexpr int kMmaTilesM = Tile::kWarpM / 16;
  constexpr int kMmaTilesN = Tile::kWarpN / 8;
  constexpr int kStageBytes = (Tile::kM + Tile::kN) * kRowStride;
  constexpr int kRowsPerPass = Tile::kThreads / kChunksPerRow;
  constexpr int kChunksA = Tile::kM / kRowsPerPass;
  constexpr int kChunksB = Tile::kN / kRowsPerPass;
  static_assert(Tile::kM % kRowsPerPass == 0 && Tile::kN % kRowsPerPass == 0, "whole copy passes");
  static_assert(kBlockK % kMmaK == 0, "whole mma k-steps per stage");
  constexpr int kOutside = -(1 << 29);  // top row of the GEMM rows past N*P*Q: fails every bounds check

  CONVOY_DYNAMIC_SHARED(uint8_t, smem);  // [kStages][kM + kN rows][kRowStride]: A rows, then B rows
  const QuantizedImplicitGemmParams& shape = params;
  const int tid = threadIdx.x;
  const int lane = tid % 32;
  const int warp_m = (tid / 32) / Tile::kWarpsN, warp_n = (tid / 32) % Tile::kWarpsN;
  const int block_m = blockIdx.x * Tile::kM;  // first GEMM row (output pixel, [N*P*Q]) of the block
  const int block_n = blockIdx.y * Tile::kN;  // first output channel of the block within its group ([K/groups])
  const int group = blockIdx.z;               // [groups]
  const int chunk = tid % kChunksPerRow;
  const int first_row = tid / kChunksPerRow;
  const uint8_t* x = static_cast<const uint8_t*>(params.x) + group * shape.c_group;  // the group's first channel
  const int8_t* filter = params.filter + static_cast<int64_t>(group) * shape.k_group * shape.gemm_k;  // [K/g][gemm_k]
  const uint4 fill = ReplicatedBytes(shape.src_zero_point);

  int a_image[kChunksA], a_h0[kChunksA], a_w0[kChunksA];
#pragma unroll
  for (int i = 0; i < kChunksA; ++i) {
    const int m = block_m + first_row + i * kRowsPerPass;  // [N*P*Q]
    const bool valid = m < shape.gemm_m;
    const int mm = valid ? m : 0;
    const int image = mm / (shape.p * shape.q);  // [N]
    const int pq = mm - image * shape.p * shape.q;
    const int p = pq / shape.q, q = pq - p * shape.q;  // [P], [Q]
    a_image[i] = image;
    a_h0[i] = valid ? p * shape.stride_h - shape.pad_h : kOutside;
    a_w0[i] = q * shape.stride_w - shape.pad_w;
  }

  // The gather iterator: this thread's reduction index [R*S*Cp] and its tap (c in [Cp], r, s).
  int kk = chunk * kVec;
  const int first_tap = kk / shape.c_padded;
  int tap_c = kk - first_tap * shape.c_padded;
  int tap_r = first_tap / shape.s;
  int tap_s = first_tap - tap_r * shape.s;

  auto load_stage = [&](int stage) {
    uint8_t* a_tile = smem + stage * kStageBytes;     // [kM][kRowStride]
    uint8_t* b_tile = a_tile + Tile::kM * kRowStride;  // [kN][kRowStride]
    const bool k_ok = kk < shape.gemm_k;
#pragma unroll
    for (int i = 0; i < kChunksA; ++i) {
      const int row = first_row + i * kRowsPerPass;
      uint8_t* destination = &a_tile[row * kRowStride + chunk * kVec];
      const int h = a_h0[i] + tap_r * shape.dilation_h;  // [H]
      const int wi = a_w0[i] + tap_s * shape.dilation_w;  // [W]
      const bool inside = k_ok && h >= 0 && h < shape.h && wi >= 0 && wi < shape.w;
      const int64_t pixel = (static_cast<int64_t>(a_image[i]) * shape.h + h) * shape.w + wi;  // [N*H*W]
      if constexpr (kVectorGather) {
        if (inside) {
          CpAsyncCg16(destination, x + pixel * shape.c + tap_c, 16);
        } else {
          *reinterpret_cast<uint4*>(destination) = fill;
        }
      } else {
        uint32_t words[4];
#pragma unroll
        for (int word = 0; word < 4; ++word) {
          uint32_t packed = 0;
#pragma unroll
          for (int byte = 0; byte < 4; ++byte) {
            const int channel = tap_c + 4 * word + byte;  // [Cp]
            uint32_t value = fill.x & 0xFFu;
            if (inside) value = channel < shape.c_group ? x[pixel * shape.c + channel] : 0u;
            packed |= value << (8 * byte);
          }
          words[word] = packed;
        }
        *reinterpret_cast<uint4*>(destination) = make_uint4(words[0], words[1], words[2], words[3]);
      }
    }
#pragma unroll
    for (int i = 0; i < kChunksB; ++i) {
      const int row = first_row + i * kRowsPerPass;
      const int out_channel = block_n + row;  // [K/groups]
      const bool valid = k_ok && out_channel < shape.k_group;
      const int8_t* source = valid ? filter + static_cast<int64_t>(out_channel) * shape.gemm_k + kk : filter;
      CpAsyncCg16(&b_tile[row * kRowStride + chunk * kVec], source, valid ? 16 : 0);
    }
    // Next stage: kBlockK further along [R*S*Cp]; Cp is a multiple of 16, so a chunk never straddles two taps.
    kk += kBlockK;
    tap_c += kBlockK;
    while (tap_c >= shape.c_padded) {
      tap_c -= shape.c_padded;
      if (++tap_s == shape.s) {
        tap_s = 0;
        ++tap_r;
      }
    }
  };

  // Fragments of one m16n8k32 step: ldmatrix moves 16-byte rows, so register i of lane 4g + t holds bytes 4t..4t+3
  // of row g of matrix i, which is the 8-bit fragment layout (A: rows +8 for odd i, k +16 for i >= 2; B: k +16).
  auto load_fragments = [&](uint32_t (&a_frag)[kMmaTilesM][4], uint32_t (&b_frag)[kMmaTilesN][2],
                            const uint8_t* a_tile, const uint8_t* b_tile, int k0) {
#pragma unroll
    for (int mi = 0; mi < kMmaTilesM; ++mi) {
      const int row = warp_m * Tile::kWarpM + mi * 16 + lane % 16;  // [kM]
      LdMatrixX4(a_frag[mi], &a_tile[row * kRowStride + k0 + (lane / 16) * kVec]);
    }
#pragma unroll
    for (int ni = 0; ni < kMmaTilesN; ni += 2) {
      const int row = warp_n * Tile::kWarpN + ni * 8 + (lane / 16) * 8 + lane % 8;  // [kN]
      uint32_t pair[4];
      LdMatrixX4(pair, &b_tile[row * kRowStride + k0 + ((lane / 8) % 2) * kVec]);
      b_frag[ni][0] = pair[0];
      b_frag[ni][1] = pair[1];
      b_frag[ni + 1][0] = pair[2];
      b_frag[ni + 1][1] = pair[3];
    }
  };

  int32_t acc[kMmaTilesM][kMmaTilesN][4];
#pragma unroll
  for (int mi = 0; mi < kMmaTilesM; ++mi) {
#pragma unroll
    for (int ni = 0; ni < kMmaTilesN; ++ni) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0;
    }
  }

  const int k_tiles = (shape.gemm_k + kBlockK - 1) / kBlockK;
#pragma unroll
  for (int stage = 0; stage < Tile::kStages - 1; ++stage) {
    if (stage < k_tiles) load_stage(stage);
    CpAsyncCommitGroup();  // always commit, so that group i holds k-tile i
  }

  for (int kt = 0; kt < k_tiles; ++kt) {
    CpAsyncWaitGroup<Tile::kStages - 2>();  // k-tile kt has landed (this thread's copies)
    __syncthreads();                        // ... everyone's (and their plain stores); the stage below is free
    const int next = kt + Tile::kStages - 1;
    if (next < k_tiles) load_stage(next % Tile::kStages);
    CpAsyncCommitGroup();

    const uint8_t* a_tile = smem + (kt % Tile::kStages) * kStageBytes;  // [kM][kRowStride]
    const uint8_t* b_tile = a_tile + Tile::kM * kRowStride;              // [kN][kRowStride]
    uint32_t a_frag[2][kMmaTilesM][4];
    uint32_t b_frag[2][kMmaTilesN][2];
    load_fragments(a_frag[0], b_frag[0], a_tile, b_tile, 0);
#pragma unroll
    for (int step = 0; step < kSteps; ++step) {
      if (step + 1 < kSteps) {
        load_fragments(a_frag[(step + 1) % 2], b_frag[(step + 1) % 2], a_tile, b_tile, (step + 1) * kMmaK);
      }
      const int buffer = step % 2;
#pragma unroll
      for (int mi = 0; mi < kMmaTilesM; ++mi) {
#pragma unroll
        for (int ni = 0; ni < kMmaTilesN; ++ni) {
          if constexpr (kUnsignedSrc) {
            MmaM16N8K32U8S8(acc[mi][ni], a_frag[buffer][mi], b_frag[buffer][ni]);
          } else {
            MmaM16N8K32S8(acc[mi][ni], a_frag[buffer][mi], b_frag[buffer][ni]);
          }
        }
      }
    }
  }
  CpAsyncWaitAll();
  __syncthreads();  // every warp is done with the pipeline's shared memory: the staging buffers reuse it

  // Epilogue through shared memory, as in the FP16 kernel: pass mi stages row tile mi of every warp (accumulator e
  // of an mma tile is row lane/4 (+8 for e >= 2), column 2*(lane%4) (+1 for odd e)); each thread then requantizes 4
  // consecutive channels of a staged row.
  using Staging = EpilogueStaging<Tile>;
  constexpr int V = 4;
  constexpr int kVectorsPerRow = Tile::kN / V;
  constexpr int kRowsPerIteration = Tile::kThreads / kVectorsPerRow;
  static_assert(Tile::kThreads % kVectorsPerRow == 0, "each thread keeps one column of vectors");
  static_assert(2 * Staging::kFloats * 4 <= QuantizedImplicitGemmSharedBytes<Tile>(), "staging fits in the pipeline");
  int32_t* staging = reinterpret_cast<int32_t*>(smem);  // [2][Staging::kRows][Staging::kPitch]
  const int vector_column = tid % kVectorsPerRow;
  const int n0 = block_n + vector_column * V;  // [K/groups]

#pragma unroll
  for (int mi = 0; mi < kMmaTilesM; ++mi) {
    int32_t* buffer = staging + (mi % 2) * Staging::kFloats;  // [kRows][kPitch]
#pragma unroll
    for (int ni = 0; ni < kMmaTilesN; ++ni) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = warp_m * 16 + lane / 4 + half * 8;                   // [Staging::kRows]
        const int column = warp_n * Tile::kWarpN + ni * 8 + (lane % 4) * 2;  // [kN]
        *reinterpret_cast<int2*>(&buffer[row * Staging::kPitch + column]) =
            make_int2(acc[mi][ni][half * 2], acc[mi][ni][half * 2 + 1]);
      }
    }
    __syncthreads();  // the other buffer was last read before the previous pass's barrier
    for (int row = tid / kVectorsPerRow; row < Staging::kRows; row += kRowsPerIteration) {
      const int m = block_m + (row / 16) * Tile::kWarpM + mi * 16 + row % 16;  // [N*P*Q]
      if (m >= shape.gemm_m) continue;
      const int4 values = *reinterpret_cast<const int4*>(&buffer[row * Staging::kPitch + vector_column * V]);
      const int32_t lanes[V] = {values.x, values.y, values.z, values.w};
#pragma unroll
      for (int j = 0; j < V; ++j) {
        if (n0 + j >= shape.k_group) break;
        const int channel = group * shape.k_group + n0 + j;  // [K]
        StoreQuantizedOutput(params, static_cast<int64_t>(m) * shape.k + channel, channel,
                             static_cast<uint32_t>(lanes[j]));
      }
    }
  }
}

// What the launch-cost model needs about the kernel for Tile (the mainloop is the FP16 kernel's with 1-byte elements).
template <typename Tile>
GemmKernelDescription QuantizedImplicitGemmDescription(const GpuModel& gpu) {
  GemmKernelDescription d;
  d.tile_m = Tile::kM;
  d.tile_n = Tile::kN;
  d.k_step = Tile::kStepBytes;
  d.warps = Tile::kWarps;
  d.warp_tile_m = Tile::kWarpM;
  d.warp_tile_n = Tile::kWarpN;
  d.stages = Tile::kStages;
  d.gathers = true;
  d.resources.threads = Tile::kThreads;
  d.resources.shared_bytes = QuantizedImplicitGemmSharedBytes<Tile>();
  d.resources.registers_per_thread = LaunchBoundsRegisterCap(Tile::kThreads, Tile::kMinBlocksPerSm, gpu);
  return d;
}

// Sizes the grid (kM x kN output tiles of each group, groups in z) and launches on `stream`, raising the kernel's
// dynamic shared memory limit first when it needs more than 48 KiB.
template <typename Tile, bool kUnsignedSrc, bool kVectorGather>
cudaError_t LaunchQuantizedImplicitGemm(const QuantizedImplicitGemmParams& params, int groups, cudaStream_t stream) {
  constexpr int kSharedBytes = QuantizedImplicitGemmSharedBytes<Tile>();
  const auto kernel = QuantizedImplicitGemmKernel<Tile, kUnsignedSrc, kVectorGather>;
  if (kSharedBytes > 48 * 1024) {
    const cudaError_t error = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
    if (error != cudaSuccess) return error;
  }
  const dim3 grid((params.gemm_m + Tile::kM - 1) / Tile::kM, (params.k_group + Tile::kN - 1) / Tile::kN, groups);
  return CONVOY_LAUNCH_KERNEL(kernel, grid, dim3(Tile::kThreads), kSharedBytes, stream, params);
}

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_QUANTIZED_CONV2D_IMPLICIT_GEMM_KERNEL_CUH_
