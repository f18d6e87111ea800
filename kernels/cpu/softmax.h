// CPU softmax along the middle axis of [outer, axis, inner] ("cpu.softmax.stable"): max subtracted, exp, sum,
// scale, in FP32 (FP16/BF16 loaded into FP32). inner == 1 ([N, C] heads) walks contiguous rows; inner > 1 (NCHW
// along C) processes up to 64 inner positions at once so the loops over them are contiguous.
#ifndef CONVOY_KERNELS_CPU_SOFTMAX_H_
#define CONVOY_KERNELS_CPU_SOFTMAX_H_

#include "kernels/registry/algorithm.h"

namespace convoy::cpu {

class CpuSoftmaxAlgorithm final : public SoftmaxAlgorithm {
 public:
  absl::string_view name() const override { return "cpu.softmax.stable"; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const SoftmaxProblem& problem) const override { return problem.Validate(); }
  absl::Status Run(const SoftmaxProblem& problem, const SoftmaxArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
};

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_SOFTMAX_H_
