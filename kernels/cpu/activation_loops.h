// ApplyActivationInPlace: the one float activation loop every CPU kernel's epilogue uses (conv, GEMM, batch norm,
// binary, standalone activation). One switch on the kind, then a branch-free loop the compiler can vectorize.
#ifndef CONVOY_KERNELS_CPU_ACTIVATION_LOOPS_H_
#define CONVOY_KERNELS_CPU_ACTIVATION_LOOPS_H_

#include <cstdint>

#include "kernels/common/epilogue.h"

namespace convoy::cpu {

// x[i] = act(x[i]) for i in [0, n).
void ApplyActivationInPlace(float* x, int64_t n, const Activation& activation);

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_ACTIVATION_LOOPS_H_
