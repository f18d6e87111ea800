// The reductions of the CPU squeeze-and-excitation op (squeeze_excitation.cc), compiled once per instruction set like
// the binary op's row kernels (binary_rows.h): squeeze_excitation_rows_baseline.cc (x86-64-v2: SSE4.2),
// squeeze_excitation_rows_avx2.cc (-mavx2 -mfma) and squeeze_excitation_rows_avx512.cc (-mavx512f/bw/dq/vl), each from
// squeeze_excitation_rows_body.inc with its vector width. Pick a table after checking CpuSupports (cpu_isa.h).
//
// Free of anything but <cstdint>, for the same reason as binary_rows.h.
#ifndef CONVOY_KERNELS_CPU_SQUEEZE_EXCITATION_ROWS_H_
#define CONVOY_KERNELS_CPU_SQUEEZE_EXCITATION_ROWS_H_

#include <cstdint>

namespace convoy::cpu {

struct SqueezeExcitationRowKernels {
  // sums[k] += sum over r < rows of x[r * length + k], for k < length (NHWC pixels of C channels; NCHW8c rows of 8).
  void (*sum_rows)(const float* x, int64_t rows, int64_t length, float* sums);
  // sum over i < n of a[i] * b[i] (the two matrix-vector products), and of a[i] (an NCHW plane).
  float (*dot)(const float* a, const float* b, int64_t n);
  float (*sum)(const float* a, int64_t n);
  // y[i] += a * x[i], i < n (the second product, a row of the transposed filter per hidden channel).
  void (*axpy)(float a, const float* x, float* y, int64_t n);
};

extern const SqueezeExcitationRowKernels kSqueezeExcitationRowKernelsBaseline;
extern const SqueezeExcitationRowKernels kSqueezeExcitationRowKernelsAvx2;
extern const SqueezeExcitationRowKernels kSqueezeExcitationRowKernelsAvx512;

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_SQUEEZE_EXCITATION_ROWS_H_
