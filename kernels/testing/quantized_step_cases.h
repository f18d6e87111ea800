// The shared cases and checks of the element steps around INT8 convolutions in a QDQ plan, on any Device:
//   quantize / dequantize (ConvertOp with ConvertProblem::quantized()): FP32 <-> UINT8 / INT8 with a scale and zero
//     point between NCHW and NHWC, against ONNX's QuantizeLinear / DequantizeLinear written out element by element;
//   the quantized add (QuantizedAddOp), against onnxruntime's x86 QLinearAdd arithmetic written out (problems.h).
// Fresh random data per seed: FP32 values on and around the quantization grid (exact ties k + 0.5, which round half to
// even), far outside the range (saturation at both ends), NaN (the type's minimum) and +-infinity; for the add every
// pair of operand bytes once plus a random tail, fresh scales and zero points. Outputs are poisoned first (FP32: NaN;
// bytes: the complement of the expected value). Compared exactly: the definitions are single FP32 operations.
//
// `also` (optional) is a second algorithm run on the host with a CPU context on the same inputs, whose output must
// equal the device's byte for byte: the CUDA unit tests pass the CPU algorithm, so the two backends are checked
// against each other as well as against the definitions.
//
//   for (const QuantizedConvertCase& c : QuantizedConvertTestCases())
//     EXPECT_THAT(CheckQuantizeRoundTrip(algorithm, c, device, seed, nullptr), IsOk());
#ifndef CONVOY_KERNELS_TESTING_QUANTIZED_STEP_CASES_H_
#define CONVOY_KERNELS_TESTING_QUANTIZED_STEP_CASES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/common/problems.h"
#include "kernels/registry/algorithm.h"
#include "kernels/registry/device.h"

namespace convoy::testing {

// One quantize (FP32 src_layout -> quantized dst_layout) and its dequantize back.
struct QuantizedConvertCase {
  DataType quantized = DataType::kUInt8;
  Layout src_layout = Layout::kNCHW, dst_layout = Layout::kNHWC;
  int n = 1, c = 1, h = 1, w = 1;

  ConvertProblem Quantize(float scale, int zero_point) const;
  std::string ToString() const;
};

// UINT8 and INT8 x every pair of NCHW and NHWC x three shapes: C = 40 by H * W = 35 (partial 32 x 32 tiles both
// ways), an RGB input, and a pooled [N, 64, 1, 1] tail (the layouts coincide).
std::vector<QuantizedConvertCase> QuantizedConvertTestCases();

// Quantizes random FP32 data with `algorithm` on `device`, then dequantizes the expected bytes back with it (the
// dequantize problem is the quantize's with source and destination swapped), each against the definition.
absl::Status CheckQuantizeRoundTrip(const ConvertAlgorithm& algorithm, const QuantizedConvertCase& c, Device& device,
                                    uint32_t seed, const ConvertAlgorithm* also = nullptr);

// Where the add writes its output: a buffer of its own, or over an operand (then y's type and zero point are that
// operand's).
enum class QuantizedAddOutput { kSeparate, kOverA, kOverB };

// The quantized add of a_type + b_type -> y_type on 65536 + [0, 1000) elements (every operand byte pair once),
// `offset` bytes into every device buffer (0: the vector path; 1: pointers off every vector alignment).
absl::Status CheckQuantizedAdd(const QuantizedAddAlgorithm& algorithm, DataType a_type, DataType b_type,
                               DataType y_type, QuantizedAddOutput output, int offset, Device& device, uint32_t seed,
                               const QuantizedAddAlgorithm* also = nullptr);

}  // namespace convoy::testing

#endif  // CONVOY_KERNELS_TESTING_QUANTIZED_STEP_CASES_H_
