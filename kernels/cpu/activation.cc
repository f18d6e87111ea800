#include "kernels/cpu/activation.h"

#include <algorithm>

#include "kernels/cpu/convert_element.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {
namespace {

constexpr int64_t kChunk = 512;  // elements staged in FP32 at a time (on the stack)

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
