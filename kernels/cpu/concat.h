// CPU channel concat ("cpu.concat.copy"): contiguous memcpy runs (input i's C_i * H * W block per image in NCHW, its
// C_i channels per pixel in NHWC), bit for bit, so any data type works.
#ifndef CONVOY_KERNELS_CPU_CONCAT_H_
#define CONVOY_KERNELS_CPU_CONCAT_H_

#include "kernels/registry/algorithm.h"

namespace convoy::cpu {

class CpuConcatAlgorithm final : public ConcatAlgorithm {
 public:
  absl::string_view name() const override { return "cpu.concat.copy"; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const ConcatProblem& problem) const override { return problem.Validate(); }
  absl::Status Run(const ConcatProblem& problem, const ConcatArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
};

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_CONCAT_H_
