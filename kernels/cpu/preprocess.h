// CPU image pre-processing ("cpu.preprocess.elementwise"): UINT8 [N, H, W, C] -> y = x * a[c] + b[c] with
// a = 1 / (255 * std) (or 1 / std without scale_to_unit) and b = -mean / std, in FP32, stored in the destination
// dtype and layout. One (n, h) image row per work item.
#ifndef CONVOY_KERNELS_CPU_PREPROCESS_H_
#define CONVOY_KERNELS_CPU_PREPROCESS_H_

#include "kernels/registry/algorithm.h"

namespace convoy::cpu {

class CpuPreprocessAlgorithm final : public PreprocessAlgorithm {
 public:
  absl::string_view name() const override { return "cpu.preprocess.elementwise"; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const PreprocessProblem& problem) const override {
    if (problem.dst_c != 0 && problem.dst_c != problem.c) {
      return absl::UnimplementedError("channel padding (dst_c) is done by the CUDA kernels only");
    }
    return problem.Validate();
  }
  absl::Status Run(const PreprocessProblem& problem, const PreprocessArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
};

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_PREPROCESS_H_
