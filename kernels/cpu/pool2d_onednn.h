// CPU pooling on oneDNN's pooling primitive: max, average (count_include_pad or not, ceil mode), global average and
// global max, FP32 (and BF16 where the CPU has a BF16 kernel), in NCHW, NHWC and the blocked NCHW8c layout; max and
// global max also on UINT8 / INT8 NHWC tensors (the INT8 max pool of QDQ models, exact: no arithmetic). One
// algorithm per layout: "cpu.pool2d.onednn_nchw", "_nhwc", "_nchw8c". Ceil mode becomes extra bottom/right padding;
// the one PyTorch rule oneDNN does not share (with count_include_pad, a ceil-mode window that runs past the padded
// input divides by the clipped window) is declined, as are dilated windows (cpu.pool2d.direct takes those). The
// primitive is made once per problem by Prepare.
#ifndef CONVOY_KERNELS_CPU_POOL2D_ONEDNN_H_
#define CONVOY_KERNELS_CPU_POOL2D_ONEDNN_H_

#include <memory>

#include "kernels/cpu/onednn_support.h"
#include "kernels/registry/algorithm.h"

namespace convoy::cpu {

struct OnednnPoolDescriptor;

template <Layout kLayout>
class Pool2dOnednn final : public Pool2dAlgorithm {
 public:
  absl::string_view name() const override;
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const Pool2dProblem& problem) const override;
  size_t WorkspaceBytes(const Pool2dProblem& problem) const override;
  absl::StatusOr<std::unique_ptr<AlgorithmState>> Prepare(const Pool2dProblem& problem,
                                                          const ExecutionContext& context) const override;
  absl::Status Run(const Pool2dProblem& problem, const Pool2dArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
  // The oneDNN implementation the problem's primitive got ("oneDNN <impl>"), for `convoy inspect`.
  std::string LaunchSummary(const Pool2dProblem& problem) const override;
  // Above cpu.pool2d.direct (score 0).
  int HeuristicScore(const Pool2dProblem& problem) const override { return 10; }

 private:
  absl::StatusOr<std::shared_ptr<const OnednnPoolDescriptor>> Describe(const Pool2dProblem& problem) const;
  onednn::DescriptorCache<Pool2dProblem, OnednnPoolDescriptor> descriptors_;
};

using Pool2dOnednnNchw = Pool2dOnednn<Layout::kNCHW>;
using Pool2dOnednnNhwc = Pool2dOnednn<Layout::kNHWC>;
using Pool2dOnednnNchw8c = Pool2dOnednn<Layout::kNCHW8c>;

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_POOL2D_ONEDNN_H_
