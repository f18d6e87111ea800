// CPU channel split ("cpu.split.copy"): the inverse of concat, as contiguous memcpy runs, any data type.
#ifndef CONVOY_KERNELS_CPU_SPLIT_H_
#define CONVOY_KERNELS_CPU_SPLIT_H_

#include "kernels/registry/algorithm.h"

namespace convoy::cpu {

class CpuSplitAlgorithm final : public SplitAlgorithm {
 public:
  absl::string_view name() const override { return "cpu.split.copy"; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const SplitProblem& problem) const override { return problem.Validate(); }
  absl::Status Run(const SplitProblem& problem, const SplitArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
};

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_SPLIT_H_
