// The max pooling's row kernels (pool2d_max_rows.h) compiled for
// AVX2 (-mavx2 -mfma, kernels/cpu/per_isa.bzl): 8 floats per vector.
#define CONVOY_ROW_LANES 8
#define CONVOY_MAX_ROW_KERNELS kMaxRowKernelsAvx2
#include "kernels/cpu/pool2d_max_rows_body.inc"
