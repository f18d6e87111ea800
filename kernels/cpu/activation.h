// CPU standalone activation ("cpu.activation.elementwise"): y = act(x) over a flat array, in chunks across the
// thread pool; y may equal x. FP16/BF16 are computed in FP32.
#ifndef CONVOY_KERNELS_CPU_ACTIVATION_H_
#define CONVOY_KERNELS_CPU_ACTIVATION_H_

#include <cstdint>

#include "kernels/common/epilogue.h"
#include "kernels/cpu/activation_loops.h"
#include "kernels/registry/algorithm.h"

namespace convoy::cpu {

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
