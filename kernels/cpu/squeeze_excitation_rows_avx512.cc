// The squeeze-and-excitation op's reductions (squeeze_excitation_rows.h) compiled for
// AVX-512 (-mavx512f -mavx512bw -mavx512dq -mavx512vl, kernels/cpu/per_isa.bzl): 16 floats per vector.
#define CONVOY_ROW_LANES 16
#define CONVOY_ROW_KERNELS kSqueezeExcitationRowKernelsAvx512
#include "kernels/cpu/squeeze_excitation_rows_body.inc"
