// Sample kernel: stages a block's slice through dynamic shared memory (more than 48 KiB needs cudaFuncSetAttribute).
#include "kernels/cuda_emulation/cuda_compat.cuh"
#include "kernels/cuda_emulation/testdata/sample_kernels.h"

namespace convoy::cuda_emulation_testdata {
namespace {

__global__ void ReverseThroughDynamicSharedKernel(const float* __restrict__ in, float* __restrict__ out, int count) {
  CONVOY_DYNAMIC_SHARED(float, staged);  // [count]
  const float* block_in = in + blockIdx.x * count;
  float* block_out = out + blockIdx.x * count;
  for (int i = threadIdx.x; i < count; i += blockDim.x) staged[i] = block_in[i];
  __syncthreads();
  for (int i = threadIdx.x; i < count; i += blockDim.x) block_out[i] = staged[count - 1 - i];
}

}  // namespace

cudaError_t LaunchReverseThroughDynamicShared(const float* in, float* out, int count, int blocks,
                                              int max_dynamic_shared_bytes, cudaStream_t stream) {
  const size_t bytes = sizeof(float) * static_cast<size_t>(count);
  const cudaError_t error = cudaFuncSetAttribute(ReverseThroughDynamicSharedKernel,
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize, max_dynamic_shared_bytes);
  if (error != cudaSuccess) return error;
  return CONVOY_LAUNCH_KERNEL(ReverseThroughDynamicSharedKernel, dim3(blocks), dim3(128), bytes, stream, in, out,
                              count);
}

}  // namespace convoy::cuda_emulation_testdata
