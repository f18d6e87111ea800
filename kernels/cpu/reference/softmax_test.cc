// Checks the reference softmax: rows sum to 1, ratios follow exp of differences, huge inputs stay finite.
#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/reference/reference_ops.h"
#include "kernels/testing/test_tensors.h"

namespace convoy::reference {
namespace {

using ::convoy::testing::IsOk;

TEST(ReferenceSoftmaxTest, EachSliceSumsToOneAndRatiosAreExpOfDifferences) {
  SoftmaxProblem p;
  p.outer = 3, p.axis = 7, p.inner = 5;  // NCHW softmax along C: outer = N, inner = H * W
  std::vector<float> x(p.outer * p.axis * p.inner), y(x.size());
  testing::FillUniform(x.data(), DataType::kFloat32, x.size(), 1, -4, 4);
  testing::PoisonWithNaN(y.data(), DataType::kFloat32, y.size());
  ASSERT_THAT(Softmax(p, SoftmaxArgs{x.data(), y.data()}), IsOk());
  for (int o = 0; o < p.outer; ++o)
    for (int i = 0; i < p.inner; ++i) {
      double sum = 0;
      for (int a = 0; a < p.axis; ++a) sum += y[(o * p.axis + a) * p.inner + i];
      EXPECT_NEAR(sum, 1.0, 1e-6);
      const int i0 = (o * p.axis) * p.inner + i, i1 = (o * p.axis + 1) * p.inner + i;
      EXPECT_NEAR(y[i1] / y[i0], std::exp(double{x[i1]} - x[i0]), 1e-5 * std::exp(double{x[i1]} - x[i0]));
    }
}

TEST(ReferenceSoftmaxTest, LargeLogitsDoNotOverflow) {
  SoftmaxProblem p;
  p.axis = 3;
  const float x[3] = {1000.0f, 1000.0f, 999.0f};
  float y[3];
  ASSERT_THAT(Softmax(p, SoftmaxArgs{x, y}), IsOk());
  const double e = std::exp(-1.0);
  EXPECT_NEAR(y[0], 1 / (2 + e), 1e-6);
  EXPECT_NEAR(y[2], e / (2 + e), 1e-6);
}

}  // namespace
}  // namespace convoy::reference
