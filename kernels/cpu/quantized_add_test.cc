// cpu.quantized_add.elementwise against onnxruntime's x86 QLinearAdd arithmetic written out here element by element:
// the scale ratios a_scale / y_scale and b_scale / y_scale, the zero points folded into one FP32 constant, two FMAs on
// the raw operands, rounded half to even, saturated (quantized_vector_loops.h). Every pair of UINT8/INT8 operand types
// and output type, fresh random operands, scales and zero points each run (the seed is printed on failure), counts
// that are not a multiple of the chunk, the output poisoned first (the complement of the expected byte), and the
// output written over an operand (y == a). Compared exactly: both sides compute the same FP32 operations.
#include "kernels/cpu/quantized_add.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_macros.h"
#include "kernels/common/status_matchers.h"
#include "kernels/common/thread_pool.h"

namespace convoy::cpu {
namespace {

using ::convoy::testing::IsOk;

int Lo(DataType t) { return t == DataType::kUInt8 ? 0 : -128; }
int Hi(DataType t) { return t == DataType::kUInt8 ? 255 : 127; }
int Load(const std::vector<uint8_t>& v, DataType t, size_t i) {
  return t == DataType::kUInt8 ? int{v[i]} : int{static_cast<int8_t>(v[i])};
}

int Expected(const QuantizedAddProblem& p, int a, int b) {
  const float ra = p.a_scale / p.y_scale, rb = p.b_scale / p.y_scale;
  const float fixed = static_cast<float>(p.y_zero_point) -
                      std::fmaf(ra, static_cast<float>(p.a_zero_point), rb * static_cast<float>(p.b_zero_point));
  const float v = std::fmaf(static_cast<float>(a), ra, std::fmaf(static_cast<float>(b), rb, fixed));
  const double q = std::nearbyint(static_cast<double>(v));
  return static_cast<int>(std::fmin(std::fmax(q, Lo(p.y_type)), Hi(p.y_type)));
}

absl::Status Check(DataType a_type, DataType b_type, DataType y_type, bool in_place, uint32_t seed) {
  std::mt19937 rng(seed);
  ThreadPool pool(2);
  ExecutionContext context{Backend::kCpu, &pool};
  std::uniform_real_distribution<float> scale(0.005f, 0.1f);
  std::uniform_int_distribution<int> byte(0, 255);
  QuantizedAddProblem p;
  p.count = 20000 + std::uniform_int_distribution<int>(0, 999)(rng);
  p.a_type = a_type, p.b_type = b_type, p.y_type = y_type;
  p.a_scale = scale(rng), p.b_scale = scale(rng), p.y_scale = scale(rng);
  p.a_zero_point = std::uniform_int_distribution<int>(Lo(a_type), Hi(a_type))(rng);
  p.b_zero_point = std::uniform_int_distribution<int>(Lo(b_type), Hi(b_type))(rng);
  p.y_zero_point = std::uniform_int_distribution<int>(Lo(y_type), Hi(y_type))(rng);
  if (in_place) p.y_type = a_type, p.y_zero_point = p.a_zero_point;
  const QuantizedAddElementwise algorithm;
  CONVOY_RETURN_IF_ERROR(algorithm.CanImplement(p));
  std::vector<uint8_t> a(p.count), b(p.count);
  for (uint8_t& v : a) v = static_cast<uint8_t>(byte(rng));
  for (uint8_t& v : b) v = static_cast<uint8_t>(byte(rng));
  std::vector<int> expected(p.count);
  for (int64_t i = 0; i < p.count; ++i) expected[i] = Expected(p, Load(a, a_type, i), Load(b, b_type, i));
  std::vector<uint8_t> y(p.count);
  for (int64_t i = 0; i < p.count; ++i) y[i] = static_cast<uint8_t>(~expected[i]);
  std::vector<uint8_t>& out = in_place ? a : y;
  CONVOY_RETURN_IF_ERROR(algorithm.Run(p, QuantizedAddArgs{a.data(), b.data(), out.data()}, Workspace{}, context));
  for (int64_t i = 0; i < p.count; ++i) {
    const int got = Load(out, p.y_type, i);
    if (got != expected[i]) {
      return absl::InternalError(absl::StrCat(p.ToString(), ": element ", i, " is ", got, ", expected ", expected[i]));
    }
  }
  return absl::OkStatus();
}

TEST(QuantizedAddTest, EveryTypeTripleMatchesTheQdqDefinition) {
  for (DataType a : {DataType::kUInt8, DataType::kInt8}) {
    for (DataType b : {DataType::kUInt8, DataType::kInt8}) {
      for (DataType y : {DataType::kUInt8, DataType::kInt8}) {
        for (bool in_place : {false, true}) {
          const uint32_t seed = std::random_device{}();
          EXPECT_THAT(Check(a, b, y, in_place, seed), IsOk())
              << DataTypeName(a) << " + " << DataTypeName(b) << " -> " << DataTypeName(y) << (in_place ? " in place" : "")
              << " seed " << seed;
        }
      }
    }
  }
}

TEST(QuantizedAddTest, ValidateNamesTheOperand) {
  QuantizedAddProblem p;
  p.b_type = DataType::kFloat32;
  EXPECT_THAT(p.Validate().message(), ::testing::HasSubstr("b must be UINT8 or INT8, got FP32"));
  p.b_type = DataType::kInt8;
  p.b_zero_point = 200;
  EXPECT_THAT(p.Validate().message(), ::testing::HasSubstr("b's zero point 200 is outside INT8"));
  p.b_zero_point = 0;
  p.y_scale = 0.0f;
  EXPECT_THAT(p.Validate().message(), ::testing::HasSubstr("y's scale must be positive and finite, got 0"));
}

}  // namespace
}  // namespace convoy::cpu
