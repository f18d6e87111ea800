// CPU layer normalization along the middle axis of [outer, axis, inner] ("cpu.layer_norm.columns"): mean, then the
// variance of the deviations (two passes, FP32), then y = (x - mean) * inv_std_dev * scale + bias. inner == 1 (ONNX
// LayerNormalization, NHWC channels) normalizes contiguous rows; inner > 1 (NCHW channels) handles 64 adjacent
// positions at a time so the loops over them are contiguous, like cpu.softmax.stable.
#ifndef CONVOY_KERNELS_CPU_LAYER_NORM_H_
#define CONVOY_KERNELS_CPU_LAYER_NORM_H_

#include "kernels/registry/algorithm.h"

namespace convoy::cpu {

class CpuLayerNormAlgorithm final : public LayerNormAlgorithm {
 public:
  absl::string_view name() const override { return "cpu.layer_norm.columns"; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const LayerNormProblem& problem) const override { return problem.Validate(); }
  absl::Status Run(const LayerNormProblem& problem, const LayerNormArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
};

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_LAYER_NORM_H_
