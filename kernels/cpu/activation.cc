#include "kernels/cpu/activation.h"

#include <algorithm>

#include "kernels/cpu/convert_element.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {
namespace {

constexpr int64_t kChunk = 512;  // elements staged in FP32 at a time (on the stack)

template <ActivationKind kKind>
void ActivationLoop(float* x, int64_t n, float alpha, float beta) {
  for (int64_t i = 0; i < n; ++i) x[i] = ApplyActivation(x[i], kKind, alpha, beta);
}

template <typename S>
void ActivationKernel(const ActivationProblem& p, const typename S::T* x, typename S::T* y, ThreadPool& pool) {
  const int64_t chunks = (p.count + kChunk - 1) / kChunk;
  pool.ParallelFor(chunks, [&](int64_t begin, int64_t end) {
    float staged[kChunk];
    for (int64_t chunk = begin; chunk < end; ++chunk) {
      const int64_t first = chunk * kChunk, n = std::min(kChunk, p.count - first);
      LoadRow<S>(x + first, n, staged);
      ApplyActivationInPlace(staged, n, p.activation);
      StoreRow<S>(staged, n, y + first);
    }
  }, 4);
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
  }
}

absl::Status CpuActivationAlgorithm::CanImplement(const ActivationProblem& problem) const {
  return problem.Validate();
}

absl::Status CpuActivationAlgorithm::Run(const ActivationProblem& p, const ActivationArgs& args, Workspace,
                                         const ExecutionContext& context) const {
  return DispatchFloatStorage(p.dtype, [&](auto storage) {
    using S = decltype(storage);
    ActivationKernel<S>(p, static_cast<const typename S::T*>(args.x), static_cast<typename S::T*>(args.y),
                        *context.thread_pool);
    return absl::OkStatus();
  });
}

CONVOY_REGISTER_ALGORITHM(ActivationOp, CpuActivationAlgorithm);

}  // namespace convoy::cpu
