// The max pooling's row kernels (pool2d_max_rows.h) compiled for
// x86-64-v2 (SSE4.2): 4 floats per vector.
#define CONVOY_ROW_LANES 4
#define CONVOY_MAX_ROW_KERNELS kMaxRowKernelsBaseline
#include "kernels/cpu/pool2d_max_rows_body.inc"
