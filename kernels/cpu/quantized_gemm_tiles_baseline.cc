// The own INT8 convolution's inner loops (quantized_gemm_tiles.h) compiled for x86-64-v2 (SSE4.2,
// kernels/cpu/per_isa.bzl): 4 lanes per vector, a 2-row by 16-channel register tile.
#define CONVOY_QGEMM_LANES 4
#define CONVOY_QGEMM_ROWS 2
#define CONVOY_QGEMM_BLOCKS 1
#define CONVOY_QGEMM_TILES kQuantizedGemmTilesBaseline
#include "kernels/cpu/quantized_gemm_tiles_body.inc"
