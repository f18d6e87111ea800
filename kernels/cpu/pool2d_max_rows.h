// The max pooling's row kernels (pool2d_max_nhwc.cc), compiled once per instruction set: pool2d_max_rows_baseline.cc
// (x86-64-v2: SSE4.2), pool2d_max_rows_avx2.cc (-mavx2 -mfma) and pool2d_max_rows_avx512.cc (-mavx512f/bw/dq/vl),
// each from the same body (pool2d_max_rows_body.inc) with its vector width. Pick a table with MaxRowKernelsFor
// (pool2d_max_nhwc.cc) after checking CpuSupports (cpu_isa.h): calling a table the CPU lacks the instructions for
// faults.
//
// This header stays free of anything but <cstdint>: the per-instruction-set translation units include it.
#ifndef CONVOY_KERNELS_CPU_POOL2D_MAX_ROWS_H_
#define CONVOY_KERNELS_CPU_POOL2D_MAX_ROWS_H_

#include <cstdint>

namespace convoy::cpu {

// y[c] = the largest of taps[t][c] over t < count, for c < channels, starting from -infinity and taking a tap where
// the running maximum is smaller (so a NaN tap is passed over, as std::max(acc, v) does). BF16 values are compared as
// the FP32 numbers they are and stored back unchanged (the maximum is one of the inputs).
struct MaxRowKernels {
  void (*fp32)(const float* const* taps, int count, float* y, int64_t channels);
  void (*bf16)(const uint16_t* const* taps, int count, uint16_t* y, int64_t channels);
};

extern const MaxRowKernels kMaxRowKernelsBaseline;
extern const MaxRowKernels kMaxRowKernelsAvx2;
extern const MaxRowKernels kMaxRowKernelsAvx512;

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_POOL2D_MAX_ROWS_H_
