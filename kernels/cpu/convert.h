// CPU layout and dtype conversion ("cpu.convert.elementwise"): FP32 <-> FP16 <-> BF16 (round to nearest even, the
// same rounding as dtype.h) between any two of NCHW, NHWC and NCHW8c. A same-layout conversion is one flat loop in
// chunks; NCHW <-> NHWC walks the destination contiguously, one (n, h) row at a time; a reorder into or out of NCHW8c
// (convert_onednn's where oneDNN takes the data types, this algorithm's for FP16, e.g. a blocked plan's FP16 output)
// addresses both sides through their strides. Both data types are dispatched once per Run.
// It is also the quantize and dequantize of QDQ plans (ConvertProblem::quantized(): FP32 <-> UINT8 / INT8 with one
// scale and zero point, in any of those layouts), the steps at the edges of the INT8 convolutions. Those run the vector
// loops of quantized_vector_loops.h (AVX-512, AVX2 or portable, picked by cpuid; bit for bit the same) for one layout
// on both sides, NHWC <-> NCHW8c (runs of 8 channels) and NCHW FP32 <-> NHWC 8-bit (the plans' input and output
// edges); the other layout pairs take the scalar loops, with the same results.
#ifndef CONVOY_KERNELS_CPU_CONVERT_H_
#define CONVOY_KERNELS_CPU_CONVERT_H_

#include "kernels/registry/algorithm.h"

namespace convoy::cpu {

class CpuConvertAlgorithm final : public ConvertAlgorithm {
 public:
  absl::string_view name() const override { return "cpu.convert.elementwise"; }
  Backend backend() const override { return Backend::kCpu; }
  // Every valid problem. Its heuristic score (0) leaves the FP32/BF16 blocked reorders to convert_onednn, except an
  // FP32 image of three channels from NCHW into NHWC (an FP32 NHWC plan's input), which its SSE interleave of whole
  // rows does faster than oneDNN 2.6's reorder (30).
  absl::Status CanImplement(const ConvertProblem& problem) const override;
  int HeuristicScore(const ConvertProblem& problem) const override;
  absl::Status Run(const ConvertProblem& problem, const ConvertArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
};

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_CONVERT_H_
