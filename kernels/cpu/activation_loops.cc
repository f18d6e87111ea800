#include "kernels/cpu/activation_loops.h"

#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/silu_loops.h"

namespace convoy::cpu {
namespace {

template <ActivationKind kKind>
void ActivationLoop(float* x, int64_t n, float alpha, float beta) {
  for (int64_t i = 0; i < n; ++i) x[i] = ApplyActivation(x[i], kKind, alpha, beta);
}

// The widest instruction set this CPU runs, asked once. Sigmoid and SiLU take the vectorized loops only with AVX2 or
// AVX-512: their portable version computes its FMAs in software on an x86-64-v2 build (25 ns per element, against 4
// for libm's expf; activation_loops_bench).
CpuIsa WidestIsa() {
  static const CpuIsa isa = BestCpuIsa();
  return isa;
}

}  // namespace

void ApplyActivationInPlace(float* x, int64_t n, const Activation& a) {
  switch (a.kind) {
    case ActivationKind::kIdentity: return;
    case ActivationKind::kRelu: return ActivationLoop<ActivationKind::kRelu>(x, n, a.alpha, a.beta);
    case ActivationKind::kClip: return ActivationLoop<ActivationKind::kClip>(x, n, a.alpha, a.beta);
    case ActivationKind::kLeakyRelu: return ActivationLoop<ActivationKind::kLeakyRelu>(x, n, a.alpha, a.beta);
    case ActivationKind::kSigmoid:
      if (WidestIsa() != CpuIsa::kBaseline) return SigmoidInPlace(WidestIsa(), x, n);
      return ActivationLoop<ActivationKind::kSigmoid>(x, n, a.alpha, a.beta);
    case ActivationKind::kTanh: return ActivationLoop<ActivationKind::kTanh>(x, n, a.alpha, a.beta);
    case ActivationKind::kSilu:
      if (WidestIsa() != CpuIsa::kBaseline) return SiluInPlace(WidestIsa(), x, n);
      return ActivationLoop<ActivationKind::kSilu>(x, n, a.alpha, a.beta);
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
