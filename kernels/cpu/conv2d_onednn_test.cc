// oneDNN conv2d against the reference, in all three layouts, on the kinds of layers MobileNetV2 and RegNet have (1x1
// with a residual, depthwise, grouped, strided 3x3, the 3-channel stem), every epilogue, FP32; and the same in BF16,
// where CanImplement must decline what oneDNN cannot run on this CPU (on AVX2 every BF16 problem; on AVX-512 BF16,
// grouped NHWC / NCHW8c with scale + SiLU, whose primitive oneDNN 2.6 offers but cannot create) and what it accepts
// must match. (These shapes do not reproduce the wrong brgconv results conv2d_onednn.cc works around on AVX-512
// CPUs; the whole-model NHWC tests in tests/python/test_whole_models.py do.)
#include "kernels/cpu/conv2d_onednn.h"

#include <cstdio>
#include <string>

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
// BF16 inputs and outputs, FP32 accumulation on both sides: the output rounding (half a BF16 ulp, 2^-9 relative)
// and oneDNN rounding the residual sum once more before the last activation.
constexpr Tolerance kBf16{2e-2, 2e-2};

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

// Every BF16 problem: declined by CanImplement (UNIMPLEMENTED), or prepared, run and matching the reference. A
// primitive that CanImplement accepted and Prepare could not create fails here (INTERNAL).
template <typename AlgorithmT>
void CheckAllShapesInBf16(Layout layout) {
  const AlgorithmT algorithm;
  int accepted = 0, declined = 0;
  for (Conv2dProblem problem : Shapes(layout)) {
    problem.dtype = DataType::kBFloat16;
    for (const Epilogue& epilogue : testing::EpiloguesToTest()) {
      problem.epilogue = epilogue;
      const absl::Status can = algorithm.CanImplement(problem);
      if (!can.ok()) {
        EXPECT_EQ(can.code(), absl::StatusCode::kUnimplemented) << can;
        ++declined;
        continue;
      }
      ++accepted;
      EXPECT_THAT(testing::CheckConv2dAgainstReference(algorithm, problem, kBf16, /*seed=*/910 + accepted), IsOk());
    }
  }
  std::printf("%s BF16: %d problems accepted and checked, %d declined\n", std::string(algorithm.name()).c_str(),
              accepted, declined);
}

TEST(Conv2dOnednnTest, NchwMatchesReference) { CheckAllShapes<Conv2dOnednnNchw>(Layout::kNCHW); }
TEST(Conv2dOnednnTest, NhwcMatchesReference) { CheckAllShapes<Conv2dOnednnNhwc>(Layout::kNHWC); }
TEST(Conv2dOnednnTest, Nchw8cMatchesReference) { CheckAllShapes<Conv2dOnednnNchw8c>(Layout::kNCHW8c); }
TEST(Conv2dOnednnTest, Bf16NchwDeclinesOrMatchesReference) { CheckAllShapesInBf16<Conv2dOnednnNchw>(Layout::kNCHW); }
TEST(Conv2dOnednnTest, Bf16NhwcDeclinesOrMatchesReference) { CheckAllShapesInBf16<Conv2dOnednnNhwc>(Layout::kNHWC); }
TEST(Conv2dOnednnTest, Bf16Nchw8cDeclinesOrMatchesReference) {
  CheckAllShapesInBf16<Conv2dOnednnNchw8c>(Layout::kNCHW8c);
}

}  // namespace
}  // namespace convoy::cpu
