// Direct depthwise conv2d against the reference: 3x3 and 5x5, strides 1 and 2, dilation, asymmetric padding,
// every epilogue (in FP32 and BF16), FP16, both layouts (NHWC in every instruction-set version the CPU runs), the
// edges of the 3x3 row kernel and of the channel vectors; and the problems it must decline.
#include "kernels/cpu/conv2d_depthwise.h"

#include <string>

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
  // The 3x3 row kernel (NCHW) and channel vectors (NHWC): rows long enough for several 4-wide steps plus a
  // remainder, odd sizes at stride 2, no padding, padding only on the right, C not a multiple of 4 (or of 8).
  shapes.push_back(Conv(1, 5, 7, 23, 5, 3, 3, 1, 1, 1, 5, layout));
  shapes.push_back(Conv(2, 13, 17, 19, 13, 3, 3, 2, 1, 1, 13, layout));
  shapes.push_back(Conv(1, 37, 10, 30, 37, 3, 3, 2, 0, 1, 37, layout));
  shapes.push_back(Conv(1, 12, 9, 2, 12, 3, 3, 1, 1, 1, 12, layout));  // narrower than the filter's reach
  Conv2dProblem right_only = Conv(1, 9, 11, 21, 9, 3, 3, 2, 0, 1, 9, layout);
  right_only.pad_top = 2, right_only.pad_bottom = 0, right_only.pad_left = 0, right_only.pad_right = 1;
  shapes.push_back(right_only);
  Conv2dProblem wide_left = Conv(1, 3, 6, 26, 3, 3, 3, 1, 0, 1, 3, layout);
  wide_left.pad_left = 2, wide_left.pad_right = 0, wide_left.pad_top = 1, wide_left.pad_bottom = 2;
  wide_left.stride_h = 2;  // stride 2 down the rows, 1 across
  shapes.push_back(wide_left);
  // The NHWC row kernel's interior (3x3 and 5x5 taps in registers, four pixels a step plus a remainder) at every
  // vector width: whole blocks of 16 channels, 16 + 8, and 16 + 8 + 4 + 1; strides 1 and 2; a 3x3 at stride 2 down
  // the rows and 1 across.
  shapes.push_back(Conv(2, 48, 9, 21, 48, 3, 3, 1, 1, 1, 48, layout));
  shapes.push_back(Conv(1, 24, 8, 18, 24, 3, 3, 2, 1, 1, 24, layout));
  shapes.push_back(Conv(1, 29, 11, 13, 29, 5, 5, 1, 2, 1, 29, layout));
  shapes.push_back(Conv(1, 32, 12, 23, 32, 5, 5, 2, 2, 1, 32, layout));
  Conv2dProblem rows_stride = Conv(1, 16, 10, 15, 16, 3, 3, 1, 0, 1, 16, layout);
  rows_stride.stride_h = 2;
  shapes.push_back(rows_stride);
  return shapes;
}

// The shared epilogues, plus the NHWC kernel's other activation forms: sigmoid and SiLU after the affine part and a
// residual (applied over the row), and SiLU with a residual after it (applied per pixel).
std::vector<Epilogue> DepthwiseEpilogues() {
  std::vector<Epilogue> out = EpiloguesToTest();
  Epilogue e;
  e.has_scale = e.has_bias = true;
  e.residual = ResidualMode::kBeforeActivation;
  e.activation = Activation::Of(ActivationKind::kSilu);
  out.push_back(e);
  e.residual = ResidualMode::kNone;
  e.activation = Activation::Of(ActivationKind::kSigmoid);
  out.push_back(e);
  e.has_scale = false;
  e.residual = ResidualMode::kAfterActivation;
  e.activation = Activation::Of(ActivationKind::kSilu);
  out.push_back(e);
  return out;
}

template <typename AlgorithmT>
void CheckAllShapes(Layout layout, CpuIsa isa = CpuIsa::kBaseline) {
  const AlgorithmT algorithm(isa);
  SCOPED_TRACE(std::string(algorithm.name()));
  uint32_t seed = 500;
  for (Conv2dProblem p : Shapes(layout)) {
    for (const Epilogue& e : DepthwiseEpilogues()) {
      p.epilogue = e;
      EXPECT_THAT(CheckConv2dAgainstReference(algorithm, p, kFp32, seed++), IsOk());
    }
    p.dtype = DataType::kFloat16;
    EXPECT_THAT(CheckConv2dAgainstReference(algorithm, p, Tolerance{2e-3, 2e-3}, seed++), IsOk());
    // BF16 over every epilogue: NHWC finishes the clamped ones in the row kernel's registers, the others per pixel.
    p.dtype = DataType::kBFloat16;
    for (const Epilogue& e : DepthwiseEpilogues()) {
      p.epilogue = e;
      EXPECT_THAT(CheckConv2dAgainstReference(algorithm, p, Tolerance{1e-2, 1e-2}, seed++), IsOk());
    }
  }
}

TEST(Conv2dDepthwiseTest, NchwMatchesReference) { CheckAllShapes<Conv2dDepthwiseNchw>(Layout::kNCHW); }
// Every version this CPU runs (baseline, AVX2, AVX-512).
TEST(Conv2dDepthwiseTest, NhwcMatchesReference) {
  for (CpuIsa isa : SupportedCpuIsas()) CheckAllShapes<Conv2dDepthwiseNhwc>(Layout::kNHWC, isa);
}

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
