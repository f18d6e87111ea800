// CPU binary element-wise op: y = act(a OP b) with b the same shape, [N, C, 1, 1] (squeeze-excitation), [C] per
// channel, or a scalar, in NCHW, NHWC or NCHW8c. y may equal a.
//
// One algorithm per instruction set the CPU runs (cpu_isa.h), registered at load: "cpu.binary.elementwise"
// (x86-64-v2, every dtype), "cpu.binary.elementwise_avx2" and "cpu.binary.elementwise_avx512" (FP32 only), the
// widest preferred by the heuristic. FP32 runs the row kernels of binary_rows.h compiled for that instruction set:
// the tensor is cut into runs that share one form of b (flat for same-shape and scalar b in any layout; NCHW planes
// with one b value each; NHWC pixels of C channels with b's row of the image; NCHW8c planes of 8-channel pixels with
// b's 8 values of the block), the activation applied to each piece of at most 8192 outputs right after it is
// written. BF16 runs the same row kernels on pieces of 4096 elements converted to FP32 by the instruction set's own
// converts (rounded back to nearest even once, after the activation); FP16, and BF16 in the baseline version's
// fallback, are staged through FP32 in 512-element chunks (RunBinaryStaged).
#ifndef CONVOY_KERNELS_CPU_BINARY_H_
#define CONVOY_KERNELS_CPU_BINARY_H_

#include <string>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/registry/algorithm.h"

namespace convoy::cpu {

class CpuBinaryAlgorithm final : public BinaryAlgorithm {
 public:
  // `isa`: the instruction set its FP32 kernels are compiled for (the CPU must support it: CpuSupports).
  explicit CpuBinaryAlgorithm(CpuIsa isa);
  absl::string_view name() const override { return name_; }
  Backend backend() const override { return Backend::kCpu; }
  // Validate()'s error, or UNIMPLEMENTED in the AVX2 and AVX-512 versions for FP16, and for BF16 NHWC pixels of more
  // than 4096 channels under a broadcast b.
  absl::Status CanImplement(const BinaryProblem& problem) const override;
  // BF16 with a broadcast b: b in FP32 ([N*C] floats at most).
  size_t WorkspaceBytes(const BinaryProblem& problem) const override;
  // The widest instruction set wins: baseline 0, AVX2 10, AVX-512 20.
  int HeuristicScore(const BinaryProblem& problem) const override;
  absl::Status Run(const BinaryProblem& problem, const BinaryArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;

 private:
  const CpuIsa isa_;
  const std::string name_;
};

// The portable loop of every dtype: each row staged through a float buffer in 512-element chunks, the activation
// applied there. FP16 runs it (and BF16 where RunBf16Rows cannot); FP32 ran it before the per-instruction-set row kernels, and
// kernels/benchmarks:binary_isa_bench times it beside them.
absl::Status RunBinaryStaged(const BinaryProblem& problem, const BinaryArgs& args, const ExecutionContext& context);

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_BINARY_H_
