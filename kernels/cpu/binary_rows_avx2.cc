// The binary op's FP32 row kernels (binary_rows.h) compiled for
// AVX2 (-mavx2 -mfma, kernels/cpu/per_isa.bzl): 8 floats per vector.
#define CONVOY_ROW_LANES 8
#define CONVOY_ROW_KERNELS kBinaryRowKernelsAvx2
#include "kernels/cpu/binary_rows_body.inc"
