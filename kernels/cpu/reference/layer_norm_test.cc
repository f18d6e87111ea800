// Checks the reference layer norm against its definition's consequences: with unit scale and no bias every column
// has mean 0 and mean square variance / (variance + epsilon); scale and bias apply per axis position as
// y = scale * unit + bias; the statistics are the column's mean and 1 / sqrt(variance + epsilon); a constant column
// gives y = bias; missing operands are refused.
#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/reference/reference_ops.h"
#include "kernels/testing/test_tensors.h"

namespace convoy::reference {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::RandomFloats;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

std::vector<float> Poisoned(int64_t count) {
  std::vector<float> v(static_cast<size_t>(count));
  testing::PoisonWithNaN(v.data(), DataType::kFloat32, count);
  return v;
}

TEST(ReferenceLayerNormTest, ColumnsAreNormalizedThenScaledAndShifted) {
  for (int64_t inner : {int64_t{1}, int64_t{6}}) {
    LayerNormProblem p;
    p.outer = 3, p.axis = 10, p.inner = inner, p.epsilon = 0.01f, p.write_stats = true;
    const int64_t count = p.outer * p.axis * p.inner, columns = p.outer * p.inner;
    std::vector<float> x = RandomFloats(count, 21, 2.0f, 6.0f);
    const std::vector<float> ones(p.axis, 1.0f), scale = RandomFloats(p.axis, 22, 0.5f, 2.0f),
                             bias = RandomFloats(p.axis, 23);
    std::vector<float> unit = Poisoned(count), mean = Poisoned(columns), inv = Poisoned(columns);
    ASSERT_THAT(LayerNorm(p, LayerNormArgs{x.data(), ones.data(), nullptr, unit.data(), mean.data(), inv.data()}),
                IsOk());
    for (int64_t o = 0; o < p.outer; ++o)
      for (int64_t i = 0; i < p.inner; ++i) {
        double m = 0, v = 0, sum = 0, squares = 0;
        for (int64_t a = 0; a < p.axis; ++a) m += x[(o * p.axis + a) * p.inner + i] / double(p.axis);
        for (int64_t a = 0; a < p.axis; ++a) {
          const double d = x[(o * p.axis + a) * p.inner + i] - m;
          v += d * d / double(p.axis);
          sum += unit[(o * p.axis + a) * p.inner + i];
          squares += double{unit[(o * p.axis + a) * p.inner + i]} * unit[(o * p.axis + a) * p.inner + i];
        }
        EXPECT_NEAR(sum / p.axis, 0.0, 1e-6) << o << "," << i;
        EXPECT_NEAR(squares / p.axis, v / (v + p.epsilon), 1e-5) << o << "," << i;
        EXPECT_NEAR(mean[o * p.inner + i], m, 1e-5) << o << "," << i;
        EXPECT_NEAR(inv[o * p.inner + i], 1.0 / std::sqrt(v + p.epsilon), 1e-4) << o << "," << i;
      }
    p.has_bias = true, p.write_stats = false;
    std::vector<float> y = Poisoned(count);
    ASSERT_THAT(LayerNorm(p, LayerNormArgs{x.data(), scale.data(), bias.data(), y.data()}), IsOk());
    for (int64_t e = 0; e < count; ++e) {
      const int64_t a = e / p.inner % p.axis;
      EXPECT_NEAR(y[e], scale[a] * unit[e] + bias[a], 1e-5) << e;
    }
    // A constant column (variance 0) becomes the bias.
    for (int64_t a = 0; a < p.axis; ++a) x[a * p.inner] = 3.5f;
    ASSERT_THAT(LayerNorm(p, LayerNormArgs{x.data(), scale.data(), bias.data(), y.data()}), IsOk());
    for (int64_t a = 0; a < p.axis; ++a) EXPECT_FLOAT_EQ(y[a * p.inner], bias[a]) << a;
  }
}

TEST(ReferenceLayerNormTest, RefusesMissingOperandsAndBadProblems) {
  LayerNormProblem p;
  p.axis = 4, p.has_bias = true;
  float buffer[16] = {};
  EXPECT_THAT(LayerNorm(p, LayerNormArgs{buffer, buffer, nullptr, buffer}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("args.bias (has_bias) is null")));
  p.has_bias = false, p.write_stats = true;
  EXPECT_THAT(LayerNorm(p, LayerNormArgs{buffer, buffer, nullptr, buffer}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("args.mean (write_stats) is null")));
  p.axis = 0;
  EXPECT_THAT(p.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("axis must be positive, got 0")));
  p.axis = 4, p.epsilon = -1.0f;
  EXPECT_THAT(p.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("epsilon must be >= 0")));
}

}  // namespace
}  // namespace convoy::reference
