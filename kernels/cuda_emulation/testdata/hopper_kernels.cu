// Small sm_90a kernels driving one Hopper instruction each (see hopper_kernels.h), with optional planted mistakes.
#include "kernels/cuda_emulation/testdata/hopper_kernels.h"

#include "kernels/cuda_emulation/cuda_compat.cuh"
#include "kernels/cuda_emulation/hopper.cuh"

namespace convoy::cuda_emulation_testdata {
namespace {

using ::convoy::cuda::WgmmaType;
using HopperAccumulator = ::convoy::cuda::WgmmaAccumulator<64>;

template <bool kTransA, bool kTransB>
__device__ void IssueProbeWgmma(const WgmmaProbe& p, HopperAccumulator& acc, ::convoy::cuda::WgmmaFragmentA& a,
                                const uint8_t* smem) {
  const uint64_t desc_b = ::convoy::cuda::MakeSmemDescriptor(smem + p.a_bytes, p.b_leading, p.b_stride, p.b_swizzle);
  if (p.a_in_registers) {
    ::convoy::cuda::WgmmaAsync<WgmmaType::kF16, 64, kTransB>(acc, a, desc_b, false);
  } else {
    const uint64_t desc_a = ::convoy::cuda::MakeSmemDescriptor(smem, p.a_leading, p.a_stride, p.a_swizzle);
    ::convoy::cuda::WgmmaAsync<WgmmaType::kF16, 64, kTransA, kTransB>(acc, desc_a, desc_b, false);
  }
}

// Copies the probe's operand images into shared memory (A at 0, B at a_bytes) and publishes them to the async proxy.
__device__ void StageProbeOperands(const WgmmaProbe& p, uint8_t* smem) {
  const int tid = threadIdx.x;
  for (int i = tid; i < p.a_bytes; i += blockDim.x) smem[i] = p.a_image[i];
  for (int i = tid; i < p.b_bytes; i += blockDim.x) smem[p.a_bytes + i] = p.b_image[i];
  // Each writing thread fences its own stores; the planted mistakes skip it, or leave it to thread 0 alone.
  const bool fences = p.mistake == HopperMistake::kProxyFenceByOneThread
                            ? tid == 0
                            : p.mistake != HopperMistake::kMissingProxyFence;
  if (fences) ::convoy::cuda::FenceProxyAsyncShared();
  __syncthreads();
}

__global__ void WgmmaProbeKernel(WgmmaProbe p, float* d) {
  CONVOY_DYNAMIC_SHARED(uint8_t, smem);
  const int tid = threadIdx.x;
  StageProbeOperands(p, smem);
  const bool issues = p.mistake == HopperMistake::kMisalignedWarpgroup ? (tid >= 64 && tid < 192) : tid < 128;
  if (!issues) return;
  HopperAccumulator acc;
  ::convoy::cuda::WgmmaFragmentA a;
  if (p.a_in_registers) {
#pragma unroll
    for (int i = 0; i < 4; ++i) a[i] = p.a_registers[tid * 4 + i];
  }
  if (p.mistake != HopperMistake::kMissingWgmmaFence) ::convoy::cuda::WgmmaFence();
  ::convoy::cuda::WgmmaFenceOperands(acc);
  if (p.transpose_a) {
    if (p.transpose_b) {
      IssueProbeWgmma<true, true>(p, acc, a, smem);
    } else {
      IssueProbeWgmma<true, false>(p, acc, a, smem);
    }
  } else if (p.transpose_b) {
    IssueProbeWgmma<false, true>(p, acc, a, smem);
  } else {
    IssueProbeWgmma<false, false>(p, acc, a, smem);
  }
  ::convoy::cuda::WgmmaCommitGroup();
  if (p.mistake != HopperMistake::kMissingWgmmaWait) ::convoy::cuda::WgmmaWaitGroup<0>();
  ::convoy::cuda::WgmmaFenceOperands(acc);
#pragma unroll
  for (int v = 0; v < HopperAccumulator::kRegisters; ++v) d[(tid % 128) * 32 + v] = acc[v];
}

template <WgmmaType kType>
__device__ void RunInt8ProbeWgmma(const WgmmaProbe& p, int32_t* d, const uint8_t* smem) {
  const int tid = threadIdx.x;
  ::convoy::cuda::WgmmaAccumulator<64, int32_t> acc;
  ::convoy::cuda::WgmmaFragmentA a;
  if (p.a_in_registers) {
#pragma unroll
    for (int i = 0; i < 4; ++i) a[i] = p.a_registers[tid * 4 + i];
  }
  ::convoy::cuda::WgmmaFence();
  ::convoy::cuda::WgmmaFenceOperands(acc);
  const uint64_t desc_b = ::convoy::cuda::MakeSmemDescriptor(smem + p.a_bytes, p.b_leading, p.b_stride, p.b_swizzle);
  if (p.a_in_registers) {
    ::convoy::cuda::WgmmaAsync<kType, 64>(acc, a, desc_b, false);
  } else {
    const uint64_t desc_a = ::convoy::cuda::MakeSmemDescriptor(smem, p.a_leading, p.a_stride, p.a_swizzle);
    ::convoy::cuda::WgmmaAsync<kType, 64>(acc, desc_a, desc_b, false);
  }
  // A second wgmma accumulates the same product again (scale-d 1): the result is twice the product.
  ::convoy::cuda::WgmmaCommitGroup();
  ::convoy::cuda::WgmmaWaitGroup<0>();
  ::convoy::cuda::WgmmaFenceOperands(acc);
  ::convoy::cuda::WgmmaFence();
  if (p.a_in_registers) {
    ::convoy::cuda::WgmmaAsync<kType, 64>(acc, a, desc_b, true);
  } else {
    const uint64_t desc_a = ::convoy::cuda::MakeSmemDescriptor(smem, p.a_leading, p.a_stride, p.a_swizzle);
    ::convoy::cuda::WgmmaAsync<kType, 64>(acc, desc_a, desc_b, true);
  }
  ::convoy::cuda::WgmmaCommitGroup();
  ::convoy::cuda::WgmmaWaitGroup<0>();
  ::convoy::cuda::WgmmaFenceOperands(acc);
#pragma unroll
  for (int v = 0; v < 32; ++v) d[tid * 32 + v] = acc[v];
}

__global__ void WgmmaInt8ProbeKernel(WgmmaProbe p, bool a_unsigned, int32_t* d) {
  CONVOY_DYNAMIC_SHARED(uint8_t, smem);
  StageProbeOperands(p, smem);
  if (threadIdx.x >= 128) return;
  if (a_unsigned) {
    RunInt8ProbeWgmma<WgmmaType::kU8S8>(p, d, smem);
  } else {
    RunInt8ProbeWgmma<WgmmaType::kS8S8>(p, d, smem);
  }
}

struct TmaProbeArgs {
  bool im2col;
  int32_t coordinates[4];
  uint16_t offsets[2];
  uint32_t bytes;
  HopperMistake mistake;
};

__global__ void TmaProbeKernel(const __grid_constant__ CUtensorMap map, TmaProbeArgs args, uint8_t* out) {
  CONVOY_DYNAMIC_SHARED(uint8_t, dynamic_smem);
  CONVOY_SHARED_VAR(uint64_t, barrier);
  // The dynamic base follows the static mbarrier and is 16-byte aligned only: round it up to 1024 (the planted
  // mistake uses it as it is).
  const uintptr_t aligned = (reinterpret_cast<uintptr_t>(dynamic_smem) + 1023) & ~uintptr_t{1023};
  uint8_t* smem = args.mistake == HopperMistake::kUnalignedDynamicShared ? dynamic_smem
                                                                         : reinterpret_cast<uint8_t*>(aligned);
  const int tid = threadIdx.x;
  if (tid == 0) {
    ::convoy::cuda::MbarrierInit(&barrier, 1);
    if (args.mistake != HopperMistake::kMissingMbarrierFence) ::convoy::cuda::FenceMbarrierInit();
  }
  __syncthreads();
  if (tid == 0) {
    ::convoy::cuda::MbarrierArriveExpectTx(&barrier, args.bytes);
    if (args.im2col) {
      ::convoy::cuda::TmaLoadIm2col4d(smem, &map, &barrier, args.coordinates[0], args.coordinates[1],
                                      args.coordinates[2], args.coordinates[3], args.offsets[0], args.offsets[1]);
    } else {
      const int32_t c[2] = {args.coordinates[0], args.coordinates[1]};
      ::convoy::cuda::TmaLoadTile<2>(smem, &map, &barrier, c);
    }
  }
  ::convoy::cuda::MbarrierWait(&barrier, args.mistake == HopperMistake::kWrongMbarrierParity ? 1 : 0);
  for (uint32_t i = tid; i < args.bytes; i += blockDim.x) out[i] = smem[i];
}

constexpr int kPipelineStages = 2;
constexpr int kTileBytes = 64 * 64 * 2;  // 64 rows x 128 bytes

__global__ void __launch_bounds__(256, 1)
    WgmmaPipelineKernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
                        int k_tiles, float* d, HopperMistake mistake) {
  CONVOY_DYNAMIC_SHARED(uint8_t, dynamic_smem);
  CONVOY_SHARED_ARRAY(uint64_t, full, [kPipelineStages]);
  CONVOY_SHARED_ARRAY(uint64_t, empty, [kPipelineStages]);
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(dynamic_smem) + 1023) & ~uintptr_t{1023});
  const int tid = threadIdx.x;
  if (tid == 0) {
    for (int s = 0; s < kPipelineStages; ++s) {
      ::convoy::cuda::MbarrierInit(&full[s], 1);
      // Every consumer thread releases the stage (CUTLASS's PipelineTmaAsync with a cluster of one), or, planted,
      // thread 0 alone.
      ::convoy::cuda::MbarrierInit(&empty[s], mistake == HopperMistake::kOneThreadRelease ? 1 : 128);
    }
    ::convoy::cuda::FenceMbarrierInit();
  }
  __syncthreads();
  if (tid >= 128) {  // producer warpgroup: one thread issues the copies
    ::convoy::cuda::SetMaxNRegDecrease<40>();
    if (tid == 128) {
      for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % kPipelineStages;
        const uint32_t phase = (kt / kPipelineStages) & 1;
        ::convoy::cuda::MbarrierWait(&empty[s], phase ^ 1);
        ::convoy::cuda::MbarrierArriveExpectTx(&full[s], 2 * kTileBytes);
        const int32_t c[2] = {kt * 64, 0};
        ::convoy::cuda::TmaLoadTile<2>(smem + s * 2 * kTileBytes, &a_map, &full[s], c);
        ::convoy::cuda::TmaLoadTile<2>(smem + s * 2 * kTileBytes + kTileBytes, &b_map, &full[s], c);
      }
    }
    return;
  }
  ::convoy::cuda::SetMaxNRegIncrease<256>();  // 256 threads enter with 256 registers each: nothing to take
  HopperAccumulator acc;
  ::convoy::cuda::WgmmaFenceOperands(acc);
  for (int kt = 0; kt < k_tiles; ++kt) {
    const int s = kt % kPipelineStages;
    const uint32_t phase = (kt / kPipelineStages) & 1;
    ::convoy::cuda::MbarrierWait(&full[s], mistake == HopperMistake::kWrongMbarrierParity ? phase ^ 1 : phase);
    ::convoy::cuda::WgmmaFence();
    const uint8_t* a_tile = smem + s * 2 * kTileBytes;
    const uint8_t* b_tile = a_tile + kTileBytes;
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {  // 4 x k16 per 64-element row of 128 bytes: +32 bytes each
      const uint64_t desc_a = ::convoy::cuda::MakeSmemDescriptor(a_tile + 32 * ks, 16, 1024, 128);
      const uint64_t desc_b = ::convoy::cuda::MakeSmemDescriptor(b_tile + 32 * ks, 16, 1024, 128);
      ::convoy::cuda::WgmmaAsync<WgmmaType::kF16, 64>(acc, desc_a, desc_b, kt > 0 || ks > 0);
    }
    ::convoy::cuda::WgmmaCommitGroup();
    if (mistake == HopperMistake::kReleaseBeforeWait) {
      ::convoy::cuda::MbarrierArrive(&empty[s]);
      ::convoy::cuda::WgmmaWaitGroup<0>();
    } else if (mistake == HopperMistake::kOneThreadRelease) {
      ::convoy::cuda::WgmmaWaitGroup<0>();
      if (tid == 0) ::convoy::cuda::MbarrierArrive(&empty[s]);
    } else {
      ::convoy::cuda::WgmmaWaitGroup<0>();
      ::convoy::cuda::MbarrierArrive(&empty[s]);
    }
  }
  ::convoy::cuda::WgmmaFenceOperands(acc);
  const int warp = tid / 32, lane = tid % 32;
#pragma unroll
  for (int v = 0; v < HopperAccumulator::kRegisters; ++v) {
    const int row = 16 * warp + lane / 4 + 8 * ((v >> 1) & 1);
    const int col = 8 * (v >> 2) + 2 * (lane % 4) + (v & 1);
    d[row * 64 + col] = acc[v];
  }
}

__global__ void SetMaxNRegProbeKernel(int* out, HopperMistake mistake) {
  const int tid = threadIdx.x;
  if (tid >= 128) {  // two consumer warpgroups take what the producer released: 2 x 128 x (232 - 168)
    if (mistake == HopperMistake::kOverIncrease) {
      ::convoy::cuda::SetMaxNRegIncrease<240>();
    } else {
      ::convoy::cuda::SetMaxNRegIncrease<232>();
    }
  } else if (mistake == HopperMistake::kNonUniformSetMaxNReg && tid >= 64) {
    ::convoy::cuda::SetMaxNRegDecrease<48>();
  } else {
    ::convoy::cuda::SetMaxNRegDecrease<40>();  // 128 x (168 - 40) registers back to the pool
  }
  out[tid] = 1;
}

}  // namespace

cudaError_t LaunchWgmmaProbe(const WgmmaProbe& probe, float* d, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL(WgmmaProbeKernel, dim3(1), dim3(probe.threads), probe.a_bytes + probe.b_bytes, stream,
                              probe, d);
}

cudaError_t LaunchWgmmaInt8Probe(const WgmmaProbe& probe, bool a_unsigned, int32_t* d, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL(WgmmaInt8ProbeKernel, dim3(1), dim3(probe.threads), probe.a_bytes + probe.b_bytes,
                              stream, probe, a_unsigned, d);
}

cudaError_t LaunchTmaProbe(const CUtensorMap& map, bool im2col, const int32_t* coordinates, const uint16_t* offsets,
                           uint32_t bytes, uint8_t* out, HopperMistake mistake, cudaStream_t stream) {
  TmaProbeArgs args{};
  args.im2col = im2col;
  for (int i = 0; i < (im2col ? 4 : 2); ++i) args.coordinates[i] = coordinates[i];
  if (im2col) args.offsets[0] = offsets[0], args.offsets[1] = offsets[1];
  args.bytes = bytes;
  args.mistake = mistake;
  // Room for the box even when `bytes` (the expect_tx count) is planted too small, plus 1024 to round the dynamic
  // base (16-byte aligned after the static mbarrier) up to 1024.
  const uint32_t dynamic_bytes = (bytes > 4096 ? bytes : 4096) + 1024;
  return CONVOY_LAUNCH_KERNEL(TmaProbeKernel, dim3(1), dim3(128), dynamic_bytes, stream, map, args, out);
}

cudaError_t LaunchWgmmaPipeline(const CUtensorMap& a_map, const CUtensorMap& b_map, int k_tiles, float* d,
                                HopperMistake mistake, cudaStream_t stream) {
  constexpr int kSharedBytes = kPipelineStages * 2 * kTileBytes + 1024;
  const cudaError_t error =
      cudaFuncSetAttribute(WgmmaPipelineKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
  if (error != cudaSuccess) return error;
  return CONVOY_LAUNCH_KERNEL(WgmmaPipelineKernel, dim3(1), dim3(256), kSharedBytes, stream, a_map, b_map, k_tiles, d,
                              mistake);
}

cudaError_t LaunchSetMaxNRegProbe(int* out, HopperMistake mistake, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL(SetMaxNRegProbeKernel, dim3(1), dim3(384), 0, stream, out, mistake);
}

}  // namespace convoy::cuda_emulation_testdata
