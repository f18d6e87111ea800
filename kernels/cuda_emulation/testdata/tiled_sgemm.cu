// Sample kernel: shared-memory tiled SGEMM with two barriers per tile step, any matrix sizes.
#include "kernels/cuda_emulation/cuda_compat.cuh"
#include "kernels/cuda_emulation/testdata/sample_kernels.h"

namespace convoy::cuda_emulation_testdata {
namespace {

template <int kTile>
__global__ void TiledSgemmKernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int m,
                                 int n, int k) {
  CONVOY_SHARED_ARRAY(float, a_tile, [kTile][kTile]);      // [row in tile][k in tile]
  CONVOY_SHARED_ARRAY(float, b_tile, [kTile][kTile + 1]);  // [k in tile][col in tile], padded
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * kTile + ty;  // of c, < m
  const int col = blockIdx.x * kTile + tx;  // of c, < n
  float sum = 0.0f;
  for (int k0 = 0; k0 < k; k0 += kTile) {
    a_tile[ty][tx] = row < m && k0 + tx < k ? a[row * k + k0 + tx] : 0.0f;
    b_tile[ty][tx] = k0 + ty < k && col < n ? b[(k0 + ty) * n + col] : 0.0f;
    __syncthreads();
    for (int kk = 0; kk < kTile; ++kk) sum += a_tile[ty][kk] * b_tile[kk][tx];
    __syncthreads();
  }
  if (row < m && col < n) c[row * n + col] = sum;
}

}  // namespace

cudaError_t LaunchTiledSgemm(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream) {
  constexpr int kTile = 16;
  const dim3 grid((n + kTile - 1) / kTile, (m + kTile - 1) / kTile);
  return CONVOY_LAUNCH_KERNEL((TiledSgemmKernel<kTile>), grid, dim3(kTile, kTile), 0, stream, a, b, c, m, n, k);
}

}  // namespace convoy::cuda_emulation_testdata
