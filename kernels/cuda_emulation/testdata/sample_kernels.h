// Launchers of the sample kernels in this folder. The same .cu files are built by nvcc (cuda_library: proves they
// compile for sm_80/sm_90) and by the CUDA emulation (cuda_emulated_library: the tests run them on the CPU).
// Pointers are device pointers (host memory in emulation). Every launcher returns the launch's cudaError_t.
#ifndef CONVOY_KERNELS_CUDA_EMULATION_TESTDATA_SAMPLE_KERNELS_H_
#define CONVOY_KERNELS_CUDA_EMULATION_TESTDATA_SAMPLE_KERNELS_H_

#include "kernels/cuda_emulation/cuda_host_api.h"

namespace convoy::cuda_emulation_testdata {

// block_reduce.cu: block_sums[b] = sum of the elements block b visits in a grid-stride loop (warp shuffles + shared
// memory). threads_per_block must be a multiple of 32.
cudaError_t LaunchBlockSum(const float* input, int n, float* block_sums, int blocks, int threads_per_block,
                           cudaStream_t stream);

// warp_intrinsics.cu: one block of `threads` (a multiple of 32); thread i writes kWarpIntrinsicOutputs values to
// out[i * kWarpIntrinsicOutputs + j], see the kernel for what each j is.
inline constexpr int kWarpIntrinsicOutputs = 14;
cudaError_t LaunchWarpIntrinsics(const int* input, int threads, int* out, cudaStream_t stream);

// tiled_sgemm.cu: c[m][n] = sum_k a[m][k] * b[k][n], row-major, any sizes (16x16 shared-memory tiles).
cudaError_t LaunchTiledSgemm(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream);

// shared_memory.cu: out[i] = in[block_start + count - 1 - i] per block of `count` floats, staged through `count`
// floats of dynamic shared memory, after setting the kernel's limit to max_dynamic_shared_bytes.
cudaError_t LaunchReverseThroughDynamicShared(const float* in, float* out, int count, int blocks,
                                              int max_dynamic_shared_bytes, cudaStream_t stream);

// mma_tiles.cu: c[m][n] = sum_k a[m][k] * b(k, n) on tensor cores, one warp per 16x8 tile, cp.async double buffering
// and ldmatrix. m % 16 == 0, n % 8 == 0, k % 16 == 0 (k % 8 for TF32).
cudaError_t LaunchMmaGemmF16(const __half* a, const __half* b_nk, float* c, int m, int n, int k, cudaStream_t stream);
cudaError_t LaunchMmaGemmBf16(const __nv_bfloat16* a, const __nv_bfloat16* b_kn, float* c, int m, int n, int k,
                              cudaStream_t stream);
cudaError_t LaunchMmaGemmTf32(const float* a, const float* b_nk, float* c, int m, int n, int k, cudaStream_t stream);
// c[m][n] = c_in[m][n] + sum_k a[m][k] * b_nk[n][k] in int32 on the 8-bit integer mma (m16n8k32): a signed bytes
// (a_unsigned false, .s8.s8) or unsigned bytes (.u8.s8), b signed. m % 16 == 0, n % 8 == 0, k % 32 == 0.
cudaError_t LaunchMmaGemmInt8(const void* a, bool a_unsigned, const int8_t* b_nk, const int32_t* c_in, int32_t* c,
                              int m, int n, int k, cudaStream_t stream);

// histogram.cu: histogram[v % bins] counts, plus atomicMax/atomicMin/float atomicAdd/atomicCAS/atomicExch results:
// stats = {max, min, index of some v == target (or -1), index of some element (last exchanged)}; sum = sum of values.
cudaError_t LaunchHistogram(const int* values, int n, int bins, int target, unsigned* histogram, int* stats, float* sum,
                            cudaStream_t stream);

// buggy_kernels.cu: kernels with deliberate bugs, to show the emulation catches them.
// One block of 64 threads; only threads < 32 write the shared tile, all read it: out[32..63] come from unwritten
// shared memory.
cudaError_t LaunchReadUnwrittenShared(const float* in, float* out, cudaStream_t stream);
// One block of n threads: tile[t] = in[t]; (optional __syncthreads); out[t] = tile[t + direction] (0 at the ends).
cudaError_t LaunchNeighborExchange(const float* in, float* out, int n, int direction, bool with_barrier,
                                   cudaStream_t stream);
// 64 threads: threads >= 16 return before a __syncthreads the others reach.
cudaError_t LaunchBarrierAfterEarlyExit(float* out, cudaStream_t stream);
// 64 threads: odd and even threads call __syncthreads on different lines.
cudaError_t LaunchBarriersOnDifferentLines(float* out, cudaStream_t stream);
// 32 threads: lane 31 returns, the others __shfl_xor_sync with a full mask.
cudaError_t LaunchShuffleWithExitedLane(const float* in, float* out, cudaStream_t stream);
// 32 threads: every lane calls __shfl_sync with mask 0x0000FFFF.
cudaError_t LaunchShuffleMaskWithoutCaller(const float* in, float* out, cudaStream_t stream);
// 32 threads: each copies 4 floats with cp.async into shared memory, then reads them back with or without waiting.
cudaError_t LaunchCpAsyncRead(const float* in, float* out, bool wait, cudaStream_t stream);
// One block of `threads`: out[threadIdx.x] = 1 (out must have `threads` elements; give it fewer to overflow).
cudaError_t LaunchWriteEveryThread(float* out, int threads, cudaStream_t stream);
// 32 threads: tile[32] written, then thread t reads tile[t + 1]: thread 31 reads past the array.
cudaError_t LaunchSharedOverrun(float* out, cudaStream_t stream);
// 32 threads: thread 5 calls __trap().
cudaError_t LaunchTrapInThread5(float* out, cudaStream_t stream);

}  // namespace convoy::cuda_emulation_testdata

#endif  // CONVOY_KERNELS_CUDA_EMULATION_TESTDATA_SAMPLE_KERNELS_H_
