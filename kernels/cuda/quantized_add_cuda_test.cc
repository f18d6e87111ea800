// cuda.quantized_add.elementwise (QuantizedAddOp) on the shared check of kernels/testing/quantized_step_cases.h:
// against onnxruntime's x86 QLinearAdd arithmetic written out there and against the CPU algorithm
// (cpu.quantized_add.elementwise) on the same operands, byte for byte. Every triple of UINT8/INT8 operand and output
// types, each with 8 draws of fresh scales and zero points (every pair of operand bytes per draw: an FMA order off by
// one rounding shows in some of them), operand pointers off the four-byte alignment (the scalar path), the output
// written over either operand; outputs poisoned first; the seed is printed on failure. Under AddressSanitizer, which
// runs the emulated kernel about 20x slower, 2 draws per triple (the optimized build runs all 8).
//
// Two builds of this one source: :quantized_add_emulated_test (the emulated CudaDevice) and :quantized_add_cuda_test
// (the nvcc-built kernel on a GPU; skips where there is none).
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/quantized_add.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/test_device_or_skip.h"
#include "kernels/registry/registry.h"
#include "kernels/testing/quantized_step_cases.h"

namespace convoy::cuda {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::QuantizedAddOutput;

#if defined(__SANITIZE_ADDRESS__)
constexpr int kDrawsPerTypeTriple = 2;
#else
constexpr int kDrawsPerTypeTriple = 8;
#endif

const QuantizedAddAlgorithm& CudaAlgorithm() {
  std::vector<const QuantizedAddAlgorithm*> all = OpRegistry<QuantizedAddOp>::Global().All(Backend::kCuda);
  EXPECT_EQ(all.size(), 1u);
  return *all.at(0);
}

TEST(CudaQuantizedAddTest, EveryTypeTripleMatchesQLinearAddAndTheCpuBitForBit) {
  CONVOY_CREATE_DEVICE_OR_SKIP(device);
  const cpu::QuantizedAddElementwise cpu_algorithm;
  for (DataType a : {DataType::kUInt8, DataType::kInt8}) {
    for (DataType b : {DataType::kUInt8, DataType::kInt8}) {
      for (DataType y : {DataType::kUInt8, DataType::kInt8}) {
        for (int draw = 0; draw < kDrawsPerTypeTriple; ++draw) {
          const int offset = draw % 2;
          const uint32_t seed = std::random_device{}();
          EXPECT_THAT(testing::CheckQuantizedAdd(CudaAlgorithm(), a, b, y, QuantizedAddOutput::kSeparate, offset,
                                                 *device, seed, &cpu_algorithm),
                      IsOk())
              << DataTypeName(a) << " + " << DataTypeName(b) << " -> " << DataTypeName(y) << " offset " << offset
              << " seed " << seed;
        }
      }
    }
  }
}

TEST(CudaQuantizedAddTest, WritesOverEitherOperand) {
  CONVOY_CREATE_DEVICE_OR_SKIP(device);
  for (DataType a : {DataType::kUInt8, DataType::kInt8}) {
    for (DataType b : {DataType::kUInt8, DataType::kInt8}) {
      for (QuantizedAddOutput output : {QuantizedAddOutput::kOverA, QuantizedAddOutput::kOverB}) {
        const uint32_t seed = std::random_device{}();
        EXPECT_THAT(testing::CheckQuantizedAdd(CudaAlgorithm(), a, b, a, output, 0, *device, seed), IsOk())
            << DataTypeName(a) << " + " << DataTypeName(b)
            << (output == QuantizedAddOutput::kOverA ? " over a" : " over b") << " seed " << seed;
      }
    }
  }
}

TEST(CudaQuantizedAddTest, RejectsBadProblemsAndMissingOperands) {
  CONVOY_CREATE_DEVICE_OR_SKIP(device);
  const QuantizedAddAlgorithm& algorithm = CudaAlgorithm();
  QuantizedAddProblem p;
  p.count = 16;
  p.y_type = DataType::kFloat32;
  EXPECT_THAT(algorithm.CanImplement(p).message(), ::testing::HasSubstr("y must be UINT8 or INT8, got FP32"));
  p.y_type = DataType::kUInt8;
  p.a_scale = -1.0f;
  EXPECT_THAT(algorithm.CanImplement(p).message(), ::testing::HasSubstr("a's scale must be positive and finite"));
  p.a_scale = 1.0f;
  absl::StatusOr<DeviceAllocation> buffer = device->Allocate(16);
  ASSERT_TRUE(buffer.ok());
  const absl::Status missing =
      algorithm.Run(p, QuantizedAddArgs{buffer->data(), nullptr, buffer->data()}, Workspace{}, device->context());
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.message(), ::testing::HasSubstr("args.b is null"));
}

}  // namespace
}  // namespace convoy::cuda
