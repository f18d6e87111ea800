// CPU 2-D transposed convolution ("cpu.conv_transpose2d.direct"): each output element gathers the input elements
// whose filter taps reach it (oy + pad_top - r * dilation divisible by the stride), FP32 accumulation, NCHW or NHWC,
// filter [C, K/groups, R, S]. Parallel over (image, output channel) planes. A direct form: decoders and
// segmentation heads use a few small transposed convolutions, where it is cheap enough; a col2im GEMM form is the
// step after this if a model spends its time here.
#ifndef CONVOY_KERNELS_CPU_CONV_TRANSPOSE2D_H_
#define CONVOY_KERNELS_CPU_CONV_TRANSPOSE2D_H_

#include "kernels/registry/algorithm.h"

namespace convoy::cpu {

class CpuConvTranspose2dAlgorithm final : public ConvTranspose2dAlgorithm {
 public:
  absl::string_view name() const override { return "cpu.conv_transpose2d.direct"; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const ConvTranspose2dProblem& problem) const override { return problem.Validate(); }
  absl::Status Run(const ConvTranspose2dProblem& problem, const ConvTranspose2dArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
};

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_CONV_TRANSPOSE2D_H_
