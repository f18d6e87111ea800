// The split-K reduce pass: sums the FP32 partial results a split-K GEMM-shaped kernel left in its workspace and
// applies the whole fused epilogue once (scale, bias, residual before/after, activation), writing the output with
// 16-byte vector stores (gemm_epilogue.cuh). Separate from any main loop, so every tiled kernel with a reduction split
// across blocks (the implicit GEMM here, a later wgmma kernel) ends with the same pass.
//
//   partials: [split][rows][channels] FP32, written by blocks z = 0 .. split - 1 (every element, zeros included)
//   LaunchSplitKReduce<T>(partials, split, rows, target, stream);
//
// One thread per vector of kOutputVector<T> channels of one row; the split partials are summed in order
// z = 0, 1, ... (deterministic, independent of the launch order of the main kernel's blocks). Grid-stride, at most
// 8192 blocks of 256 threads. Instances for __half, __nv_bfloat16 and float are in split_k_reduce.cu.
#ifndef CONVOY_KERNELS_CUDA_SPLIT_K_REDUCE_CUH_
#define CONVOY_KERNELS_CUDA_SPLIT_K_REDUCE_CUH_

#include <cstdint>

#include "kernels/cuda/gemm_epilogue.cuh"
#include "kernels/cuda_emulation/cuda_compat.cuh"

namespace convoy::cuda {

// Reduces partials [split][rows][target.channels] into target.y with the fused epilogue. `partials` is 16-byte
// aligned (a workspace).
template <typename T>
cudaError_t LaunchSplitKReduce(const float* partials, int split, int64_t rows, const OutputTarget<T>& target,
                               cudaStream_t stream);

extern template cudaError_t LaunchSplitKReduce<__half>(const float*, int, int64_t, const OutputTarget<__half>&,
                                                       cudaStream_t);
extern template cudaError_t LaunchSplitKReduce<__nv_bfloat16>(const float*, int, int64_t,
                                                              const OutputTarget<__nv_bfloat16>&, cudaStream_t);
extern template cudaError_t LaunchSplitKReduce<float>(const float*, int, int64_t, const OutputTarget<float>&,
                                                      cudaStream_t);

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_SPLIT_K_REDUCE_CUH_
