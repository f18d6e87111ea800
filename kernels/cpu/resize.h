// CPU spatial resize ("cpu.resize.tables"): ONNX Resize over H and W in every mode (resize_sampling.h). Each Run
// first tabulates, per output row and per output column, the source indices and normalised weights of its taps in
// the workspace (the coordinate arithmetic then costs out_h + out_w evaluations, not one per element), then sums the
// taps: NCHW row by row within each channel plane, NHWC pixel by pixel over contiguous channels.
#ifndef CONVOY_KERNELS_CPU_RESIZE_H_
#define CONVOY_KERNELS_CPU_RESIZE_H_

#include "kernels/registry/algorithm.h"

namespace convoy::cpu {

class CpuResizeAlgorithm final : public ResizeAlgorithm {
 public:
  absl::string_view name() const override { return "cpu.resize.tables"; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const ResizeProblem& problem) const override { return problem.Validate(); }
  size_t WorkspaceBytes(const ResizeProblem& problem) const override;
  absl::Status Run(const ResizeProblem& problem, const ResizeArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
};

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_RESIZE_H_
