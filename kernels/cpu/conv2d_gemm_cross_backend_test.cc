// Every CPU conv2d and GEMM algorithm (im2col, 1x1, depthwise, Winograd, OpenBLAS GEMM, and the oneDNN ones) against
// the reference over the shared problem list of kernels/testing, on the default pool and on 1- and 3-thread pools;
// and over the same list in the blocked NCHW8c layout (every listed problem whose channel counts are multiples of 8,
// which only the oneDNN algorithms take), at the problem's batch and at batch 3. BF16 problems run on the own
// algorithms only on CPUs without a oneDNN BF16 convolution (AVX2: oneDNN 2.6 has none, not even its reference).
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/testing/cross_backend_suite.h"

namespace convoy::testing {
namespace {

// The shared conv2d problems and the same in the blocked NCHW8c layout (problem_list.h).
std::vector<Conv2dProblem> Conv2dProblemsInEveryLayout() {
  std::vector<Conv2dProblem> out = Conv2dProblems();
  for (const Conv2dProblem& p : Conv2dProblemsInBlockedLayout()) out.push_back(p);
  return out;
}

TEST(Conv2dGemmCrossBackendTest, Conv2d) {
  ExpectAllAlgorithmsMatchReference<Conv2dOp>(Backend::kCpu, CpuDevice::Default(), Conv2dProblemsInEveryLayout());
}

TEST(Conv2dGemmCrossBackendTest, Gemm) {
  ExpectAllAlgorithmsMatchReference<GemmOp>(Backend::kCpu, CpuDevice::Default());
}

TEST(Conv2dGemmCrossBackendTest, ResultsDoNotDependOnThreadCount) {
  for (int threads : {1, 3}) {
    auto device = CpuDevice::Create(CpuDevice::Options{threads});
    ASSERT_TRUE(device.ok()) << device.status();
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    ExpectAllAlgorithmsMatchReference<Conv2dOp>(Backend::kCpu, **device, Conv2dProblemsInEveryLayout());
    ExpectAllAlgorithmsMatchReference<GemmOp>(Backend::kCpu, **device);
  }
}

}  // namespace
}  // namespace convoy::testing
