// Sample kernel: block sum with warp shuffles and a shared array of per-warp partial sums.
#include "kernels/cuda_emulation/cuda_compat.cuh"
#include "kernels/cuda_emulation/testdata/sample_kernels.h"

namespace convoy::cuda_emulation_testdata {
namespace {

__device__ __forceinline__ float WarpSumDown(float value) {
  for (int offset = warpSize / 2; offset > 0; offset /= 2) value += __shfl_down_sync(0xFFFFFFFFu, value, offset);
  return value;  // complete in lane 0
}

__device__ __forceinline__ float WarpSumXor(float value) {
  for (int mask = warpSize / 2; mask > 0; mask /= 2) value += __shfl_xor_sync(0xFFFFFFFFu, value, mask);
  return value;  // complete in every lane
}

__global__ void BlockSumKernel(const float* __restrict__ input, int n, float* __restrict__ block_sums) {
  CONVOY_SHARED_ARRAY(float, warp_sums, [32]);  // [warp]
  const int lane = threadIdx.x % warpSize;
  const int warp = threadIdx.x / warpSize;
  float sum = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) sum += input[i];
  sum = WarpSumDown(sum);
  if (lane == 0) warp_sums[warp] = sum;
  __syncthreads();
  if (warp == 0) {
    const int warps = blockDim.x / warpSize;
    float partial = lane < warps ? warp_sums[lane] : 0.0f;
    partial = WarpSumXor(partial);
    if (lane == 0) block_sums[blockIdx.x] = partial;
  }
}

}  // namespace

cudaError_t LaunchBlockSum(const float* input, int n, float* block_sums, int blocks, int threads_per_block,
                           cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL(BlockSumKernel, dim3(blocks), dim3(threads_per_block), 0, stream, input, n, block_sums);
}

}  // namespace convoy::cuda_emulation_testdata
