// CPU transpose of a dense tensor of rank 1..6 (TransposeProblem), any data type (bit copies). Both algorithms work
// on the problem's Coalesced() form, so NCHW <-> NHWC and the H <-> W swap are batched matrix transposes:
//
//   cpu.transpose.tiled     coalesced [R, C] -> [C, R] or [B, R, C] -> [B, C, R]: 32 x 32 tiles, so the strided side
//                           of each tile stays in L1; tiles of one batch are split across the pool.
//   cpu.transpose.strided   any permutation: per output row, the input offset from the row's coordinates, then
//                           memcpy when the innermost dim stays innermost, else a strided gather.
#ifndef CONVOY_KERNELS_CPU_TRANSPOSE_H_
#define CONVOY_KERNELS_CPU_TRANSPOSE_H_

#include "kernels/registry/algorithm.h"

namespace convoy::cpu {

class CpuTransposeTiledAlgorithm final : public TransposeAlgorithm {
 public:
  absl::string_view name() const override { return "cpu.transpose.tiled"; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const TransposeProblem& problem) const override;
  absl::Status Run(const TransposeProblem& problem, const TransposeArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
  int HeuristicScore(const TransposeProblem&) const override { return 10; }
};

class CpuTransposeStridedAlgorithm final : public TransposeAlgorithm {
 public:
  absl::string_view name() const override { return "cpu.transpose.strided"; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const TransposeProblem& problem) const override;
  absl::Status Run(const TransposeProblem& problem, const TransposeArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
  int HeuristicScore(const TransposeProblem&) const override { return 0; }
};

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_TRANSPOSE_H_
