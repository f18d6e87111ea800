// Every CPU conv2d and GEMM algorithm (im2col, 1x1, depthwise, Winograd, OpenBLAS GEMM) against the reference over
// the shared problem list of kernels/testing, on the default pool and on 1- and 3-thread pools.
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/testing/cross_backend_suite.h"

namespace convoy::testing {
namespace {

TEST(Conv2dGemmCrossBackendTest, Conv2d) {
  ExpectAllAlgorithmsMatchReference<Conv2dOp>(Backend::kCpu, CpuDevice::Default());
}

TEST(Conv2dGemmCrossBackendTest, Gemm) {
  ExpectAllAlgorithmsMatchReference<GemmOp>(Backend::kCpu, CpuDevice::Default());
}

TEST(Conv2dGemmCrossBackendTest, ResultsDoNotDependOnThreadCount) {
  for (int threads : {1, 3}) {
    auto device = CpuDevice::Create(CpuDevice::Options{threads});
    ASSERT_TRUE(device.ok()) << device.status();
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    ExpectAllAlgorithmsMatchReference<Conv2dOp>(Backend::kCpu, **device);
    ExpectAllAlgorithmsMatchReference<GemmOp>(Backend::kCpu, **device);
  }
}

}  // namespace
}  // namespace convoy::testing
