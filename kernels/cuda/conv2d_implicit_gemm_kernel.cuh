// The tensor-core implicit-GEMM mainloop shared by the conv2d implicit-GEMM algorithms, the 1x1 conv GEMM and the
// tensor-core GEMM. It computes, for an NHWC convolution with groups == 1,
//
//   Y[m, k] = epilogue( sum_kk A[m, kk] * B[k, kk] ),   m = (n, p, q) in [0, N*P*Q),  kk = (r, s, c) in [0, R*S*C)
//
// where A is gathered from the input on the fly (A[m, kk] = X[n, p*stride - pad + r*dilation, q*... , c], zero
// outside the image) and B is the NHWC filter [K, R, S, C] read as a row-major [K, R*S*C] matrix. A GEMM
// Y[m, n] = A[m, k] * B[n, k]^T is the 1x1 case with H = W = 1.
//
// Structure (CUTLASS's multistage implicit GEMM, written from the PTX ISA):
//   - a block of 4 warps (2 x 2) computes a kM x kN output tile; each warp a (kM/2) x (kN/2) tile of 16x8 mma tiles;
//   - the reduction advances 64 bytes at a time (32 FP16/BF16 or 16 FP32 elements); each thread copies 16-byte
//     chunks of A and B tiles into shared memory with cp.async (zero-filled past the image border, past K and past
//     R*S*C), kStages deep so that kStages - 1 slices are in flight while one is multiplied;
//   - fragments come out of shared memory with ldmatrix (rows padded by 16 bytes: conflict-free), and go through
//     mma.sync m16n8k16 (FP16/BF16, FP32 accumulate) or m16n8k8 TF32 (FP32 inputs rounded with cvt.rna.tf32);
//   - the epilogue (scale, bias, residual, activation) is applied to the accumulators in registers, and each pair of
//     adjacent output channels is written with one store.
//
// Requirements (checked by the algorithms' CanImplement): C a multiple of 16 bytes of elements (8 FP16/BF16, 4 FP32),
// K even, 16-byte aligned x and w, y aligned to two elements (8 bytes FP32, 4 FP16/BF16), residual 4-byte aligned.
// kOneByOne kernels also need R = S = 1, stride 1 and no padding (then A is X itself, [N*H*W, C]).
#ifndef CONVOY_KERNELS_CUDA_CONV2D_IMPLICIT_GEMM_KERNEL_CUH_
#define CONVOY_KERNELS_CUDA_CONV2D_IMPLICIT_GEMM_KERNEL_CUH_

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/conv2d_common.cuh"
#include "kernels/cuda_emulation/cuda_compat.cuh"

namespace convoy::cuda {

// Compile-time tile shape: kM x kN outputs per block of 4 warps, kStages shared-memory stages.
template <int kBlockM, int kBlockN, int kPipelineStages>
struct ImplicitGemmTile {
  static constexpr int kM = kBlockM;
  static constexpr int kN = kBlockN;
  static constexpr int kStages = kPipelineStages;
  static constexpr int kThreads = 128;
  static constexpr int kWarpM = kM / 2;  // warps are arranged 2 x 2
  static constexpr int kWarpN = kN / 2;
  static_assert(kWarpM % 16 == 0 && kWarpN % 16 == 0, "a warp tile is whole 16x16 mma pairs");
  static_assert(kStages >= 2, "the pipeline needs at least two stages");
};

using ImplicitGemmTile128x128 = ImplicitGemmTile<128, 128, 3>;
using ImplicitGemmTile128x64 = ImplicitGemmTile<128, 64, 3>;
using ImplicitGemmTile64x64 = ImplicitGemmTile<64, 64, 3>;

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
};

// Bytes of dynamic shared memory the kernel for (T, Tile) uses.
template <typename T, typename Tile>
constexpr int ImplicitGemmSharedBytes() {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  constexpr int kRowStride = 4 * kVec + kVec;
  return Tile::kStages * (Tile::kM + Tile::kN) * kRowStride * static_cast<int>(sizeof(T));
}

template <typename T, typename Tile, bool kOneByOne>
__global__ void __launch_bounds__(128) ImplicitGemmKernel(ImplicitGemmParams<T> params) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte chunk
  constexpr int kBlockK = 4 * kVec;                        // reduction elements per stage (64 bytes per row)
  constexpr int kRowStride = kBlockK + kVec;               // shared row pitch, padded by 16 bytes
  constexpr int kMmaK = 2 * kVec;                          // 16 for FP16/BF16 (m16n8k16), 8 for TF32 (m16n8k8)
  constexpr int kMmaTilesM = Tile::kWarpM / 16;
  constexpr int kMmaTilesN = Tile::kWarpN / 8;
  constexpr int kStageElements = (Tile::kM + Tile::kN) * kRowStride;
  constexpr int kRowsPerPass = Tile::kThreads / 4;  // 4 chunks per 64-byte row
  constexpr int kChunksA = Tile::kM / kRowsPerPass;
  constexpr int kChunksB = Tile::kN / kRowsPerPass;

  CONVOY_DYNAMIC_SHARED(T, smem);  // [kStages][kM + kN rows][kRowStride]: A rows, then B rows
  const ImplicitGemmShape& shape = params.shape;
  const int tid = threadIdx.x;
  const int lane = tid % 32;
  const int warp_m = (tid / 32) / 2, warp_n = (tid / 32) % 2;
  const int block_m = blockIdx.x * Tile::kM;  // first GEMM row (output pixel, [N*P*Q]) of the block
  const int block_n = blockIdx.y * Tile::kN;  // first output channel ([K]) of the block
  const int chunk = tid % 4;                  // this thread's 16-byte column chunk within a 64-byte row
  const int first_row = tid / 4;              // this thread's first tile row; then every kRowsPerPass

  // The output pixel of each A row this thread copies: image index and top-left input corner ([N, H, W]).
  int a_image[kChunksA], a_h0[kChunksA], a_w0[kChunksA];
  int64_t a_pixel[kChunksA];  // kOneByOne: element offset of the row in X viewed as [N*H*W, C]
  bool a_valid[kChunksA];
#pragma unroll
  for (int i = 0; i < kChunksA; ++i) {
    const int m = block_m + first_row + i * kRowsPerPass;  // [N*P*Q]
    a_valid[i] = m < shape.gemm_m;
    const int mm = a_valid[i] ? m : 0;
    const int image = mm / (shape.p * shape.q);  // [N]
    const int pq = mm - image * shape.p * shape.q;
    const int p = pq / shape.q, q = pq - p * shape.q;  // [P], [Q]
    a_image[i] = image;
    a_h0[i] = p * shape.stride_h - shape.pad_h;
    a_w0[i] = q * shape.stride_w - shape.pad_w;
    a_pixel[i] = static_cast<int64_t>(mm) * shape.c;
  }

  auto load_stage = [&](int stage, int k_tile) {
    T* a_tile = smem + stage * kStageElements;  // [kM][kRowStride]
    T* b_tile = a_tile + Tile::kM * kRowStride;  // [kN][kRowStride]
    const int kk = k_tile * kBlockK + chunk * kVec;  // reduction index [R*S*C] of this thread's chunks
    const bool k_ok = kk < shape.gemm_k;
    int c = kk, r = 0, s = 0;  // [C], [R], [S]
    if constexpr (!kOneByOne) {
      const int rs = kk / shape.c;
      c = kk - rs * shape.c;
      r = rs / shape.s;
      s = rs - r * shape.s;
    }
#pragma unroll
    for (int i = 0; i < kChunksA; ++i) {
      const int row = first_row + i * kRowsPerPass;
      const T* source = params.x;
      int bytes = 0;
      if (k_ok && a_valid[i]) {
        if constexpr (kOneByOne) {
          source = params.x + a_pixel[i] + c;
          bytes = 16;
        } else {
          const int h = a_h0[i] + r * shape.dilation_h;  // [H]
          const int w = a_w0[i] + s * shape.dilation_w;  // [W]
          if (h >= 0 && h < shape.h && w >= 0 && w < shape.w) {
            source = params.x + ((static_cast<int64_t>(a_image[i]) * shape.h + h) * shape.w + w) * shape.c + c;
            bytes = 16;
          }
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

  const int k_tiles = (shape.gemm_k + kBlockK - 1) / kBlockK;
#pragma unroll
  for (int stage = 0; stage < Tile::kStages - 1; ++stage) {
    if (stage < k_tiles) load_stage(stage, stage);
    CpAsyncCommitGroup();  // always commit, so that group i holds k-tile i
  }

  for (int kt = 0; kt < k_tiles; ++kt) {
    CpAsyncWaitGroup<Tile::kStages - 2>();  // k-tile kt has landed (this thread's copies)
    __syncthreads();                        // ... everyone's; and everyone is done with the stage refilled below
    const int next = kt + Tile::kStages - 1;
    if (next < k_tiles) load_stage(next % Tile::kStages, next);
    CpAsyncCommitGroup();

    const T* a_tile = smem + (kt % Tile::kStages) * kStageElements;  // [kM][kRowStride]
    const T* b_tile = a_tile + Tile::kM * kRowStride;                 // [kN][kRowStride]
#pragma unroll
    for (int k0 = 0; k0 < kBlockK; k0 += kMmaK) {
      uint32_t a_frag[kMmaTilesM][4];
      uint32_t b_frag[kMmaTilesN][2];
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
#pragma unroll
      for (int mi = 0; mi < kMmaTilesM; ++mi) {
#pragma unroll
        for (int ni = 0; ni < kMmaTilesN; ++ni) {
          if constexpr (std::is_same<T, float>::value) {
            MmaM16N8K8Tf32(acc[mi][ni], a_frag[mi], b_frag[ni]);
          } else if constexpr (std::is_same<T, __half>::value) {
            MmaM16N8K16F16(acc[mi][ni], a_frag[mi], b_frag[ni]);
          } else {
            MmaM16N8K16Bf16(acc[mi][ni], a_frag[mi], b_frag[ni]);
          }
        }
      }
    }
  }
  CpAsyncWaitAll();

  // Fused epilogue from registers: accumulator e of an mma tile is row lane/4 (+8 for e >= 2), column 2*(lane%4)
  // (+1 for odd e); K is even, so each thread's pair of columns is both in range or both out.
#pragma unroll
  for (int mi = 0; mi < kMmaTilesM; ++mi) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int m = block_m + warp_m * Tile::kWarpM + mi * 16 + lane / 4 + half * 8;  // [N*P*Q]
      if (m >= shape.gemm_m) continue;
#pragma unroll
      for (int ni = 0; ni < kMmaTilesN; ++ni) {
        const int channel = block_n + warp_n * Tile::kWarpN + ni * 8 + (lane % 4) * 2;  // [K]
        if (channel >= shape.k) continue;
        const int64_t offset = static_cast<int64_t>(m) * shape.k + channel;  // into Y [N*P*Q, K]
        const float first = ApplyFusedEpilogue(params.epilogue, acc[mi][ni][half * 2], channel, offset);
        const float second = ApplyFusedEpilogue(params.epilogue, acc[mi][ni][half * 2 + 1], channel + 1, offset + 1);
        StoreElementPair(params.y + offset, first, second);
      }
    }
  }
}

// Sizes the grid (one block per kM x kN output tile) and launches on `stream`. Raises the kernel's dynamic shared
// memory limit first when the tile needs more than 48 KiB (a host-side attribute: allowed during graph capture).
template <typename T, typename Tile, bool kOneByOne>
cudaError_t LaunchImplicitGemm(const ImplicitGemmParams<T>& params, cudaStream_t stream) {
  constexpr int kSharedBytes = ImplicitGemmSharedBytes<T, Tile>();
  if (kSharedBytes > 48 * 1024) {
    const cudaError_t error = cudaFuncSetAttribute(ImplicitGemmKernel<T, Tile, kOneByOne>,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
    if (error != cudaSuccess) return error;
  }
  const dim3 grid((params.shape.gemm_m + Tile::kM - 1) / Tile::kM, (params.shape.k + Tile::kN - 1) / Tile::kN);
  return CONVOY_LAUNCH_KERNEL((ImplicitGemmKernel<T, Tile, kOneByOne>), grid, dim3(Tile::kThreads), kSharedBytes,
                              stream, params);
}

// The explicit instances live in conv2d_implicit_gemm_instances_{f16,bf16,tf32}.cu (compiled in parallel); files
// that launch them include this header and see these declarations instead of instantiating the kernels again.
#define CONVOY_IMPLICIT_GEMM_INSTANCES(PREFIX, T)                                                               \
  PREFIX template cudaError_t LaunchImplicitGemm<T, ImplicitGemmTile128x128, false>(                           \
      const ImplicitGemmParams<T>&, cudaStream_t);                                                               \
  PREFIX template cudaError_t LaunchImplicitGemm<T, ImplicitGemmTile128x64, false>(                            \
      const ImplicitGemmParams<T>&, cudaStream_t);                                                               \
  PREFIX template cudaError_t LaunchImplicitGemm<T, ImplicitGemmTile64x64, false>(const ImplicitGemmParams<T>&, \
                                                                                   cudaStream_t);                \
  PREFIX template cudaError_t LaunchImplicitGemm<T, ImplicitGemmTile128x128, true>(                            \
      const ImplicitGemmParams<T>&, cudaStream_t);                                                               \
  PREFIX template cudaError_t LaunchImplicitGemm<T, ImplicitGemmTile128x64, true>(                             \
      const ImplicitGemmParams<T>&, cudaStream_t);                                                               \
  PREFIX template cudaError_t LaunchImplicitGemm<T, ImplicitGemmTile64x64, true>(const ImplicitGemmParams<T>&,  \
                                                                                  cudaStream_t);

#if !defined(CONVOY_IMPLICIT_GEMM_DEFINE_INSTANCES)
CONVOY_IMPLICIT_GEMM_INSTANCES(extern, __half)
CONVOY_IMPLICIT_GEMM_INSTANCES(extern, __nv_bfloat16)
CONVOY_IMPLICIT_GEMM_INSTANCES(extern, float)
#endif

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_CONV2D_IMPLICIT_GEMM_KERNEL_CUH_
