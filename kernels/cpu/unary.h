// CPU unary element-wise functions ("cpu.unary.elementwise"): unary_function.h's ApplyUnary over a flat buffer in
// FP32 (FP16/BF16 widened and rounded back), split across the pool in 4096-element chunks; in place allowed.
#ifndef CONVOY_KERNELS_CPU_UNARY_H_
#define CONVOY_KERNELS_CPU_UNARY_H_

#include "kernels/registry/algorithm.h"

namespace convoy::cpu {

class CpuUnaryAlgorithm final : public UnaryAlgorithm {
 public:
  absl::string_view name() const override { return "cpu.unary.elementwise"; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const UnaryProblem& problem) const override { return problem.Validate(); }
  absl::Status Run(const UnaryProblem& problem, const UnaryArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
};

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_UNARY_H_
