// The element-wise functions of the unary op (UnaryProblem in problems.h): ONNX's activations that are not part of
// the fused conv epilogue (Elu, Selu, Celu, Softplus, Softsign, Mish, ThresholdedRelu, Gelu's tanh form) and its
// element-wise math (Erf, Exp, Log, Abs, Neg, Sqrt, Reciprocal, Floor, Ceil, Round, Sign), as one FP32 function
// shared by the CPU kernel, the CUDA kernel (nvcc and the emulation). The reference computes the same definitions
// independently, in double.
#ifndef CONVOY_KERNELS_COMMON_UNARY_FUNCTION_H_
#define CONVOY_KERNELS_COMMON_UNARY_FUNCTION_H_

#include <cmath>
#include <cstdint>

#include "kernels/common/host_device.h"

namespace convoy {

enum class UnaryKind : uint8_t {
  kElu = 0,          // x if x > 0 else alpha * (exp(x) - 1)
  kSelu,             // gamma (beta) * (x if x > 0 else alpha * (exp(x) - 1))
  kCelu,             // max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
  kSoftplus,         // log(1 + exp(x))
  kSoftsign,         // x / (1 + |x|)
  kMish,             // x * tanh(softplus(x))
  kThresholdedRelu,  // x if x > alpha else 0
  kGeluTanh,         // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
  kErf,
  kExp,
  kLog,
  kAbs,
  kNeg,
  kSqrt,
  kReciprocal,
  kFloor,
  kCeil,
  kRound,  // half to even
  kSign,
};

// a / b: IEEE division on the host; on the GPU the fast division (2 ulp), whose code has no slow-path subroutine call
// (an IEEE division's call makes ptxas save registers around it: spills, see kernels/cuda/kernel_resources.py).
CONVOY_HOST_DEVICE float UnaryDivide(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdividef(a, b);
#else
  return a / b;
#endif
}

// Softplus without overflow: log1p(exp(x)) for moderate x, x itself where exp(x) would overflow the sum.
CONVOY_HOST_DEVICE float StableSoftplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

CONVOY_HOST_DEVICE float ApplyUnary(float x, UnaryKind kind, float alpha, float beta) {
  switch (kind) {
    case UnaryKind::kElu: return x > 0.0f ? x : alpha * expm1f(x);
    case UnaryKind::kSelu: return beta * (x > 0.0f ? x : alpha * expm1f(x));
    case UnaryKind::kCelu: return fmaxf(0.0f, x) + fminf(0.0f, alpha * expm1f(UnaryDivide(x, alpha)));
    case UnaryKind::kSoftplus: return StableSoftplus(x);
    case UnaryKind::kSoftsign: return UnaryDivide(x, 1.0f + fabsf(x));
    case UnaryKind::kMish: return x * tanhf(StableSoftplus(x));
    case UnaryKind::kThresholdedRelu: return x > alpha ? x : 0.0f;
    case UnaryKind::kGeluTanh:
      return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    case UnaryKind::kErf: return erff(x);
    case UnaryKind::kExp: return expf(x);
    case UnaryKind::kLog: return logf(x);
    case UnaryKind::kAbs: return fabsf(x);
    case UnaryKind::kNeg: return -x;
    case UnaryKind::kSqrt: return sqrtf(x);
    case UnaryKind::kReciprocal: return UnaryDivide(1.0f, x);
    case UnaryKind::kFloor: return floorf(x);
    case UnaryKind::kCeil: return ceilf(x);
    case UnaryKind::kRound: return rintf(x);
    case UnaryKind::kSign: return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x;  // 0 and NaN stay
  }
  return x;
}

}  // namespace convoy

#endif  // CONVOY_KERNELS_COMMON_UNARY_FUNCTION_H_
