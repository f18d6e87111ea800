// The squeeze-and-excitation op's reductions (squeeze_excitation_rows.h) compiled for
// x86-64-v2 (SSE4.2, the project's flags): 4 floats per vector.
#define CONVOY_ROW_LANES 4
#define CONVOY_ROW_KERNELS kSqueezeExcitationRowKernelsBaseline
#include "kernels/cpu/squeeze_excitation_rows_body.inc"
