// Sample kernel: every warp collective once, so a test can check each against its documented semantics.
#include "kernels/cuda_emulation/cuda_compat.cuh"
#include "kernels/cuda_emulation/testdata/sample_kernels.h"

namespace convoy::cuda_emulation_testdata {
namespace {

__global__ void WarpIntrinsicsKernel(const int* __restrict__ input, int* __restrict__ out) {
  constexpr unsigned kFull = 0xFFFFFFFFu;
  const int tid = threadIdx.x;
  const int lane = tid % warpSize;
  const int v = input[tid];
  int* o = out + tid * kWarpIntrinsicOutputs;  // [kWarpIntrinsicOutputs]
  o[0] = __shfl_sync(kFull, v, (lane * 7 + 3) % 32);
  o[1] = __shfl_up_sync(kFull, v, 3);
  o[2] = __shfl_down_sync(kFull, v, 5);
  o[3] = __shfl_xor_sync(kFull, v, 6);
  o[4] = __shfl_sync(kFull, v, lane ^ 1, 8);
  o[5] = static_cast<int>(__ballot_sync(kFull, v % 3 == 0));
  o[6] = __any_sync(kFull, v == 7);
  o[7] = __all_sync(kFull, v >= 0);
  o[8] = __reduce_add_sync(kFull, v);
  o[9] = __reduce_max_sync(kFull, v);
  o[10] = static_cast<int>(__match_any_sync(kFull, v % 4));
  o[11] = lane < 16 ? __shfl_xor_sync(0x0000FFFFu, v, 1) : -1;
  o[12] = static_cast<int>(__activemask());
  o[13] = __syncthreads_count(v % 2);
}

}  // namespace

cudaError_t LaunchWarpIntrinsics(const int* input, int threads, int* out, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL(WarpIntrinsicsKernel, dim3(1), dim3(threads), 0, stream, input, out);
}

}  // namespace convoy::cuda_emulation_testdata
