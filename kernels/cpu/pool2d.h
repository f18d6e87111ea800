// CPU pooling ("cpu.pool2d.direct"): max, average (PyTorch divisor rules, as the reference) and the global modes,
// with ONNX's dilated windows (taps `dilation` apart; kernels/common/pool_window.h). NCHW pools each (n, c) plane;
// NHWC pools each output pixel for blocks of 64 channels at once and the blocked NCHW8c layout each output pixel of
// each 8-channel block, so the innermost loop runs over contiguous channels. FP16/BF16 are computed in FP32; 8-bit
// max pooling is left to cpu.pool2d.onednn_nhwc.
#ifndef CONVOY_KERNELS_CPU_POOL2D_H_
#define CONVOY_KERNELS_CPU_POOL2D_H_

#include "kernels/registry/algorithm.h"

namespace convoy::cpu {

class CpuPool2dAlgorithm final : public Pool2dAlgorithm {
 public:
  absl::string_view name() const override { return "cpu.pool2d.direct"; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const Pool2dProblem& problem) const override;  // NCHW, NHWC and NCHW8c
  absl::Status Run(const Pool2dProblem& problem, const Pool2dArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
};

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_POOL2D_H_
