// The tensor-core implicit-GEMM kernel shared by the conv2d implicit-GEMM algorithms, the 1x1 conv GEMM and the
// tensor-core GEMM. It computes, for an NHWC convolution with groups == 1,
//
//   Y[m, k] = epilogue( sum_kk A[m, kk] * B[k, kk] ),   m = (n, p, q) in [0, N*P*Q),  kk = (r, s, c) in [0, R*S*C)
//
// where A is gathered from the input on the fly (A[m, kk] = X[n, p*stride - pad + r*dilation, q*... , c], zero
// outside the image) and B is the NHWC filter [K, R, S, C] read as a row-major [K, R*S*C] matrix. A GEMM
// Y[m, n] = A[m, k] * B[n, k]^T is the 1x1 case with H = W = 1.
//
// Structure (CUTLASS's multistage implicit GEMM, written from the PTX ISA):
//   - a block of kWarpsM x kWarpsN warps (2 x 2 = 4, or 2 x 4 / 4 x 2 = 8) computes a kM x kN output tile; each warp
//     a kWarpM x kWarpN tile of 16x8 mma tiles;
//   - the reduction advances kStepBytes (64 or 128 bytes: 32 or 64 FP16/BF16 elements, 16 or 32 FP32) per stage; each
//     thread copies 16-byte chunks of the A and B tiles into shared memory with cp.async (zero-filled past the image
//     border, past K and past R*S*C), kStages deep so that kStages - 1 slices are in flight while one is multiplied;
//   - the gather is incremental: each thread keeps its chunk's reduction index and filter tap (c, r, s) and advances
//     them by one step per stage with adds and compares (the divisions happen once, before the main loop);
//   - fragments come out of shared memory with ldmatrix (rows padded by 16 bytes: conflict-free), double-buffered in
//     registers (the next k16/k8 step's fragments load while the current step's mma.sync run), and go through
//     mma.sync m16n8k16 (FP16/BF16, FP32 accumulate) or m16n8k8 TF32 (FP32 inputs rounded with cvt.rna.tf32);
//   - the epilogue is staged through shared memory: per row of mma tiles the warps write their FP32 accumulators to
//     one of two staging buffers, then every thread takes a 16-byte vector of consecutive output channels of a row and
//     writes it with the fused epilogue (gemm_epilogue.cuh: scale/bias loaded once per thread, residual read and
//     output written with 16-byte coalesced accesses);
//   - split-K (params.partials set): block z walks k-tiles [z * k_tiles_per_split, ...) and writes its raw FP32 sums
//     to partials[z]; the split-K reduce pass (split_k_reduce.cuh) applies the epilogue afterwards.
//
// Requirements (checked by the algorithms' CanImplement): C a multiple of 16 bytes of elements (8 FP16/BF16, 4 FP32),
// 16-byte aligned x and w; N*P*Q, N*H*W and R*S*C below 2^31. kOneByOne kernels also need R = S = 1, stride 1 and no
// padding (then A is X itself, [N*H*W, C]).
#ifndef CONVOY_KERNELS_CUDA_CONV2D_IMPLICIT_GEMM_KERNEL_CUH_
#define CONVOY_KERNELS_CUDA_CONV2D_IMPLICIT_GEMM_KERNEL_CUH_

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/conv2d_common.cuh"
#include "kernels/cuda/gemm_epilogue.cuh"
#include "kernels/cuda/launch_cost_model.h"
#include "kernels/cuda/split_k_reduce.cuh"
#include "kernels/cuda_emulation/cuda_compat.cuh"

namespace convoy::cuda {

// Compile-time tile shape: kM x kN outputs per block of kWarpsM x kWarpsN warps, kStepBytes of reduction per row per
// stage, kStages shared-memory stages; kMinBlocksPerSm goes to __launch_bounds__ (the register budget ptxas must meet,
// and what the emulation assumes for occupancy).
template <int kBlockM, int kBlockN, int kWarpRows, int kWarpColumns, int kReductionStepBytes, int kPipelineStages,
          int kMinBlocks>
struct ImplicitGemmTile {
  static constexpr int kM = kBlockM;
  static constexpr int kN = kBlockN;
  static constexpr int kWarpsM = kWarpRows;
  static constexpr int kWarpsN = kWarpColumns;
  static constexpr int kWarps = kWarpsM * kWarpsN;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kWarpM = kM / kWarpsM;
  static constexpr int kWarpN = kN / kWarpsN;
  static constexpr int kStepBytes = kReductionStepBytes;
  static constexpr int kStages = kPipelineStages;
  static constexpr int kMinBlocksPerSm = kMinBlocks;
  static_assert(kWarpM % 16 == 0 && kWarpN % 16 == 0, "a warp tile is whole 16x16 mma pairs");
  static_assert(kStages >= 2, "the pipeline needs at least two stages");
  static_assert(kStepBytes == 64 || kStepBytes == 128, "a stage row is 4 or 8 16-byte chunks");
};

// The 4-warp tiles (64-byte reduction steps: 32 FP16/BF16 elements) and the 8-warp tiles (128-byte steps: 64
// elements). Registers per thread measured with ptxas -v for sm_90 (FP16) are under each tile's launch-bounds cap.
using ImplicitGemmTile128x128 = ImplicitGemmTile<128, 128, 2, 2, 64, 3, 2>;
using ImplicitGemmTile128x64 = ImplicitGemmTile<128, 64, 2, 2, 64, 3, 3>;
using ImplicitGemmTile64x64 = ImplicitGemmTile<64, 64, 2, 2, 64, 3, 5>;
using ImplicitGemmTile128x256 = ImplicitGemmTile<128, 256, 2, 4, 128, 3, 1>;
using ImplicitGemmTile256x128 = ImplicitGemmTile<256, 128, 4, 2, 128, 3, 1>;

// Run-time shape of one implicit GEMM (NHWC, groups 1), passed to the kernel by value.
struct ImplicitGemmShape {
  int n = 1, h = 1, w = 1, c = 1;  // input [N, H, W, C]
  int k = 1, r = 1, s = 1;         // filter [K, R, S, C]
  int p = 1, q = 1;                // output [N, P, Q, K]
  int pad_h = 0, pad_w = 0;        // top and left padding
  int stride_h = 1, stride_w = 1;
  int dilation_h = 1, dilation_w = 1;
  int gemm_m = 1;  // N * P * Q
  int gemm_k = 1;  // R * S * C
};

template <typename T>
struct ImplicitGemmParams {
  ImplicitGemmShape shape;
  const T* x = nullptr;  // [N, H, W, C]
  const T* w = nullptr;  // [K, R, S, C]
  T* y = nullptr;        // [N, P, Q, K]
  EpilogueOperands<T> epilogue;
  bool vector_store = false;      // y and residual 16-byte aligned, K % kOutputVector<T> == 0
  // Split-K: null, or the FP32 workspace [split][gemm_m][K] this launch's blocks z write their sums into.
  float* partials = nullptr;
  bool partials_vector_ok = false;  // K % 4 == 0 (partials 16-byte aligned: a workspace)
  int k_tiles_per_split = 0;        // main-loop iterations of each blockIdx.z (all of them without split-K)
};

// Reduction elements per main-loop iteration of (T, Tile).
template <typename T, typename Tile>
constexpr int ImplicitGemmStepElements() {
  return Tile::kStepBytes / static_cast<int>(sizeof(T));
}

// Bytes of dynamic shared memory the kernel for (T, Tile) uses: the pipeline stages (the epilogue's two staging
// buffers fit inside them).
template <typename T, typename Tile>
constexpr int ImplicitGemmSharedBytes() {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  constexpr int kRowStride = ImplicitGemmStepElements<T, Tile>() + kVec;
  return Tile::kStages * (Tile::kM + Tile::kN) * kRowStride * static_cast<int>(sizeof(T));
}

// The epilogue's staging: kWarpsM * 16 rows (one row of mma tiles of every warp) of kN FP32 accumulators, the row
// pitch padded by 8 floats (the float2 writes of a half-warp fall in distinct banks).
template <typename Tile>
struct EpilogueStaging {
  static constexpr int kRows = Tile::kWarpsM * 16;
  static constexpr int kPitch = Tile::kN + 8;  // floats
  static constexpr int kFloats = kRows * kPitch;
};

// Effective split factor: the k-tiles are dealt out ceil(k_tiles / split) per block z, so no z is left empty.
constexpr int EffectiveSplitK(int k_tiles, int split) {
  if (split <= 1 || k_tiles <= 1) return 1;
  const int per_split = (k_tiles + split - 1) / split;
  return (k_tiles + per_split - 1) / per_split;
}

template <typename T, typename Tile, bool kOneByOne>
__global__ void __launch_bounds__(Tile::kThreads, Tile::kMinBlocksPerSm)
    ImplicitGemmKernel(ImplicitGemmParams<T> params) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));            // elements per 16-byte chunk
  constexpr int kChunksPerRow = Tile::kStepBytes / 16;              // chunks per stage row
  constexpr int kBlockK = ImplicitGemmStepElements<T, Tile>();      // reduction elements per stage
  constexpr int kRowStride = kBlockK + kVec;                        // shared row pitch, padded by 16 bytes
  constexpr int kMmaK = 2 * kVec;                                   // 16 for FP16/BF16 (m16n8k16), 8 for TF32
  constexpr int kSteps = kBlockK / kMmaK;                           // mma k-steps per stage
  constexpr int kMmaTilesM = Tile::kWarpM / 16;
  constexpr int kMmaTilesN = Tile::kWarpN / 8;
  constexpr int kStageElements = (Tile::kM + Tile::kN) * kRowStride;
  constexpr int kRowsPerPass = Tile::kThreads / kChunksPerRow;
  constexpr int kChunksA = Tile::kM / kRowsPerPass;
  constexpr int kChunksB = Tile::kN / kRowsPerPass;
  static_assert(Tile::kM % kRowsPerPass == 0 && Tile::kN % kRowsPerPass == 0, "whole copy passes");
  // Outside-the-image marker for the rows past N*P*Q: every h computed from it fails the bounds check.
  constexpr int kOutside = -(1 << 29);

  CONVOY_DYNAMIC_SHARED(T, smem);  // [kStages][kM + kN rows][kRowStride]: A rows, then B rows
  const ImplicitGemmShape& shape = params.shape;
  const int tid = threadIdx.x;
  const int lane = tid % 32;
  const int warp_m = (tid / 32) / Tile::kWarpsN, warp_n = (tid / 32) % Tile::kWarpsN;
  const int block_m = blockIdx.x * Tile::kM;  // first GEMM row (output pixel, [N*P*Q]) of the block
  const int block_n = blockIdx.y * Tile::kN;  // first output channel ([K]) of the block
  const int chunk = tid % kChunksPerRow;      // this thread's 16-byte column chunk within a stage row
  const int first_row = tid / kChunksPerRow;  // this thread's first tile row; then every kRowsPerPass

  // The output pixel of each A row this thread copies: image index and top-left input corner ([N, H, W]); for
  // kOneByOne the pixel index itself (or -1 past the end).
  int a_image[kChunksA], a_h0[kChunksA], a_w0[kChunksA];
#pragma unroll
  for (int i = 0; i < kChunksA; ++i) {
    const int m = block_m + first_row + i * kRowsPerPass;  // [N*P*Q]
    const bool valid = m < shape.gemm_m;
    if constexpr (kOneByOne) {
      a_image[i] = valid ? m : -1;
      a_h0[i] = a_w0[i] = 0;
    } else {
      const int mm = valid ? m : 0;
      const int image = mm / (shape.p * shape.q);  // [N]
      const int pq = mm - image * shape.p * shape.q;
      const int p = pq / shape.q, q = pq - p * shape.q;  // [P], [Q]
      a_image[i] = image;
      a_h0[i] = valid ? p * shape.stride_h - shape.pad_h : kOutside;
      a_w0[i] = q * shape.stride_w - shape.pad_w;
    }
  }

  // This block's share of the reduction (all of it without split-K).
  const int k_tiles = (shape.gemm_k + kBlockK - 1) / kBlockK;
  const int k_begin = blockIdx.z * params.k_tiles_per_split;
  const int my_tiles = max(0, min(k_tiles, k_begin + params.k_tiles_per_split) - k_begin);

  // The gather iterator: this thread's reduction index [R*S*C] and its filter tap and channel, advanced by kBlockK
  // per loaded stage (divisions only here).
  int kk = k_begin * kBlockK + chunk * kVec;
  int tap_c = kk, tap_r = 0, tap_s = 0;  // [C], [R], [S]
  if constexpr (!kOneByOne) {
    const int rs = kk / shape.c;
    tap_c = kk - rs * shape.c;
    tap_r = rs / shape.s;
    tap_s = rs - tap_r * shape.s;
  }

  auto load_stage = [&](int stage) {
    T* a_tile = smem + stage * kStageElements;  // [kM][kRowStride]
    T* b_tile = a_tile + Tile::kM * kRowStride;  // [kN][kRowStride]
    const bool k_ok = kk < shape.gemm_k;
#pragma unroll
    for (int i = 0; i < kChunksA; ++i) {
      const int row = first_row + i * kRowsPerPass;
      const T* source = params.x;
      int bytes = 0;
      if constexpr (kOneByOne) {
        if (k_ok && a_image[i] >= 0) {
          source = params.x + static_cast<int64_t>(a_image[i]) * shape.c + tap_c;
          bytes = 16;
        }
      } else {
        const int h = a_h0[i] + tap_r * shape.dilation_h;  // [H]
        const int w = a_w0[i] + tap_s * shape.dilation_w;  // [W]
        if (k_ok && h >= 0 && h < shape.h && w >= 0 && w < shape.w) {
          source = params.x + ((static_cast<int64_t>(a_image[i]) * shape.h + h) * shape.w + w) * shape.c + tap_c;
          bytes = 16;
        }
      }
      CpAsyncCg16(&a_tile[row * kRowStride + chunk * kVec], source, bytes);
    }
#pragma unroll
    for (int i = 0; i < kChunksB; ++i) {
      const int row = first_row + i * kRowsPerPass;
      const int out_channel = block_n + row;  // [K]
      const bool valid = k_ok && out_channel < shape.k;
      const T* source = valid ? params.w + static_cast<int64_t>(out_channel) * shape.gemm_k + kk : params.w;
      CpAsyncCg16(&b_tile[row * kRowStride + chunk * kVec], source, valid ? 16 : 0);
    }
    // Next stage: kBlockK further along [R*S*C]; C is a multiple of kVec, so a chunk never straddles two taps.
    kk += kBlockK;
    tap_c += kBlockK;
    if constexpr (!kOneByOne) {
      while (tap_c >= shape.c) {
        tap_c -= shape.c;
        if (++tap_s == shape.s) {
          tap_s = 0;
          ++tap_r;
        }
      }
    }
  };

  // Fragments of one mma k-step from a stage: A rows of the warp's mma row tiles, B columns of its n8 tiles.
  auto load_fragments = [&](uint32_t (&a_frag)[kMmaTilesM][4], uint32_t (&b_frag)[kMmaTilesN][2], const T* a_tile,
                            const T* b_tile, int k0) {
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
    if constexpr (std::is_same<T, float>::value) {
#pragma unroll
      for (int mi = 0; mi < kMmaTilesM; ++mi) {
#pragma unroll
        for (int e = 0; e < 4; ++e) a_frag[mi][e] = FloatToTf32(__uint_as_float(a_frag[mi][e]));
      }
#pragma unroll
      for (int ni = 0; ni < kMmaTilesN; ++ni) {
#pragma unroll
        for (int e = 0; e < 2; ++e) b_frag[ni][e] = FloatToTf32(__uint_as_float(b_frag[ni][e]));
      }
    }
  };

  float acc[kMmaTilesM][kMmaTilesN][4];
#pragma unroll
  for (int mi = 0; mi < kMmaTilesM; ++mi) {
#pragma unroll
    for (int ni = 0; ni < kMmaTilesN; ++ni) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.0f;
    }
  }

#pragma unroll
  for (int stage = 0; stage < Tile::kStages - 1; ++stage) {
    if (stage < my_tiles) load_stage(stage);
    CpAsyncCommitGroup();  // always commit, so that group i holds k-tile i
  }

  for (int kt = 0; kt < my_tiles; ++kt) {
    CpAsyncWaitGroup<Tile::kStages - 2>();  // k-tile kt has landed (this thread's copies)
    __syncthreads();                        // ... everyone's; and everyone is done with the stage refilled below
    const int next = kt + Tile::kStages - 1;
    if (next < my_tiles) load_stage(next % Tile::kStages);
    CpAsyncCommitGroup();

    const T* a_tile = smem + (kt % Tile::kStages) * kStageElements;  // [kM][kRowStride]
    const T* b_tile = a_tile + Tile::kM * kRowStride;                 // [kN][kRowStride]
    uint32_t a_frag[2][kMmaTilesM][4];
    uint32_t b_frag[2][kMmaTilesN][2];
    load_fragments(a_frag[0], b_frag[0], a_tile, b_tile, 0);
#pragma unroll
    for (int step = 0; step < kSteps; ++step) {
      if (step + 1 < kSteps) load_fragments(a_frag[(step + 1) % 2], b_frag[(step + 1) % 2], a_tile, b_tile,
                                            (step + 1) * kMmaK);
      const int buffer = step % 2;
#pragma unroll
      for (int mi = 0; mi < kMmaTilesM; ++mi) {
#pragma unroll
        for (int ni = 0; ni < kMmaTilesN; ++ni) {
          if constexpr (std::is_same<T, float>::value) {
            MmaM16N8K8Tf32(acc[mi][ni], a_frag[buffer][mi], b_frag[buffer][ni]);
          } else if constexpr (std::is_same<T, __half>::value) {
            MmaM16N8K16F16(acc[mi][ni], a_frag[buffer][mi], b_frag[buffer][ni]);
          } else {
            MmaM16N8K16Bf16(acc[mi][ni], a_frag[buffer][mi], b_frag[buffer][ni]);
          }
        }
      }
    }
  }
  CpAsyncWaitAll();
  __syncthreads();  // every warp is done with the pipeline's shared memory: the staging buffers reuse it

  // Epilogue through shared memory. Accumulator e of an mma tile is row lane/4 (+8 for e >= 2), column 2*(lane%4)
  // (+1 for odd e). Each pass mi stages row tile mi of every warp; then each thread stores 16-byte vectors of
  // kOutputVector<T> channels, always the same column of vectors (kThreads is a multiple of the vectors per row).
  using Staging = EpilogueStaging<Tile>;
  constexpr int V = kOutputVector<T>;
  constexpr int kVectorsPerRow = Tile::kN / V;
  constexpr int kRowsPerIteration = Tile::kThreads / kVectorsPerRow;
  static_assert(Tile::kThreads % kVectorsPerRow == 0, "each thread keeps one column of vectors");
  static_assert(2 * Staging::kFloats * 4 <= ImplicitGemmSharedBytes<T, Tile>(), "staging fits in the pipeline");
  float* staging = reinterpret_cast<float*>(smem);  // [2][Staging::kRows][Staging::kPitch]
  const int vector_column = tid % kVectorsPerRow;
  const int n0 = block_n + vector_column * V;  // [K]
  OutputTarget<T> target;
  target.epilogue = params.epilogue;
  target.y = params.y;
  target.channels = shape.k;
  target.vector_ok = params.vector_store;
  float* partials = params.partials;
  if (partials != nullptr) partials += static_cast<int64_t>(blockIdx.z) * shape.gemm_m * shape.k;
  const ChannelAffine<V> affine = LoadChannelAffine<T, V>(target, n0);  // once per thread (unused by split-K)

#pragma unroll
  for (int mi = 0; mi < kMmaTilesM; ++mi) {
    float* buffer = staging + (mi % 2) * Staging::kFloats;  // [kRows][kPitch]
#pragma unroll
    for (int ni = 0; ni < kMmaTilesN; ++ni) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = warp_m * 16 + lane / 4 + half * 8;                   // [Staging::kRows]
        const int column = warp_n * Tile::kWarpN + ni * 8 + (lane % 4) * 2;  // [kN]
        *reinterpret_cast<float2*>(&buffer[row * Staging::kPitch + column]) =
            make_float2(acc[mi][ni][half * 2], acc[mi][ni][half * 2 + 1]);
      }
    }
    // The other buffer was last read before the previous pass's barrier, so one barrier per pass suffices.
    __syncthreads();
    for (int row = tid / kVectorsPerRow; row < Staging::kRows; row += kRowsPerIteration) {
      const int m = block_m + (row / 16) * Tile::kWarpM + mi * 16 + row % 16;  // [N*P*Q]
      if (m >= shape.gemm_m || n0 >= shape.k) continue;
      float values[V];
      const float* source = &buffer[row * Staging::kPitch + vector_column * V];
#pragma unroll
      for (int j = 0; j < V; j += 4) {
        const float4 v = *reinterpret_cast<const float4*>(source + j);
        values[j] = v.x, values[j + 1] = v.y, values[j + 2] = v.z, values[j + 3] = v.w;
      }
      if (partials != nullptr) {
        StorePartialVector<V>(partials, m, n0, shape.k, params.partials_vector_ok, values);
      } else {
        StoreOutputVector<T, V>(target, m, n0, affine, values);
      }
    }
  }
}

// What the launch-cost model needs about (T, Tile, kOneByOne) with `split_k`: tile, warps, reduction step, shared
// memory, and the registers the emulation assumes (the launch-bounds cap).
template <typename T, typename Tile, bool kOneByOne>
GemmKernelDescription ImplicitGemmDescription(int split_k, const GpuModel& gpu) {
  GemmKernelDescription d;
  d.tile_m = Tile::kM;
  d.tile_n = Tile::kN;
  d.k_step = ImplicitGemmStepElements<T, Tile>();
  d.warps = Tile::kWarps;
  d.warp_tile_m = Tile::kWarpM;
  d.warp_tile_n = Tile::kWarpN;
  d.stages = Tile::kStages;
  d.split_k = split_k;
  d.gathers = !kOneByOne;
  d.resources.threads = Tile::kThreads;
  d.resources.shared_bytes = ImplicitGemmSharedBytes<T, Tile>();
  d.resources.registers_per_thread = LaunchBoundsRegisterCap(Tile::kThreads, Tile::kMinBlocksPerSm, gpu);
  return d;
}

// Resident blocks per SM of the kernel: on a GPU cudaOccupancyMaxActiveBlocksPerMultiprocessor on the compiled
// kernel (its real registers); under the emulation (or if the query fails) the same rules on the device model.
template <typename T, typename Tile, bool kOneByOne>
int ImplicitGemmBlocksPerSm(const GpuModel& gpu) {
  constexpr int kSharedBytes = ImplicitGemmSharedBytes<T, Tile>();
#if defined(CONVOY_CUDA_REAL)
  int blocks = 0;
  const auto kernel = ImplicitGemmKernel<T, Tile, kOneByOne>;
  if ((kSharedBytes <= 48 * 1024 ||
       cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes) == cudaSuccess) &&
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, Tile::kThreads, kSharedBytes) == cudaSuccess) {
    return blocks;
  }
  (void)cudaGetLastError();
#endif
  return OccupancyBlocksPerSm(ImplicitGemmDescription<T, Tile, kOneByOne>(1, gpu).resources, gpu);
}

// Sizes the grid (one block per kM x kN output tile, times the split factor in z) and launches on `stream`; with
// split_k > 1 also the reduce pass, reading `workspace` (at least SplitKWorkspaceBytes(M, K, split_k) bytes,
// 16-byte aligned). Raises the kernel's dynamic shared memory limit first when the tile needs more than 48 KiB (a
// host-side attribute: allowed during graph capture).
template <typename T, typename Tile, bool kOneByOne>
cudaError_t LaunchImplicitGemm(const ImplicitGemmParams<T>& base, int split_k, void* workspace, cudaStream_t stream) {
  constexpr int kSharedBytes = ImplicitGemmSharedBytes<T, Tile>();
  if (kSharedBytes > 48 * 1024) {
    const cudaError_t error = cudaFuncSetAttribute(ImplicitGemmKernel<T, Tile, kOneByOne>,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
    if (error != cudaSuccess) return error;
  }
  ImplicitGemmParams<T> params = base;
  constexpr int kBlockK = ImplicitGemmStepElements<T, Tile>();
  const int k_tiles = (params.shape.gemm_k + kBlockK - 1) / kBlockK;
  const int split = EffectiveSplitK(k_tiles, split_k);
  params.k_tiles_per_split = (k_tiles + split - 1) / split;
  params.partials = split > 1 ? static_cast<float*>(workspace) : nullptr;
  params.partials_vector_ok = params.shape.k % 4 == 0;
  const dim3 grid((params.shape.gemm_m + Tile::kM - 1) / Tile::kM, (params.shape.k + Tile::kN - 1) / Tile::kN, split);
  const cudaError_t launched = CONVOY_LAUNCH_KERNEL((ImplicitGemmKernel<T, Tile, kOneByOne>), grid,
                                                    dim3(Tile::kThreads), kSharedBytes, stream, params);
  if (launched != cudaSuccess || split == 1) return launched;
  OutputTarget<T> target;
  target.epilogue = params.epilogue;
  target.y = params.y;
  target.channels = params.shape.k;
  target.vector_ok = params.vector_store;
  return LaunchSplitKReduce<T>(params.partials, split, params.shape.gemm_m, target, stream);
}

// The explicit instances live in conv2d_implicit_gemm_instances_{f16,bf16,tf32}_{general,1x1}.cu (compiled in
// parallel); files that launch them include this header and see these declarations instead of instantiating the
// kernels again.
#define CONVOY_IMPLICIT_GEMM_INSTANCE(PREFIX, T, TILE, ONE_BY_ONE)                                                 \
  PREFIX template cudaError_t LaunchImplicitGemm<T, TILE, ONE_BY_ONE>(const ImplicitGemmParams<T>&, int, void*,   \
                                                                      cudaStream_t);                              \
  PREFIX template int ImplicitGemmBlocksPerSm<T, TILE, ONE_BY_ONE>(const GpuModel&);
#define CONVOY_IMPLICIT_GEMM_INSTANCES_OF(PREFIX, T, ONE_BY_ONE)                 \
  CONVOY_IMPLICIT_GEMM_INSTANCE(PREFIX, T, ImplicitGemmTile128x128, ONE_BY_ONE) \
  CONVOY_IMPLICIT_GEMM_INSTANCE(PREFIX, T, ImplicitGemmTile128x64, ONE_BY_ONE)  \
  CONVOY_IMPLICIT_GEMM_INSTANCE(PREFIX, T, ImplicitGemmTile64x64, ONE_BY_ONE)   \
  CONVOY_IMPLICIT_GEMM_INSTANCE(PREFIX, T, ImplicitGemmTile128x256, ONE_BY_ONE) \
  CONVOY_IMPLICIT_GEMM_INSTANCE(PREFIX, T, ImplicitGemmTile256x128, ONE_BY_ONE)

#if !defined(CONVOY_IMPLICIT_GEMM_DEFINE_INSTANCES)
CONVOY_IMPLICIT_GEMM_INSTANCES_OF(extern, __half, false)
CONVOY_IMPLICIT_GEMM_INSTANCES_OF(extern, __half, true)
CONVOY_IMPLICIT_GEMM_INSTANCES_OF(extern, __nv_bfloat16, false)
CONVOY_IMPLICIT_GEMM_INSTANCES_OF(extern, __nv_bfloat16, true)
CONVOY_IMPLICIT_GEMM_INSTANCES_OF(extern, float, false)
CONVOY_IMPLICIT_GEMM_INSTANCES_OF(extern, float, true)
#endif

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_CONV2D_IMPLICIT_GEMM_KERNEL_CUH_
