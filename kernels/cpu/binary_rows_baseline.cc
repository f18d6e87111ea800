// The binary op's FP32 row kernels (binary_rows.h) compiled for
// x86-64-v2 (SSE4.2, the project's flags): 4 floats per vector.
#define CONVOY_ROW_LANES 4
#define CONVOY_ROW_KERNELS kBinaryRowKernelsBaseline
#include "kernels/cpu/binary_rows_body.inc"
