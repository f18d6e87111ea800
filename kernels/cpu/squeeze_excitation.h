// CPU squeeze-and-excitation ("cpu.squeeze_excitation.direct", "_avx2", "_avx512"): SqueezeExcitationProblem
// (problems.h), the whole branch x -> global average pool -> 1x1 conv -> activation -> 1x1 conv -> gate activation
// -> x * gate as one step, FP32, in NCHW, NHWC or NCHW8c; one algorithm per instruction set the CPU runs (cpu_isa.h),
// the widest preferred.
//
// What it saves against the five steps the branch is otherwise planned as (a pool, two 1x1 convolutions on a 1x1
// image, the gate's broadcast multiply): four hand-overs between the thread pool and oneDNN's OpenMP team, and four
// tiny kernels' fixed costs, per block (EfficientNet-B0 has 16). The work itself is unchanged: x is read twice (the
// sums, then the multiply) and y written once; the two matrix-vector products (at most C * squeeze multiply-adds
// each, 55 K in EfficientNet-B0) run on the calling thread between the two parallel passes.
//
// Run: pass 1 splits each image's pixels (channel planes in NCHW) into pieces over the pool, each summing into its own
// slice of the workspace; the calling thread adds the pieces, computes both products and the gate into the
// workspace; pass 2 multiplies x by the gate over the pool. The sums and dot products are the reductions of
// squeeze_excitation_rows.h and the multiply the binary op's row kernels (binary_rows.h), both compiled for the
// algorithm's instruction set.
#ifndef CONVOY_KERNELS_CPU_SQUEEZE_EXCITATION_H_
#define CONVOY_KERNELS_CPU_SQUEEZE_EXCITATION_H_

#include <string>

#include "kernels/cpu/cpu_isa.h"
#include <string>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/registry/algorithm.h"

namespace convoy::cpu {

class CpuSqueezeExcitation final : public SqueezeExcitationAlgorithm {
 public:
  // Pieces an image's sums are split into at most (the workspace holds this many partial sums per channel).
  static constexpr int kMaxPieces = 8;

  // `isa`: the instruction set its loops are compiled for (the CPU must support it: CpuSupports).
  explicit CpuSqueezeExcitation(CpuIsa isa);
  absl::string_view name() const override { return name_; }
  Backend backend() const override { return Backend::kCpu; }
  // Validate()'s error, or UNIMPLEMENTED for anything but FP32.
  absl::Status CanImplement(const SqueezeExcitationProblem& problem) const override;
  size_t WorkspaceBytes(const SqueezeExcitationProblem& problem) const override;
  // The widest instruction set wins: baseline 0, AVX2 10, AVX-512 20.
  int HeuristicScore(const SqueezeExcitationProblem& problem) const override;
  absl::Status Run(const SqueezeExcitationProblem& problem, const SqueezeExcitationArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;

 private:
  const CpuIsa isa_;
  const std::string name_;
};

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_SQUEEZE_EXCITATION_H_
