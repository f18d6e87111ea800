// Warp-level matrix and asynchronous-copy device functions that work in both modes: inline PTX under nvcc, the
// warp rendezvous of the CUDA emulation otherwise (tensor_core_emulation.h). Included by cuda_compat.cuh.
//
//   MmaM16N8K16F16(acc, a, b)    acc[4] += A(16x16 f16, 4 regs) * B(16x8 f16, 2 regs)    mma.sync ... .f32.f16.f16.f32
//   MmaM16N8K16Bf16(acc, a, b)   the same with bfloat16 inputs                          .f32.bf16.bf16.f32
//   MmaM16N8K8Tf32(acc, a, b)    acc[4] += A(16x8 tf32, 4 regs) * B(8x8 tf32, 2 regs)    m16n8k8 .f32.tf32.tf32.f32
//   MmaM16N8K32S8(acc, a, b)     int acc[4] += A(16x32 s8, 4 regs) * B(32x8 s8, 2 regs)  m16n8k32 .s32.s8.s8.s32
//   MmaM16N8K32U8S8(acc, a, b)   the same with unsigned bytes in A                       m16n8k32 .s32.u8.s8.s32
//   LdMatrixX1/X2/X4[Trans](regs, row_address)   ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16
//   CpAsyncCa<4|8|16>(dst, src, src_bytes), CpAsyncCg16(dst, src, src_bytes)   cp.async (zero-fills past src_bytes)
//   CpAsyncCommitGroup(), CpAsyncWaitGroup<N>(), CpAsyncWaitAll()
//   FloatToTf32(x)               cvt.rna.tf32.f32 (as a uint32_t register for the mma)
//   PackHalf2 / PackBfloat162    two 16-bit values into one register, the first in the low half
// Fragment layouts are those of the PTX ISA (see tensor_core_emulation.cc for the summary). All 32 lanes of the warp
// must call mma and ldmatrix together.
#ifndef CONVOY_KERNELS_CUDA_EMULATION_TENSOR_CORE_CUH_
#define CONVOY_KERNELS_CUDA_EMULATION_TENSOR_CORE_CUH_

#include <cstdint>

#if !defined(CONVOY_CUDA_REAL)
#include "kernels/cuda_emulation/cuda_emulation.h"
// The caller's source line, for the emulation's error messages.
#define CONVOY_CALLER_LOCATION , const char *convoy_file = __builtin_FILE(), int convoy_line = __builtin_LINE()
#define CONVOY_CALLER_LOCATION_FIRST const char *convoy_file = __builtin_FILE(), int convoy_line = __builtin_LINE()
#define CONVOY_HERE_ \
  ::convoy::cuda_emulation::SourceLocation { convoy_file, convoy_line }
#else
#define CONVOY_CALLER_LOCATION
#define CONVOY_CALLER_LOCATION_FIRST
#endif

namespace convoy::cuda {

#if defined(CONVOY_CUDA_REAL)
__device__ __forceinline__ uint32_t SharedAddress(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}
#endif

__device__ __forceinline__ void MmaM16N8K16F16(float acc[4], const uint32_t a[4],
                                               const uint32_t b[2] CONVOY_CALLER_LOCATION) {
#if defined(CONVOY_CUDA_REAL)
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  ::convoy::cuda_emulation::MmaM16N8K16F16F32(acc, a, b, CONVOY_HERE_);
#endif
}

__device__ __forceinline__ void MmaM16N8K16Bf16(float acc[4], const uint32_t a[4],
                                                const uint32_t b[2] CONVOY_CALLER_LOCATION) {
#if defined(CONVOY_CUDA_REAL)
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  ::convoy::cuda_emulation::MmaM16N8K16Bf16F32(acc, a, b, CONVOY_HERE_);
#endif
}

__device__ __forceinline__ void MmaM16N8K8Tf32(float acc[4], const uint32_t a[4],
                                               const uint32_t b[2] CONVOY_CALLER_LOCATION) {
#if defined(CONVOY_CUDA_REAL)
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  ::convoy::cuda_emulation::MmaM16N8K8Tf32F32(acc, a, b, CONVOY_HERE_);
#endif
}

// The 8-bit integer forms (sm_80 and later): four bytes per register, the lowest k in the lowest byte; exact products,
// the s32 sums wrap (no .satfinite).
__device__ __forceinline__ void MmaM16N8K32S8(int32_t acc[4], const uint32_t a[4],
                                              const uint32_t b[2] CONVOY_CALLER_LOCATION) {
#if defined(CONVOY_CUDA_REAL)
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  ::convoy::cuda_emulation::MmaM16N8K32S8S8S32(acc, a, b, CONVOY_HERE_);
#endif
}

__device__ __forceinline__ void MmaM16N8K32U8S8(int32_t acc[4], const uint32_t a[4],
                                                const uint32_t b[2] CONVOY_CALLER_LOCATION) {
#if defined(CONVOY_CUDA_REAL)
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  ::convoy::cuda_emulation::MmaM16N8K32U8S8S32(acc, a, b, CONVOY_HERE_);
#endif
}

__device__ __forceinline__ uint32_t FloatToTf32(float value) {
#if defined(CONVOY_CUDA_REAL)
  uint32_t result;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(result) : "f"(value));
  return result;
#else
  return ::convoy::cuda_emulation::FloatToTf32Bits(value);
#endif
}

__device__ __forceinline__ uint32_t PackHalf2(__half low, __half high) {
  return static_cast<uint32_t>(__half_as_ushort(low)) | (static_cast<uint32_t>(__half_as_ushort(high)) << 16);
}

__device__ __forceinline__ uint32_t PackBfloat162(__nv_bfloat16 low, __nv_bfloat16 high) {
  return static_cast<uint32_t>(__bfloat16_as_ushort(low)) | (static_cast<uint32_t>(__bfloat16_as_ushort(high)) << 16);
}

// ldmatrix: lane 8*i + r passes the address of row r (16 bytes) of matrix i.
__device__ __forceinline__ void LdMatrixX1(uint32_t regs[1], const void* row_address CONVOY_CALLER_LOCATION) {
#if defined(CONVOY_CUDA_REAL)
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
               : "=r"(regs[0])
               : "r"(SharedAddress(row_address)));
#else
  ::convoy::cuda_emulation::LdMatrix(1, false, regs, row_address, CONVOY_HERE_);
#endif
}

__device__ __forceinline__ void LdMatrixX2(uint32_t regs[2], const void* row_address CONVOY_CALLER_LOCATION) {
#if defined(CONVOY_CUDA_REAL)
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(regs[0]), "=r"(regs[1])
               : "r"(SharedAddress(row_address)));
#else
  ::convoy::cuda_emulation::LdMatrix(2, false, regs, row_address, CONVOY_HERE_);
#endif
}

__device__ __forceinline__ void LdMatrixX4(uint32_t regs[4], const void* row_address CONVOY_CALLER_LOCATION) {
#if defined(CONVOY_CUDA_REAL)
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(regs[0]), "=r"(regs[1]), "=r"(regs[2]), "=r"(regs[3])
               : "r"(SharedAddress(row_address)));
#else
  ::convoy::cuda_emulation::LdMatrix(4, false, regs, row_address, CONVOY_HERE_);
#endif
}

__device__ __forceinline__ void LdMatrixX1Trans(uint32_t regs[1], const void* row_address CONVOY_CALLER_LOCATION) {
#if defined(CONVOY_CUDA_REAL)
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
               : "=r"(regs[0])
               : "r"(SharedAddress(row_address)));
#else
  ::convoy::cuda_emulation::LdMatrix(1, true, regs, row_address, CONVOY_HERE_);
#endif
}

__device__ __forceinline__ void LdMatrixX2Trans(uint32_t regs[2], const void* row_address CONVOY_CALLER_LOCATION) {
#if defined(CONVOY_CUDA_REAL)
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(regs[0]), "=r"(regs[1])
               : "r"(SharedAddress(row_address)));
#else
  ::convoy::cuda_emulation::LdMatrix(2, true, regs, row_address, CONVOY_HERE_);
#endif
}

__device__ __forceinline__ void LdMatrixX4Trans(uint32_t regs[4], const void* row_address CONVOY_CALLER_LOCATION) {
#if defined(CONVOY_CUDA_REAL)
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(regs[0]), "=r"(regs[1]), "=r"(regs[2]), "=r"(regs[3])
               : "r"(SharedAddress(row_address)));
#else
  ::convoy::cuda_emulation::LdMatrix(4, true, regs, row_address, CONVOY_HERE_);
#endif
}

// cp.async.ca (kBytes = 4, 8 or 16): copies source_bytes from global memory, zero-fills up to kBytes.
template <int kBytes>
__device__ __forceinline__ void CpAsyncCa(void* shared_destination, const void* global_source,
                                          int source_bytes = kBytes CONVOY_CALLER_LOCATION) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async.ca copies 4, 8 or 16 bytes");
#if defined(CONVOY_CUDA_REAL)
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(SharedAddress(shared_destination)),
               "l"(global_source), "n"(kBytes), "r"(source_bytes));
#else
  ::convoy::cuda_emulation::CpAsync(shared_destination, global_source, kBytes, source_bytes, CONVOY_HERE_);
#endif
}

// cp.async.cg: 16 bytes, bypassing L1.
__device__ __forceinline__ void CpAsyncCg16(void* shared_destination, const void* global_source,
                                            int source_bytes = 16 CONVOY_CALLER_LOCATION) {
#if defined(CONVOY_CUDA_REAL)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(SharedAddress(shared_destination)),
               "l"(global_source), "r"(source_bytes));
#else
  ::convoy::cuda_emulation::CpAsync(shared_destination, global_source, 16, source_bytes, CONVOY_HERE_);
#endif
}

__device__ __forceinline__ void CpAsyncCommitGroup() {
#if defined(CONVOY_CUDA_REAL)
  asm volatile("cp.async.commit_group;\n" ::);
#else
  ::convoy::cuda_emulation::CpAsyncCommitGroup();
#endif
}

// Waits until at most kPending of the committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void CpAsyncWaitGroup() {
#if defined(CONVOY_CUDA_REAL)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
#else
  ::convoy::cuda_emulation::CpAsyncWaitGroup(kPending);
#endif
}

__device__ __forceinline__ void CpAsyncWaitAll() {
#if defined(CONVOY_CUDA_REAL)
  asm volatile("cp.async.wait_all;\n" ::);
#else
  ::convoy::cuda_emulation::CpAsyncWaitAll();
#endif
}

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_EMULATION_TENSOR_CORE_CUH_
