// CPU GEMM (fully connected: Y[m, n] = epilogue(A[m, k] * B[n, k]^T)) on oneDNN's matmul primitive:
// "cpu.gemm.onednn_matmul". FP32 (and BF16 where the CPU has a BF16 kernel); B is reordered once into the layout
// the primitive chose (PackFilter); the whole epilogue runs as post-ops (per-column scale and bias, the residual
// before or after the activation). The primitive is made once per problem by Prepare and owned by the plan.
#ifndef CONVOY_KERNELS_CPU_GEMM_ONEDNN_H_
#define CONVOY_KERNELS_CPU_GEMM_ONEDNN_H_

#include <memory>

#include "kernels/cpu/onednn_support.h"
#include "kernels/registry/algorithm.h"

namespace convoy::cpu {

struct OnednnMatmulDescriptor;

class GemmOnednnMatmul final : public GemmAlgorithm {
 public:
  absl::string_view name() const override { return "cpu.gemm.onednn_matmul"; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const GemmProblem& problem) const override;
  size_t WorkspaceBytes(const GemmProblem& problem) const override;
  size_t PackedFilterBytes(const GemmProblem& problem) const override;
  // B in the layout the matmul chose for this problem (format `any`): it may differ between batch sizes.
  std::string PackedFilterLayout(const GemmProblem& problem) const override;
  absl::Status PackFilter(const GemmProblem& problem, const void* filter, void* packed,
                          const ExecutionContext& context) const override;
  absl::StatusOr<std::unique_ptr<AlgorithmState>> Prepare(const GemmProblem& problem,
                                                          const ExecutionContext& context) const override;
  absl::Status Run(const GemmProblem& problem, const GemmArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
  // The oneDNN implementation the problem's primitive got ("oneDNN <impl>"), for `convoy inspect`.
  std::string LaunchSummary(const GemmProblem& problem) const override;
  // Above cpu.gemm.openblas (10).
  int HeuristicScore(const GemmProblem& problem) const override { return 20; }

 private:
  absl::StatusOr<std::shared_ptr<const OnednnMatmulDescriptor>> Describe(const GemmProblem& problem) const;
  onednn::DescriptorCache<GemmProblem, OnednnMatmulDescriptor> descriptors_;
};

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_GEMM_ONEDNN_H_
