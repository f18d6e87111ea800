// Checks the reference batch norm, activation, binary and preprocess ops against closed forms per element.
#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/reference/reference_ops.h"
#include "kernels/testing/test_tensors.h"

namespace convoy::reference {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::RandomFloats;

TEST(ReferencePointwiseTest, BatchNormNormalizesEachChannelWithItsStatistics) {
  BatchNormProblem p;
  p.n = 2, p.c = 3, p.h = 2, p.w = 3, p.layout = Layout::kNHWC, p.activation = Activation::Relu6();
  const std::vector<float> x = RandomFloats(36, 1, -3, 3), gamma = RandomFloats(3, 2), beta = RandomFloats(3, 3);
  const std::vector<float> mean = RandomFloats(3, 4), var = RandomFloats(3, 5, 0.1f, 2.0f);
  std::vector<float> y(36);
  ASSERT_THAT(BatchNorm(p, BatchNormArgs{x.data(), gamma.data(), beta.data(), mean.data(), var.data(), y.data()}),
              IsOk());
  for (int i = 0; i < 36; ++i) {
    const int c = i % 3;  // NHWC: channel is the fastest dimension
    const double v = (x[i] - mean[c]) / std::sqrt(var[c] + 1e-5) * gamma[c] + beta[c];
    EXPECT_NEAR(y[i], std::min(std::max(v, 0.0), 6.0), 1e-6) << i;
  }
}

TEST(ReferencePointwiseTest, ActivationMatchesClosedForms) {
  const std::vector<float> x = RandomFloats(64, 6, -5, 5);
  std::vector<float> y(64);
  ActivationProblem p;
  p.count = 64;
  p.activation = Activation::LeakyRelu(0.1f);
  ASSERT_THAT(Activation(p, ActivationArgs{x.data(), y.data()}), IsOk());
  for (int i = 0; i < 64; ++i) EXPECT_FLOAT_EQ(y[i], x[i] >= 0 ? x[i] : 0.1f * x[i]);
  p.activation = Activation::Of(ActivationKind::kHardSwish);
  ASSERT_THAT(Activation(p, ActivationArgs{x.data(), y.data()}), IsOk());
  for (int i = 0; i < 64; ++i) EXPECT_NEAR(y[i], x[i] * std::clamp(x[i] + 3.0, 0.0, 6.0) / 6.0, 1e-6);
}

TEST(ReferencePointwiseTest, BinaryBroadcastsPerImageChannel) {
  BinaryProblem p;
  p.op = BinaryOp::kMul, p.broadcast = BinaryBroadcast::kPerImageChannel;
  p.n = 2, p.c = 3, p.h = 2, p.w = 2, p.activation = Activation::Of(ActivationKind::kSigmoid);
  const std::vector<float> a = RandomFloats(24, 7), b = RandomFloats(6, 8);
  std::vector<float> y(24);
  ASSERT_THAT(Binary(p, BinaryArgs{a.data(), b.data(), y.data()}), IsOk());
  for (int i = 0; i < 24; ++i) {
    const int n = i / 12, c = (i / 4) % 3;
    EXPECT_NEAR(y[i], 1.0 / (1.0 + std::exp(-double{a[i]} * b[n * 3 + c])), 1e-6) << i;
  }
}

TEST(ReferencePointwiseTest, PreprocessNormalizesHwcBytesIntoEitherLayout) {
  PreprocessProblem p;
  p.n = 1, p.h = 2, p.w = 3, p.c = 3, p.mean = {0.485f, 0.456f, 0.406f, 0}, p.stddev = {0.229f, 0.224f, 0.225f, 1};
  std::vector<uint8_t> x(18);
  testing::FillUniform(x.data(), DataType::kUInt8, 18, 9);
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
    p.dst_layout = layout;
    std::vector<float> y(18);
    ASSERT_THAT(Preprocess(p, PreprocessArgs{x.data(), y.data()}), IsOk());
    const TensorDesc d = TensorDesc::Image(DataType::kFloat32, 1, 3, 2, 3, layout);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        for (int c = 0; c < 3; ++c) {
          const double expected = (x[(i * 3 + j) * 3 + c] / 255.0 - p.mean[c]) / p.stddev[c];
          EXPECT_NEAR(y[d.Offset4(0, c, i, j)], expected, 1e-5);
        }
  }
}

}  // namespace
}  // namespace convoy::reference
