#include "kernels/common/epilogue.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace convoy {

std::string ActivationName(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::kIdentity: return "identity";
    case ActivationKind::kRelu: return "relu";
    case ActivationKind::kClip: return "clip";
    case ActivationKind::kLeakyRelu: return "leaky_relu";
    case ActivationKind::kSigmoid: return "sigmoid";
    case ActivationKind::kTanh: return "tanh";
    case ActivationKind::kSilu: return "silu";
    case ActivationKind::kHardSigmoid: return "hard_sigmoid";
    case ActivationKind::kHardSwish: return "hard_swish";
    case ActivationKind::kGelu: return "gelu";
    case ActivationKind::kQuantizeDequantizeU8: return "quantize_dequantize_u8";
    case ActivationKind::kQuantizeDequantizeS8: return "quantize_dequantize_s8";
  }
  return "unknown";
}

std::string ToString(const Activation& a) {
  switch (a.kind) {
    case ActivationKind::kClip:
    case ActivationKind::kHardSigmoid: return absl::StrCat(ActivationName(a.kind), "(", a.alpha, ",", a.beta, ")");
    case ActivationKind::kLeakyRelu: return absl::StrCat(ActivationName(a.kind), "(", a.alpha, ")");
    case ActivationKind::kQuantizeDequantizeU8:
    case ActivationKind::kQuantizeDequantizeS8:
      return absl::StrCat(ActivationName(a.kind), "(scale=", a.alpha, ",zero_point=", a.beta, ")");
    default: return ActivationName(a.kind);
  }
}

std::string ToString(const Epilogue& e) {
  std::string s;
  if (e.has_scale) absl::StrAppend(&s, "scale+");
  if (e.has_bias) absl::StrAppend(&s, "bias+");
  if (e.residual == ResidualMode::kBeforeActivation) absl::StrAppend(&s, "residual+");
  absl::StrAppend(&s, ToString(e.activation));
  if (e.residual == ResidualMode::kAfterActivation) absl::StrAppend(&s, "+residual");
  return s;
}

std::string ToString(const QuantizedEpilogue& e) {
  std::string s = absl::StrCat("src_zp=", e.src_zero_point);
  if (e.has_bias) absl::StrAppend(&s, "+bias_s32");
  absl::StrAppend(&s, e.scales.empty() ? "+requant" : "+requant(const_scales)");
  if (e.residual == ResidualMode::kBeforeActivation) {
    absl::StrAppend(&s, "+residual(", e.residual_scale, ",zp=", e.residual_zero_point, ")");
  }
  if (e.relu) absl::StrAppend(&s, "+relu");
  absl::StrAppend(&s, "+dst_zp=", e.dst_zero_point);
  return s;
}

double ApplyActivationReference(double x, const Activation& a) {
  const double alpha = a.alpha, beta = a.beta;
  switch (a.kind) {
    case ActivationKind::kIdentity: return x;
    case ActivationKind::kRelu: return std::max(x, 0.0);
    case ActivationKind::kClip: return std::min(std::max(x, alpha), beta);
    case ActivationKind::kLeakyRelu: return x >= 0 ? x : alpha * x;
    case ActivationKind::kSigmoid: return 1.0 / (1.0 + std::exp(-x));
    case ActivationKind::kTanh: return std::tanh(x);
    case ActivationKind::kSilu: return x / (1.0 + std::exp(-x));
    case ActivationKind::kHardSigmoid: return std::max(0.0, std::min(1.0, alpha * x + beta));
    case ActivationKind::kHardSwish: return x * std::max(0.0, std::min(1.0, x / 6.0 + 0.5));
    case ActivationKind::kGelu: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    // ONNX defines the quotient x / scale in FP32: computing it in double would round differently at ties.
    case ActivationKind::kQuantizeDequantizeU8:
    case ActivationKind::kQuantizeDequantizeS8: {
      const double qmin = a.kind == ActivationKind::kQuantizeDequantizeU8 ? 0 : -128;
      const double qmax = a.kind == ActivationKind::kQuantizeDequantizeU8 ? 255 : 127;
      const float quotient = static_cast<float>(x) / a.alpha;
      if (std::isnan(quotient)) return (qmin - beta) * alpha;
      const double q = std::min(std::max(std::nearbyint(static_cast<double>(quotient)) + beta, qmin), qmax);
      return (q - beta) * alpha;
    }
  }
  return x;
}

}  // namespace convoy
