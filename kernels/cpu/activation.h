// CPU standalone activation ("cpu.activation.elementwise"): y = act(x) over a flat array, in chunks across the
// thread pool; y may equal x. FP16/BF16 are computed in FP32. ApplyActivationInPlace is shared with the batch-norm and
// binary kernels.
#ifndef CONVOY_KERNELS_CPU_ACTIVATION_H_
#define CONVOY_KERNELS_CPU_ACTIVATION_H_

#include <cstdint>

#include "kernels/common/epilogue.h"
#include "kernels/registry/algorithm.h"

namespace convoy::cpu {

// x[i] = act(x[i]) for i in [0, n): one switch on the kind, then a branch-free loop the compiler can vectorize.
void ApplyActivationInPlace(float* x, int64_t n, const Activation& activation);

class CpuActivationAlgorithm final : public ActivationAlgorithm {
 public:
  absl::string_view name() const override { return "cpu.activation.elementwise"; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const ActivationProblem& problem) const override;
  absl::Status Run(const ActivationProblem& problem, const ActivationArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
};

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_ACTIVATION_H_
