// CPU argmax along the middle axis of [outer, axis, inner] ("cpu.argmax.columns"): inner > 1 (NCHW channels) walks
// 64 adjacent positions at a time down the axis, keeping their best values and indices on the stack; inner == 1
// (NHWC channels, [N, C] rows) scans each row.
#ifndef CONVOY_KERNELS_CPU_ARGMAX_H_
#define CONVOY_KERNELS_CPU_ARGMAX_H_

#include "kernels/registry/algorithm.h"

namespace convoy::cpu {

class CpuArgMaxAlgorithm final : public ArgMaxAlgorithm {
 public:
  absl::string_view name() const override { return "cpu.argmax.columns"; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const ArgMaxProblem& problem) const override { return problem.Validate(); }
  absl::Status Run(const ArgMaxProblem& problem, const ArgMaxArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
};

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_ARGMAX_H_
