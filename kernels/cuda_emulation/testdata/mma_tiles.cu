// Sample kernels: tensor-core GEMM tiles (one warp per 16x8 output tile) with a two-stage cp.async pipeline,
// ldmatrix fragment loads and mma.sync: FP16 (B as [n][k], ldmatrix), BF16 (B as [k][n], ldmatrix.trans) and TF32
// m16n8k8 (fp32 inputs rounded with cvt.rna.tf32), and the 8-bit integer m16n8k32 (s8 x s8 and u8 x s8 into s32; the
// bytes go through the same ldmatrix, 16 bytes a row).
#include "kernels/cuda_emulation/cuda_compat.cuh"
#include "kernels/cuda_emulation/testdata/sample_kernels.h"

namespace convoy::cuda_emulation_testdata {
namespace {

using convoy::cuda::CpAsyncCg16;
using convoy::cuda::CpAsyncCommitGroup;
using convoy::cuda::CpAsyncWaitGroup;

// Writes the accumulator fragment (rows g and g+8, columns 2t and 2t+1) of the tile at (row0, col0).
__device__ __forceinline__ void StoreAccumulator(const float acc[4], float* c, int n, int row0, int col0) {
  const int lane = threadIdx.x;
  const int g = lane / 4, t = lane % 4;
  c[(row0 + g) * n + col0 + 2 * t] = acc[0];
  c[(row0 + g) * n + col0 + 2 * t + 1] = acc[1];
  c[(row0 + g + 8) * n + col0 + 2 * t] = acc[2];
  c[(row0 + g + 8) * n + col0 + 2 * t + 1] = acc[3];
}

__global__ void MmaGemmF16Kernel(const __half* __restrict__ a, const __half* __restrict__ b_nk, float* __restrict__ c,
                                 int m, int n, int k) {
  CONVOY_SHARED_ARRAY(__half, a_tile, [2][16][16]);  // [stage][row][k]
  CONVOY_SHARED_ARRAY(__half, b_tile, [2][8][16]);   // [stage][col][k]
  const int lane = threadIdx.x;
  const int row0 = blockIdx.y * 16, col0 = blockIdx.x * 8;
  const int steps = k / 16;
  auto load_stage = [&](int stage, int k0) {
    // 16 rows x 32 bytes of A = 32 chunks of 16 bytes; 8 rows x 32 bytes of B = 16 chunks.
    CpAsyncCg16(&a_tile[stage][lane / 2][(lane % 2) * 8], a + (row0 + lane / 2) * k + k0 + (lane % 2) * 8);
    if (lane < 16) {
      CpAsyncCg16(&b_tile[stage][lane / 2][(lane % 2) * 8], b_nk + (col0 + lane / 2) * k + k0 + (lane % 2) * 8);
    }
    CpAsyncCommitGroup();
  };
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  load_stage(0, 0);
  for (int step = 0; step < steps; ++step) {
    const int stage = step % 2;
    if (step + 1 < steps) {
      load_stage(1 - stage, (step + 1) * 16);
      CpAsyncWaitGroup<1>();
    } else {
      CpAsyncWaitGroup<0>();
    }
    __syncwarp();
    uint32_t a_frag[4], b_frag[2];
    convoy::cuda::LdMatrixX4(a_frag, &a_tile[stage][lane % 16][(lane / 16) * 8]);
    convoy::cuda::LdMatrixX2(b_frag, &b_tile[stage][lane % 8][((lane / 8) % 2) * 8]);
    convoy::cuda::MmaM16N8K16F16(acc, a_frag, b_frag);
    __syncwarp();  // every lane has read this stage before it is refilled
  }
  StoreAccumulator(acc, c, n, row0, col0);
}

__global__ void MmaGemmBf16Kernel(const __nv_bfloat16* __restrict__ a, const __nv_bfloat16* __restrict__ b_kn,
                                  float* __restrict__ c, int m, int n, int k) {
  CONVOY_SHARED_ARRAY(__nv_bfloat16, a_tile, [2][16][16]);  // [stage][row][k]
  CONVOY_SHARED_ARRAY(__nv_bfloat16, b_tile, [2][16][8]);   // [stage][k][col]
  const int lane = threadIdx.x;
  const int row0 = blockIdx.y * 16, col0 = blockIdx.x * 8;
  const int steps = k / 16;
  auto load_stage = [&](int stage, int k0) {
    CpAsyncCg16(&a_tile[stage][lane / 2][(lane % 2) * 8], a + (row0 + lane / 2) * k + k0 + (lane % 2) * 8);
    if (lane < 16) CpAsyncCg16(&b_tile[stage][lane][0], b_kn + (k0 + lane) * n + col0);
    CpAsyncCommitGroup();
  };
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  load_stage(0, 0);
  for (int step = 0; step < steps; ++step) {
    const int stage = step % 2;
    if (step + 1 < steps) {
      load_stage(1 - stage, (step + 1) * 16);
      CpAsyncWaitGroup<1>();
    } else {
      CpAsyncWaitGroup<0>();
    }
    __syncwarp();
    uint32_t a_frag[4], b_frag[2];
    convoy::cuda::LdMatrixX4(a_frag, &a_tile[stage][lane % 16][(lane / 16) * 8]);
    convoy::cuda::LdMatrixX2Trans(b_frag, &b_tile[stage][lane % 16][0]);
    convoy::cuda::MmaM16N8K16Bf16(acc, a_frag, b_frag);
    __syncwarp();
  }
  StoreAccumulator(acc, c, n, row0, col0);
}

__global__ void MmaGemmTf32Kernel(const float* __restrict__ a, const float* __restrict__ b_nk, float* __restrict__ c,
                                  int m, int n, int k) {
  CONVOY_SHARED_ARRAY(float, a_tile, [2][16][8]);  // [stage][row][k]
  CONVOY_SHARED_ARRAY(float, b_tile, [2][8][8]);   // [stage][col][k]
  const int lane = threadIdx.x;
  const int row0 = blockIdx.y * 16, col0 = blockIdx.x * 8;
  const int steps = k / 8;
  auto load_stage = [&](int stage, int k0) {
    CpAsyncCg16(&a_tile[stage][lane / 2][(lane % 2) * 4], a + (row0 + lane / 2) * k + k0 + (lane % 2) * 4);
    if (lane < 16) {
      CpAsyncCg16(&b_tile[stage][lane / 2][(lane % 2) * 4], b_nk + (col0 + lane / 2) * k + k0 + (lane % 2) * 4);
    }
    CpAsyncCommitGroup();
  };
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  load_stage(0, 0);
  for (int step = 0; step < steps; ++step) {
    const int stage = step % 2;
    if (step + 1 < steps) {
      load_stage(1 - stage, (step + 1) * 8);
      CpAsyncWaitGroup<1>();
    } else {
      CpAsyncWaitGroup<0>();
    }
    __syncwarp();
    // A 32-bit element is two b16 halves, so ldmatrix rows of 16 bytes hold 4 floats and land in the TF32 layout.
    uint32_t a_frag[4], b_frag[2];
    convoy::cuda::LdMatrixX4(a_frag, &a_tile[stage][lane % 16][(lane / 16) * 4]);
    convoy::cuda::LdMatrixX2(b_frag, &b_tile[stage][lane % 8][((lane / 8) % 2) * 4]);
    for (int i = 0; i < 4; ++i) a_frag[i] = convoy::cuda::FloatToTf32(__uint_as_float(a_frag[i]));
    for (int i = 0; i < 2; ++i) b_frag[i] = convoy::cuda::FloatToTf32(__uint_as_float(b_frag[i]));
    convoy::cuda::MmaM16N8K8Tf32(acc, a_frag, b_frag);
    __syncwarp();
  }
  StoreAccumulator(acc, c, n, row0, col0);
}

// kUnsignedA: A holds uint8_t (mma .u8.s8), else int8_t (.s8.s8). B is [n][k] signed bytes.
template <bool kUnsignedA>
__global__ void MmaGemmInt8Kernel(const uint8_t* __restrict__ a, const int8_t* __restrict__ b_nk,
                                  const int32_t* __restrict__ c_in, int32_t* __restrict__ c, int m, int n, int k) {
  CONVOY_SHARED_ARRAY(uint8_t, a_tile, [2][16][32]);  // [stage][row][k]
  CONVOY_SHARED_ARRAY(int8_t, b_tile, [2][8][32]);    // [stage][col][k]
  const int lane = threadIdx.x;
  const int g = lane / 4, t = lane % 4;
  const int row0 = blockIdx.y * 16, col0 = blockIdx.x * 8;
  const int steps = k / 32;
  auto load_stage = [&](int stage, int k0) {
    // 16 rows x 32 bytes of A = 32 chunks of 16 bytes; 8 rows x 32 bytes of B = 16 chunks.
    CpAsyncCg16(&a_tile[stage][lane / 2][(lane % 2) * 16], a + (row0 + lane / 2) * k + k0 + (lane % 2) * 16);
    if (lane < 16) {
      CpAsyncCg16(&b_tile[stage][lane / 2][(lane % 2) * 16], b_nk + (col0 + lane / 2) * k + k0 + (lane % 2) * 16);
    }
    CpAsyncCommitGroup();
  };
  int32_t acc[4];
  for (int i = 0; i < 4; ++i) acc[i] = c_in[(row0 + g + 8 * (i >> 1)) * n + col0 + 2 * t + (i & 1)];
  load_stage(0, 0);
  for (int step = 0; step < steps; ++step) {
    const int stage = step % 2;
    if (step + 1 < steps) {
      load_stage(1 - stage, (step + 1) * 32);
      CpAsyncWaitGroup<1>();
    } else {
      CpAsyncWaitGroup<0>();
    }
    __syncwarp();
    // ldmatrix moves 16-bit pairs, so a 16-byte row is 16 bytes of k: register i of lane 4g + t gets bytes 4t..4t+3
    // of row g of matrix i, which is the m16n8k32 fragment when matrix i is (rows +8 for odd i, k +16 for i >= 2).
    uint32_t a_frag[4], b_frag[2];
    convoy::cuda::LdMatrixX4(a_frag, &a_tile[stage][lane % 16][(lane / 16) * 16]);
    convoy::cuda::LdMatrixX2(b_frag, &b_tile[stage][lane % 8][((lane / 8) % 2) * 16]);
    if constexpr (kUnsignedA) {
      convoy::cuda::MmaM16N8K32U8S8(acc, a_frag, b_frag);
    } else {
      convoy::cuda::MmaM16N8K32S8(acc, a_frag, b_frag);
    }
    __syncwarp();
  }
  for (int i = 0; i < 4; ++i) c[(row0 + g + 8 * (i >> 1)) * n + col0 + 2 * t + (i & 1)] = acc[i];
}

}  // namespace

cudaError_t LaunchMmaGemmInt8(const void* a, bool a_unsigned, const int8_t* b_nk, const int32_t* c_in, int32_t* c,
                              int m, int n, int k, cudaStream_t stream) {
  const auto* bytes = static_cast<const uint8_t*>(a);
  if (a_unsigned) {
    return CONVOY_LAUNCH_KERNEL(MmaGemmInt8Kernel<true>, dim3(n / 8, m / 16), dim3(32), 0, stream, bytes, b_nk, c_in,
                                c, m, n, k);
  }
  return CONVOY_LAUNCH_KERNEL(MmaGemmInt8Kernel<false>, dim3(n / 8, m / 16), dim3(32), 0, stream, bytes, b_nk, c_in,
                              c, m, n, k);
}

cudaError_t LaunchMmaGemmF16(const __half* a, const __half* b_nk, float* c, int m, int n, int k, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL(MmaGemmF16Kernel, dim3(n / 8, m / 16), dim3(32), 0, stream, a, b_nk, c, m, n, k);
}

cudaError_t LaunchMmaGemmBf16(const __nv_bfloat16* a, const __nv_bfloat16* b_kn, float* c, int m, int n, int k,
                              cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL(MmaGemmBf16Kernel, dim3(n / 8, m / 16), dim3(32), 0, stream, a, b_kn, c, m, n, k);
}

cudaError_t LaunchMmaGemmTf32(const float* a, const float* b_nk, float* c, int m, int n, int k, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL(MmaGemmTf32Kernel, dim3(n / 8, m / 16), dim3(32), 0, stream, a, b_nk, c, m, n, k);
}

}  // namespace convoy::cuda_emulation_testdata
