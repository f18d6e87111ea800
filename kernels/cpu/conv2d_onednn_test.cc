// oneDNN conv2d against the reference, in all three layouts, on the kinds of layers MobileNetV2 and RegNet have (1x1
// with a residual, depthwise, grouped, strided 3x3, the 3-channel stem), every epilogue, FP32. (These shapes do not
// reproduce the wrong brgconv results conv2d_onednn.cc works around on AVX-512 CPUs; the whole-model NHWC tests in
// tests/python/test_whole_models.py do.)
#include "kernels/cpu/conv2d_onednn.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/conv2d_test_harness.h"

namespace convoy::cpu {
namespace {

using ::convoy::cpu::testing::CheckEveryEpilogue;
using ::convoy::cpu::testing::Conv;
using ::convoy::testing::IsOk;
using ::convoy::testing::Tolerance;

constexpr Tolerance kFp32{1e-4, 1e-4};  // up to 576 products per output, summed in another order than the reference

std::vector<Conv2dProblem> Shapes(Layout layout) {
  return {
      Conv(2, 144, 16, 16, 24, 1, 1, 1, 0, 1, 1, layout),   // MobileNetV2 projection (residual epilogues)
      Conv(2, 24, 16, 16, 144, 1, 1, 1, 0, 1, 1, layout),   // expansion
      Conv(2, 96, 32, 32, 96, 3, 3, 2, 1, 1, 96, layout),   // depthwise, stride 2
      Conv(2, 144, 16, 16, 144, 3, 3, 1, 1, 1, 144, layout),
      Conv(2, 64, 16, 16, 64, 3, 3, 1, 1, 1, 8, layout),    // RegNet's grouped 3x3 (8 channels per group)
      Conv(2, 48, 16, 16, 48, 3, 3, 2, 1, 1, 6, layout),
      Conv(2, 3, 64, 64, 32, 3, 3, 2, 1, 1, 1, layout),     // the stem
      Conv(1, 64, 8, 8, 64, 3, 3, 1, 1, 1, 1, layout),
  };
}

template <typename AlgorithmT>
void CheckAllShapes(Layout layout) {
  EXPECT_THAT(CheckEveryEpilogue(AlgorithmT(), Shapes(layout), kFp32, /*seed=*/900), ::testing::Each(IsOk()));
}

TEST(Conv2dOnednnTest, NchwMatchesReference) { CheckAllShapes<Conv2dOnednnNchw>(Layout::kNCHW); }
TEST(Conv2dOnednnTest, NhwcMatchesReference) { CheckAllShapes<Conv2dOnednnNhwc>(Layout::kNHWC); }
TEST(Conv2dOnednnTest, Nchw8cMatchesReference) { CheckAllShapes<Conv2dOnednnNchw8c>(Layout::kNCHW8c); }

}  // namespace
}  // namespace convoy::cpu
