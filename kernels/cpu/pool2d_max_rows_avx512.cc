// The max pooling's row kernels (pool2d_max_rows.h) compiled for
// AVX-512 (-mavx512f -mavx512bw -mavx512dq -mavx512vl, kernels/cpu/per_isa.bzl): 16 floats per vector.
#define CONVOY_ROW_LANES 16
#define CONVOY_MAX_ROW_KERNELS kMaxRowKernelsAvx512
#include "kernels/cpu/pool2d_max_rows_body.inc"
