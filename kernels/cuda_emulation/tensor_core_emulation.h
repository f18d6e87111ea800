// Emulated warp-level matrix instructions and asynchronous copies: mma.sync (m16n8k16 f16/bf16, m16n8k8 tf32,
// m16n8k32 s8 x s8 and u8 x s8 into s32),
// ldmatrix (x1/x2/x4, .trans) and cp.async (ca/cg, commit_group, wait_group). Kernel sources call the wrappers in
// tensor_core.cuh, which use inline PTX under nvcc and these functions in emulation.
//
// mma and ldmatrix are warp collectives: all 32 lanes must call them (the rendezvous checks it); each lane brings its
// fragment in the register layout the PTX ISA documents and gets its part of the result back. The products of the
// 16-bit and TF32 inputs are exact and accumulated in double, then rounded to float once (the GPU's accumulation
// order and rounding differ in the last bits: compare with a tolerance). The 8-bit integer forms are exact: products
// and sums in 64 bits, the result wrapped to 32 bits as the GPU's s32 accumulator wraps without .satfinite.
//
// cp.async copies really are asynchronous here: a copy lands in shared memory only when cp.async.wait_group (or
// wait_all) covers its group, so reading the destination too early reads the 0xFF poison. The source is read at issue
// (so ASAN blames the issuing line). Misaligned or non-shared destinations and misaligned sources fail the launch.
#ifndef CONVOY_KERNELS_CUDA_EMULATION_TENSOR_CORE_EMULATION_H_
#define CONVOY_KERNELS_CUDA_EMULATION_TENSOR_CORE_EMULATION_H_

#include <cstdint>

#include "kernels/cuda_emulation/block_scheduler.h"

namespace convoy::cuda_emulation {

// acc (4 floats) += A (16x16, 4 regs of f16x2) * B (16x8, 2 regs of f16x2); .row.col layouts.
void MmaM16N8K16F16F32(float acc[4], const uint32_t a[4], const uint32_t b[2], SourceLocation where);
// Same with bfloat16 inputs.
void MmaM16N8K16Bf16F32(float acc[4], const uint32_t a[4], const uint32_t b[2], SourceLocation where);
// acc (4 floats) += A (16x8, 4 tf32 regs) * B (8x8, 2 tf32 regs). The low 13 bits of each input are ignored.
void MmaM16N8K8Tf32F32(float acc[4], const uint32_t a[4], const uint32_t b[2], SourceLocation where);
// acc (4 int32) += A (16x32, 4 regs of 4 signed bytes) * B (32x8, 2 regs of 4 signed bytes); .row.col layouts:
// mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32.
void MmaM16N8K32S8S8S32(int32_t acc[4], const uint32_t a[4], const uint32_t b[2], SourceLocation where);
// The same with unsigned bytes in A: mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32.
void MmaM16N8K32U8S8S32(int32_t acc[4], const uint32_t a[4], const uint32_t b[2], SourceLocation where);

// ldmatrix.sync.aligned.m8n8.x{matrices}{.trans}.shared.b16: lane 8*i + r gives the address of row r of matrix i.
void LdMatrix(int matrices, bool transpose, uint32_t* out, const void* row_address, SourceLocation where);

// cp.async.{ca,cg}.shared.global: copies `source_bytes` (<= copy_bytes) and zero-fills the rest of copy_bytes.
void CpAsync(void* shared_destination, const void* global_source, int copy_bytes, int source_bytes,
             SourceLocation where);
void CpAsyncCommitGroup();
// Completes every committed group except the `pending` most recent ones.
void CpAsyncWaitGroup(int pending);
void CpAsyncWaitAll();

// cvt.rna.tf32.f32: round to the 10-bit TF32 mantissa, ties away from zero; the result is a float bit pattern.
uint32_t FloatToTf32Bits(float value);

}  // namespace convoy::cuda_emulation

#endif  // CONVOY_KERNELS_CUDA_EMULATION_TENSOR_CORE_EMULATION_H_
