// Emulated Hopper (sm_90a) instructions: wgmma.mma_async with its shared-memory matrix descriptors, wgmma.fence /
// commit_group / wait_group, mbarrier (init, arrive, expect_tx, try_wait.parity, transaction counts, phases),
// cp.async.bulk.tensor (tiled and im2col, 2D-5D, from tensor_map.h's maps), fence.proxy.async, fence.mbarrier_init
// and setmaxnreg. Kernel sources call the wrappers of hopper.cuh (inline PTX under nvcc, these functions here).
//
// The model follows the PTX ISA (9.7.15 wgmma, 9.7.13.15 mbarrier, 9.7.9.25 cp.async.bulk.tensor, 5.5 tensors):
//   - warpgroup = warps 4w..4w+3; wgmma.mma_async and setmaxnreg are warpgroup collectives (all 128 threads, same
//     source line, uniform operands), a block without the whole warpgroup fails the launch;
//   - the matrix descriptor: bits 0-13 start address >> 4, 16-29 leading byte offset >> 4, 32-45 stride byte offset
//     >> 4, 49-51 base offset, 62-63 swizzle (0 none, 1 128B, 2 64B, 3 32B). Element (mn, k) of an operand lies at
//     the canonical layout's address (WgmmaOperandElementAddress), then the swizzle XORs address bits [4, 4+b) with
//     bits [7, 7+b) (b = 1, 2, 3 for 32B, 64B, 128B; the base offset shifts the row phase of a pattern that does not
//     start on its 256/512/1024-byte boundary). The bulk tensor copy writes shared memory through the same swizzle.
//   - wgmma is asynchronous: the result reaches a thread's accumulator registers at the wgmma.wait_group that covers
//     it (until then they hold NaN); reading or writing accumulator or A registers of an in-flight wgmma, a register
//     access between the last wgmma.fence and a wgmma that uses the registers, a wgmma with no wgmma.fence before it,
//     shared memory changed by ordinary stores without fence.proxy.async before a wgmma reads it, shared memory a
//     bulk copy has not written yet, and shared memory of an in-flight wgmma overwritten before its wait: each fails
//     the launch with the instruction's source line. A thread's wgmma.wait_group covers its own part of the
//     operation only: the shared memory a wgmma reads stays in use until every thread of the warpgroup waited for it
//     (each warp's part runs on its own on hardware, so a stage released after one thread's wait can be refilled
//     while a lagging warp still reads it);
//   - mbarrier: a phase completes when its pending arrivals and its transaction count both reach zero; try_wait.parity
//     P succeeds once the phase of parity P completed; a wait that can never succeed is a deadlock report listing
//     every mbarrier's state instead of a hang;
//   - bulk tensor copies land (bytes written, complete_tx on the mbarrier) only when no thread can run, as late as
//     possible, so a read before the mbarrier wait sees the 0xFF poison; the mbarrier they signal must have been made
//     visible to the async proxy (fence.proxy.async or fence.mbarrier_init after mbarrier.init).
// Products are exact and summed in double, rounded to float once (TF32 inputs keep their top 19 bits). The integer
// forms (.s32.s8.s8, .s32.u8.s8: k32, one byte per element, both operands K-major as the ISA requires for 8-bit types)
// sum exactly in 64 bits and wrap to int32 (no .satfinite), as the tensor core does.
#ifndef CONVOY_KERNELS_CUDA_EMULATION_HOPPER_EMULATION_H_
#define CONVOY_KERNELS_CUDA_EMULATION_HOPPER_EMULATION_H_

#include <cstdint>

#include "kernels/cuda_emulation/block_scheduler.h"
#include "kernels/cuda_emulation/tensor_map.h"

namespace convoy::cuda_emulation {

struct WgmmaOperation;

// The emulation state every wgmma register fragment carries (WgmmaAccumulator, WgmmaFragmentA in hopper.cuh).
// Plain data (no owning pointer): a block that fails is abandoned with its threads' stacks, which must then hold no
// heap memory (the operations are owned by the block's Hopper state).
struct WgmmaRegisterState {
  WgmmaOperation* in_flight = nullptr;  // the latest wgmma reading or writing these registers, until its wait
  int64_t access_epoch = -1;            // the thread's wgmma.fence count at its last access of the registers
};
// Every access of a fragment's registers by the kernel goes through this check.
void CheckWgmmaRegisterAccess(WgmmaRegisterState& state);

// kS8S8 and kU8S8 are the integer forms .s32.s8.s8 and .s32.u8.s8 (A unsigned): int32 accumulators.
enum class WgmmaType { kF16, kBf16, kTf32, kS8S8, kU8S8 };
constexpr bool WgmmaIsInteger(WgmmaType type) { return type == WgmmaType::kS8S8 || type == WgmmaType::kU8S8; }
// K of one wgmma of the type: 32 bytes of each row of A and B.
constexpr int WgmmaK(WgmmaType type) {
  return type == WgmmaType::kTf32 ? 8 : WgmmaIsInteger(type) ? 32 : 16;
}
constexpr int WgmmaElementBytes(WgmmaType type) { return 32 / WgmmaK(type); }

// wgmma.mma_async.sync.aligned.m64n{n}k{16|8}.f32.{f16|bf16|tf32} or m64n{n}k32.s32.{s8|u8}.s8: d (n/2 registers per
// thread: floats, or the int32 bit patterns for the integer types) = a * b + (scale_d ? d : 0), a from shared memory
// (desc_a) or, when a_registers is set, from 4 registers per thread; b from shared memory. transpose_a/b select the
// MN-major layouts (16-bit types only).
struct WgmmaInstruction {
  WgmmaType type = WgmmaType::kF16;
  int n = 8;
  bool scale_d = true;
  int scale_a = 1, scale_b = 1;
  bool transpose_a = false, transpose_b = false;
};
void WgmmaMmaAsync(const WgmmaInstruction& instruction, float* d, WgmmaRegisterState& d_state,
                   const uint32_t* a_registers, WgmmaRegisterState* a_state, uint64_t desc_a, uint64_t desc_b,
                   SourceLocation where);
void WgmmaFence(SourceLocation where);
void WgmmaCommitGroup(SourceLocation where);
void WgmmaWaitGroup(int pending, SourceLocation where);

// The descriptor model, as pure functions (tested against tables written from the ISA).
struct MatrixDescriptor {
  uint32_t start_address = 0;        // bytes
  uint32_t leading_byte_offset = 0;  // bytes
  uint32_t stride_byte_offset = 0;   // bytes
  int base_offset = 0;
  int swizzle_bytes = 0;  // 0 (none), 32, 64 or 128
};
MatrixDescriptor DecodeMatrixDescriptor(uint64_t descriptor);
uint64_t EncodeMatrixDescriptor(const MatrixDescriptor& descriptor);
// The shared address the swizzle mode maps `address` to (what a TMA write or a wgmma read touches).
uint32_t SwizzleSharedAddress(uint32_t address, int swizzle_bytes, int base_offset);
// The shared address of element (mn, k) (row or column mn of M or N, k of K) of a wgmma operand of `element_bytes`
// per element described by `descriptor`: K-major (elements of a row of K contiguous) unless mn_major.
uint32_t WgmmaOperandElementAddress(const MatrixDescriptor& descriptor, bool mn_major, int element_bytes, int mn,
                                    int k);

// mbarrier.init / inval / arrive / expect_tx / arrive.expect_tx / test_wait.parity / try_wait.parity loop.
void MbarrierInit(void* barrier, uint32_t count, SourceLocation where);
void MbarrierInval(void* barrier, SourceLocation where);
uint64_t MbarrierArrive(void* barrier, uint32_t count, SourceLocation where);
void MbarrierExpectTx(void* barrier, uint32_t bytes, SourceLocation where);
uint64_t MbarrierArriveExpectTx(void* barrier, uint32_t bytes, SourceLocation where);
bool MbarrierTestWaitParity(void* barrier, uint32_t parity, SourceLocation where);
void MbarrierWaitParity(void* barrier, uint32_t parity, SourceLocation where);

void FenceProxyAsyncShared(SourceLocation where);
void FenceMbarrierInit(SourceLocation where);

// cp.async.bulk.tensor.{rank}d.shared::cluster.global{.tile|.im2col}.mbarrier::complete_tx::bytes: coordinates
// innermost first; im2col_offsets (rank - 2 of them, W first) select im2col mode, nullptr the tiled mode.
void BulkTensorLoad(void* shared_destination, const void* tensor_map, int rank, const int32_t* coordinates,
                    const uint16_t* im2col_offsets, void* barrier, SourceLocation where);

// setmaxnreg.{inc|dec}.sync.aligned.u32: a warpgroup collective; registers in [24, 256], a multiple of 8, the same in
// every thread of the warpgroup.
void SetMaxNReg(bool increase, int registers, SourceLocation where);

}  // namespace convoy::cuda_emulation

#endif  // CONVOY_KERNELS_CUDA_EMULATION_HOPPER_EMULATION_H_
