// cuda.quantized_add.elementwise (QuantizedAddOp) against the CPU algorithm (cpu.quantized_add.elementwise, onnxruntime's
// x86 QLinearAdd arithmetic, kernels/cpu/quantized_add_test.cc) and against that arithmetic written out here: every
// triple of UINT8/INT8 operand and output types, every pair of operand bytes (shuffled) plus a random tail, fresh random
// scales and zero points each run (the seed is printed on failure), counts that leave a tail past the four-byte packs, operand
// pointers off the pack alignment (the scalar path), and the output written over an operand (y == a, y == b). The
// output is poisoned first (the complement of the expected byte). Compared exactly: the device evaluates the same two
// FMAs (__fmaf_rn) and rounding as the CPU.
//
// Two builds of this one source: :quantized_add_emulated_test (the emulated CudaDevice) and :quantized_add_cuda_test
// (the nvcc-built kernel on a GPU; skips where there is none).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_macros.h"
#include "kernels/common/status_matchers.h"
#include "kernels/common/thread_pool.h"
#include "kernels/cpu/quantized_add.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/test_device_or_skip.h"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

using ::convoy::testing::IsOk;

int Lo(DataType t) { return t == DataType::kUInt8 ? 0 : -128; }
int Hi(DataType t) { return t == DataType::kUInt8 ? 255 : 127; }
int Load(const std::vector<uint8_t>& v, DataType t, size_t i) {
  return t == DataType::kUInt8 ? int{v[i]} : int{static_cast<int8_t>(v[i])};
}

// onnxruntime's QLinearAdd on one pair (quantized_vector_loops.h).
int Expected(const QuantizedAddProblem& p, int a, int b) {
  const float ra = p.a_scale / p.y_scale, rb = p.b_scale / p.y_scale;
  const float fixed = static_cast<float>(p.y_zero_point) -
                      std::fmaf(ra, static_cast<float>(p.a_zero_point), rb * static_cast<float>(p.b_zero_point));
  const float v = std::fmaf(static_cast<float>(a), ra, std::fmaf(static_cast<float>(b), rb, fixed));
  const double q = std::nearbyint(static_cast<double>(v));
  return static_cast<int>(std::fmin(std::fmax(q, Lo(p.y_type)), Hi(p.y_type)));
}

const QuantizedAddAlgorithm& CudaAlgorithm() {
  std::vector<const QuantizedAddAlgorithm*> all = OpRegistry<QuantizedAddOp>::Global().All(Backend::kCuda);
  EXPECT_EQ(all.size(), 1u);
  return *all.at(0);
}

enum class Output { kSeparate, kOverA, kOverB };

// `offset` bytes into each device buffer: 0 takes the four-byte packs, 1 the scalar loop.
absl::Status Check(Device& device, DataType a_type, DataType b_type, DataType y_type, Output output, int offset,
                   uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> scale(0.005f, 0.1f);
  std::uniform_int_distribution<int> byte(0, 255);
  QuantizedAddProblem p;
  p.count = 65536 + std::uniform_int_distribution<int>(0, 999)(rng);
  p.a_type = a_type, p.b_type = b_type, p.y_type = y_type;
  p.a_scale = scale(rng), p.b_scale = scale(rng), p.y_scale = scale(rng);
  p.a_zero_point = std::uniform_int_distribution<int>(Lo(a_type), Hi(a_type))(rng);
  p.b_zero_point = std::uniform_int_distribution<int>(Lo(b_type), Hi(b_type))(rng);
  p.y_zero_point = std::uniform_int_distribution<int>(Lo(y_type), Hi(y_type))(rng);
  if (output == Output::kOverA) p.y_type = a_type, p.y_zero_point = p.a_zero_point;
  if (output == Output::kOverB) p.y_type = b_type, p.y_zero_point = p.b_zero_point;
  const QuantizedAddAlgorithm& algorithm = CudaAlgorithm();
  CONVOY_RETURN_IF_ERROR(algorithm.CanImplement(p));
  std::vector<uint8_t> a(p.count), b(p.count);
  // Every pair of operand bytes once, shuffled, then a random tail.
  std::vector<int> pairs(65536);
  for (int i = 0; i < 65536; ++i) pairs[i] = i;
  std::shuffle(pairs.begin(), pairs.end(), rng);
  for (int64_t i = 0; i < p.count; ++i) {
    a[i] = static_cast<uint8_t>(i < 65536 ? pairs[i] & 255 : byte(rng));
    b[i] = static_cast<uint8_t>(i < 65536 ? pairs[i] >> 8 : byte(rng));
  }

  // The CPU's bytes, checked against the arithmetic.
  ThreadPool pool(2);
  const cpu::QuantizedAddElementwise cpu_algorithm;
  std::vector<uint8_t> expected(p.count);
  CONVOY_RETURN_IF_ERROR(cpu_algorithm.Run(p, QuantizedAddArgs{a.data(), b.data(), expected.data()}, Workspace{},
                                           ExecutionContext{Backend::kCpu, &pool}));
  for (int64_t i = 0; i < p.count; ++i) {
    const int want = Expected(p, Load(a, a_type, i), Load(b, b_type, i));
    if (Load(expected, p.y_type, i) != want) {
      return absl::InternalError(absl::StrCat("the CPU's element ", i, " is ", Load(expected, p.y_type, i),
                                              ", the arithmetic's ", want));
    }
  }

  const size_t bytes = static_cast<size_t>(p.count) + offset;
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation da, device.Allocate(bytes));
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation db, device.Allocate(bytes));
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation dy, device.Allocate(bytes));
  uint8_t* a_ptr = da.as<uint8_t>() + offset;
  uint8_t* b_ptr = db.as<uint8_t>() + offset;
  uint8_t* y_ptr = output == Output::kOverA ? a_ptr : output == Output::kOverB ? b_ptr : dy.as<uint8_t>() + offset;
  CONVOY_RETURN_IF_ERROR(device.CopyToDevice(a_ptr, a.data(), a.size()));
  CONVOY_RETURN_IF_ERROR(device.CopyToDevice(b_ptr, b.data(), b.size()));
  if (output == Output::kSeparate) {
    std::vector<uint8_t> poisoned(p.count);
    for (int64_t i = 0; i < p.count; ++i) poisoned[i] = static_cast<uint8_t>(~expected[i]);
    CONVOY_RETURN_IF_ERROR(device.CopyToDevice(y_ptr, poisoned.data(), poisoned.size()));
  }
  CONVOY_RETURN_IF_ERROR(algorithm.Run(p, QuantizedAddArgs{a_ptr, b_ptr, y_ptr}, Workspace{}, device.context()));
  CONVOY_RETURN_IF_ERROR(device.Synchronize());
  std::vector<uint8_t> y(p.count);
  CONVOY_RETURN_IF_ERROR(device.CopyToHost(y.data(), y_ptr, y.size()));
  for (int64_t i = 0; i < p.count; ++i) {
    if (y[i] != expected[i]) {
      return absl::InternalError(absl::StrCat(p.ToString(), ": element ", i, " (a ", Load(a, a_type, i), ", b ",
                                              Load(b, b_type, i), ") is ", Load(y, p.y_type, i), ", expected ",
                                              Load(expected, p.y_type, i)));
    }
  }
  return absl::OkStatus();
}

TEST(CudaQuantizedAddTest, EveryTypeTripleMatchesTheCpuBitForBit) {
  CONVOY_CREATE_DEVICE_OR_SKIP(device);
  for (DataType a : {DataType::kUInt8, DataType::kInt8}) {
    for (DataType b : {DataType::kUInt8, DataType::kInt8}) {
      for (DataType y : {DataType::kUInt8, DataType::kInt8}) {
        for (int draw = 0; draw < 8; ++draw) {  // fresh scales per draw: an FMA order off by one rounding shows
          const int offset = draw % 2;
          const uint32_t seed = std::random_device{}();
          EXPECT_THAT(Check(*device, a, b, y, Output::kSeparate, offset, seed), IsOk())
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
      for (Output output : {Output::kOverA, Output::kOverB}) {
        const uint32_t seed = std::random_device{}();
        EXPECT_THAT(Check(*device, a, b, a, output, 0, seed), IsOk())
            << DataTypeName(a) << " + " << DataTypeName(b) << (output == Output::kOverA ? " over a" : " over b")
            << " seed " << seed;
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
