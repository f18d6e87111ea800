// CPU INT8 element-wise add ("cpu.quantized_add.elementwise"): QuantizedAddProblem (problems.h), the residual add of a
// QDQ plan between two 8-bit tensors, written 8-bit, in one pass over bytes. Each element is computed as onnxruntime's
// x86 QLinearAdd computes it (the operation its optimizer makes of DequantizeLinear, DequantizeLinear -> Add ->
// QuantizeLinear): saturate(rint(fma(a, a_scale / y_scale, fma(b, b_scale / y_scale, fixed)))) with the zero points
// folded into `fixed` (quantized_vector_loops.h). That is ONNX's DequantizeLinear -> Add -> QuantizeLinear up to the
// last FP32 bit: the two land on neighbouring steps for about 4 of 10^6 operand pairs, and matching onnxruntime here is
// what keeps deep residual networks identical to it (ResNet-50). Flat over the buffers: any layout, as long as both
// operands and the output share it. Chunks of the buffer run on the thread pool, each through the widest vector loop
// the CPU runs (AVX-512, AVX2 with FMA, or portable, all bit for bit the same).
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
