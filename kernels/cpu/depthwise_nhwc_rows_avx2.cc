// The FP32 NHWC depthwise row kernel (depthwise_nhwc_rows.h) compiled for
// AVX2 + FMA (-mavx2 -mfma, kernels/cpu/per_isa.bzl): 8 floats per vector.
#define CONVOY_ROW_LANES 8
#define CONVOY_DEPTHWISE_NHWC_ROWS kDepthwiseNhwcRowsAvx2
#include "kernels/cpu/depthwise_nhwc_rows_body.inc"
