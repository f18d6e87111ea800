// CPU GEMM (the fully connected classifier) on OpenBLAS sgemm: Y[m, n] = epilogue(A[m, k] x B[n, k]^T), registered
// as "cpu.gemm.openblas". The output is cut into row x column tiles spread over the pool (a batch-1 classifier is
// one row, so columns are split too); each tile is one single-threaded sgemm followed by the epilogue on the hot
// tile. FP16/BF16 compute in FP32: B is converted once (the packed filter), A rows per tile, Y rounded on store.
#ifndef CONVOY_KERNELS_CPU_GEMM_OPENBLAS_H_
#define CONVOY_KERNELS_CPU_GEMM_OPENBLAS_H_

#include "kernels/registry/algorithm.h"

namespace convoy {
namespace cpu {

class GemmOpenBlas final : public GemmAlgorithm {
 public:
  absl::string_view name() const override { return "cpu.gemm.openblas"; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const GemmProblem& problem) const override;
  size_t WorkspaceBytes(const GemmProblem& problem) const override;
  size_t PackedFilterBytes(const GemmProblem& problem) const override;
  absl::Status PackFilter(const GemmProblem& problem, const void* filter, void* packed,
                          const ExecutionContext& context) const override;
  absl::Status Run(const GemmProblem& problem, const GemmArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
  int HeuristicScore(const GemmProblem& problem) const override { return 10; }
};

}  // namespace cpu
}  // namespace convoy

#endif  // CONVOY_KERNELS_CPU_GEMM_OPENBLAS_H_
