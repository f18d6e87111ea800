// The Hopper (sm_90a) conv2d and GEMM algorithms against the CPU reference through the shared cross-backend suite,
// on the emulated CudaDevice (which reports compute capability 9.0): every problem they claim from the shared lists,
// the CUDA extras and the ResNet-50 / MobileNetV2 / EfficientNet-Lite0 layer shapes (NetworkConvLayerShapes: the
// networks' channels, filters, strides and padding at small spatial sizes), in FP16, BF16 and FP32-as-TF32; the
// extras again under the reverse and seeded-random thread orders and recorded into a CUDA graph; and the compute-
// capability gate. Only the Hopper algorithms are linked, so "every algorithm" here means every Hopper one, and the
// suite fails if one of them never ran. Tolerances are the suite's (op_case_traits.h): FP16 rel 1e-2 / abs
// 2e-3*sqrt(reduction), BF16 3e-2 / 1.6e-2, TF32 2e-3 / 1e-3 (all accumulate in FP32; TF32 keeps 10 mantissa bits).
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cuda/conv2d_gemm_test_problems.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda_emulation/cuda_host_api.h"
#include "kernels/registry/registry.h"
#include "kernels/testing/cross_backend_suite.h"
#include "kernels/testing/problem_list.h"

namespace convoy::testing {
namespace {

std::unique_ptr<cuda::CudaDevice> CreateDevice() {
  absl::StatusOr<std::unique_ptr<cuda::CudaDevice>> device = cuda::CudaDevice::Create({});
  EXPECT_TRUE(device.ok()) << device.status();
  return device.ok() ? *std::move(device) : nullptr;
}

std::vector<Conv2dProblem> LayerProblems(int spatial, int batch, DataType dtype) {
  std::vector<Conv2dProblem> out;
  for (const ResNetLayer& layer : NetworkConvLayerShapes(spatial, batch, dtype)) out.push_back(layer.problem);
  return out;
}

TEST(HopperConv2dGemmTest, Conv2dSharedListAndExtrasMatchReference) {
  std::unique_ptr<cuda::CudaDevice> device = CreateDevice();
  ASSERT_NE(device, nullptr);
  ExpectAllAlgorithmsMatchReference<Conv2dOp>(Backend::kCuda, *device, CudaConvTestProblems());
}

TEST(HopperConv2dGemmTest, GemmSharedListAndExtrasMatchReference) {
  std::unique_ptr<cuda::CudaDevice> device = CreateDevice();
  ASSERT_NE(device, nullptr);
  ExpectAllAlgorithmsMatchReference<GemmOp>(Backend::kCuda, *device, CudaGemmTestProblems());
}

TEST(HopperConv2dGemmTest, NetworkLayersFp16) {
  std::unique_ptr<cuda::CudaDevice> device = CreateDevice();
  ASSERT_NE(device, nullptr);
  ExpectAllAlgorithmsMatchReference<Conv2dOp>(Backend::kCuda, *device, LayerProblems(3, 2, DataType::kFloat16));
}

TEST(HopperConv2dGemmTest, NetworkLayersBf16) {
  std::unique_ptr<cuda::CudaDevice> device = CreateDevice();
  ASSERT_NE(device, nullptr);
  ExpectAllAlgorithmsMatchReference<Conv2dOp>(Backend::kCuda, *device, LayerProblems(3, 2, DataType::kBFloat16));
}

TEST(HopperConv2dGemmTest, NetworkLayersTf32) {
  std::unique_ptr<cuda::CudaDevice> device = CreateDevice();
  ASSERT_NE(device, nullptr);
  ExpectAllAlgorithmsMatchReference<Conv2dOp>(Backend::kCuda, *device, LayerProblems(3, 2, DataType::kFloat32));
}

// Missing mbarrier waits or early stage releases show under other thread orders; the emulation also reports them
// outright, but the orders shake the producer / consumer interleaving. lag:5 and lag:9 hold back the second warp of
// each consumer warpgroup: a stage released by one consumer thread after its own wgmma.wait_group is refilled while
// that warp has not waited for the wgmma reading it (reported as the bulk copy overwriting shared memory that the
// wgmma "still reads"); released by every consumer thread it holds.
TEST(HopperConv2dGemmTest, PipelineHoldsUnderReverseRandomAndLaggingWarpSchedules) {
  std::unique_ptr<cuda::CudaDevice> device = CreateDevice();
  ASSERT_NE(device, nullptr);
  using cuda_emulation::Schedule;
  for (const Schedule& schedule :
       {Schedule::Reverse(), Schedule::SeededRandom(29), Schedule::LaggingWarp(5), Schedule::LaggingWarp(9)}) {
    SCOPED_TRACE(schedule.ToString());
    std::cout << "schedule " << schedule.ToString() << "\n";
    cuda_emulation::ScopedSchedule scoped(schedule);
    ExpectAllAlgorithmsMatchReference<Conv2dOp>(Backend::kCuda, *device, CudaConvExtraProblems());
    ExpectAllAlgorithmsMatchReference<GemmOp>(Backend::kCuda, *device, CudaGemmExtraProblems());
  }
}

// The Hopper-aimed shapes (stride 2 with asymmetric padding, dilation 2, C not a multiple of 64, M not a multiple of
// 128, K tails, 1x1, GEMM tails) on every Hopper candidate, in the default order and with the second warp of each
// consumer warpgroup lagging.
TEST(HopperConv2dGemmTest, HopperShapesMatchReferenceOnEveryCandidate) {
  std::unique_ptr<cuda::CudaDevice> device = CreateDevice();
  ASSERT_NE(device, nullptr);
  using cuda_emulation::Schedule;
  for (const Schedule& schedule : {Schedule::Forward(), Schedule::LaggingWarp(5)}) {
    SCOPED_TRACE(schedule.ToString());
    cuda_emulation::ScopedSchedule scoped(schedule);
    ExpectAllAlgorithmsMatchReference<Conv2dOp>(Backend::kCuda, *device, HopperConvExtraProblems());
    ExpectAllAlgorithmsMatchReference<GemmOp>(Backend::kCuda, *device, HopperGemmExtraProblems());
  }
}

// A plan with CUDA graphs records each step: the tensor maps travel as kernel parameters, nothing allocates.
TEST(HopperConv2dGemmTest, EveryAlgorithmRecordsIntoAGraphAndReplays) {
  std::unique_ptr<cuda::CudaDevice> device = CreateDevice();
  ASSERT_NE(device, nullptr);
  CrossBackendOptions options;
  options.record_and_replay = true;
  ExpectAllAlgorithmsMatchReference<Conv2dOp>(Backend::kCuda, *device, CudaConvExtraProblems(), options);
  ExpectAllAlgorithmsMatchReference<GemmOp>(Backend::kCuda, *device, CudaGemmExtraProblems(), options);
}

// sm_90a code runs only on compute capability 9.0: on any other device (here an emulated 8.0 and 10.0 part) the
// Hopper algorithms decline, as they do when an operator sets CONVOY_CUDA_DISABLE_HOPPER=1.
TEST(HopperConv2dGemmTest, CandidatesOnlyOnComputeCapability90) {
  Conv2dProblem conv;
  conv.n = 1, conv.h = conv.w = 8, conv.c = 64, conv.k = 64, conv.r = conv.s = 3;
  conv.pad_top = conv.pad_bottom = conv.pad_left = conv.pad_right = 1;
  conv.dtype = DataType::kFloat16, conv.layout = Layout::kNHWC;
  ASSERT_EQ(OpRegistry<Conv2dOp>::Global().All(Backend::kCuda).size(), 6u);
  const std::vector<const Conv2dAlgorithm*> candidates =
      OpRegistry<Conv2dOp>::Global().Candidates(conv, Backend::kCuda);
  EXPECT_EQ(candidates.size(), 3u);  // the im2col tiles (the 1x1 ones decline a 3x3 filter)
  for (const auto& [major, minor] : {std::pair{8, 0}, std::pair{10, 0}, std::pair{8, 9}}) {
    cuda_emulation::ScopedComputeCapability capability(major, minor);
    for (const Conv2dAlgorithm* algorithm : candidates) {
      const absl::Status status = algorithm->CanImplement(conv);
      EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << algorithm->name();
      EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("compute capability 9.0"));
    }
  }
  setenv("CONVOY_CUDA_DISABLE_HOPPER", "1", 1);
  EXPECT_TRUE(OpRegistry<Conv2dOp>::Global().Candidates(conv, Backend::kCuda).empty());
  unsetenv("CONVOY_CUDA_DISABLE_HOPPER");
  EXPECT_EQ(OpRegistry<Conv2dOp>::Global().Candidates(conv, Backend::kCuda).size(), 3u);
}

// The im2col filter offsets are 8 bits and must stay below 255 (CUTLASS's sm90 limit): (S - 1) * dilation = 255 is
// declined, 254 accepted (the corners are kept in range by the padding).
TEST(HopperConv2dGemmTest, Im2colOffsetLimitIsBelow255) {
  Conv2dProblem conv;
  conv.n = 1, conv.h = conv.w = 8, conv.c = 64, conv.k = 64, conv.r = conv.s = 2;
  conv.pad_top = conv.pad_bottom = conv.pad_left = conv.pad_right = 127;
  conv.dilation_h = conv.dilation_w = 255;
  conv.dtype = DataType::kFloat16, conv.layout = Layout::kNHWC;
  const std::vector<const Conv2dAlgorithm*> all = OpRegistry<Conv2dOp>::Global().All(Backend::kCuda);
  int im2col = 0;
  for (const Conv2dAlgorithm* algorithm : all) {
    if (algorithm->name().find("implicit_gemm") == absl::string_view::npos) continue;
    ++im2col;
    const absl::Status refused = algorithm->CanImplement(conv);
    EXPECT_EQ(refused.code(), absl::StatusCode::kUnimplemented) << algorithm->name();
    EXPECT_THAT(std::string(refused.message()), ::testing::HasSubstr("offset limit 255")) << algorithm->name();
    Conv2dProblem fits = conv;
    fits.dilation_h = fits.dilation_w = 254;
    EXPECT_TRUE(algorithm->CanImplement(fits).ok()) << algorithm->name() << ": " << algorithm->CanImplement(fits);
  }
  EXPECT_EQ(im2col, 3);
}

}  // namespace
}  // namespace convoy::testing
