// Hopper (sm_90a) device instructions that work in both modes: inline PTX under nvcc (built only with
// -gencode=arch=compute_90a,code=sm_90a), the CUDA emulation's model otherwise (hopper_emulation.h). Include after
// cuda_compat.cuh, only from .cu files built for sm_90a.
//
//   WgmmaAccumulator<N[, T]>            the n/2 accumulator registers of one m64nN wgmma per thread (acc[i]): float,
//                                       or int32_t for the integer types (kS8S8: .s32.s8.s8, kU8S8: .s32.u8.s8, k32)
//   WgmmaFragmentA                      4 registers of A for the register-source wgmma
//   MakeSmemDescriptor(p, lbo, sbo, swizzle_bytes[, base_offset])   the 64-bit shared-memory matrix descriptor
//   WgmmaAsync<type, N[, transA, transB]>(acc, desc_a | a_fragment, desc_b, accumulate)   wgmma.mma_async
//   WgmmaFence(), WgmmaCommitGroup(), WgmmaWaitGroup<N>(), WgmmaFenceOperands(acc)
//   MbarrierInit / MbarrierArrive / MbarrierArriveExpectTx / MbarrierWait(barrier, parity)
//   FenceProxyAsyncShared(), FenceMbarrierInit()
//   TmaLoadTile<rank>(dst, map, barrier, coords...), TmaLoadIm2col4d(dst, map, barrier, c, w, h, n, off_w, off_h)
//   SetMaxNRegIncrease<N>(), SetMaxNRegDecrease<N>()
// Every register access of a fragment goes through operator[], which the emulation checks against in-flight wgmmas
// and wgmma.fence. The accumulator fragment layout is the ISA's: register v of thread t holds row 16*(t/32) +
// (t%32)/4 + 8*((v/2)%2), column 8*(v/4) + 2*(t%4) + v%2.
#ifndef CONVOY_KERNELS_CUDA_EMULATION_HOPPER_CUH_
#define CONVOY_KERNELS_CUDA_EMULATION_HOPPER_CUH_

#include <cstdint>
#include <type_traits>

#include "kernels/cuda_emulation/cuda_compat.cuh"

#if defined(CONVOY_CUDA_REAL)
#include <cuda.h>
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "hopper.cuh needs the sm_90a target: -gencode=arch=compute_90a,code=sm_90a"
#endif
#else
#include "kernels/cuda_emulation/hopper_emulation.h"
#include "kernels/cuda_emulation/tensor_map.h"
#endif

namespace convoy::cuda {

#if defined(CONVOY_CUDA_REAL)
enum class WgmmaType { kF16, kBf16, kTf32, kS8S8, kU8S8 };
constexpr bool WgmmaIsInteger(WgmmaType type) { return type == WgmmaType::kS8S8 || type == WgmmaType::kU8S8; }
#else
using WgmmaType = ::convoy::cuda_emulation::WgmmaType;
using ::convoy::cuda_emulation::WgmmaIsInteger;
#endif

template <int kN, typename T = float>
struct WgmmaAccumulator {
  static_assert(kN % 8 == 0 && kN >= 8 && kN <= 256, "wgmma N is a multiple of 8 in [8, 256]");
  static_assert(sizeof(T) == 4, "float or int32_t accumulators");
  static constexpr int kRegisters = kN / 2;
  T reg[kRegisters];
#if defined(CONVOY_CUDA_REAL)
  __device__ __forceinline__ T& operator[](int i) { return reg[i]; }
#else
  ::convoy::cuda_emulation::WgmmaRegisterState emulation;
  T& operator[](int i) {
    ::convoy::cuda_emulation::CheckWgmmaRegisterAccess(emulation);
    return reg[i];
  }
#endif
};

struct WgmmaFragmentA {
  uint32_t reg[4];
#if defined(CONVOY_CUDA_REAL)
  __device__ __forceinline__ uint32_t& operator[](int i) { return reg[i]; }
#else
  ::convoy::cuda_emulation::WgmmaRegisterState emulation;
  uint32_t& operator[](int i) {
    ::convoy::cuda_emulation::CheckWgmmaRegisterAccess(emulation);
    return reg[i];
  }
#endif
};

__device__ __forceinline__ uint32_t SharedWindowAddress(const void* pointer) {
#if defined(CONVOY_CUDA_REAL)
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
#else
  return ::convoy::cuda_emulation::BlockScheduler::Current().SharedAddress(pointer);
#endif
}

// The matrix descriptor of an operand at `matrix` (16-byte aligned shared memory): leading / stride byte offsets
// in bytes, swizzle_bytes 0, 32, 64 or 128.
__device__ __forceinline__ uint64_t MakeSmemDescriptor(const void* matrix, uint32_t leading_byte_offset,
                                                       uint32_t stride_byte_offset, int swizzle_bytes,
                                                       int base_offset = 0) {
  const uint64_t mode = swizzle_bytes == 128 ? 1 : swizzle_bytes == 64 ? 2 : swizzle_bytes == 32 ? 3 : 0;
  return (uint64_t{(SharedWindowAddress(matrix) & 0x3FFFFu) >> 4}) |
         (uint64_t{(leading_byte_offset & 0x3FFFFu) >> 4} << 16) |
         (uint64_t{(stride_byte_offset & 0x3FFFFu) >> 4} << 32) | (uint64_t(base_offset & 7) << 49) | (mode << 62);
}

#if defined(CONVOY_CUDA_REAL)
template <WgmmaType kType, int kN, int kTransA, int kTransB>
struct WgmmaSS;
template <WgmmaType kType, int kN, int kTransA, int kTransB>
struct WgmmaRS;
#include "kernels/cuda_emulation/wgmma_instructions.inc"
#endif

// The accumulator element of a wgmma type: int32_t for the integer forms, float otherwise.
template <WgmmaType kType>
using WgmmaAccumulatorElement = std::conditional_t<WgmmaIsInteger(kType), int32_t, float>;

// wgmma.mma_async with A and B from shared memory: acc = A * B + (accumulate ? acc : 0).
template <WgmmaType kType, int kN, bool kTransA = false, bool kTransB = false, typename T>
__device__ __forceinline__ void WgmmaAsync(WgmmaAccumulator<kN, T>& acc, uint64_t desc_a, uint64_t desc_b,
                                           bool accumulate CONVOY_CALLER_LOCATION) {
  static_assert(std::is_same<T, WgmmaAccumulatorElement<kType>>::value, "int32_t accumulators for integer types");
  static_assert(!WgmmaIsInteger(kType) || (!kTransA && !kTransB), "8-bit operands are K-major");
#if defined(CONVOY_CUDA_REAL)
  WgmmaSS<kType, kN, kTransA ? 1 : 0, kTransB ? 1 : 0>::Run(acc.reg, desc_a, desc_b, accumulate ? 1u : 0u);
#else
  ::convoy::cuda_emulation::WgmmaInstruction instruction;
  instruction.type = kType;
  instruction.n = kN;
  instruction.scale_d = accumulate;
  instruction.transpose_a = kTransA;
  instruction.transpose_b = kTransB;
  // The emulation moves the 32-bit registers as they are (int32 bit patterns for the integer types).
  ::convoy::cuda_emulation::WgmmaMmaAsync(instruction, reinterpret_cast<float*>(acc.reg), acc.emulation, nullptr,
                                          nullptr, desc_a, desc_b, CONVOY_HERE_);
#endif
}

// wgmma.mma_async with A from registers (a fragment per thread) and B from shared memory.
template <WgmmaType kType, int kN, bool kTransB = false, typename T>
__device__ __forceinline__ void WgmmaAsync(WgmmaAccumulator<kN, T>& acc, WgmmaFragmentA& a, uint64_t desc_b,
                                           bool accumulate CONVOY_CALLER_LOCATION) {
  static_assert(std::is_same<T, WgmmaAccumulatorElement<kType>>::value, "int32_t accumulators for integer types");
  static_assert(!WgmmaIsInteger(kType) || !kTransB, "8-bit operands are K-major");
#if defined(CONVOY_CUDA_REAL)
  WgmmaRS<kType, kN, 0, kTransB ? 1 : 0>::Run(acc.reg, a.reg, desc_b, accumulate ? 1u : 0u);
#else
  ::convoy::cuda_emulation::WgmmaInstruction instruction;
  instruction.type = kType;
  instruction.n = kN;
  instruction.scale_d = accumulate;
  instruction.transpose_b = kTransB;
  ::convoy::cuda_emulation::WgmmaMmaAsync(instruction, reinterpret_cast<float*>(acc.reg), acc.emulation, a.reg,
                                          &a.emulation, 0, desc_b, CONVOY_HERE_);
#endif
}

__device__ __forceinline__ void WgmmaFence(CONVOY_CALLER_LOCATION_FIRST) {
#if defined(CONVOY_CUDA_REAL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#else
  ::convoy::cuda_emulation::WgmmaFence(CONVOY_HERE_);
#endif
}

__device__ __forceinline__ void WgmmaCommitGroup(CONVOY_CALLER_LOCATION_FIRST) {
#if defined(CONVOY_CUDA_REAL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
  ::convoy::cuda_emulation::WgmmaCommitGroup(CONVOY_HERE_);
#endif
}

// Waits until at most kPending committed wgmma groups of this thread are in flight.
template <int kPending>
__device__ __forceinline__ void WgmmaWaitGroup(CONVOY_CALLER_LOCATION_FIRST) {
  static_assert(kPending >= 0 && kPending <= 7, "wgmma.wait_group takes 0..7");
#if defined(CONVOY_CUDA_REAL)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#else
  ::convoy::cuda_emulation::WgmmaWaitGroup(kPending, CONVOY_HERE_);
#endif
}

// Keeps the compiler from moving accesses of the accumulators across the asynchronous wgmma instructions (call it
// before the first wgmma and after the wait, as CUTLASS's warpgroup_fence_operand does). Nothing to do in emulation.
template <int kN, typename T>
__device__ __forceinline__ void WgmmaFenceOperands(WgmmaAccumulator<kN, T>& acc) {
#if defined(CONVOY_CUDA_REAL)
#pragma unroll
  for (int i = 0; i < WgmmaAccumulator<kN, T>::kRegisters; ++i) {
    if constexpr (std::is_same<T, float>::value) {
      asm volatile("" : "+f"(acc.reg[i])::"memory");
    } else {
      asm volatile("" : "+r"(acc.reg[i])::"memory");
    }
  }
#else
  (void)acc;
#endif
}

// ----------------------------------------------------------------------------------------------------- mbarrier

__device__ __forceinline__ void MbarrierInit(uint64_t* barrier, uint32_t count CONVOY_CALLER_LOCATION) {
#if defined(CONVOY_CUDA_REAL)
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(SharedWindowAddress(barrier)), "r"(count)
               : "memory");
#else
  ::convoy::cuda_emulation::MbarrierInit(barrier, count, CONVOY_HERE_);
#endif
}

__device__ __forceinline__ void MbarrierArrive(uint64_t* barrier CONVOY_CALLER_LOCATION) {
#if defined(CONVOY_CUDA_REAL)
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(
                   SharedWindowAddress(barrier))
               : "memory");
#else
  ::convoy::cuda_emulation::MbarrierArrive(barrier, 1, CONVOY_HERE_);
#endif
}

// Adds `bytes` to the phase's transaction count and arrives (what the producer does before issuing the copies).
__device__ __forceinline__ void MbarrierArriveExpectTx(uint64_t* barrier, uint32_t bytes CONVOY_CALLER_LOCATION) {
#if defined(CONVOY_CUDA_REAL)
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n" ::"r"(
                   SharedWindowAddress(barrier)),
               "r"(bytes)
               : "memory");
#else
  ::convoy::cuda_emulation::MbarrierArriveExpectTx(barrier, bytes, CONVOY_HERE_);
#endif
}

// Waits until the phase of parity `parity` completed (mbarrier.try_wait.parity in a loop).
__device__ __forceinline__ void MbarrierWait(uint64_t* barrier, uint32_t parity CONVOY_CALLER_LOCATION) {
#if defined(CONVOY_CUDA_REAL)
  asm volatile(
      "{\n.reg .pred done;\nwait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}\n" ::"r"(SharedWindowAddress(barrier)),
      "r"(parity)
      : "memory");
#else
  ::convoy::cuda_emulation::MbarrierWaitParity(barrier, parity, CONVOY_HERE_);
#endif
}

// Orders this thread's ordinary shared-memory stores before later async-proxy accesses (wgmma, bulk copies).
__device__ __forceinline__ void FenceProxyAsyncShared(CONVOY_CALLER_LOCATION_FIRST) {
#if defined(CONVOY_CUDA_REAL)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#else
  ::convoy::cuda_emulation::FenceProxyAsyncShared(CONVOY_HERE_);
#endif
}

// Makes prior mbarrier.init visible to the async proxy (bulk copies completing on the barrier).
__device__ __forceinline__ void FenceMbarrierInit(CONVOY_CALLER_LOCATION_FIRST) {
#if defined(CONVOY_CUDA_REAL)
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#else
  ::convoy::cuda_emulation::FenceMbarrierInit(CONVOY_HERE_);
#endif
}

// ------------------------------------------------------------------------------------------ bulk tensor copies

// cp.async.bulk.tensor tiled mode, 2D-5D: the box at `coordinates` (innermost first) into `destination` (128-byte
// aligned shared memory); completes `bytes` of transactions on `barrier`.
template <int kRank>
__device__ __forceinline__ void TmaLoadTile(void* destination, const CUtensorMap* map, uint64_t* barrier,
                                            const int32_t (&c)[kRank] CONVOY_CALLER_LOCATION) {
  static_assert(kRank >= 2 && kRank <= 5, "tiled bulk tensor copies here are 2D-5D");
#if defined(CONVOY_CUDA_REAL)
  const uint32_t dst = SharedWindowAddress(destination), bar = SharedWindowAddress(barrier);
  const uint64_t m = reinterpret_cast<uint64_t>(map);
  if constexpr (kRank == 2) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], "
        "[%2];\n" ::"r"(dst),
        "l"(m), "r"(bar), "r"(c[0]), "r"(c[1])
        : "memory");
  } else if constexpr (kRank == 3) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
        "[%2];\n" ::"r"(dst),
        "l"(m), "r"(bar), "r"(c[0]), "r"(c[1]), "r"(c[2])
        : "memory");
  } else if constexpr (kRank == 4) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, "
        "%6}], [%2];\n" ::"r"(dst),
        "l"(m), "r"(bar), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3])
        : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, "
        "%6, %7}], [%2];\n" ::"r"(dst),
        "l"(m), "r"(bar), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4])
        : "memory");
  }
#else
  ::convoy::cuda_emulation::BulkTensorLoad(destination, map, kRank, c, nullptr, barrier, CONVOY_HERE_);
#endif
}

// cp.async.bulk.tensor.4d im2col mode for an NHWC tensor: pixels_per_column pixels from the filter base (w, h) of
// image n (the map's bounding box and traversal strides walk the output pixels), each at (w + off_w, h + off_h),
// channels c.. c + channels_per_pixel - 1.
__device__ __forceinline__ void TmaLoadIm2col4d(void* destination, const CUtensorMap* map, uint64_t* barrier, int32_t c,
                                                int32_t w, int32_t h, int32_t n, uint16_t off_w,
                                                uint16_t off_h CONVOY_CALLER_LOCATION) {
#if defined(CONVOY_CUDA_REAL)
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, "
      "%6}], [%2], {%7, %8};\n" ::"r"(SharedWindowAddress(destination)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(SharedWindowAddress(barrier)), "r"(c), "r"(w), "r"(h), "r"(n),
      "h"(off_w), "h"(off_h)
      : "memory");
#else
  const int32_t coordinates[4] = {c, w, h, n};
  const uint16_t offsets[2] = {off_w, off_h};
  ::convoy::cuda_emulation::BulkTensorLoad(destination, map, 4, coordinates, offsets, barrier, CONVOY_HERE_);
#endif
}

// ------------------------------------------------------------------------------------------------- setmaxnreg

template <int kRegisters>
__device__ __forceinline__ void SetMaxNRegIncrease(CONVOY_CALLER_LOCATION_FIRST) {
  static_assert(kRegisters >= 24 && kRegisters <= 256 && kRegisters % 8 == 0, "setmaxnreg takes 24..256, step 8");
#if defined(CONVOY_CUDA_REAL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
#else
  ::convoy::cuda_emulation::SetMaxNReg(true, kRegisters, CONVOY_HERE_);
#endif
}

template <int kRegisters>
__device__ __forceinline__ void SetMaxNRegDecrease(CONVOY_CALLER_LOCATION_FIRST) {
  static_assert(kRegisters >= 24 && kRegisters <= 256 && kRegisters % 8 == 0, "setmaxnreg takes 24..256, step 8");
#if defined(CONVOY_CUDA_REAL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
#else
  ::convoy::cuda_emulation::SetMaxNReg(false, kRegisters, CONVOY_HERE_);
#endif
}

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_EMULATION_HOPPER_CUH_
