// The FP32 NHWC depthwise row kernel (depthwise_nhwc_rows.h) compiled for
// x86-64-v2 (SSE4.2): 4 floats per vector.
#define CONVOY_ROW_LANES 4
#define CONVOY_DEPTHWISE_NHWC_ROWS kDepthwiseNhwcRowsBaseline
#include "kernels/cpu/depthwise_nhwc_rows_body.inc"
