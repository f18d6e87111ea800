// Sample kernel: histogram in shared memory with atomics, plus the other atomics on global memory.
#include "kernels/cuda_emulation/cuda_compat.cuh"
#include "kernels/cuda_emulation/testdata/sample_kernels.h"

namespace convoy::cuda_emulation_testdata {
namespace {

__global__ void HistogramKernel(const int* __restrict__ values, int n, int bins, int target,
                                unsigned* __restrict__ histogram, int* __restrict__ stats, float* __restrict__ sum) {
  CONVOY_DYNAMIC_SHARED(unsigned, local_counts);  // [bins]
  for (int b = threadIdx.x; b < bins; b += blockDim.x) local_counts[b] = 0;
  __syncthreads();
  float local_sum = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const int v = values[i];
    atomicAdd(&local_counts[v % bins], 1u);
    atomicMax(&stats[0], v);
    atomicMin(&stats[1], v);
    if (v == target) atomicCAS(&stats[2], -1, i);
    atomicExch(&stats[3], i);
    local_sum += static_cast<float>(v);
  }
  atomicAdd(sum, local_sum);
  __syncthreads();
  for (int b = threadIdx.x; b < bins; b += blockDim.x) atomicAdd(&histogram[b], local_counts[b]);
}

}  // namespace

cudaError_t LaunchHistogram(const int* values, int n, int bins, int target, unsigned* histogram, int* stats, float* sum,
                            cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL(HistogramKernel, dim3(8), dim3(128), sizeof(unsigned) * bins, stream, values, n, bins,
                              target, histogram, stats, sum);
}

}  // namespace convoy::cuda_emulation_testdata
