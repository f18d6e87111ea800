// Checks the reference GEMM: identity A copies B^T, it agrees with the reference 1x1 conv on the same data (NHWC
// pointwise conv is exactly a GEMM), the epilogue indexes columns, and bad arguments are rejected.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/reference/reference_ops.h"
#include "kernels/testing/test_tensors.h"

namespace convoy::reference {
namespace {

using ::convoy::testing::CompareFloats;
using ::convoy::testing::IsOk;
using ::convoy::testing::RandomFloats;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

TEST(ReferenceGemmTest, IdentityLeftOperandTransposesB) {
  GemmProblem p;
  p.m = p.k = 5, p.n = 7;
  std::vector<float> a(p.m * p.k, 0.0f);
  for (int i = 0; i < p.m; ++i) a[i * p.k + i] = 1.0f;
  const std::vector<float> b = RandomFloats(p.n * p.k, 1);
  std::vector<float> y(p.m * p.n);
  testing::PoisonWithNaN(y.data(), DataType::kFloat32, y.size());
  ASSERT_THAT(Gemm(p, GemmArgs{a.data(), b.data(), nullptr, nullptr, nullptr, y.data()}), IsOk());
  for (int i = 0; i < p.m; ++i)
    for (int j = 0; j < p.n; ++j) ASSERT_EQ(y[i * p.n + j], b[j * p.k + i]);
}

TEST(ReferenceGemmTest, MatchesPointwiseNhwcConvWithTheSameEpilogue) {
  Conv2dProblem conv;
  conv.n = 2, conv.h = 3, conv.w = 5, conv.c = 6, conv.k = 4, conv.layout = Layout::kNHWC;
  conv.epilogue = Epilogue{true, true, ResidualMode::kBeforeActivation, Activation::Of(ActivationKind::kSilu)};
  GemmProblem gemm;
  gemm.m = conv.n * conv.h * conv.w, gemm.n = conv.k, gemm.k = conv.c, gemm.epilogue = conv.epilogue;
  const std::vector<float> x = RandomFloats(gemm.m * gemm.k, 2), w = RandomFloats(gemm.n * gemm.k, 3);
  const std::vector<float> residual = RandomFloats(gemm.m * gemm.n, 4);
  const std::vector<float> bias = RandomFloats(gemm.n, 5), scale = RandomFloats(gemm.n, 6);
  std::vector<float> y_gemm(gemm.m * gemm.n), y_conv(gemm.m * gemm.n);
  testing::PoisonWithNaN(y_gemm.data(), DataType::kFloat32, y_gemm.size());
  testing::PoisonWithNaN(y_conv.data(), DataType::kFloat32, y_conv.size());
  ASSERT_THAT(Gemm(gemm, GemmArgs{x.data(), w.data(), bias.data(), scale.data(), residual.data(), y_gemm.data()}),
              IsOk());
  ASSERT_THAT(Conv2d(conv, Conv2dArgs{x.data(), w.data(), bias.data(), scale.data(), residual.data(), y_conv.data()}),
              IsOk());
  EXPECT_THAT(CompareFloats(y_gemm, y_conv, {0, 0}), IsOk());
}

TEST(ReferenceGemmTest, BiasAndScaleIndexTheColumn) {
  GemmProblem p;
  p.m = 3, p.n = 4, p.k = 6;
  p.epilogue.has_bias = p.epilogue.has_scale = true;
  const std::vector<float> a = RandomFloats(p.m * p.k, 7), b = RandomFloats(p.n * p.k, 8);
  const std::vector<float> bias = RandomFloats(p.n, 9), scale = RandomFloats(p.n, 10);
  std::vector<float> y(p.m * p.n);
  testing::PoisonWithNaN(y.data(), DataType::kFloat32, y.size());
  ASSERT_THAT(Gemm(p, GemmArgs{a.data(), b.data(), bias.data(), scale.data(), nullptr, y.data()}), IsOk());
  for (int i = 0; i < p.m; ++i)
    for (int j = 0; j < p.n; ++j) {
      double dot = 0;
      for (int t = 0; t < p.k; ++t) dot += double{a[i * p.k + t]} * b[j * p.k + t];
      EXPECT_NEAR(y[i * p.n + j], dot * scale[j] + bias[j], 1e-5) << i << "," << j;
    }
}

TEST(ReferenceGemmTest, RejectsInvalidProblemsAndMissingOperands) {
  GemmProblem p;
  float buffer[4] = {};
  p.k = 0;
  EXPECT_THAT(Gemm(p, GemmArgs{buffer, buffer, nullptr, nullptr, nullptr, buffer}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("k must be positive, got 0")));
  p.k = 1;
  EXPECT_THAT(Gemm(p, GemmArgs{buffer, buffer, nullptr, nullptr, nullptr, nullptr}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("args.y is null")));
  p.epilogue.residual = ResidualMode::kAfterActivation;
  EXPECT_THAT(Gemm(p, GemmArgs{buffer, buffer, nullptr, nullptr, nullptr, buffer}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("residual")));
}

}  // namespace
}  // namespace convoy::reference
