// The shared problem list and check of every INT8 convolution algorithm (QuantizedConv2dOp), on any Device: the
// layer kinds quantized ResNets and MobileNets have (the 3-channel stem, a strided 3x3 with asymmetric padding, a 3x3
// basic block, a 1x1 projection, depthwise, grouped), crossed with every epilogue of QuantizedEpilogue (INT32 bias,
// per-channel requantization, the residual with its own scale and zero point, ReLU, UINT8 / INT8 / FP32 outputs
// with zero points; UINT8 and INT8 sources with nonzero zero points), each run on fresh random data against the exact
// integer reference (reference::QuantizedConv2d).
//
//   for (const QuantizedConv2dProblem& p : QuantizedConv2dTestProblems(Layout::kNHWC))
//     EXPECT_THAT(CheckQuantizedConv2d(algorithm, p, device, seed, {}), IsOk());
#ifndef CONVOY_KERNELS_TESTING_QUANTIZED_CONV2D_CASES_H_
#define CONVOY_KERNELS_TESTING_QUANTIZED_CONV2D_CASES_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kernels/common/problems.h"
#include "kernels/registry/algorithm.h"
#include "kernels/registry/device.h"

namespace convoy::testing {

// The layer shapes (geometry only: the types and epilogue are the defaults).
std::vector<QuantizedConv2dProblem> QuantizedConv2dTestShapes(Layout layout);

// Source type, output type and epilogue of one case.
struct QuantizedEpilogueCase {
  DataType src_type = DataType::kUInt8;
  DataType dst_type = DataType::kUInt8;
  QuantizedEpilogue epilogue;
};
std::vector<QuantizedEpilogueCase> QuantizedConv2dTestEpilogues();

// Every shape crossed with every epilogue case.
std::vector<QuantizedConv2dProblem> QuantizedConv2dTestProblems(Layout layout);

// ResNet-style residual adds fused after the convolution (QuantizedConv2dProblem::fused_add; the CPU algorithm runs
// them): every shape crossed with the conv as the add's second operand (always exact in oneDNN's post-op order), as
// its first with a quantization whose two FMA orders agree on every operand pair (ResNet-50's layer1.1, from
// onnxruntime's quantizer), and INT8 tensors around a UINT8 sum.
std::vector<QuantizedConv2dProblem> QuantizedConv2dFusedAddTestProblems(Layout layout);

// A residual-add case with the conv's output (UINT8/INT8, zero point conv_zp, scale conv_scale) as operand `which`
// and the residual (zero point 0) as the other, into a UINT8 sum with scale y_scale; the conv has a bias.
QuantizedConv2dProblem WithFusedAdd(QuantizedConv2dProblem shape, QuantizedFusedAdd which, float conv_scale,
                                    int conv_zp, float residual_scale, float y_scale,
                                    DataType conv_type = DataType::kUInt8, DataType residual_type = DataType::kUInt8);

// Where the check puts the requantization multipliers: in args.scale (run time), or in the problem
// (epilogue.scales, as plans make it) with args.scale null, so an algorithm that still read it would fail.
enum class QuantizedScaleSource { kArgs, kProblem };

// How far an algorithm may be from the reference. The accumulation is exact on every algorithm; where one forms
// the FP32 requantization in another order than the reference (oneDNN), an output whose exact value lies within an
// FP32 rounding of a tie may round to the neighbouring step: max_off_by_one_fraction of a problem's quantized
// outputs (and at least min_off_by_one_allowed) may be one step off. FP32 outputs within fp32_relative.
struct QuantizedTolerance {
  double max_off_by_one_fraction = 0.0;
  int64_t min_off_by_one_allowed = 0;
  float fp32_relative = 0.0f;  // 0: bit-exact
};

// Which operands the check draws. kUniform: the whole ranges of the source and weight types. kExtreme: every input
// at the source type's largest magnitude (255, or -128) and every weight -128 or 127 (random signs), where a kernel
// summing pairs of products in 16 bits (pmaddubsw without VNNI) saturates; the multipliers spread the outputs as for
// uniform operands.
enum class QuantizedOperands { kUniform, kExtreme };

// One problem on `device`: random inputs from `seed` (whole ranges of the source and weight types, INT32 bias, scales
// that spread the outputs over the whole quantized range with some saturating), the filter packed when the algorithm
// packs it, the output poisoned before the run with a value differing from the reference in every element (FP32: NaN;
// integers: the bitwise complement), then compared element by element within `tolerance`; a fused add must reproduce
// the separate steps bit for bit (no output off). An algorithm that adds the residual onto the output buffer
// (ResidualInOutput) then runs once more as plans run it, the residual in y, and is compared again.
absl::Status CheckQuantizedConv2d(const QuantizedConv2dAlgorithm& algorithm, const QuantizedConv2dProblem& problem,
                                  Device& device, uint32_t seed, const QuantizedTolerance& tolerance,
                                  QuantizedScaleSource scales = QuantizedScaleSource::kArgs,
                                  QuantizedOperands operands = QuantizedOperands::kUniform);

}  // namespace convoy::testing

#endif  // CONVOY_KERNELS_TESTING_QUANTIZED_CONV2D_CASES_H_
