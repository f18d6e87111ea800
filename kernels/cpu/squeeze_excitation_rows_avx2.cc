// The squeeze-and-excitation op's reductions (squeeze_excitation_rows.h) compiled for
// AVX2 (-mavx2 -mfma, kernels/cpu/per_isa.bzl): 8 floats per vector.
#define CONVOY_ROW_LANES 8
#define CONVOY_ROW_KERNELS kSqueezeExcitationRowKernelsAvx2
#include "kernels/cpu/squeeze_excitation_rows_body.inc"
