// The Hopper (sm_90a) main loop shared by the Hopper conv2d and GEMM algorithms (and, with 8-bit operands and the
// integer wgmma, the INT8 ones of quantized_conv2d_hopper_kernel.cuh): wgmma fed by the bulk tensor copy
// engine (TMA) through a ring of shared-memory stages synchronised with mbarriers, warp-specialized. It computes
//
//   Y[m, k] = epilogue( sum_kk A[m, kk] * B[k, kk] ),   m over N*P*Q output pixels (or GEMM rows), kk over R*S*C
//
// Block: one producer warpgroup (warps 0-3; thread 0 issues every copy) and Tile::kConsumers consumer warpgroups of
// 64 output rows each (wgmma m64nNk16, or k8 for TF32, N = Tile::kN). Per k-iteration the producer waits for the
// stage to be empty, announces its bytes (mbarrier.arrive.expect_tx) and issues two copies that complete on the
// stage's full barrier:
//   - A: kIm2col: cp.async.bulk.tensor.4d.im2col over the NHWC input: Tile::kM consecutive output pixels (the
//        tensor map's bounding box and traversal strides walk P x Q and wrap to the next image; padding is the
//        out-of-bounds zero fill), filter tap (r, s) as the im2col offsets, kBlockK channels from c0;
//        otherwise a 2D tile of the row-major [M, Kred] matrix (GEMM, 1x1 stride-1 conv);
//   - B: the filter as [K][R*S][C] (3D tiled box kBlockK x 1 x kN) or the GEMM's [N, Kred] (2D box).
// Both land with the 128-byte swizzle, which is also the wgmma descriptors' layout (K-major, 128-byte rows, 8-row
// groups 1024 bytes apart). Consumers wait for the stage, issue the 4 wgmmas of its 128-byte row (descriptor start
// +32 bytes each), commit, wait until at most one group is in flight, and release the previous stage: every consumer
// thread arrives on its empty barrier (count 128 per consumer warpgroup), as CUTLASS's single-CTA pipelines do. The
// fused epilogue (scale, bias, residual, activation) is applied to the accumulators and each pair of adjacent output
// channels is written with one store.
//
// The reduction runs over R*S taps x ceil(C / kBlockK) channel blocks: channels past C read as zeros (the copy's
// out-of-bounds fill), so any C that is a multiple of 16 bytes works, at a cost when C is not a multiple of kBlockK.
#ifndef CONVOY_KERNELS_CUDA_CONV2D_HOPPER_KERNEL_CUH_
#define CONVOY_KERNELS_CUDA_CONV2D_HOPPER_KERNEL_CUH_

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/conv2d_common.cuh"
#include "kernels/cuda/conv2d_implicit_gemm_kernel.cuh"
#include "kernels/cuda_emulation/cuda_compat.cuh"
#include "kernels/cuda_emulation/hopper.cuh"

namespace convoy::cuda {

// The setmaxnreg split of a warp-specialized block of `threads` threads with `consumers` consumer warpgroups (two:
// the split is used; one: no setmaxnreg, 0). Each thread enters with the register cap __launch_bounds__(threads, 1)
// gives (64K registers over the threads, in units of 8 per thread, at most 256: 168 for 384 threads), which is
// what ptxas compiles a kernel with setmaxnreg to. The producer warpgroup drops to kHopperProducerRegisters (what
// CUTLASS's warp-specialized kernels use, LoadRegisterRequirement) and the consumers rise to what that frees:
// (cap * threads - 128 * producer) / (128 * consumers), in units of 8 (232 for 384 threads, CUTLASS's
// MmaRegisterRequirement). setmaxnreg.inc blocks until the registers are free, so the split must not ask for more
// than the block holds at entry: static_asserted here against the cap, and against the count ptxas actually
// compiled by //kernels/cuda:hopper_register_fit_test (kernel_resources.py --check_setmaxnreg), which reads the
// split from the tile's name.
inline constexpr int kHopperProducerRegisters = 40;
constexpr int HopperEntryRegisters(int threads) {
  const int cap = 65536 / threads / 8 * 8;
  return cap > 256 ? 256 : cap;
}
constexpr int HopperProducerRegisters(int consumers) { return consumers == 2 ? kHopperProducerRegisters : 0; }
constexpr int HopperConsumerRegisters(int consumers) {
  if (consumers != 2) return 0;
  const int threads = 128 * (1 + consumers);
  const int consumer = (HopperEntryRegisters(threads) * threads - 128 * kHopperProducerRegisters) / (128 * consumers);
  return consumer / 8 * 8 > 256 ? 256 : consumer / 8 * 8;
}

// Compile-time tile: kM x kN outputs per block (kM = 64 per consumer warpgroup), kStages shared-memory stages, and
// the setmaxnreg split (kProducerRegs / kConsumerRegs, 0 when the block does not use setmaxnreg; derived, see
// above: template arguments so that the compiled kernel's name carries them to the register-fit check).
template <int kBlockM, int kBlockN, int kPipelineStages, int kProducerRegs = HopperProducerRegisters(kBlockM / 64),
          int kConsumerRegs = HopperConsumerRegisters(kBlockM / 64)>
struct HopperTile {
  static constexpr int kM = kBlockM;
  static constexpr int kN = kBlockN;
  static constexpr int kStages = kPipelineStages;
  static constexpr int kConsumers = kM / 64;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kRowBytes = 128;  // one 128-byte swizzled row of the reduction per stage
  static constexpr int kStageBytes = (kM + kN) * kRowBytes;
  static constexpr int kSharedBytes = kStages * kStageBytes + 1024;  // + alignment of the stages to 1024 bytes
  static constexpr bool kSetMaxNReg = kConsumers == 2;
  static constexpr int kProducerRegisters = kProducerRegs;
  static constexpr int kConsumerRegisters = kConsumerRegs;
  static_assert(kM == 64 || kM == 128, "one or two consumer warpgroups");
  static_assert(kN % 16 == 0 && kN >= 16 && kN <= 256, "wgmma N");
  static_assert(kSharedBytes <= 227 * 1024, "shared memory");
  static_assert(!kSetMaxNReg || (kProducerRegisters >= 24 && kConsumerRegisters <= 256 &&
                                 kProducerRegisters % 8 == 0 && kConsumerRegisters % 8 == 0),
                "setmaxnreg takes 24..256 registers in steps of 8");
  static_assert(!kSetMaxNReg || (kProducerRegisters <= HopperEntryRegisters(kThreads) &&
                                 kConsumerRegisters >= HopperEntryRegisters(kThreads) &&
                                 128 * kProducerRegisters + 128 * kConsumers * kConsumerRegisters <=
                                     HopperEntryRegisters(kThreads) * kThreads),
                "the setmaxnreg split asks for more registers than the block holds at entry");
};

using HopperTile128x128 = HopperTile<128, 128, 5>;
using HopperTile128x64 = HopperTile<128, 64, 6>;
using HopperTile64x64 = HopperTile<64, 64, 6>;

template <typename T>
struct HopperGemmParams {
  CUtensorMap a_map;  // im2col 4D over X [N, H, W, C], or 2D over A [M, Kred]
  CUtensorMap b_map;  // 3D over W [K, R*S, C], or 2D over B [N, Kred]
  ImplicitGemmShape shape;
  int k_iterations = 0;    // R*S*c_blocks (im2col) or ceil(Kred / kBlockK)
  int channel_blocks = 1;  // ceil(C / kBlockK) (im2col)
  T* y = nullptr;          // [M, K] row-major (NHWC output)
  EpilogueOperands<T> epilogue;
};

template <typename T>
constexpr WgmmaType HopperWgmmaType() {
  if constexpr (std::is_same<T, __half>::value) {
    return WgmmaType::kF16;
  } else if constexpr (std::is_same<T, __nv_bfloat16>::value) {
    return WgmmaType::kBf16;
  } else {
    return WgmmaType::kTf32;
  }
}

// The producer thread's loop. T is the element type of A and B (the reduction elements of a 128-byte row); Params is
// HopperGemmParams<T> or any struct with the same a_map, b_map, shape, k_iterations and channel_blocks (the INT8
// kernel's, quantized_conv2d_hopper_kernel.cuh).
template <typename T, typename Tile, bool kIm2col, typename Params>
__device__ __forceinline__ void HopperProduce(const Params& params, uint8_t* stages, uint64_t* full, uint64_t* empty) {
  constexpr int kBlockK = Tile::kRowBytes / static_cast<int>(sizeof(T));
  const ImplicitGemmShape& shape = params.shape;
  const int block_m = blockIdx.x * Tile::kM;  // first output pixel / GEMM row of the block
  const int block_n = blockIdx.y * Tile::kN;  // first output channel
  // The filter base of the block's first output pixel (im2col): image n0, input corner (h0, w0).
  const int pq = shape.p * shape.q;
  const int n0 = block_m / pq, p0 = (block_m % pq) / shape.q, q0 = block_m % shape.q;
  const int w0 = q0 * shape.stride_w - shape.pad_w, h0 = p0 * shape.stride_h - shape.pad_h;
  for (int it = 0; it < params.k_iterations; ++it) {
    const int stage = it % Tile::kStages;
    const uint32_t round = static_cast<uint32_t>(it / Tile::kStages);
    MbarrierWait(&empty[stage], (round & 1) ^ 1);  // the consumers released the stage (round 0: fresh)
    MbarrierArriveExpectTx(&full[stage], Tile::kStageBytes);
    uint8_t* a_tile = stages + stage * Tile::kStageBytes;   // [kM][128 B]
    uint8_t* b_tile = a_tile + Tile::kM * Tile::kRowBytes;  // [kN][128 B]
    if constexpr (kIm2col) {
      const int tap = it / params.channel_blocks;  // [R*S]
      const int c0 = (it % params.channel_blocks) * kBlockK;
      const int r = tap / shape.s, s = tap % shape.s;
      TmaLoadIm2col4d(a_tile, &params.a_map, &full[stage], c0, w0, h0, n0, static_cast<uint16_t>(s * shape.dilation_w),
                      static_cast<uint16_t>(r * shape.dilation_h));
      const int32_t b_coordinates[3] = {c0, tap, block_n};
      TmaLoadTile<3>(b_tile, &params.b_map, &full[stage], b_coordinates);
    } else {
      const int32_t a_coordinates[2] = {it * kBlockK, block_m};
      const int32_t b_coordinates[2] = {it * kBlockK, block_n};
      TmaLoadTile<2>(a_tile, &params.a_map, &full[stage], a_coordinates);
      TmaLoadTile<2>(b_tile, &params.b_map, &full[stage], b_coordinates);
    }
  }
}

// A consumer warpgroup's main loop: k_iterations stages of 4 wgmmas (32 bytes of K each: k16 for FP16/BF16, k8 for
// TF32, k32 for the 8-bit integer types) into acc, the warpgroup's 64 x kN outputs; every wgmma retired on return.
template <WgmmaType kType, typename Tile, typename Accumulator>
__device__ __forceinline__ void HopperConsumeMainloop(Accumulator& acc, int k_iterations, const uint8_t* stages,
                                                      uint64_t* full, uint64_t* empty, int consumer) {
  WgmmaFenceOperands(acc);
  for (int it = 0; it < k_iterations; ++it) {
    const int stage = it % Tile::kStages;
    MbarrierWait(&full[stage], static_cast<uint32_t>(it / Tile::kStages) & 1);
    const uint8_t* a_tile = stages + stage * Tile::kStageBytes + consumer * 64 * Tile::kRowBytes;
    const uint8_t* b_tile = stages + stage * Tile::kStageBytes + Tile::kM * Tile::kRowBytes;
    WgmmaFence();
#pragma unroll
    for (int step = 0; step < 4; ++step) {  // 32 bytes of K per wgmma
      const uint64_t desc_a = MakeSmemDescriptor(a_tile + 32 * step, 16, 1024, 128);
      const uint64_t desc_b = MakeSmemDescriptor(b_tile + 32 * step, 16, 1024, 128);
      WgmmaAsync<kType, Tile::kN>(acc, desc_a, desc_b, it > 0 || step > 0);
    }
    WgmmaCommitGroup();
    WgmmaWaitGroup<1>();  // the previous iteration's wgmmas retired: its stage can be refilled
    // Every consumer thread releases the stage after its own wait (CUTLASS's PipelineTmaAsync with a cluster of
    // one): a thread's wait covers its warp's part of the wgmma only, so one thread's release could let the
    // producer refill a stage that a lagging warp still reads.
    if (it > 0) MbarrierArrive(&empty[(it - 1) % Tile::kStages]);
  }
  WgmmaWaitGroup<0>();
  WgmmaFenceOperands(acc);
}

template <typename T, typename Tile>
__device__ __forceinline__ void HopperConsume(const HopperGemmParams<T>& params, const uint8_t* stages, uint64_t* full,
                                              uint64_t* empty, int consumer, int thread) {
  WgmmaAccumulator<Tile::kN> acc;  // 64 x kN outputs of this warpgroup
  HopperConsumeMainloop<HopperWgmmaType<T>(), Tile>(acc, params.k_iterations, stages, full, empty, consumer);

  const ImplicitGemmShape& shape = params.shape;
  const int warp = thread / 32, lane = thread % 32;
  const int block_m = blockIdx.x * Tile::kM + consumer * 64;
  const int block_n = blockIdx.y * Tile::kN;
#pragma unroll
  for (int v = 0; v < WgmmaAccumulator<Tile::kN>::kRegisters; v += 2) {
    const int m = block_m + 16 * warp + lane / 4 + 8 * ((v >> 1) & 1);  // [N*P*Q]
    const int channel = block_n + 8 * (v >> 2) + 2 * (lane % 4);        // [K], even
    if (m >= shape.gemm_m || channel >= shape.k) continue;
    const int64_t offset = static_cast<int64_t>(m) * shape.k + channel;  // into Y [N*P*Q, K]
    const float first = ApplyFusedEpilogue(params.epilogue, acc[v], channel, offset);
    const float second = ApplyFusedEpilogue(params.epilogue, acc[v + 1], channel + 1, offset + 1);
    StoreElementPair(params.y + offset, first, second);
  }
}

// The warp-specialized block around the stages (1024-byte aligned, in dynamic shared memory) and their full / empty
// mbarriers: thread 0 initializes the barriers; warpgroup 0 gives registers up and its thread 0 runs produce();
// the consumer warpgroups take them and run consume(consumer, thread in the warpgroup).
template <typename Tile, typename Produce, typename Consume>
__device__ __forceinline__ void RunHopperBlock(uint64_t* full, uint64_t* empty, const Produce& produce,
                                               const Consume& consume) {
  const int tid = threadIdx.x;
  if (tid == 0) {
    for (int s = 0; s < Tile::kStages; ++s) {
      MbarrierInit(&full[s], 1);
      MbarrierInit(&empty[s], 128 * Tile::kConsumers);  // every consumer thread arrives
    }
    FenceMbarrierInit();
  }
  __syncthreads();
  const int warpgroup = tid / 128;
  if (warpgroup == 0) {
    if constexpr (Tile::kSetMaxNReg) SetMaxNRegDecrease<Tile::kProducerRegisters>();
    if (tid == 0) produce();
  } else {
    if constexpr (Tile::kSetMaxNReg) SetMaxNRegIncrease<Tile::kConsumerRegisters>();
    consume(warpgroup - 1, tid % 128);
  }
}

template <typename T, typename Tile, bool kIm2col>
__global__ void __launch_bounds__(Tile::kThreads, 1)
    HopperGemmKernel(const __grid_constant__ HopperGemmParams<T> params) {
  CONVOY_DYNAMIC_SHARED(uint8_t, dynamic_smem);
  CONVOY_SHARED_ARRAY(uint64_t, full, [Tile::kStages]);   // copies of stage s landed
  CONVOY_SHARED_ARRAY(uint64_t, empty, [Tile::kStages]);  // consumers done with stage s
  uint8_t* stages = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(dynamic_smem) + 1023) & ~uintptr_t{1023});
  RunHopperBlock<Tile>(
      full, empty, [&] { HopperProduce<T, Tile, kIm2col>(params, stages, full, empty); },
      [&](int consumer, int thread) { HopperConsume<T, Tile>(params, stages, full, empty, consumer, thread); });
}

// Launches `kernel` (a Hopper main-loop kernel taking Params) with one block per kM x kN tile of the
// params.shape.gemm_m x params.shape.k output; raises the kernel's dynamic shared-memory limit first (a host-side
// attribute, allowed during graph capture).
template <typename Tile, typename Kernel, typename Params>
cudaError_t LaunchHopperTiles(Kernel kernel, const Params& params, cudaStream_t stream) {
  const cudaError_t error =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tile::kSharedBytes);
  if (error != cudaSuccess) return error;
  const dim3 grid((params.shape.gemm_m + Tile::kM - 1) / Tile::kM, (params.shape.k + Tile::kN - 1) / Tile::kN);
  return CONVOY_LAUNCH_KERNEL(kernel, grid, dim3(Tile::kThreads), Tile::kSharedBytes, stream, params);
}

template <typename T, typename Tile, bool kIm2col>
cudaError_t LaunchHopperGemm(const HopperGemmParams<T>& params, cudaStream_t stream) {
  return LaunchHopperTiles<Tile>(HopperGemmKernel<T, Tile, kIm2col>, params, stream);
}

#define CONVOY_HOPPER_GEMM_INSTANCES(PREFIX, T)                                                                        \
  PREFIX template cudaError_t LaunchHopperGemm<T, HopperTile128x128, true>(const HopperGemmParams<T>&, cudaStream_t);  \
  PREFIX template cudaError_t LaunchHopperGemm<T, HopperTile128x64, true>(const HopperGemmParams<T>&, cudaStream_t);   \
  PREFIX template cudaError_t LaunchHopperGemm<T, HopperTile64x64, true>(const HopperGemmParams<T>&, cudaStream_t);    \
  PREFIX template cudaError_t LaunchHopperGemm<T, HopperTile128x128, false>(const HopperGemmParams<T>&, cudaStream_t); \
  PREFIX template cudaError_t LaunchHopperGemm<T, HopperTile128x64, false>(const HopperGemmParams<T>&, cudaStream_t);  \
  PREFIX template cudaError_t LaunchHopperGemm<T, HopperTile64x64, false>(const HopperGemmParams<T>&, cudaStream_t);

#if !defined(CONVOY_HOPPER_GEMM_DEFINE_INSTANCES)
CONVOY_HOPPER_GEMM_INSTANCES(extern, __half)
CONVOY_HOPPER_GEMM_INSTANCES(extern, __nv_bfloat16)
CONVOY_HOPPER_GEMM_INSTANCES(extern, float)
#endif

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_CONV2D_HOPPER_KERNEL_CUH_
