// CPU layout and dtype conversion on oneDNN's reorder primitive: "cpu.convert.onednn_reorder". It is the one
// algorithm that moves tensors into and out of the blocked NCHW8c layout (to and from NCHW or NHWC, FP32 and BF16,
// dtype changes included); it also takes the plain NCHW <-> NHWC reorders. The primitive is made once per problem by
// Prepare (owned by the plan), so a plan's edge conversions cost one pass each and no JIT at request time.
#ifndef CONVOY_KERNELS_CPU_CONVERT_ONEDNN_H_
#define CONVOY_KERNELS_CPU_CONVERT_ONEDNN_H_

#include <memory>

#include "kernels/cpu/onednn_support.h"
#include "kernels/registry/algorithm.h"

namespace convoy::cpu {

struct OnednnReorderDescriptor;

class ConvertOnednnReorder final : public ConvertAlgorithm {
 public:
  absl::string_view name() const override { return "cpu.convert.onednn_reorder"; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const ConvertProblem& problem) const override;
  size_t WorkspaceBytes(const ConvertProblem& problem) const override;
  absl::StatusOr<std::unique_ptr<AlgorithmState>> Prepare(const ConvertProblem& problem,
                                                          const ExecutionContext& context) const override;
  absl::Status Run(const ConvertProblem& problem, const ConvertArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
  // The oneDNN implementation the problem's primitive got ("oneDNN <impl>"), for `convoy inspect`.
  std::string LaunchSummary(const ConvertProblem& problem) const override;
  // Above cpu.convert.elementwise for the reorders only it can do (to or from NCHW8c), below it otherwise.
  int HeuristicScore(const ConvertProblem& problem) const override;

 private:
  absl::StatusOr<std::shared_ptr<const OnednnReorderDescriptor>> Describe(const ConvertProblem& problem) const;
  onednn::DescriptorCache<ConvertProblem, OnednnReorderDescriptor> descriptors_;
};

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_CONVERT_ONEDNN_H_
