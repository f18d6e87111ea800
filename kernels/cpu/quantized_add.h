// CPU INT8 element-wise add ("cpu.quantized_add.elementwise"): QuantizedAddProblem (problems.h), the residual add of a
// QDQ plan between two 8-bit tensors, written 8-bit. Each element is dequantized, summed and requantized in FP32 in the
// order the QDQ graph defines (DequantizeLinear twice, Add, QuantizeLinear), so the step gives bit for bit what the
// FP32 path (two dequantize steps, an FP32 add, a quantize) gives, in one pass over bytes. Flat over the
// buffers: any layout, as long as both operands and the output share it. Chunks of the buffer run on the thread pool,
// each through the widest vector loop the CPU runs (quantized_vector_loops.h: AVX-512, AVX2 or portable, all bit for
// bit the same).
#ifndef CONVOY_KERNELS_CPU_QUANTIZED_ADD_H_
#define CONVOY_KERNELS_CPU_QUANTIZED_ADD_H_

#include "kernels/registry/algorithm.h"

namespace convoy::cpu {

class QuantizedAddElementwise final : public QuantizedAddAlgorithm {
 public:
  absl::string_view name() const override { return "cpu.quantized_add.elementwise"; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const QuantizedAddProblem& problem) const override { return problem.Validate(); }
  absl::Status Run(const QuantizedAddProblem& problem, const QuantizedAddArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
};

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_QUANTIZED_ADD_H_
