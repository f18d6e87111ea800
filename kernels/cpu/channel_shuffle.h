// CPU channel shuffle ("cpu.channel_shuffle.copy"): y[:, j * groups + g] = x[:, g * (C / groups) + j]. NCHW moves
// whole H * W planes with memcpy; NHWC permutes the C channels of each pixel. Any data type (bit copies).
#ifndef CONVOY_KERNELS_CPU_CHANNEL_SHUFFLE_H_
#define CONVOY_KERNELS_CPU_CHANNEL_SHUFFLE_H_

#include "kernels/registry/algorithm.h"

namespace convoy::cpu {

class CpuChannelShuffleAlgorithm final : public ChannelShuffleAlgorithm {
 public:
  absl::string_view name() const override { return "cpu.channel_shuffle.copy"; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const ChannelShuffleProblem& problem) const override;
  absl::Status Run(const ChannelShuffleProblem& problem, const ChannelShuffleArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
};

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_CHANNEL_SHUFFLE_H_
