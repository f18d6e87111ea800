#include "kernels/cpu/activation_loops.h"

namespace convoy::cpu {
namespace {

template <ActivationKind kKind>
void ActivationLoop(float* x, int64_t n, float alpha, float beta) {
  for (int64_t i = 0; i < n; ++i) x[i] = ApplyActivation(x[i], kKind, alpha, beta);
}

}  // namespace

void ApplyActivationInPlace(float* x, int64_t n, const Activation& a) {
  switch (a.kind) {
    case ActivationKind::kIdentity: return;
    case ActivationKind::kRelu: return ActivationLoop<ActivationKind::kRelu>(x, n, a.alpha, a.beta);
    case ActivationKind::kClip: return ActivationLoop<ActivationKind::kClip>(x, n, a.alpha, a.beta);
    case ActivationKind::kLeakyRelu: return ActivationLoop<ActivationKind::kLeakyRelu>(x, n, a.alpha, a.beta);
    case ActivationKind::kSigmoid: return ActivationLoop<ActivationKind::kSigmoid>(x, n, a.alpha, a.beta);
    case ActivationKind::kTanh: return ActivationLoop<ActivationKind::kTanh>(x, n, a.alpha, a.beta);
    case ActivationKind::kSilu: return ActivationLoop<ActivationKind::kSilu>(x, n, a.alpha, a.beta);
    case ActivationKind::kHardSigmoid: return ActivationLoop<ActivationKind::kHardSigmoid>(x, n, a.alpha, a.beta);
    case ActivationKind::kHardSwish: return ActivationLoop<ActivationKind::kHardSwish>(x, n, a.alpha, a.beta);
    case ActivationKind::kGelu: return ActivationLoop<ActivationKind::kGelu>(x, n, a.alpha, a.beta);
    case ActivationKind::kQuantizeDequantizeU8:
      return ActivationLoop<ActivationKind::kQuantizeDequantizeU8>(x, n, a.alpha, a.beta);
    case ActivationKind::kQuantizeDequantizeS8:
      return ActivationLoop<ActivationKind::kQuantizeDequantizeS8>(x, n, a.alpha, a.beta);
  }
}

}  // namespace convoy::cpu
