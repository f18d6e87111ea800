// im2col + GEMM conv2d against the reference: filter sizes, strides, padding (asymmetric too), dilation, groups,
// both layouts, every epilogue, FP16/BF16, tile boundaries, and one and several threads.
#include "kernels/cpu/conv2d_im2col_gemm.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/conv2d_test_harness.h"

namespace convoy::cpu {
namespace {

using ::convoy::cpu::testing::CheckConv2dAgainstReference;
using ::convoy::cpu::testing::CheckEveryEpilogue;
using ::convoy::cpu::testing::Conv;
using ::convoy::cpu::testing::EpiloguesToTest;
using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::convoy::testing::Tolerance;

// Sums of up to ~300 products of values in [-1, 1]: FP32 rounding stays far below 1e-4.
constexpr Tolerance kFp32{1e-4, 1e-4};

std::vector<Conv2dProblem> Shapes(Layout layout) {
  std::vector<Conv2dProblem> shapes = {
      Conv(1, 3, 17, 15, 8, 7, 7, 2, 3, 1, 1, layout),    // stem-like, 7x7 stride 2
      Conv(2, 8, 9, 11, 16, 3, 3, 1, 1, 1, 1, layout),    // 3x3 same
      Conv(1, 16, 10, 10, 24, 3, 3, 2, 1, 1, 1, layout),  // 3x3 stride 2
      Conv(1, 6, 12, 12, 6, 3, 3, 1, 2, 2, 1, layout),    // dilation 2
      Conv(2, 12, 7, 9, 18, 3, 3, 1, 1, 1, 3, layout),    // grouped
      Conv(1, 8, 8, 8, 8, 3, 3, 1, 1, 1, 8, layout),      // depthwise through im2col
      Conv(1, 32, 6, 6, 40, 1, 1, 2, 0, 1, 1, layout),    // 1x1 stride 2 (ResNet downsample)
      Conv(3, 5, 40, 41, 7, 1, 1, 1, 0, 1, 1, layout),    // several pixel tiles per image
  };
  Conv2dProblem asymmetric = Conv(1, 4, 9, 8, 5, 2, 3, 1, 0, 1, 1, layout);
  asymmetric.pad_top = 1, asymmetric.pad_left = 2, asymmetric.pad_right = 0, asymmetric.pad_bottom = 0;
  shapes.push_back(asymmetric);
  return shapes;
}

template <typename AlgorithmT>
void CheckAllShapes(Layout layout) {
  EXPECT_THAT(CheckEveryEpilogue(AlgorithmT(), Shapes(layout), kFp32, /*seed=*/100), ::testing::Each(IsOk()));
}

TEST(Conv2dIm2colGemmTest, NchwMatchesReference) { CheckAllShapes<Conv2dIm2colGemmNchw>(Layout::kNCHW); }
TEST(Conv2dIm2colGemmTest, NhwcMatchesReference) { CheckAllShapes<Conv2dIm2colGemmNhwc>(Layout::kNHWC); }

TEST(Conv2dIm2colGemmTest, SingleThreadAndThreeThreadsMatchReference) {
  Conv2dProblem p = Conv(2, 16, 14, 14, 32, 3, 3, 1, 1);
  p.epilogue = EpiloguesToTest()[2];
  for (int threads : {1, 3}) {
    EXPECT_THAT(CheckConv2dAgainstReference(Conv2dIm2colGemmNchw(), p, kFp32, 7, threads), IsOk());
    p.layout = Layout::kNHWC;
    EXPECT_THAT(CheckConv2dAgainstReference(Conv2dIm2colGemmNhwc(), p, kFp32, 8, threads), IsOk());
    p.layout = Layout::kNCHW;
  }
}

TEST(Conv2dIm2colGemmTest, ReducedPrecisionComputesInFloat) {
  const Conv2dIm2colGemmNchw nchw;
  const Conv2dIm2colGemmNhwc nhwc;
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
    Conv2dProblem p = Conv(1, 12, 9, 9, 20, 3, 3, 1, 1, 1, 2, layout);
    p.epilogue = EpiloguesToTest()[2];
    const Conv2dAlgorithm& algorithm = layout == Layout::kNCHW ? static_cast<const Conv2dAlgorithm&>(nchw) : nhwc;
    // Output rounding dominates: half an FP16 ulp is 2^-11 relative, half a BF16 ulp 2^-8.
    p.dtype = DataType::kFloat16;
    EXPECT_THAT(CheckConv2dAgainstReference(algorithm, p, Tolerance{2e-3, 2e-3}, 5), IsOk());
    p.dtype = DataType::kBFloat16;
    EXPECT_THAT(CheckConv2dAgainstReference(algorithm, p, Tolerance{1e-2, 1e-2}, 6), IsOk());
  }
}

TEST(Conv2dIm2colGemmTest, DeclinesTheOtherLayout) {
  EXPECT_THAT(Conv2dIm2colGemmNchw().CanImplement(Conv(1, 4, 5, 5, 4, 3, 3, 1, 1, 1, 1, Layout::kNHWC)),
              StatusIs(absl::StatusCode::kUnimplemented, ::testing::HasSubstr("NCHW")));
}

TEST(Conv2dIm2colGemmTest, RejectsAWorkspaceTooSmall) {
  const Conv2dProblem p = Conv(1, 4, 5, 5, 4, 3, 3, 1, 1);
  ASSERT_GT(Conv2dIm2colGemmNchw().WorkspaceBytes(p), 0u);
  ThreadPool pool(1);
  std::vector<float> x(100), w(144), y(100);
  EXPECT_THAT(Conv2dIm2colGemmNchw().Run(p, Conv2dArgs{x.data(), w.data(), nullptr, nullptr, nullptr, y.data()},
                                         Workspace{nullptr, 16}, ExecutionContext{Backend::kCpu, &pool}),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("workspace")));
}

}  // namespace
}  // namespace convoy::cpu
