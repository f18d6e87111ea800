#include "kernels/cpu/unary.h"

#include "kernels/common/unary_function.h"
#include "kernels/cpu/convert_element.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {

absl::Status CpuUnaryAlgorithm::Run(const UnaryProblem& p, const UnaryArgs& args, Workspace,
                                    const ExecutionContext& context) const {
  if (absl::Status valid = p.Validate(); !valid.ok()) return valid;
  if (args.x == nullptr || args.y == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": ", p.ToString(), ": null x or y"));
  }
  return DispatchFloatStorage(p.dtype, [&](auto storage) {
    using S = decltype(storage);
    const auto* x = static_cast<const typename S::T*>(args.x);
    auto* y = static_cast<typename S::T*>(args.y);
    context.thread_pool->ParallelFor(
        p.count,
        [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) S::Store(y, i, ApplyUnary(S::Load(x, i), p.kind, p.alpha, p.beta));
        },
        /*min_chunk=*/4096);
    return absl::OkStatus();
  });
}

CONVOY_REGISTER_ALGORITHM(UnaryOp, CpuUnaryAlgorithm);

}  // namespace convoy::cpu
