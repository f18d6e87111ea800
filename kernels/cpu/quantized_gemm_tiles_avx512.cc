// The own INT8 convolution's inner loops (quantized_gemm_tiles.h) compiled for AVX-512 (-mavx512f -mavx512bw
// -mavx512dq -mavx512vl, kernels/cpu/per_isa.bzl): 16 lanes per vector, a 12-row by 32-channel register tile (24
// accumulators).
#define CONVOY_QGEMM_LANES 16
#define CONVOY_QGEMM_ROWS 12
#define CONVOY_QGEMM_BLOCKS 2
#define CONVOY_QGEMM_TILES kQuantizedGemmTilesAvx512
#include "kernels/cpu/quantized_gemm_tiles_body.inc"
