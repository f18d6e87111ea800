// CPU max pooling on NHWC tensors, FP32 and BF16, compiled per instruction set ("cpu.pool2d.max_nhwc" for
// x86-64-v2, "cpu.pool2d.max_nhwc_avx2", "cpu.pool2d.max_nhwc_avx512"; cpu_isa.h): each output pixel is the
// element-wise maximum of its window's input pixels, whole channel rows at a time (pool2d_max_rows.h), the pixels
// split across the context's threads. Windowed max pooling only (the global modes, averages and other layouts run on
// cpu.pool2d.direct and cpu.pool2d.onednn_*), windows of up to 64 taps, any stride, padding, dilation and ceil mode.
// The AVX2 and AVX-512 versions take the heuristic ahead of oneDNN's pooling, which ran the ResNets' 3x3 stride-2
// max pool 1.4-2.2x slower than its peers (docs/kernels.md).
#ifndef CONVOY_KERNELS_CPU_POOL2D_MAX_NHWC_H_
#define CONVOY_KERNELS_CPU_POOL2D_MAX_NHWC_H_

#include <string>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/registry/algorithm.h"

namespace convoy::cpu {

class CpuMaxPoolNhwcAlgorithm final : public Pool2dAlgorithm {
 public:
  explicit CpuMaxPoolNhwcAlgorithm(CpuIsa isa);
  absl::string_view name() const override { return name_; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const Pool2dProblem& problem) const override;
  int HeuristicScore(const Pool2dProblem& problem) const override;
  absl::Status Run(const Pool2dProblem& problem, const Pool2dArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;

  static constexpr int kMaxTaps = 64;

 private:
  CpuIsa isa_;
  std::string name_;
};

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_POOL2D_MAX_NHWC_H_
