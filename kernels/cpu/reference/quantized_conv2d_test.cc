// The integer reference's requantization on hand-checked values: a 1x1 convolution over two channels, so each output
// is x0 * w0 + x1 * w1 with the zero point subtracted, then the epilogue.
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/reference/reference_ops.h"

namespace convoy::reference {
namespace {

using ::convoy::testing::IsOk;

QuantizedConv2dProblem OneByOne(int pixels) {
  QuantizedConv2dProblem p;
  p.n = 1, p.h = 1, p.w = pixels, p.c = 2, p.k = 1;
  p.layout = Layout::kNHWC;
  return p;
}

TEST(QuantizedConv2dReferenceTest, RoundsHalfToEvenAddsZeroPointsAndSaturates) {
  QuantizedConv2dProblem p = OneByOne(4);
  p.epilogue.src_zero_point = 10, p.epilogue.dst_zero_point = 3, p.epilogue.has_bias = true;
  // acc = (x0 - 10) * 1 + (x1 - 10) * 2, + bias 1, times 0.5:
  const std::vector<uint8_t> x = {14, 10,    // 4 + 0 + 1 = 5 -> 2.5 -> 2 (even) + 3 = 5
                                  16, 10,    // 6 + 1 = 7 -> 3.5 -> 4 + 3 = 7
                                  255, 255,  // 245 * 3 + 1 = 736 -> 368 -> saturates at 255
                                  0, 0};     // -30 + 1 = -29 -> -14.5 -> -14 + 3 = -11 -> saturates at 0
  const std::vector<int8_t> w = {1, 2};
  const std::vector<int32_t> bias = {1};
  const std::vector<float> scale = {0.5f};
  std::vector<uint8_t> y(4, 77);
  ASSERT_THAT(QuantizedConv2d(p, {x.data(), w.data(), bias.data(), scale.data(), nullptr, y.data()}), IsOk());
  EXPECT_EQ(y, (std::vector<uint8_t>{5, 7, 255, 0}));
}

TEST(QuantizedConv2dReferenceTest, ResidualBeforeReluAndInt8Output) {
  QuantizedConv2dProblem p = OneByOne(3);
  p.src_type = DataType::kInt8, p.dst_type = DataType::kInt8;
  p.epilogue.relu = true;
  p.epilogue.residual = ResidualMode::kBeforeActivation;
  p.epilogue.residual_scale = 0.25f, p.epilogue.residual_zero_point = -4;
  p.epilogue.dst_zero_point = -1;
  const std::vector<int8_t> x = {3, -1,   // 3 - 2 = 1 -> 1 + 0.25 * (8 + 4) = 4 -> 4 - 1 = 3
                                 -5, 0,   // -5 -> -5 + 0.25 * (0 + 4) = -4 -> relu 0 -> -1
                                 100, 100};  // 300 + 0.25 * (-4 + 4) -> saturates at 127
  const std::vector<int8_t> w = {1, 2};
  const std::vector<float> scale = {1.0f};
  const std::vector<int8_t> residual = {8, 0, -4};
  std::vector<int8_t> y(3, 77);
  ASSERT_THAT(QuantizedConv2d(p, {x.data(), w.data(), nullptr, scale.data(), residual.data(), y.data()}), IsOk());
  EXPECT_EQ(y, (std::vector<int8_t>{3, -1, 127}));
}

TEST(QuantizedConv2dReferenceTest, Fp32OutputIsTheRequantizedValue) {
  QuantizedConv2dProblem p = OneByOne(1);
  p.dst_type = DataType::kFloat32;
  p.epilogue.has_bias = true;
  const std::vector<uint8_t> x = {3, 4};  // 3 + 8 = 11, + bias -1 = 10, times 0.125
  const std::vector<int8_t> w = {1, 2};
  const std::vector<int32_t> bias = {-1};
  const std::vector<float> scale = {0.125f};
  std::vector<float> y(1, -1.0f);
  ASSERT_THAT(QuantizedConv2d(p, {x.data(), w.data(), bias.data(), scale.data(), nullptr, y.data()}), IsOk());
  EXPECT_EQ(y[0], 1.25f);
}

TEST(QuantizedConv2dReferenceTest, MissingOperandsAreNamed) {
  QuantizedConv2dProblem p = OneByOne(1);
  p.epilogue.has_bias = true;
  const std::vector<uint8_t> x = {0, 0};
  const std::vector<int8_t> w = {0, 0};
  const std::vector<float> scale = {1.0f};
  std::vector<uint8_t> y(1);
  EXPECT_THAT(std::string(QuantizedConv2d(p, {x.data(), w.data(), nullptr, scale.data(), nullptr, y.data()}).message()),
              ::testing::HasSubstr("args.bias (has_bias)"));
}

}  // namespace
}  // namespace convoy::reference
