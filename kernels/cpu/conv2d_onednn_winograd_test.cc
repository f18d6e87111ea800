// oneDNN's Winograd convolution for NHWC plans against the reference: ResNet's 3x3 layer kinds (bias + ReLU, and bias
// + residual + ReLU with the residual in its own buffer and already in the output) at batch 1 and 8 on 1-3 threads,
// odd plane sizes, within the cross-backend suite's FP32 tolerance; that the algorithm is registered exactly where
// oneDNN has AVX-512 kernels and runs a Winograd kernel there; the shapes and epilogues it declines, by message.
#include "kernels/cpu/conv2d_onednn_winograd.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/common/tolerance.h"
#include "kernels/cpu/conv2d_test_harness.h"
#include "kernels/cpu/onednn_support.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {
namespace {

using ::convoy::cpu::testing::CheckConv2dAgainstReference;
using ::convoy::cpu::testing::Conv;
using ::convoy::cpu::testing::EpiloguesToTest;
using ::convoy::cpu::testing::ResidualPlacement;
using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

Conv2dProblem Nhwc(int n, int c, int h, int w, int k, int pad = 1) {
  Conv2dProblem p = Conv(n, c, h, w, k, 3, 3, 1, pad, 1, 1, Layout::kNHWC);
  p.epilogue.has_bias = true;
  p.epilogue.activation = Activation::Relu();
  return p;
}

Conv2dProblem WithResidual(Conv2dProblem p) {
  p.epilogue.residual = ResidualMode::kBeforeActivation;
  return p;
}

// The cross-backend suite's FP32 tolerance for a conv (kernels/testing/op_case_traits.cc): 1e-4 relative plus
// 1e-5 * sqrt(C * 9) absolute. Winograd's transforms round differently from the direct sum; F(2x2,3x3)'s matrices
// have entries 0, +-1 and 1/2, so the extra rounding is a few ulps per output (the measured difference from brgconv
// on ResNet's layers is about 1e-6 of the output's range: docs/kernels.md).
::convoy::testing::Tolerance SuiteTolerance(const Conv2dProblem& p) {
  return ToleranceFor(DataType::kFloat32, double{1.0} * p.c * 9);
}

TEST(Conv2dOnednnWinogradTest, RegisteredExactlyWhereOnednnHasAvx512Kernels) {
  const bool registered =
      OpRegistry<Conv2dOp>::Global().Find("cpu.conv2d.onednn_winograd_nhwc") != nullptr;
  EXPECT_EQ(registered, onednn::HasAvx512Kernels());
}

TEST(Conv2dOnednnWinogradTest, ResNetLayerKindsMatchReference) {
  if (!onednn::HasAvx512Kernels()) GTEST_SKIP() << "oneDNN 2.6 has Winograd kernels on AVX-512 CPUs only";
  const Conv2dOnednnWinogradNhwc algorithm;
  uint32_t seed = 900;
  // ResNet-18/50 kinds with small planes (the reference runs in double): batch 1 and 8, planes that F(2x2) and
  // F(4x4) tiles do not divide, channel counts of 1-4 blocks of 16.
  const std::vector<Conv2dProblem> shapes = {Nhwc(1, 64, 14, 14, 64),  Nhwc(8, 64, 7, 7, 64),
                                             Nhwc(1, 128, 9, 11, 128), Nhwc(2, 32, 13, 6, 48),
                                             Nhwc(1, 256, 7, 7, 256),  Nhwc(1, 16, 5, 9, 32, /*pad=*/0)};
  for (const Conv2dProblem& shape : shapes) {
    for (const Conv2dProblem& p : {shape, WithResidual(shape)}) {
      ASSERT_THAT(algorithm.CanImplement(p), IsOk()) << p.ToString();
      auto impl = algorithm.Implementation(p);
      ASSERT_THAT(impl.status(), IsOk());
      EXPECT_THAT(*impl, HasSubstr("wino")) << p.ToString();
      for (int threads : {1, 2, 3}) {
        EXPECT_THAT(CheckConv2dAgainstReference(algorithm, p, SuiteTolerance(p), seed++, threads), IsOk())
            << *impl << ", " << threads << " threads";
      }
      if (p.epilogue.residual != ResidualMode::kNone) {
        EXPECT_THAT(CheckConv2dAgainstReference(algorithm, p, SuiteTolerance(p), seed++, 2,
                                                ResidualPlacement::kInOutput),
                    IsOk())
            << *impl << ", the residual already in the output";
      }
    }
  }
}

TEST(Conv2dOnednnWinogradTest, EveryEpilogueMatchesReferenceOrIsDeclined) {
  if (!onednn::HasAvx512Kernels()) GTEST_SKIP() << "oneDNN 2.6 has Winograd kernels on AVX-512 CPUs only";
  const Conv2dOnednnWinogradNhwc algorithm;
  uint32_t seed = 1900;
  for (const Epilogue& e : EpiloguesToTest()) {
    Conv2dProblem p = Nhwc(1, 32, 10, 10, 32);
    p.epilogue = e;
    const absl::Status can = algorithm.CanImplement(p);
    if (e.has_scale) {
      EXPECT_THAT(can, StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("per-channel scale"))) << p.ToString();
      continue;
    }
    if (!can.ok()) {
      EXPECT_EQ(can.code(), absl::StatusCode::kUnimplemented) << can;
      continue;
    }
    EXPECT_THAT(CheckConv2dAgainstReference(algorithm, p, SuiteTolerance(p), seed++), IsOk()) << p.ToString();
  }
}

TEST(Conv2dOnednnWinogradTest, PackedFilterLayoutNamesTheWinogradFormat) {
  if (!onednn::HasAvx512Kernels()) GTEST_SKIP() << "oneDNN 2.6 has Winograd kernels on AVX-512 CPUs only";
  const Conv2dOnednnWinogradNhwc algorithm;
  const std::string layout = algorithm.PackedFilterLayout(Nhwc(1, 64, 14, 14, 64));
  EXPECT_THAT(layout, HasSubstr("wino format"));
  EXPECT_THAT(layout, HasSubstr(" ic 64 oc 64"));
  EXPECT_GT(algorithm.PackedFilterBytes(Nhwc(1, 64, 14, 14, 64)), size_t{0});
}

TEST(Conv2dOnednnWinogradTest, HeuristicPrefersItWhereItMeasuredFaster) {
  if (!onednn::HasAvx512Kernels()) GTEST_SKIP() << "oneDNN 2.6 has Winograd kernels on AVX-512 CPUs only";
  const Conv2dOnednnWinogradNhwc algorithm;
  // Above brgconv's 40: F(2x2) (batch 1) on 14x14 and larger outputs; below it on 7x7, and F(4x4) (batch 8), whose
  // packed filter is 4x larger, only where the autotuner times it faster.
  const auto impl = [&](const Conv2dProblem& p) { return algorithm.Implementation(p).value_or("none"); };
  EXPECT_THAT(impl(Nhwc(1, 256, 14, 14, 256)), HasSubstr("wino_2x3"));
  EXPECT_EQ(algorithm.HeuristicScore(Nhwc(1, 256, 14, 14, 256)), 45);
  EXPECT_EQ(algorithm.HeuristicScore(Nhwc(1, 512, 7, 7, 512)), 35);
  EXPECT_THAT(impl(Nhwc(8, 512, 7, 7, 512)), HasSubstr("wino_4x3"));
  EXPECT_EQ(algorithm.HeuristicScore(Nhwc(8, 512, 7, 7, 512)), 35);
  EXPECT_THAT(impl(Nhwc(8, 64, 56, 56, 64)), HasSubstr("wino_4x3"));
  EXPECT_EQ(algorithm.HeuristicScore(Nhwc(8, 64, 56, 56, 64)), 35);
}

TEST(Conv2dOnednnWinogradTest, DeclinesOtherShapes) {
  const Conv2dOnednnWinogradNhwc algorithm;
  const auto unimplemented = [&](const Conv2dProblem& p, const std::string& words) {
    EXPECT_THAT(algorithm.CanImplement(p), StatusIs(absl::StatusCode::kUnimplemented, HasSubstr(words)))
        << p.ToString();
  };
  unimplemented(Conv(1, 16, 8, 8, 16, 3, 3, 1, 1), "NHWC only");  // NCHW
  unimplemented(Conv(1, 16, 8, 8, 16, 3, 3, 2, 1, 1, 1, Layout::kNHWC), "stride 1");
  unimplemented(Conv(1, 16, 8, 8, 16, 5, 5, 1, 2, 1, 1, Layout::kNHWC), "3x3 filters");
  unimplemented(Conv(1, 16, 8, 8, 16, 3, 3, 1, 2, 2, 1, Layout::kNHWC), "dilation 1");
  unimplemented(Conv(1, 32, 8, 8, 32, 3, 3, 1, 1, 1, 2, Layout::kNHWC), "one group");
  unimplemented(Conv(1, 8, 8, 8, 16, 3, 3, 1, 1, 1, 1, Layout::kNHWC), "got C=8 K=16");
  unimplemented(Conv(1, 16, 8, 8, 24, 3, 3, 1, 1, 1, 1, Layout::kNHWC), "got C=16 K=24");
  Conv2dProblem half = Nhwc(1, 16, 8, 8, 16);
  half.dtype = DataType::kFloat16;
  unimplemented(half, "FP32 only");
}

}  // namespace
}  // namespace convoy::cpu
