// CPU binary element-wise op ("cpu.binary.elementwise"): y = act(a OP b) with b the same shape, [N, C, 1, 1]
// (squeeze-excitation), [C] per channel, or a scalar. The tensor is walked as contiguous rows (a plane per (n, c) in
// NCHW, C channels per pixel in NHWC, a channel block's plane of 8-channel pixels in NCHW8c) so b is either a
// matching row, one constant per row, or (NCHW8c) 8 channel values repeated along the row. y may equal a.
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
