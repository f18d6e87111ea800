// CPU binary element-wise op ("cpu.binary.elementwise"): y = act(a OP b) with b the same shape, [N, C, 1, 1]
// (squeeze-excitation), [C] per channel, or a scalar. The tensor is walked as contiguous rows (a plane per (n, c) in
// NCHW, C channels per pixel in NHWC) so b is either a matching row or one constant per row. y may equal a.
// FP16/BF16 are computed in FP32.
#ifndef CONVOY_KERNELS_CPU_BINARY_H_
#define CONVOY_KERNELS_CPU_BINARY_H_

#include "kernels/registry/algorithm.h"

namespace convoy::cpu {

class CpuBinaryAlgorithm final : public BinaryAlgorithm {
 public:
  absl::string_view name() const override { return "cpu.binary.elementwise"; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const BinaryProblem& problem) const override { return problem.Validate(); }
  absl::Status Run(const BinaryProblem& problem, const BinaryArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
};

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_BINARY_H_
