// Every CUDA INT8 convolution algorithm (cuda.quantized_conv2d.implicit_gemm_*, the direct cuda.quantized_conv2d.simt,
// and the wgmma cuda.quantized_conv2d.hopper_* where the device has compute capability 9.0, as the emulated one does)
// against the exact integer reference on the shared INT8 problem list (kernels/testing/quantized_conv2d_cases.h:
// every layer shape and every epilogue the CPU INT8 test runs) plus shapes that reach the kernels' corners (several
// k-tiles with a partial last one, several block tiles in M and N with ragged edges, dilation, padded channel
// pitches, K not a multiple of the 4-channel epilogue vector; for the Hopper kernels a partial last 128-channel
// stage, more stages than the ring holds, and padding with zero points: the im2col border correction). Fresh random data each run, outputs poisoned first.
//
// Tolerance: none. The accumulation is exact (int32; the zero point folded into a per-channel compensation, or
// subtracted from each input in the direct kernel), and the epilogue performs the reference's FP32 operations in
// the reference's order with explicitly rounded operations (__fmul_rn, __fadd_rn, __fsub_rn: no FMA contraction on
// the GPU; the host build has no FMA at -march=x86-64-v2), so every UINT8 / INT8 output and every FP32 output must
// equal the reference's bit for bit.
//
// Two builds of this one source:
//   :quantized_conv2d_emulated_test   the kernels compiled against the CUDA emulation, on the emulated CudaDevice;
//                                     also under the reverse and seeded-random thread schedules (barriers).
//   :quantized_conv2d_cuda_test       the nvcc-built kernels on a real GPU (skips, saying so, where there is none).
#include <cstdlib>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/test_device_or_skip.h"
#include "kernels/registry/registry.h"
#include "kernels/testing/quantized_conv2d_cases.h"

#if defined(CONVOY_CUDA_EMULATION)
#include "kernels/cuda_emulation/schedule.h"
#endif

namespace convoy::testing {
namespace {

// On a real GPU the INT8 wgmma kernels are candidates only when asked for (quantized_conv2d_hopper.cu) until they are
// verified there: this test is that verification, so it asks.
const bool kHopperInt8Requested = setenv("CONVOY_CUDA_HOPPER_INT8", "1", /*overwrite=*/0) == 0;

QuantizedConv2dProblem Conv(int n, int c, int h, int w, int k, int r, int stride, int pad, int groups) {
  QuantizedConv2dProblem p;
  p.n = n, p.c = c, p.h = h, p.w = w, p.k = k, p.r = r, p.s = r;
  p.stride_h = p.stride_w = stride;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = pad;
  p.groups = groups;
  p.layout = Layout::kNHWC;
  return p;
}

// Shapes past the shared list's corners, each with two of the shared epilogues (ReLU + bias on u8; residual on s8).
std::vector<QuantizedConv2dProblem> ExtraProblems() {
  QuantizedConv2dProblem dilated = Conv(1, 32, 11, 11, 72, 3, 1, 2, 1);  // 3 N tiles of 32 at 64 wide; dilation 2
  dilated.dilation_h = dilated.dilation_w = 2;
  std::vector<QuantizedConv2dProblem> shapes = {
      dilated,
      Conv(3, 48, 10, 9, 136, 3, 1, 1, 1),  // 270 rows (3 M tiles of 128, ragged); K = 136 (ragged N); 7 k-tiles
      Conv(1, 40, 7, 7, 30, 1, 1, 0, 1),    // C = 40: bytewise, Cp = 48; K = 30: a partial 4-channel vector
      Conv(1, 256, 4, 4, 20, 3, 2, 1, 1),   // a deep reduction: 36 k-tiles of 64
      Conv(1, 64, 6, 6, 64, 3, 1, 1, 2),    // 2 groups of 32 channels: the 16-byte gather with a group offset
      // 1x1 (the Hopper GEMM's too): 286 rows (3 M tiles of 128, ragged), C = 144 (a second 128-channel stage with
      // 16 channels, the rest the copy's zero fill), K = 136 (ragged N tiles)
      Conv(2, 144, 13, 11, 136, 1, 1, 0, 1),
      Conv(1, 784, 5, 5, 27, 1, 1, 0, 1),  // 1x1: 7 stages of 128 channels (the 5-6 stage rings wrap); K = 27, odd
  };
  const std::vector<QuantizedEpilogueCase> epilogues = QuantizedConv2dTestEpilogues();
  std::vector<QuantizedConv2dProblem> out;
  for (const QuantizedConv2dProblem& shape : shapes) {
    for (const int e : {1, 4}) {
      QuantizedConv2dProblem p = shape;
      p.src_type = epilogues[e].src_type, p.dst_type = epilogues[e].dst_type, p.epilogue = epilogues[e].epilogue;
      out.push_back(p);
    }
  }
  return out;
}

std::vector<const QuantizedConv2dAlgorithm*> CudaAlgorithms() {
  return OpRegistry<QuantizedConv2dOp>::Global().All(Backend::kCuda);
}

std::vector<std::string> CudaAlgorithmNames() {
  std::vector<std::string> names;
  for (const QuantizedConv2dAlgorithm* algorithm : CudaAlgorithms()) names.emplace_back(algorithm->name());
  return names;
}

// One algorithm per test instance, so the sharded (and the ASan) runs split the emulated work.
class CudaQuantizedConv2dAlgorithmTest : public ::testing::TestWithParam<std::string> {
 protected:
  const QuantizedConv2dAlgorithm& algorithm() const {
    for (const QuantizedConv2dAlgorithm* a : CudaAlgorithms()) {
      if (a->name() == GetParam()) return *a;
    }
    std::abort();  // the parameters are the registry's names
  }

  // Runs the algorithm on every problem it implements (at least one), bit-exact against the reference.
  void ExpectExactOnEveryProblemItImplements(const std::vector<QuantizedConv2dProblem>& problems, Device& device,
                                             QuantizedScaleSource scales = QuantizedScaleSource::kArgs) {
    int ran = 0;
    for (const QuantizedConv2dProblem& p : problems) {
      if (!algorithm().CanImplement(p).ok()) continue;
      ++ran;
      const uint32_t seed = std::random_device{}();
      EXPECT_THAT(CheckQuantizedConv2d(algorithm(), p, device, seed, QuantizedTolerance{}, scales), IsOk())
          << GetParam() << " " << p.ToString() << " seed " << seed;
    }
    EXPECT_GT(ran, 0) << GetParam() << " implements none of the problems";
  }
};

TEST(CudaQuantizedConv2dTest, ThirteenAlgorithmsAreRegistered) { EXPECT_EQ(CudaAlgorithms().size(), 13u); }

// The direct kernel is the trusted one (what verification compares the others with), and never the heuristic's
// pick where a tensor-core kernel implements the problem.
TEST(CudaQuantizedConv2dTest, TheDirectKernelIsTrustedAndNeverTheHeuristicsPick) {
  int trusted = 0;
  for (const QuantizedConv2dAlgorithm* algorithm : CudaAlgorithms()) {
    if (algorithm->TrustedForVerification()) {
      ++trusted;
      EXPECT_EQ(algorithm->name(), "cuda.quantized_conv2d.simt");
    }
  }
  EXPECT_EQ(trusted, 1);
  std::vector<QuantizedConv2dProblem> problems = QuantizedConv2dTestProblems(Layout::kNHWC);
  for (const QuantizedConv2dProblem& p : QuantizedConv2dFusedAddTestProblems(Layout::kNHWC)) problems.push_back(p);
  for (const QuantizedConv2dProblem& p : problems) {
    const auto chosen = OpRegistry<QuantizedConv2dOp>::Global().Heuristic(p, Backend::kCuda);
    ASSERT_THAT(chosen.status(), IsOk()) << p.ToString();
    EXPECT_NE((*chosen)->name(), "cuda.quantized_conv2d.simt") << p.ToString();
  }
}

TEST(CudaQuantizedConv2dTest, EveryProblemHasAnAlgorithm) {
  std::vector<QuantizedConv2dProblem> problems = QuantizedConv2dTestProblems(Layout::kNHWC);
  for (const QuantizedConv2dProblem& p : ExtraProblems()) problems.push_back(p);
  for (const QuantizedConv2dProblem& p : QuantizedConv2dFusedAddTestProblems(Layout::kNHWC)) problems.push_back(p);
  for (const QuantizedConv2dProblem& p : problems) {
    EXPECT_THAT(OpRegistry<QuantizedConv2dOp>::Global().Heuristic(p, Backend::kCuda).status(), IsOk())
        << p.ToString();
  }
}

TEST_P(CudaQuantizedConv2dAlgorithmTest, SharedProblemsMatchTheIntegerReferenceExactly) {
  CONVOY_CREATE_DEVICE_OR_SKIP(device);
  ExpectExactOnEveryProblemItImplements(QuantizedConv2dTestProblems(Layout::kNHWC), *device);
}

TEST_P(CudaQuantizedConv2dAlgorithmTest, CornerShapesMatchTheIntegerReferenceExactly) {
  CONVOY_CREATE_DEVICE_OR_SKIP(device);
  ExpectExactOnEveryProblemItImplements(ExtraProblems(), *device);
}

// The multipliers fixed in the problem (epilogue.scales, as a plan's QDQ folds make them): packed after the
// compensation at plan time, read from there (args.scale null). One epilogue per layer shape, a different one each.
TEST_P(CudaQuantizedConv2dAlgorithmTest, FixedMultipliersMatchTheIntegerReferenceExactly) {
  CONVOY_CREATE_DEVICE_OR_SKIP(device);
  const std::vector<QuantizedConv2dProblem> all = QuantizedConv2dTestProblems(Layout::kNHWC);
  const size_t epilogues = QuantizedConv2dTestEpilogues().size();
  std::vector<QuantizedConv2dProblem> problems;
  for (size_t i = 0; i < all.size(); ++i) {
    if (i % epilogues == (i / epilogues) % epilogues) problems.push_back(all[i]);
  }
  for (const QuantizedConv2dProblem& p : ExtraProblems()) problems.push_back(p);
  ExpectExactOnEveryProblemItImplements(problems, *device, QuantizedScaleSource::kProblem);
}

// A residual add fused after the requantization (QuantizedConv2dProblem::fused_add), the convolution as either
// operand, UINT8 and INT8, with ReLU: the conv's own rounding and saturation, then QLinearAdd's arithmetic, exact.
TEST_P(CudaQuantizedConv2dAlgorithmTest, FusedAddMatchesTheIntegerReferenceExactly) {
  CONVOY_CREATE_DEVICE_OR_SKIP(device);
  ExpectExactOnEveryProblemItImplements(QuantizedConv2dFusedAddTestProblems(Layout::kNHWC), *device,
                                        QuantizedScaleSource::kProblem);
}

#if defined(CONVOY_CUDA_EMULATION)
// The kernels' barriers (pipeline stages refilled while other warps read them, the epilogue's staging reusing the
// pipeline's shared memory) under the reverse and a seeded-random thread order, on two problems (one per gather).
TEST_P(CudaQuantizedConv2dAlgorithmTest, BarriersHoldUnderReverseAndRandomSchedules) {
  CONVOY_CREATE_DEVICE_OR_SKIP(device);
  const std::vector<QuantizedConv2dProblem> all = QuantizedConv2dTestProblems(Layout::kNHWC);
  const std::vector<QuantizedConv2dProblem> problems = {all[3 * 7 + 3], all[5 * 7 + 4]};  // 1x1 residual; grouped
  for (const cuda_emulation::Schedule& schedule :
       {cuda_emulation::Schedule::Reverse(), cuda_emulation::Schedule::SeededRandom(std::random_device{}())}) {
    SCOPED_TRACE(schedule.ToString());
    cuda_emulation::ScopedSchedule scoped(schedule);
    ExpectExactOnEveryProblemItImplements(problems, *device);
  }
}
#endif

INSTANTIATE_TEST_SUITE_P(Algorithms, CudaQuantizedConv2dAlgorithmTest, ::testing::ValuesIn(CudaAlgorithmNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param.substr(info.param.rfind('.') + 1);  // implicit_gemm_64x64
                           return name;
                         });

// Bad arguments come back as statuses naming what is wrong, before anything is launched.
TEST(CudaQuantizedConv2dTest, RejectsMissingOperandsAndOtherLayouts) {
  QuantizedConv2dProblem p = QuantizedConv2dTestProblems(Layout::kNHWC)[2 * 7 + 1];  // bias + relu
  for (const QuantizedConv2dAlgorithm* algorithm : CudaAlgorithms()) {
    if (!algorithm->CanImplement(p).ok()) continue;
    alignas(16) static uint8_t buffer[64];
    QuantizedConv2dArgs args{buffer, reinterpret_cast<const int8_t*>(buffer), nullptr,
                             reinterpret_cast<const float*>(buffer), nullptr, buffer};
    const absl::Status status = algorithm->Run(p, args, Workspace{}, ExecutionContext{Backend::kCuda});
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("args.bias is null"));
  }
  QuantizedConv2dProblem nchw = p;
  nchw.layout = Layout::kNCHW;
  for (const QuantizedConv2dAlgorithm* algorithm : CudaAlgorithms()) {
    EXPECT_TRUE(absl::IsUnimplemented(algorithm->CanImplement(nchw))) << algorithm->name();
  }
}

// A fused add needs its other operand.
TEST(CudaQuantizedConv2dTest, AFusedAddNeedsItsOtherOperand) {
  // The 1x1 projection (shape 3), the convolution as operand b.
  const QuantizedConv2dProblem p = QuantizedConv2dFusedAddTestProblems(Layout::kNHWC)[3 * 3];
  int checked = 0;
  for (const QuantizedConv2dAlgorithm* algorithm : CudaAlgorithms()) {
    if (!algorithm->CanImplement(p).ok()) continue;
    ++checked;
    alignas(16) static uint8_t buffer[64];
    QuantizedConv2dArgs args{buffer, reinterpret_cast<const int8_t*>(buffer), reinterpret_cast<const int32_t*>(buffer),
                             reinterpret_cast<const float*>(buffer), nullptr, buffer};
    const absl::Status status = algorithm->Run(p, args, Workspace{}, ExecutionContext{Backend::kCuda});
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("args.residual (its other operand) is null"));
  }
  EXPECT_GT(checked, 0) << p.ToString();
}

// Without multipliers in the problem, args.scale must be given; with them, the packed filter carries them.
TEST(CudaQuantizedConv2dTest, NeedsScalesFromTheArgumentsOrTheProblem) {
  QuantizedConv2dProblem p = QuantizedConv2dTestProblems(Layout::kNHWC)[2 * 7 + 1];  // bias + relu
  for (const QuantizedConv2dAlgorithm* algorithm : CudaAlgorithms()) {
    if (!algorithm->CanImplement(p).ok()) continue;
    alignas(16) static uint8_t buffer[64];
    QuantizedConv2dArgs args{buffer, reinterpret_cast<const int8_t*>(buffer), reinterpret_cast<const int32_t*>(buffer),
                             nullptr, nullptr, buffer};
    const absl::Status status = algorithm->Run(p, args, Workspace{}, ExecutionContext{Backend::kCuda});
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("args.scale is null"));
    QuantizedConv2dProblem fixed = p;
    fixed.epilogue.scales.assign(p.k, 0.01f);
    // 4 bytes per multiplier after the packed filter (the direct kernel packs nothing without them: with them, the
    // filter as it is, padded to 16 bytes, then the multipliers).
    const size_t unfixed = algorithm->PackedFilterBytes(p);
    const size_t filter = unfixed > 0 ? unfixed : static_cast<size_t>(p.filter_elements() + 15) / 16 * 16;
    EXPECT_EQ(algorithm->PackedFilterBytes(fixed), filter + 4 * p.k) << algorithm->name();
    EXPECT_NE(algorithm->PackedFilterLayout(fixed), algorithm->PackedFilterLayout(p)) << algorithm->name();
  }
}

}  // namespace
}  // namespace convoy::testing
