// Small pieces the CPU's INT8 convolutions share (quantized_conv2d_onednn.cc, quantized_conv2d_gemm.cc): which
// problems are a plain GEMM, an 8-bit type's range as FP32 values, and the constants of onnxruntime's x86 QLinearAdd,
//   y = saturate(rint(fma(a, ra, fma(b, rb, fixed))))   ra = a_scale / y_scale, rb = b_scale / y_scale,
//                                                        fixed = y_zp - fma(ra, a_zp, rb * b_zp)
// formed with the same C++ operations as the reference and QuantizedAddLoop (quantized_vector_loops.h), so every
// user's FP32 constants are the same bits.
#ifndef CONVOY_KERNELS_CPU_QUANTIZED_ARITHMETIC_H_
#define CONVOY_KERNELS_CPU_QUANTIZED_ARITHMETIC_H_

#include <cmath>

#include "kernels/common/dtype.h"
#include "kernels/common/problems.h"

namespace convoy::cpu {

// Whether the problem is a GEMM as it lies in memory: a 1x1, stride-1, unpadded, ungrouped NHWC convolution, whose
// source is [n*h*w, c] and destination [n*h*w, k] row-major, and whose filter ([k, c]) is the GEMM's [c, k] transposed.
inline bool IsPlainGemm(const QuantizedConv2dProblem& p) {
  return p.layout == Layout::kNHWC && p.groups == 1 && p.r == 1 && p.s == 1 && p.stride_h == 1 && p.stride_w == 1 &&
         p.pad_top == 0 && p.pad_bottom == 0 && p.pad_left == 0 && p.pad_right == 0;
}

// The least and greatest value of UINT8 (else INT8).
inline float QuantizedLowest(DataType t) { return t == DataType::kUInt8 ? 0.f : -128.f; }
inline float QuantizedHighest(DataType t) { return t == DataType::kUInt8 ? 255.f : 127.f; }

struct QuantizedAddFactors {
  float ra, rb, fixed;
};

inline QuantizedAddFactors QuantizedAddFactorsOf(const QuantizedAddProblem& q) {
  const float ra = q.a_scale / q.y_scale, rb = q.b_scale / q.y_scale;
  return {ra, rb,
          static_cast<float>(q.y_zero_point) -
              std::fmaf(ra, static_cast<float>(q.a_zero_point), rb * static_cast<float>(q.b_zero_point))};
}

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_QUANTIZED_ARITHMETIC_H_
