// CPU inference batch norm ("cpu.batch_norm.direct"): y = act(x * s[c] + t[c]) with s = gamma / sqrt(var + eps) and
// t = beta - mean * s folded once per Run into the workspace (2 * C floats). NCHW runs a plane per (n, c); NHWC a
// row of C per pixel. FP16/BF16 are computed in FP32.
#ifndef CONVOY_KERNELS_CPU_BATCH_NORM_H_
#define CONVOY_KERNELS_CPU_BATCH_NORM_H_

#include "kernels/registry/algorithm.h"

namespace convoy::cpu {

class CpuBatchNormAlgorithm final : public BatchNormAlgorithm {
 public:
  absl::string_view name() const override { return "cpu.batch_norm.direct"; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const BatchNormProblem& problem) const override { return problem.Validate(); }
  size_t WorkspaceBytes(const BatchNormProblem& problem) const override;
  absl::Status Run(const BatchNormProblem& problem, const BatchNormArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
};

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_BATCH_NORM_H_
