// Direct depthwise conv2d against the reference: 3x3 and 5x5, strides 1 and 2, dilation, asymmetric padding,
// every epilogue, FP16/BF16, both layouts; and the problems it must decline.
#include "kernels/cpu/conv2d_depthwise.h"

#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/conv2d_test_harness.h"

namespace convoy::cpu {
namespace {

using ::convoy::cpu::testing::CheckConv2dAgainstReference;
using ::convoy::cpu::testing::Conv;
using ::convoy::cpu::testing::EpiloguesToTest;
using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::convoy::testing::Tolerance;

constexpr Tolerance kFp32{1e-5, 1e-5};  // at most 25 products per output

std::vector<Conv2dProblem> Shapes(Layout layout) {
  std::vector<Conv2dProblem> shapes = {
      Conv(2, 8, 12, 13, 8, 3, 3, 1, 1, 1, 8, layout),   Conv(1, 16, 15, 15, 16, 3, 3, 2, 1, 1, 16, layout),
      Conv(1, 5, 11, 9, 5, 5, 5, 1, 2, 1, 5, layout),    Conv(1, 7, 14, 14, 7, 5, 5, 2, 2, 1, 7, layout),
      Conv(1, 4, 10, 10, 4, 3, 3, 1, 2, 2, 4, layout),   Conv(3, 3, 4, 4, 3, 3, 3, 1, 0, 1, 3, layout),
  };
  Conv2dProblem asymmetric = Conv(1, 6, 9, 8, 6, 3, 3, 2, 0, 1, 6, layout);
  asymmetric.pad_top = 0, asymmetric.pad_bottom = 1, asymmetric.pad_left = 1, asymmetric.pad_right = 0;
  shapes.push_back(asymmetric);
  return shapes;
}

template <typename AlgorithmT>
void CheckAllShapes(Layout layout) {
  const AlgorithmT algorithm;
  uint32_t seed = 500;
  for (Conv2dProblem p : Shapes(layout)) {
    for (const Epilogue& e : EpiloguesToTest()) {
      p.epilogue = e;
      EXPECT_THAT(CheckConv2dAgainstReference(algorithm, p, kFp32, seed++), IsOk());
    }
    p.dtype = DataType::kFloat16;
    EXPECT_THAT(CheckConv2dAgainstReference(algorithm, p, Tolerance{2e-3, 2e-3}, seed++), IsOk());
    p.dtype = DataType::kBFloat16;
    EXPECT_THAT(CheckConv2dAgainstReference(algorithm, p, Tolerance{1e-2, 1e-2}, seed++), IsOk());
  }
}

TEST(Conv2dDepthwiseTest, NchwMatchesReference) { CheckAllShapes<Conv2dDepthwiseNchw>(Layout::kNCHW); }
TEST(Conv2dDepthwiseTest, NhwcMatchesReference) { CheckAllShapes<Conv2dDepthwiseNhwc>(Layout::kNHWC); }

TEST(Conv2dDepthwiseTest, OneThreadMatchesReference) {
  Conv2dProblem p = Conv(2, 24, 14, 14, 24, 3, 3, 1, 1, 1, 24);
  p.epilogue = EpiloguesToTest()[3];
  EXPECT_THAT(CheckConv2dAgainstReference(Conv2dDepthwiseNchw(), p, kFp32, 1, /*threads=*/1), IsOk());
}

TEST(Conv2dDepthwiseTest, DeclinesNonDepthwiseGroups) {
  EXPECT_THAT(Conv2dDepthwiseNchw().CanImplement(Conv(1, 8, 5, 5, 16, 3, 3, 1, 1, 1, 8)),
              StatusIs(absl::StatusCode::kUnimplemented, ::testing::HasSubstr("depthwise")));
  EXPECT_THAT(Conv2dDepthwiseNchw().CanImplement(Conv(1, 8, 5, 5, 8, 3, 3, 1, 1, 1, 4)),
              StatusIs(absl::StatusCode::kUnimplemented, ::testing::HasSubstr("depthwise")));
}

}  // namespace
}  // namespace convoy::cpu
