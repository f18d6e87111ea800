// The FP32 row kernels of the CPU binary op (and the BF16 conversions its BF16 path stages through) (binary.cc), compiled once per instruction set: binary_rows_baseline.cc
// (x86-64-v2: SSE4.2), binary_rows_avx2.cc (-mavx2 -mfma) and binary_rows_avx512.cc (-mavx512f/bw/dq/vl), each
// from the same body (binary_rows_body.inc) with its vector width. Pick a table with BinaryRowKernelsFor after
// checking CpuSupports (cpu_isa.h): calling a table the CPU lacks the instructions for faults.
//
// This header stays free of anything but <cstdint>: the per-instruction-set translation units include it, and an
// inline function they shared with the rest of the program could be linked in its AVX-512 form for everyone.
#ifndef CONVOY_KERNELS_CPU_BINARY_ROWS_H_
#define CONVOY_KERNELS_CPU_BINARY_ROWS_H_

#include <cstdint>

namespace convoy::cpu {

// Each array is indexed by the op in BinaryOp's order: add, sub, mul, div. `y` may equal `a` (never overlap it
// otherwise). Results are exact per element (one IEEE operation), so every instruction set gives the same bits.
struct BinaryRowKernels {
  // y[i] = a[i] OP b[i], i < n.
  void (*same_shape[4])(const float* a, const float* b, float* y, int64_t n);
  // y[i] = a[i] OP b, i < n.
  void (*scalar[4])(const float* a, float b, float* y, int64_t n);
  // `rows` rows of `length` contiguous elements, b one row repeated: y[r * length + i] = a[r * length + i] OP b[i]
  // (NHWC pixels of C channels with b per channel; NCHW8c pixels of 8 channels with b per channel of the block).
  void (*repeated[4])(const float* a, const float* b, float* y, int64_t rows, int64_t length);
  // BF16 bits <-> FP32, n elements: widening is exact; narrowing rounds to nearest even and makes a NaN a quiet NaN
  // of the same sign, as FloatToBFloat16Bits (kernels/common/dtype.h) does, bit for bit.
  void (*bf16_to_float)(const uint16_t* src, float* dst, int64_t n);
  void (*float_to_bf16)(const float* src, uint16_t* dst, int64_t n);
};

extern const BinaryRowKernels kBinaryRowKernelsBaseline;
extern const BinaryRowKernels kBinaryRowKernelsAvx2;
extern const BinaryRowKernels kBinaryRowKernelsAvx512;

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_BINARY_ROWS_H_
