// The fused epilogue: what a conv or GEMM kernel does to each accumulator before its single store.
//
//   y = act(acc * scale[k] + bias[k])             residual = kNone
//   y = act(acc * scale[k] + bias[k] + r)          residual = kBeforeActivation (ResNet: add, then relu)
//   y = act(acc * scale[k] + bias[k]) + r          residual = kAfterActivation  (MobileNetV2: linear bottleneck add)
//
// scale is the folded batch-norm multiplier (absent = 1), bias the conv bias or folded shift (absent = 0), k the output
// channel, r the element of the residual tensor at the same position as y. ApplyActivation is plain inline math so
// CPU kernels, CUDA kernels and the emulation share one definition.
#ifndef CONVOY_KERNELS_COMMON_EPILOGUE_H_
#define CONVOY_KERNELS_COMMON_EPILOGUE_H_

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/common/host_device.h"

namespace convoy {

enum class ActivationKind : uint8_t {
  kIdentity = 0,
  kRelu,
  kClip,         // min(max(x, alpha), beta); relu6 is Clip(0, 6)
  kLeakyRelu,    // x >= 0 ? x : alpha * x
  kSigmoid,
  kTanh,
  kSilu,         // x * sigmoid(x), a.k.a. swish
  kHardSigmoid,  // max(0, min(1, alpha * x + beta)); ONNX defaults alpha=0.2, beta=0.5 (PyTorch: 1/6, 0.5)
  kHardSwish,    // x * max(0, min(1, x / 6 + 0.5))
  kGelu,         // 0.5 x (1 + erf(x / sqrt(2)))
  // ONNX QuantizeLinear then DequantizeLinear with one scale (alpha) and zero point (beta, an integer):
  // q = saturate(round_half_even(x / scale) + zero_point), y = (q - zero_point) * scale, where saturate clamps to
  // [0, 255] (U8) or [-128, 127] (S8). What a QDQ model computes between two quantized ops, in floating point.
  kQuantizeDequantizeU8,
  kQuantizeDequantizeS8,
};

struct Activation {
  ActivationKind kind = ActivationKind::kIdentity;
  float alpha = 0.0f;
  float beta = 0.0f;

  static Activation Identity() { return {}; }
  static Activation Relu() { return {ActivationKind::kRelu, 0, 0}; }
  static Activation Relu6() { return {ActivationKind::kClip, 0.0f, 6.0f}; }
  static Activation Clip(float lo, float hi) { return {ActivationKind::kClip, lo, hi}; }
  static Activation LeakyRelu(float slope) { return {ActivationKind::kLeakyRelu, slope, 0}; }
  static Activation Of(ActivationKind kind, float alpha = 0, float beta = 0) { return {kind, alpha, beta}; }
  static Activation QuantizeDequantizeU8(float scale, int zero_point) {
    return {ActivationKind::kQuantizeDequantizeU8, scale, static_cast<float>(zero_point)};
  }
  static Activation QuantizeDequantizeS8(float scale, int zero_point) {
    return {ActivationKind::kQuantizeDequantizeS8, scale, static_cast<float>(zero_point)};
  }

  auto Tie() const { return std::tie(kind, alpha, beta); }
  bool operator==(const Activation& o) const { return Tie() == o.Tie(); }
  bool operator!=(const Activation& o) const { return !(*this == o); }
  template <typename H>
  friend H AbslHashValue(H h, const Activation& a) {
    return H::combine(std::move(h), a.kind, a.alpha, a.beta);
  }
};

std::string ActivationName(ActivationKind kind);
std::string ToString(const Activation& activation);

enum class ResidualMode : uint8_t { kNone = 0, kBeforeActivation, kAfterActivation };

struct Epilogue {
  bool has_bias = false;
  bool has_scale = false;
  ResidualMode residual = ResidualMode::kNone;
  Activation activation;

  auto Tie() const { return std::tie(has_bias, has_scale, residual, activation); }
  bool operator==(const Epilogue& o) const { return Tie() == o.Tie(); }
  bool operator!=(const Epilogue& o) const { return !(*this == o); }
  template <typename H>
  friend H AbslHashValue(H h, const Epilogue& e) {
    return H::combine(std::move(h), e.has_bias, e.has_scale, e.residual, e.activation);
  }
};

std::string ToString(const Epilogue& epilogue);

// The epilogue of a quantized (INT8) convolution, on the exact INT32 accumulator
//   acc = sum (x - src_zero_point) * w                            (w symmetric INT8: no weight zero point)
//   v   = float(acc + bias[k]) * scale[k]                          (one FP32 product; scale = sx * sw[k] / sy)
//   v  += residual_scale * float(r - residual_zero_point)          (residual = kBeforeActivation)
//   v   = max(v, 0)                                                (relu)
//   y   = saturate(round_half_even(v) + dst_zero_point)            (INT8 / UINT8 output)
//   y   = v                                                        (FP32 output: dst_zero_point must be 0)
// bias is INT32 (the form ONNX QDQ models store), scale[k] the per-output-channel requantization multiplier, r the
// residual element at y's position in the output's type. The zero points and the residual's scale are problem fields
// (so the algorithm cache keys them); the bias travels in the arguments like a float epilogue's.
//
// The multipliers come one of two ways. `scales` empty: in args.scale at every run (any values, the kernel treats
// them as data). `scales` holding K values: fixed when the problem is made (a plan's QDQ folds know them), and
// args.scale is not read; an algorithm may build them into its kernel. That is what oneDNN 2.6 needs for speed: its
// INT8 convolutions take per-channel output scales only as values given when the primitive is made, and the run-time
// alternative, a per-channel binary multiply post-op, made ResNet-50's 1x1 layers 1.1-1.6x slower
// (docs/performance.md, "CPU: INT8"). The values are part of the problem's equality and hash (two layers of one shape
// with different multipliers are two primitives) but not of ToString, which says only "const_scales": the algorithm
// cache keys on ToString, and which algorithm is fastest does not depend on the values.
struct QuantizedEpilogue {
  int src_zero_point = 0;
  int dst_zero_point = 0;
  bool has_bias = false;
  bool relu = false;
  ResidualMode residual = ResidualMode::kNone;  // kNone or kBeforeActivation
  float residual_scale = 1.0f;
  int residual_zero_point = 0;
  std::vector<float> scales;  // [K] multipliers fixed with the problem, or empty (args.scale)

  auto Tie() const {
    return std::tie(src_zero_point, dst_zero_point, has_bias, relu, residual, residual_scale, residual_zero_point,
                    scales);
  }
  bool operator==(const QuantizedEpilogue& o) const { return Tie() == o.Tie(); }
  bool operator!=(const QuantizedEpilogue& o) const { return !(*this == o); }
  template <typename H>
  friend H AbslHashValue(H h, const QuantizedEpilogue& e) {
    return H::combine(std::move(h), e.Tie());
  }
};

std::string ToString(const QuantizedEpilogue& epilogue);

inline bool IsQuantizeDequantize(ActivationKind kind) {
  return kind == ActivationKind::kQuantizeDequantizeU8 || kind == ActivationKind::kQuantizeDequantizeS8;
}

// ONNX QuantizeLinear + DequantizeLinear in FP32, as the spec and onnxruntime compute them: the quotient x / scale in
// FP32 (not x times a reciprocal), rounded half to even (rintf in the default rounding mode), the zero point added,
// saturated to [qmin, qmax]; then (q - zero_point) * scale. NaN saturates to qmin. The clamps are comparisons, not
// fminf/fmaxf, so the CPU loop vectorizes (divide, round, max, min on whole registers).
CONVOY_HOST_DEVICE float QuantizeDequantize(float x, float scale, float zero_point, float qmin, float qmax) {
  float q = rintf(x / scale) + zero_point;
  q = q > qmin ? q : qmin;  // NaN compares false: qmin
  q = q < qmax ? q : qmax;
  return (q - zero_point) * scale;
}

CONVOY_HOST_DEVICE float ApplyActivation(float x, ActivationKind kind, float alpha, float beta) {
  switch (kind) {
    case ActivationKind::kIdentity: return x;
    case ActivationKind::kRelu: return x > 0.0f ? x : 0.0f;
    case ActivationKind::kClip: return fminf(fmaxf(x, alpha), beta);
    case ActivationKind::kLeakyRelu: return x >= 0.0f ? x : alpha * x;
    case ActivationKind::kSigmoid: return 1.0f / (1.0f + expf(-x));
    case ActivationKind::kTanh: return tanhf(x);
    case ActivationKind::kSilu: return x / (1.0f + expf(-x));
    case ActivationKind::kHardSigmoid: return fmaxf(0.0f, fminf(1.0f, alpha * x + beta));
    case ActivationKind::kHardSwish: return x * fmaxf(0.0f, fminf(1.0f, x * (1.0f / 6.0f) + 0.5f));
    case ActivationKind::kGelu: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case ActivationKind::kQuantizeDequantizeU8: return QuantizeDequantize(x, alpha, beta, 0.0f, 255.0f);
    case ActivationKind::kQuantizeDequantizeS8: return QuantizeDequantize(x, alpha, beta, -128.0f, 127.0f);
  }
  return x;
}

CONVOY_HOST_DEVICE float ApplyActivation(float x, const Activation& a) {
  return ApplyActivation(x, a.kind, a.alpha, a.beta);
}

// Applies the whole epilogue to one accumulator whose channel's scale and bias are already loaded (ignored when the
// epilogue lacks them); residual is the residual element (ignored when residual == kNone).
CONVOY_HOST_DEVICE float ApplyEpilogueValues(float acc, const Epilogue& e, float scale, float bias, float residual) {
  float v = acc;
  if (e.has_scale) v *= scale;
  if (e.has_bias) v += bias;
  if (e.residual == ResidualMode::kBeforeActivation) v += residual;
  v = ApplyActivation(v, e.activation);
  if (e.residual == ResidualMode::kAfterActivation) v += residual;
  return v;
}

// The same with the per-channel arrays: scale/bias may be null when the epilogue lacks them.
CONVOY_HOST_DEVICE float ApplyEpilogue(float acc, const Epilogue& e, const float* scale, const float* bias,
                                       int channel, float residual) {
  return ApplyEpilogueValues(acc, e, e.has_scale ? scale[channel] : 1.0f, e.has_bias ? bias[channel] : 0.0f,
                             residual);
}

// Double-precision twin for the reference implementations.
double ApplyActivationReference(double x, const Activation& a);

}  // namespace convoy

#endif  // CONVOY_KERNELS_COMMON_EPILOGUE_H_
