// The own INT8 convolution (cpu.quantized_conv2d.gemm_nhwc*), every instruction-set version the CPU runs, against the
// exact integer reference (reference::QuantizedConv2d) bit for bit: no output may differ by a step and FP32 outputs
// must be identical (QuantizedTolerance{}), on the shared INT8 problem list with every epilogue and the fused adds,
// with the multipliers at run time and fixed in the problem, on fresh random data (outputs poisoned before each run;
// the seed is printed on failure). Extra shapes reach what the list does not: several row chunks, the channel-split
// path of small layers, ragged channel blocks and row tiles, odd reductions, dilation, the depthwise path (ragged
// channels, dilation, a global pool's 7x7 window) and the depthwise layer it leaves to the GEMM, 1 and 3 threads.
#include "kernels/cpu/quantized_conv2d_gemm.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/registry/registry.h"
#include "kernels/testing/quantized_conv2d_cases.h"

namespace convoy::cpu {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::QuantizedScaleSource;

std::unique_ptr<CpuDevice> MakeDevice(int threads) {
  CpuDevice::Options options;
  options.num_threads = threads;
  absl::StatusOr<std::unique_ptr<CpuDevice>> device = CpuDevice::Create(options);
  EXPECT_THAT(device.status(), IsOk());
  return device.ok() ? *std::move(device) : nullptr;
}

QuantizedConv2dProblem Shape(int n, int c, int h, int w, int k, int r, int stride, int pad, int groups,
                             int dilation = 1) {
  QuantizedConv2dProblem p;
  p.n = n, p.c = c, p.h = h, p.w = w, p.k = k, p.r = p.s = r;
  p.stride_h = p.stride_w = stride;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = pad;
  p.dilation_h = p.dilation_w = dilation;
  p.groups = groups;
  p.layout = Layout::kNHWC;
  return p;
}

// Shapes that cut the GEMM in the ways the shared list does not, each with every epilogue case.
std::vector<QuantizedConv2dProblem> TilingProblems() {
  const std::vector<QuantizedConv2dProblem> shapes = {
      Shape(2, 1024, 7, 9, 40, 1, 1, 0, 1),   // 96-row chunks of a 1024 reduction: 2 chunks, a ragged block of 8
      Shape(1, 2048, 2, 2, 96, 1, 1, 0, 1),   // 4 rows: the channel blocks split across threads
      Shape(3, 17, 11, 10, 33, 3, 2, 1, 1),   // odd reduction (153), 33 channels, rows not a multiple of the tile
      Shape(1, 24, 13, 13, 20, 3, 1, 2, 1, 2),  // dilation 2
      Shape(2, 72, 6, 6, 72, 3, 1, 1, 3),     // 3 groups of 24 channels: a block and a half per group
      Shape(1, 5, 4, 4, 3, 5, 1, 2, 1),       // fewer channels than a vector, window larger than the image
      Shape(2, 20, 9, 9, 20, 3, 1, 1, 20),    // depthwise: 20 channels, a vector and a ragged tail
      Shape(1, 37, 5, 5, 37, 3, 2, 2, 37, 2),  // depthwise, stride 2, dilation 2, padding wider than the image edge
      Shape(2, 64, 7, 7, 64, 7, 1, 0, 64),    // depthwise 7x7 over 7x7: a QDQ global average pool
      Shape(1, 16, 10, 10, 16, 9, 1, 4, 16),  // depthwise with 81 taps: too many for the per-pixel path, the GEMM's
  };
  std::vector<QuantizedConv2dProblem> out;
  for (const QuantizedConv2dProblem& shape : shapes) {
    for (const ::convoy::testing::QuantizedEpilogueCase& e : ::convoy::testing::QuantizedConv2dTestEpilogues()) {
      QuantizedConv2dProblem p = shape;
      p.src_type = e.src_type, p.dst_type = e.dst_type, p.epilogue = e.epilogue;
      out.push_back(p);
    }
  }
  return out;
}

void ExpectExactOn(const std::vector<QuantizedConv2dProblem>& problems, CpuDevice& device) {
  for (CpuIsa isa : SupportedCpuIsas()) {
    const QuantizedConv2dGemmNhwc algorithm(isa);
    for (const QuantizedConv2dProblem& p : problems) {
      ASSERT_THAT(algorithm.CanImplement(p), IsOk()) << algorithm.name() << " " << p.ToString();
      for (QuantizedScaleSource scales : {QuantizedScaleSource::kArgs, QuantizedScaleSource::kProblem}) {
        const uint32_t seed = std::random_device{}();
        EXPECT_THAT(::convoy::testing::CheckQuantizedConv2d(algorithm, p, device, seed, {}, scales), IsOk())
            << algorithm.name() << " " << p.ToString()
            << (scales == QuantizedScaleSource::kProblem ? " scales fixed" : " scales in args") << " seed " << seed;
      }
    }
  }
}

TEST(QuantizedConv2dGemmTest, EveryVersionMatchesTheIntegerReferenceExactlyOnTheSharedList) {
  std::unique_ptr<CpuDevice> device = MakeDevice(2);
  ASSERT_NE(device, nullptr);
  std::vector<QuantizedConv2dProblem> problems = ::convoy::testing::QuantizedConv2dTestProblems(Layout::kNHWC);
  for (const QuantizedConv2dProblem& p : ::convoy::testing::QuantizedConv2dFusedAddTestProblems(Layout::kNHWC)) {
    problems.push_back(p);
  }
  ExpectExactOn(problems, *device);
}

TEST(QuantizedConv2dGemmTest, EveryVersionMatchesTheIntegerReferenceExactlyHoweverTheWorkIsCut) {
  for (int threads : {1, 3}) {
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    std::unique_ptr<CpuDevice> device = MakeDevice(threads);
    ASSERT_NE(device, nullptr);
    ExpectExactOn(TilingProblems(), *device);
  }
}

// Saturation is what this algorithm exists to avoid: inputs at 255 (or INT8 -128) and weights of -128 or 127 give
// pairs of products a 16-bit pairwise sum would clip (255 * 127 * 2 > 32767); the reference is exact, so must this be.
TEST(QuantizedConv2dGemmTest, ExtremeOperandsDoNotSaturate) {
  std::unique_ptr<CpuDevice> device = MakeDevice(2);
  ASSERT_NE(device, nullptr);
  for (CpuIsa isa : SupportedCpuIsas()) {
    const QuantizedConv2dGemmNhwc algorithm(isa);
    for (const QuantizedConv2dProblem& p : ::convoy::testing::QuantizedConv2dTestProblems(Layout::kNHWC)) {
      if (p.epilogue.src_zero_point != 0) continue;  // the extreme is the raw value's, not the difference's
      const uint32_t seed = std::random_device{}();
      EXPECT_THAT(::convoy::testing::CheckQuantizedConv2d(algorithm, p, *device, seed, {}, QuantizedScaleSource::kArgs,
                                                          ::convoy::testing::QuantizedOperands::kExtreme),
                  IsOk())
          << algorithm.name() << " " << p.ToString() << " seed " << seed;
    }
  }
}

TEST(QuantizedConv2dGemmTest, DeclinesWhatItCannotRunAndNamesWhy) {
  const QuantizedConv2dGemmNhwc algorithm(CpuIsa::kBaseline);
  QuantizedConv2dProblem blocked = Shape(1, 16, 4, 4, 16, 3, 1, 1, 1);
  blocked.layout = Layout::kNCHW;
  EXPECT_THAT(algorithm.CanImplement(blocked).message(), ::testing::HasSubstr("NHWC only"));
  const QuantizedConv2dProblem huge = Shape(1, 8192, 3, 3, 16, 3, 1, 1, 1);  // reduction 73728
  const absl::Status too_deep = algorithm.CanImplement(huge);
  EXPECT_TRUE(absl::IsUnimplemented(too_deep)) << too_deep;
  EXPECT_THAT(too_deep.message(), ::testing::HasSubstr("73728 exceeds 65793"));
}

// One version per instruction set the CPU runs is registered, each scored below oneDNN's INT8 convolutions (0 and -1),
// the widest first.
TEST(QuantizedConv2dGemmTest, RegistersEachVersionTheCpuRunsBelowOneDnn) {
  std::vector<std::string> names;
  int previous = 0;
  const QuantizedConv2dProblem p = Shape(1, 16, 4, 4, 16, 3, 1, 1, 1);
  for (CpuIsa isa : SupportedCpuIsas()) {
    const QuantizedConv2dGemmNhwc algorithm(isa);
    names.push_back(std::string(algorithm.name()));
    EXPECT_LT(algorithm.HeuristicScore(p), -1) << algorithm.name();
    if (isa != CpuIsa::kBaseline) {
      EXPECT_GT(algorithm.HeuristicScore(p), previous) << algorithm.name();
    }
    previous = algorithm.HeuristicScore(p);
  }
  std::vector<std::string> registered;
  for (const auto* algorithm : OpRegistry<QuantizedConv2dOp>::Global().All(Backend::kCpu)) {
    if (absl::StartsWith(algorithm->name(), "cpu.quantized_conv2d.gemm_nhwc")) {
      registered.push_back(std::string(algorithm->name()));
    }
  }
  EXPECT_THAT(registered, ::testing::UnorderedElementsAreArray(names));
}

// ---- cpu.quantized_conv2d.amx_1x1_nhwc ----------------------------------------------------------------------------

// 1x1 shapes the AMX tiles cut every way: a row tail with two row tiles (49 = 32 + 17) and with one (9), 30 rows in
// tiles of 16 and 14, a 16-channel tail after a 32-channel block (48), a 1024-channel reduction (16 tile steps),
// the classifier's one row of 2048 channels into 1008 outputs (31 blocks of 32 and one of 16), channels split
// across threads (256 outputs over 9 rows).
std::vector<QuantizedConv2dProblem> AmxShapes() {
  return {Shape(1, 64, 7, 7, 16, 1, 1, 0, 1),   Shape(2, 128, 5, 3, 48, 1, 1, 0, 1),
          Shape(1, 256, 3, 3, 256, 1, 1, 0, 1), Shape(3, 1024, 4, 4, 64, 1, 1, 0, 1),
          Shape(1, 2048, 1, 1, 1008, 1, 1, 0, 1)};
}

// Every AMX shape with every epilogue case, and with the shared list's three fused adds.
std::vector<QuantizedConv2dProblem> AmxProblems() {
  std::vector<QuantizedConv2dProblem> out;
  for (const QuantizedConv2dProblem& shape : AmxShapes()) {
    for (const ::convoy::testing::QuantizedEpilogueCase& e : ::convoy::testing::QuantizedConv2dTestEpilogues()) {
      QuantizedConv2dProblem p = shape;
      p.src_type = e.src_type, p.dst_type = e.dst_type, p.epilogue = e.epilogue;
      out.push_back(p);
    }
    out.push_back(::convoy::testing::WithFusedAdd(shape, QuantizedFusedAdd::kConvIsB, 0.0067857676185667515f, 140,
                                                  0.0071817971765995026f, 0.0046936883591115475f));
    out.push_back(::convoy::testing::WithFusedAdd(shape, QuantizedFusedAdd::kConvIsA, 0.009907187893986702f, 127,
                                                  0.0046936883591115475f, 0.00786774791777134f));
    out.push_back(::convoy::testing::WithFusedAdd(shape, QuantizedFusedAdd::kConvIsB, 0.05f, -3, 0.04f, 0.07f,
                                                  DataType::kInt8, DataType::kInt8));
    out.back().epilogue.relu = true;
  }
  return out;
}

#define CONVOY_SKIP_UNLESS_AMX(algorithm)                                                        \
  if (!(algorithm).CanImplement(AmxShapes()[0]).ok()) {                                          \
    GTEST_SKIP() << "no AMX INT8 here: " << (algorithm).CanImplement(AmxShapes()[0]).message(); \
  }

TEST(QuantizedConv2dAmxTest, MatchesTheIntegerReferenceExactlyWithEveryEpilogueHoweverTheWorkIsCut) {
  const QuantizedConv2dAmx1x1Nhwc algorithm;
  CONVOY_SKIP_UNLESS_AMX(algorithm);
  for (int threads : {1, 3}) {
    std::unique_ptr<CpuDevice> device = MakeDevice(threads);
    ASSERT_NE(device, nullptr);
    for (const QuantizedConv2dProblem& p : AmxProblems()) {
      for (QuantizedScaleSource scales : {QuantizedScaleSource::kArgs, QuantizedScaleSource::kProblem}) {
        const uint32_t seed = std::random_device{}();
        EXPECT_THAT(::convoy::testing::CheckQuantizedConv2d(algorithm, p, *device, seed, {}, scales), IsOk())
            << threads << " threads " << p.ToString()
            << (scales == QuantizedScaleSource::kProblem ? " scales fixed" : " scales in args") << " seed " << seed;
      }
    }
  }
}

TEST(QuantizedConv2dAmxTest, ExtremeOperandsAreExact) {
  const QuantizedConv2dAmx1x1Nhwc algorithm;
  CONVOY_SKIP_UNLESS_AMX(algorithm);
  std::unique_ptr<CpuDevice> device = MakeDevice(2);
  ASSERT_NE(device, nullptr);
  for (const QuantizedConv2dProblem& p : AmxProblems()) {
    if (p.epilogue.src_zero_point != 0) continue;
    const uint32_t seed = std::random_device{}();
    EXPECT_THAT(::convoy::testing::CheckQuantizedConv2d(algorithm, p, *device, seed, {}, QuantizedScaleSource::kArgs,
                                                        ::convoy::testing::QuantizedOperands::kExtreme),
                IsOk())
        << p.ToString() << " seed " << seed;
  }
}

// Shapes it cannot take are declined naming what it takes; the registry offers it below oneDNN's first choice.
TEST(QuantizedConv2dAmxTest, DeclinesOtherShapesAndRegistersBelowOneDnn) {
  const QuantizedConv2dAmx1x1Nhwc algorithm;
  CONVOY_SKIP_UNLESS_AMX(algorithm);
  const absl::Status strided = algorithm.CanImplement(Shape(1, 64, 8, 8, 16, 1, 2, 0, 1));
  EXPECT_THAT(strided.message(), ::testing::HasSubstr("takes 1x1, stride-1, unpadded, ungrouped NHWC"));
  const absl::Status narrow = algorithm.CanImplement(Shape(1, 96, 8, 8, 16, 1, 1, 0, 1));
  EXPECT_THAT(narrow.message(), ::testing::HasSubstr("multiples of 64"));
  EXPECT_THAT(narrow.message(), ::testing::HasSubstr("c=96 k=16"));
  EXPECT_EQ(algorithm.HeuristicScore(AmxShapes()[0]), -1);
  bool registered = false;
  for (const auto* a : OpRegistry<QuantizedConv2dOp>::Global().All(Backend::kCpu)) {
    registered |= a->name() == algorithm.name();
  }
  EXPECT_TRUE(registered);
}

}  // namespace
}  // namespace convoy::cpu
