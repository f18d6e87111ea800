// The FP32 NHWC depthwise row kernel (depthwise_nhwc_rows.h) compiled for
// AVX-512 (-mavx512f -mavx512bw -mavx512dq -mavx512vl, kernels/cpu/per_isa.bzl): 16 floats per vector.
#define CONVOY_ROW_LANES 16
#define CONVOY_DEPTHWISE_NHWC_ROWS kDepthwiseNhwcRowsAvx512
#include "kernels/cpu/depthwise_nhwc_rows_body.inc"
