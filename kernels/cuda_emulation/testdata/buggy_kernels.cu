// Kernels with deliberate bugs (and their fixed forms), so tests can show the CUDA emulation catches each kind.
#include "kernels/cuda_emulation/cuda_compat.cuh"
#include "kernels/cuda_emulation/testdata/sample_kernels.h"

namespace convoy::cuda_emulation_testdata {
namespace {

__global__ void ReadUnwrittenSharedKernel(const float* __restrict__ in, float* __restrict__ out) {
  CONVOY_SHARED_ARRAY(float, tile, [64]);
  if (threadIdx.x < 32) tile[threadIdx.x] = in[threadIdx.x];  // bug: half the tile is never written
  __syncthreads();
  out[threadIdx.x] = tile[threadIdx.x];
}

__global__ void NeighborExchangeKernel(const float* __restrict__ in, float* __restrict__ out, int direction,
                                       bool with_barrier) {
  CONVOY_SHARED_ARRAY(float, tile, [1024]);
  const int t = threadIdx.x;
  const int n = blockDim.x;
  tile[t] = in[t];
  if (with_barrier) __syncthreads();  // the bug is leaving it out
  const int source = t + direction;
  out[t] = source >= 0 && source < n ? tile[source] : 0.0f;
}

__global__ void BarrierAfterEarlyExitKernel(float* out) {
  if (threadIdx.x >= 16) return;  // bug: these threads never reach the barrier below
  __syncthreads();
  out[threadIdx.x] = 1.0f;
}

__global__ void BarriersOnDifferentLinesKernel(float* out) {
  if (threadIdx.x % 2 == 0) {
    __syncthreads();
  } else {
    __syncthreads();  // bug: a different barrier than the even threads'
  }
  out[threadIdx.x] = 1.0f;
}

__global__ void ShuffleWithExitedLaneKernel(const float* __restrict__ in, float* __restrict__ out) {
  if (threadIdx.x == 31) return;  // bug: lane 31 is named in the mask below
  out[threadIdx.x] = __shfl_xor_sync(0xFFFFFFFFu, in[threadIdx.x], 1);
}

__global__ void ShuffleMaskWithoutCallerKernel(const float* __restrict__ in, float* __restrict__ out) {
  out[threadIdx.x] = __shfl_sync(0x0000FFFFu, in[threadIdx.x], 0);  // bug: lanes 16..31 are not in their mask
}

__global__ void CpAsyncReadKernel(const float* __restrict__ in, float* __restrict__ out, bool wait) {
  CONVOY_SHARED_ARRAY(float, staged, [32][4]);
  const int t = threadIdx.x;
  convoy::cuda::CpAsyncCa<16>(&staged[t][0], in + 4 * t);
  convoy::cuda::CpAsyncCommitGroup();
  if (wait) convoy::cuda::CpAsyncWaitGroup<0>();  // the bug is leaving it out
  for (int i = 0; i < 4; ++i) out[4 * t + i] = staged[t][i];
}

__global__ void WriteEveryThreadKernel(float* out) { out[threadIdx.x] = 1.0f; }

__global__ void SharedOverrunKernel(float* out) {
  CONVOY_SHARED_ARRAY(float, tile, [32]);
  tile[threadIdx.x] = static_cast<float>(threadIdx.x);
  __syncthreads();
  const float* row = &tile[0];
  out[threadIdx.x] = row[threadIdx.x + 1];  // bug: thread 31 reads one past the array
}

__global__ void TrapInThread5Kernel(float* out) {
  if (threadIdx.x == 5) __trap();
  out[threadIdx.x] = 1.0f;
}

}  // namespace

cudaError_t LaunchReadUnwrittenShared(const float* in, float* out, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL(ReadUnwrittenSharedKernel, dim3(1), dim3(64), 0, stream, in, out);
}

cudaError_t LaunchNeighborExchange(const float* in, float* out, int n, int direction, bool with_barrier,
                                   cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL(NeighborExchangeKernel, dim3(1), dim3(n), 0, stream, in, out, direction, with_barrier);
}

cudaError_t LaunchBarrierAfterEarlyExit(float* out, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL(BarrierAfterEarlyExitKernel, dim3(1), dim3(64), 0, stream, out);
}

cudaError_t LaunchBarriersOnDifferentLines(float* out, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL(BarriersOnDifferentLinesKernel, dim3(1), dim3(64), 0, stream, out);
}

cudaError_t LaunchShuffleWithExitedLane(const float* in, float* out, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL(ShuffleWithExitedLaneKernel, dim3(1), dim3(32), 0, stream, in, out);
}

cudaError_t LaunchShuffleMaskWithoutCaller(const float* in, float* out, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL(ShuffleMaskWithoutCallerKernel, dim3(1), dim3(32), 0, stream, in, out);
}

cudaError_t LaunchCpAsyncRead(const float* in, float* out, bool wait, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL(CpAsyncReadKernel, dim3(1), dim3(32), 0, stream, in, out, wait);
}

cudaError_t LaunchWriteEveryThread(float* out, int threads, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL(WriteEveryThreadKernel, dim3(1), dim3(threads), 0, stream, out);
}

cudaError_t LaunchSharedOverrun(float* out, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL(SharedOverrunKernel, dim3(1), dim3(32), 0, stream, out);
}

cudaError_t LaunchTrapInThread5(float* out, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL(TrapInThread5Kernel, dim3(1), dim3(32), 0, stream, out);
}

}  // namespace convoy::cuda_emulation_testdata
