// CPU layout and dtype conversion ("cpu.convert.elementwise"): FP32 <-> FP16 <-> BF16 (round to nearest even, the
// same rounding as dtype.h) and NCHW <-> NHWC. A same-layout conversion is one flat loop in chunks; a layout change
// walks the destination contiguously, one (n, h) row at a time. Both data types are dispatched once per Run.
#ifndef CONVOY_KERNELS_CPU_CONVERT_H_
#define CONVOY_KERNELS_CPU_CONVERT_H_

#include "kernels/registry/algorithm.h"

namespace convoy::cpu {

class CpuConvertAlgorithm final : public ConvertAlgorithm {
 public:
  absl::string_view name() const override { return "cpu.convert.elementwise"; }
  Backend backend() const override { return Backend::kCpu; }
  // NCHW and NHWC, and dtype-only conversions of NCHW8c tensors (the blocked reorders are convert_onednn's).
  absl::Status CanImplement(const ConvertProblem& problem) const override;
  absl::Status Run(const ConvertProblem& problem, const ConvertArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
};

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_CONVERT_H_
