// oneDNN INT8 conv2d against the exact integer reference (reference::QuantizedConv2d), NHWC, on the shared INT8
// problem list (kernels/testing/quantized_conv2d_cases.h: the kinds of layers quantized ResNets and MobileNets have,
// crossed with every epilogue, UINT8 and INT8 sources with nonzero zero points), plus the residual adds fused after the
// convolution, each with the multipliers given at run time and fixed in the problem (as plans make it). Fresh random
// data each run (the seed is printed on failure). A fused add must match the separate steps exactly. The CUDA INT8 kernels run the same list (kernels/cuda/quantized_conv2d_cuda_test.cc).
//
// Tolerance. The accumulation is exact on both sides; the requantization is one FP32 product float(acc + bias) *
// scale[k] (plus the residual term) rounded half to even, then the zero point. oneDNN may form that value in another
// order (the bias converted and added in FP32, the residual term fused with an FMA), so where the exact value lies
// within an FP32 rounding of a tie, it may round to the neighbouring step. Asserted: every quantized output within one
// step of the reference, and at most 0.1 % of a problem's outputs (at least 2) one step off; FP32 outputs within 1e-5
// relative. Measured over 8 runs of the 42 problems (AVX-512 VNNI Xeon, brgconv and jit_int8 kernels) when oneDNN
// added the zero point before rounding: 39 runs exact, 3 with one output of 1728 to 8192 one step off; since the
// algorithm rounds first (an eltwise_round post-op): 5 runs of 5 exact.
#include "kernels/cpu/quantized_conv2d_onednn.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/cpu/exact_int8_test_support.h"
#include "kernels/registry/autotuner.h"
#include "kernels/testing/quantized_conv2d_cases.h"

namespace convoy::cpu {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::QuantizedConv2dTestProblems;
using ::convoy::testing::QuantizedConv2dFusedAddTestProblems;
using ::convoy::testing::QuantizedConv2dTestShapes;
using ::convoy::testing::QuantizedScaleSource;
using ::convoy::testing::WithFusedAdd;

// The INT8 kernel tests' common set-up: a 2-thread CPU device, the tolerance of oneDNN's requantization against the
// integer reference (at most 0.1 % of outputs one step off, FP32 outputs within 1e-5 relative), and the shared NHWC
// problem list with the fused adds.
struct OnednnInt8TestSetup {
  std::unique_ptr<CpuDevice> device;
  ::convoy::testing::QuantizedTolerance tolerance;
  std::vector<QuantizedConv2dProblem> problems;
};

OnednnInt8TestSetup MakeOnednnInt8TestSetup() {
  OnednnInt8TestSetup setup;
  CpuDevice::Options options;
  options.num_threads = 2;
  absl::StatusOr<std::unique_ptr<CpuDevice>> device = CpuDevice::Create(options);
  EXPECT_THAT(device.status(), IsOk());
  if (device.ok()) setup.device = *std::move(device);
  setup.tolerance.max_off_by_one_fraction = 0.001;
  setup.tolerance.min_off_by_one_allowed = 2;
  setup.tolerance.fp32_relative = 1e-5f;
  setup.problems = QuantizedConv2dTestProblems(Layout::kNHWC);
  for (const QuantizedConv2dProblem& p : QuantizedConv2dFusedAddTestProblems(Layout::kNHWC)) {
    setup.problems.push_back(p);
  }
  return setup;
}

TEST(QuantizedConv2dOnednnTest, RunsEveryProblemAndMatchesTheIntegerReference) {
  CONVOY_SKIP_UNLESS_EXACT_CPU_INT8();
  const QuantizedConv2dOnednnNhwc algorithm;
  OnednnInt8TestSetup setup = MakeOnednnInt8TestSetup();
  ASSERT_NE(setup.device, nullptr);
  CpuDevice& device = *setup.device;
  const ::convoy::testing::QuantizedTolerance& tolerance = setup.tolerance;
  const std::vector<QuantizedConv2dProblem>& problems = setup.problems;
  for (const QuantizedConv2dProblem& p : problems) {
    for (QuantizedScaleSource scales : {QuantizedScaleSource::kArgs, QuantizedScaleSource::kProblem}) {
      const uint32_t seed = std::random_device{}();
      EXPECT_THAT(::convoy::testing::CheckQuantizedConv2d(algorithm, p, device, seed, tolerance, scales), IsOk())
          << p.ToString() << (scales == QuantizedScaleSource::kProblem ? " scales fixed" : " scales in args")
          << " seed " << seed;
    }
  }
}

// The jit_int8 variant (the tuner's second candidate) on the same list, exactly as strict: the same integer
// reference, the same fused adds bit for bit. It declines the problems whose first choice is a jit_int8 kernel already
// and those no jit_int8 kernel takes (29 of the 60 ran when written, the fused adds among them), with its own kernel.
TEST(QuantizedConv2dOnednnTest, JitVariantRunsEveryProblemItTakesAndMatchesTheIntegerReference) {
  CONVOY_SKIP_UNLESS_EXACT_CPU_INT8();
  const QuantizedConv2dOnednnNhwcJit algorithm;
  OnednnInt8TestSetup setup = MakeOnednnInt8TestSetup();
  ASSERT_NE(setup.device, nullptr);
  CpuDevice& device = *setup.device;
  const ::convoy::testing::QuantizedTolerance& tolerance = setup.tolerance;
  const std::vector<QuantizedConv2dProblem>& problems = setup.problems;
  size_t ran = 0, fused_ran = 0;
  for (const QuantizedConv2dProblem& p : problems) {
    const absl::Status can = algorithm.CanImplement(p);
    if (!can.ok()) {
      // On this list only the problems whose first choice is a jit_int8 kernel already (the stem, the small images).
      EXPECT_TRUE(absl::IsUnimplemented(can)) << p.ToString() << ": " << can;
      EXPECT_THAT(can.message(), ::testing::HasSubstr(" already")) << p.ToString();
      continue;
    }
    ++ran;
    fused_ran += p.fused_add != QuantizedFusedAdd::kNone;
    CONVOY_ASSERT_OK_AND_ASSIGN(std::string impl, algorithm.Implementation(p));
    EXPECT_TRUE(absl::StartsWith(impl, "jit_int8")) << p.ToString() << ": " << impl;
    const uint32_t seed = std::random_device{}();
    EXPECT_THAT(::convoy::testing::CheckQuantizedConv2d(algorithm, p, device, seed, tolerance,
                                                        QuantizedScaleSource::kProblem),
                IsOk())
        << p.ToString() << " seed " << seed;
  }
  EXPECT_GE(ran, 20u) << "of " << problems.size();
  EXPECT_GT(fused_ran, 0u);
}

// The matmul form (1x1, stride-1, unpadded, ungrouped problems as oneDNN's matmul) on the same list, as strict: the
// same integer reference, the same fused adds. Every other shape is declined, naming what the form takes.
TEST(QuantizedConv2dOnednnTest, MatmulFormRunsEvery1x1ProblemAndMatchesTheIntegerReference) {
  CONVOY_SKIP_UNLESS_EXACT_CPU_INT8();
  const QuantizedConv2dOnednnMatmulNhwc algorithm;
  OnednnInt8TestSetup setup = MakeOnednnInt8TestSetup();
  ASSERT_NE(setup.device, nullptr);
  size_t ran = 0, fused_ran = 0, residual_ran = 0;
  for (const QuantizedConv2dProblem& p : setup.problems) {
    const bool plain_gemm = p.r == 1 && p.s == 1 && p.stride_h == 1 && p.stride_w == 1 && p.groups == 1 &&
                            p.pad_top == 0 && p.pad_bottom == 0 && p.pad_left == 0 && p.pad_right == 0;
    const absl::Status can = algorithm.CanImplement(p);
    if (!plain_gemm) {
      EXPECT_TRUE(absl::IsUnimplemented(can)) << p.ToString() << ": " << can;
      EXPECT_THAT(can.message(), ::testing::HasSubstr("the matmul form takes 1x1, stride-1")) << p.ToString();
      continue;
    }
    ASSERT_THAT(can, IsOk()) << p.ToString();
    ++ran;
    fused_ran += p.fused_add != QuantizedFusedAdd::kNone;
    residual_ran += p.epilogue.residual != ResidualMode::kNone;
    for (QuantizedScaleSource scales : {QuantizedScaleSource::kArgs, QuantizedScaleSource::kProblem}) {
      const uint32_t seed = std::random_device{}();
      EXPECT_THAT(::convoy::testing::CheckQuantizedConv2d(algorithm, p, *setup.device, seed, setup.tolerance, scales),
                  IsOk())
          << p.ToString() << (scales == QuantizedScaleSource::kProblem ? " scales fixed" : " scales in args")
          << " seed " << seed;
    }
  }
  EXPECT_GE(ran, 4u) << "of " << setup.problems.size();
  EXPECT_GT(fused_ran, 0u);
  EXPECT_GT(residual_ran, 0u);
}

// Tuning an INT8 convolution times both CPU algorithms (TuningBuffers<QuantizedConv2dOp>): on problems that the jit
// variant takes, the cache entry records a time for each, the winner is the faster of the two, and the winner matches
// the integer reference on fresh data.
TEST(QuantizedConv2dOnednnTest, TuningTimesBothAlgorithmsAndPicksTheFaster) {
  CONVOY_SKIP_UNLESS_EXACT_CPU_INT8();
  const QuantizedConv2dOnednnNhwc first_choice;
  const QuantizedConv2dOnednnNhwcJit jit;
  OnednnInt8TestSetup setup = MakeOnednnInt8TestSetup();
  ASSERT_NE(setup.device, nullptr);
  CpuDevice& device = *setup.device;
  const ::convoy::testing::QuantizedTolerance& tolerance = setup.tolerance;
  TuningOptions options;
  options.min_timed_ms = 2;  // a test: enough runs to time both, not a measurement
  options.cold_start_warmup_ms = 10;
  AlgorithmCache cache;
  int tuned = 0;
  for (const QuantizedConv2dProblem& p : QuantizedConv2dTestProblems(Layout::kNHWC)) {
    if (!jit.CanImplement(p).ok() || !first_choice.CanImplement(p).ok()) continue;
    if (++tuned > 4) break;
    auto selected = SelectAlgorithm<QuantizedConv2dOp>(p, device, cache, AlgorithmSelection::kTune, options);
    ASSERT_THAT(selected, IsOk()) << p.ToString();
    EXPECT_TRUE(selected->tuned) << p.ToString();
    EXPECT_GT(selected->time_ms, 0) << p.ToString();
    const std::optional<CacheEntry> entry =
        cache.Peek(AlgorithmCache::MakeKey(QuantizedConv2dOp::kKind, p.ToString(), device.Identity()));
    ASSERT_TRUE(entry.has_value()) << p.ToString();
    EXPECT_EQ(entry->algorithm, selected->algorithm->name());
    double fastest = 0;
    int timed = 0;
    for (const CandidateTiming& c : entry->candidates) {
      if (c.algorithm != first_choice.name() && c.algorithm != jit.name()) continue;
      EXPECT_TRUE(c.ok) << p.ToString() << " " << c.algorithm << ": " << c.skip_reason;
      EXPECT_GT(c.time_ms, 0) << p.ToString() << " " << c.algorithm;
      fastest = timed++ == 0 ? c.time_ms : std::min(fastest, c.time_ms);
    }
    EXPECT_EQ(timed, 2) << p.ToString();
    EXPECT_DOUBLE_EQ(entry->time_ms, fastest) << p.ToString();
    const uint32_t seed = std::random_device{}();
    EXPECT_THAT(::convoy::testing::CheckQuantizedConv2d(*selected->algorithm, p, device, seed, tolerance,
                                                        QuantizedScaleSource::kProblem),
                IsOk())
        << p.ToString() << " " << selected->algorithm->name() << " seed " << seed;
  }
  EXPECT_GT(tuned, 0);
}

// A fused add runs with the conv's zero point folded into the post-ops' constants where one FP32 constant reproduces
// the add for every pair of 8-bit operands, and with the zero point as a binary post-op where none does; both match
// the integer reference on fresh data. ResNet-50's layer2.0 add (conv as the first operand), which the unfolded chain
// rounds differently on one operand pair of 65536, folds; the two others are quantizations a search over random
// scales and zero points found: one no constant folds (conv as the second operand, so the unfolded chain is the add's
// own order), and one that neither form reproduces, which is declined naming the count.
TEST(QuantizedConv2dOnednnTest, FoldsTheConvZeroPointWhereAConstantReproducesTheAdd) {
  CONVOY_SKIP_UNLESS_EXACT_CPU_INT8();
  OnednnInt8TestSetup setup = MakeOnednnInt8TestSetup();
  ASSERT_NE(setup.device, nullptr);
  const QuantizedConv2dProblem shape = QuantizedConv2dTestShapes(Layout::kNHWC)[3];
  QuantizedConv2dProblem folds =
      WithFusedAdd(shape, QuantizedFusedAdd::kConvIsA, 0.012813163921236992f, 140, 0.017131511121988297f,
                   0.009712425991892815f);
  folds.add.b_zero_point = 124;
  QuantizedConv2dProblem unfolded = WithFusedAdd(shape, QuantizedFusedAdd::kConvIsB, 0.0187785067f, 146,
                                                 0.0162724741f, 0.00444078865f);
  unfolded.add.a_zero_point = 144, unfolded.add.y_zero_point = 1;
  const QuantizedConv2dOnednnNhwc algorithm;
  EXPECT_TRUE(algorithm.FoldsConvZeroPoint(folds));
  EXPECT_FALSE(algorithm.FoldsConvZeroPoint(unfolded));
  ::convoy::testing::QuantizedTolerance exact;  // both forms reproduce the separate steps bit for bit
  exact.max_off_by_one_fraction = 0;
  for (const QuantizedConv2dProblem& p : {folds, unfolded}) {
    const uint32_t seed = std::random_device{}();
    EXPECT_THAT(::convoy::testing::CheckQuantizedConv2d(algorithm, p, *setup.device, seed, exact,
                                                        QuantizedScaleSource::kProblem),
                IsOk())
        << p.ToString() << " seed " << seed;
  }
}

TEST(QuantizedConv2dOnednnTest, DeclinesAFusedAddItCannotReproduce) {
  CONVOY_SKIP_UNLESS_EXACT_CPU_INT8();
  QuantizedConv2dProblem p = WithFusedAdd(QuantizedConv2dTestShapes(Layout::kNHWC)[3], QuantizedFusedAdd::kConvIsA,
                                          0.0141828395f, 195, 0.0175962131f, 0.00434874324f);
  p.add.b_zero_point = 137, p.add.y_zero_point = 3;
  const absl::Status status = QuantizedConv2dOnednnNhwc().CanImplement(p);
  EXPECT_TRUE(absl::IsUnimplemented(status)) << status;
  EXPECT_THAT(status.message(), ::testing::HasSubstr("which rounds 1 pairs of 8-bit operands differently"));
  EXPECT_THAT(status.message(), ::testing::HasSubstr("no constant with the conv's zero point folded in"));
  std::swap(p.add.a_scale, p.add.b_scale);
  std::swap(p.add.a_zero_point, p.add.b_zero_point);
  p.fused_add = QuantizedFusedAdd::kConvIsB;
  EXPECT_THAT(QuantizedConv2dOnednnNhwc().CanImplement(p), IsOk());
}

// oneDNN 2.6 has only its reference INT8 convolution in the other layouts: declined.
TEST(QuantizedConv2dOnednnTest, DeclinesOtherLayouts) {
  QuantizedConv2dProblem p = QuantizedConv2dTestShapes(Layout::kNCHW8c)[2];
  EXPECT_TRUE(absl::IsUnimplemented(QuantizedConv2dOnednnNhwc().CanImplement(p)));
}

TEST(QuantizedConv2dOnednnTest, ValidateNamesTheField) {
  QuantizedConv2dProblem p;
  p.c = p.k = 8, p.h = p.w = 4, p.r = p.s = 3;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
  p.src_type = DataType::kFloat32;
  EXPECT_THAT(p.Validate().message(), ::testing::HasSubstr("the input must be UINT8 or INT8, got FP32"));
  p.src_type = DataType::kUInt8;
  p.epilogue.src_zero_point = 300;
  EXPECT_THAT(p.Validate().message(), ::testing::HasSubstr("src zero point 300 is outside UINT8"));
  p.epilogue.src_zero_point = 0;
  p.dst_type = DataType::kFloat32;
  p.epilogue.dst_zero_point = 4;
  EXPECT_THAT(p.Validate().message(), ::testing::HasSubstr("dst zero point 4 does not fit FP32"));
  p.dst_type = DataType::kUInt8;
  p.epilogue.dst_zero_point = 0;
  p.epilogue.scales.assign(7, 0.5f);
  EXPECT_THAT(p.Validate().message(), ::testing::HasSubstr("epilogue.scales: expected k=8 multipliers, got 7"));
  p.epilogue.scales.assign(8, 0.5f);
  p.epilogue.scales[3] = std::nanf("");
  EXPECT_THAT(p.Validate().message(), ::testing::HasSubstr("epilogue.scales[3] is nan, not a finite number"));
}

}  // namespace
}  // namespace convoy::cpu
