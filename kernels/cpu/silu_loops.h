// SiLU (x * sigmoid(x), "swish") and sigmoid over a float array, vectorized. SiLU is the activation the FP32 oneDNN
// convolutions apply themselves after the primitive instead of oneDNN 2.6's swish post-op, which made EfficientNet's
// expand and depthwise convolutions 2.4-2.8x slower than without an activation (docs/kernels.md, "The oneDNN
// convolution"); both are what the own kernels' epilogues (ApplyActivationInPlace) and the squeeze-and-excitation
// gate run, instead of libm's expf element by element.
//
// One formula on every ISA, so the AVX-512 (16 lanes), AVX2 (8 lanes) and portable versions agree bit for bit:
//   t = clamp(-x, -87, 88); k = rint(t * log2(e)); r = fma(-k, ln2_lo, fma(-k, ln2_hi, t));
//   e^t = p(r) * 2^k, with p the degree-6 Taylor polynomial of e^r by Horner's rule in FMAs;
//   SiLU y = x / (1 + e^t), and -0 for x < -87 (where the exact value is under 1.5e-36 in magnitude);
//   sigmoid y = 1 / (1 + e^t), and +0 for x < -87 (the exact value is under 1.7e-38).
// Against the exact value (double precision) the result is within 6 ulp for x >= -87 (SiLU measured: 3.6; +infinity
// stays +infinity, sigmoid(+infinity) = 1), within 1.5e-36 absolutely below; NaN stays NaN.
#ifndef CONVOY_KERNELS_CPU_SILU_LOOPS_H_
#define CONVOY_KERNELS_CPU_SILU_LOOPS_H_

#include <cstdint>

#include "kernels/cpu/cpu_isa.h"

namespace convoy::cpu {

// x[i] = silu(x[i]) for i < n, with `isa`'s version (the portable one if this CPU lacks it).
void SiluInPlace(CpuIsa isa, float* x, int64_t n);
// x[i] = 1 / (1 + e^-x[i]) for i < n, the same way.
void SigmoidInPlace(CpuIsa isa, float* x, int64_t n);

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_SILU_LOOPS_H_
