// The binary op's FP32 row kernels (binary_rows.h) compiled for
// AVX-512 (-mavx512f -mavx512bw -mavx512dq -mavx512vl, kernels/cpu/per_isa.bzl): 16 floats per vector.
#define CONVOY_ROW_LANES 16
#define CONVOY_ROW_KERNELS kBinaryRowKernelsAvx512
#include "kernels/cpu/binary_rows_body.inc"
