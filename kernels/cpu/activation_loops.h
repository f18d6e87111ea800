// ApplyActivationInPlace: the one float activation loop every CPU kernel's epilogue uses (conv, GEMM, batch norm,
// binary, standalone activation, squeeze-and-excitation). One switch on the kind, then a branch-free loop the compiler
// can vectorize, or for sigmoid and SiLU on CPUs with AVX2 or AVX-512 the vectorized loops of silu_loops.h (within
// 6 ulp; about a tenth of libm's expf element by element: activation_loops_bench).
#ifndef CONVOY_KERNELS_CPU_ACTIVATION_LOOPS_H_
#define CONVOY_KERNELS_CPU_ACTIVATION_LOOPS_H_

#include <cstdint>

#include "kernels/common/epilogue.h"

namespace convoy::cpu {

// x[i] = act(x[i]) for i in [0, n).
void ApplyActivationInPlace(float* x, int64_t n, const Activation& activation);

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_ACTIVATION_LOOPS_H_
