// The own INT8 convolution's inner loops (quantized_gemm_tiles.h) compiled for AVX2 (-mavx2 -mfma,
// kernels/cpu/per_isa.bzl): 8 lanes per vector, a 6-row by 16-channel register tile (12 accumulators).
#define CONVOY_QGEMM_LANES 8
#define CONVOY_QGEMM_ROWS 6
#define CONVOY_QGEMM_BLOCKS 1
#define CONVOY_QGEMM_TILES kQuantizedGemmTilesAvx2
#include "kernels/cpu/quantized_gemm_tiles_body.inc"
