// onnxruntime's x86 QLinearAdd arithmetic on CUDA (and under the emulation), shared by cuda.quantized_add.elementwise
// and the INT8 convolution's fused add (QuantizedConv2dProblem::fused_add): with ra = a_scale / y_scale,
// rb = b_scale / y_scale and fixed = y_zp - fma(ra, a_zp, rb * b_zp), formed once on the host with the same C++
// operations as the CPU's (kernels/cpu/quantized_vector_loops.cc),
//
//   y = saturate(rint(fma(a, ra, fma(b, rb, fixed))))     a, b: the operands' raw 8-bit values
//
// on the device with __fmaf_rn and rintf (half to even), clamped by comparisons: bit for bit what the CPU computes.
//
//   const QuantizedAddConstants k = MakeQuantizedAddConstants(problem);   // host
//   y[i] = static_cast<Y>(QuantizedAddValue(float(a[i]), float(b[i]), k));  // device
#ifndef CONVOY_KERNELS_CUDA_QUANTIZED_ADD_ARITHMETIC_CUH_
#define CONVOY_KERNELS_CUDA_QUANTIZED_ADD_ARITHMETIC_CUH_

#include <cmath>

#include "kernels/common/problems.h"
#include "kernels/cuda_emulation/cuda_compat.cuh"

namespace convoy::cuda {

// The per-problem constants of the add and the output type's range.
struct QuantizedAddConstants {
  float ra = 1.0f, rb = 1.0f, fixed = 0.0f, lo = 0.0f, hi = 255.0f;
};

inline QuantizedAddConstants MakeQuantizedAddConstants(const QuantizedAddProblem& p) {
  const float ra = p.a_scale / p.y_scale, rb = p.b_scale / p.y_scale;
  const float fixed = static_cast<float>(p.y_zero_point) -
                      std::fmaf(ra, static_cast<float>(p.a_zero_point), rb * static_cast<float>(p.b_zero_point));
  const bool is_unsigned = p.y_type == DataType::kUInt8;
  return {ra, rb, fixed, is_unsigned ? 0.0f : -128.0f, is_unsigned ? 255.0f : 127.0f};
}

// The output's integer value (within [lo, hi]) for operand values a and b; a NaN would land on lo, as on the CPU.
__device__ __forceinline__ float QuantizedAddValue(float a, float b, const QuantizedAddConstants& k) {
  float q = rintf(__fmaf_rn(a, k.ra, __fmaf_rn(b, k.rb, k.fixed)));
  q = q > k.lo ? q : k.lo;
  q = q < k.hi ? q : k.hi;
  return q;
}

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_QUANTIZED_ADD_ARITHMETIC_CUH_
