// Every CPU algorithm of every op except conv2d and GEMM against the reference over the shared problem list.
// (The conv2d and GEMM algorithms run the same harness from their own test target.)
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/testing/cross_backend_suite.h"

namespace convoy::testing {
namespace {

CpuDevice& Device() { return CpuDevice::Default(); }

TEST(CpuCrossBackendTest, Pool2d) { ExpectAllAlgorithmsMatchReference<Pool2dOp>(Backend::kCpu, Device()); }
TEST(CpuCrossBackendTest, BatchNorm) { ExpectAllAlgorithmsMatchReference<BatchNormOp>(Backend::kCpu, Device()); }
TEST(CpuCrossBackendTest, Activation) { ExpectAllAlgorithmsMatchReference<ActivationOp>(Backend::kCpu, Device()); }
TEST(CpuCrossBackendTest, Binary) {
  ExpectAllAlgorithmsMatchReference<BinaryElementwiseOp>(Backend::kCpu, Device());
}
TEST(CpuCrossBackendTest, Concat) { ExpectAllAlgorithmsMatchReference<ConcatOp>(Backend::kCpu, Device()); }
TEST(CpuCrossBackendTest, Split) { ExpectAllAlgorithmsMatchReference<SplitOp>(Backend::kCpu, Device()); }
TEST(CpuCrossBackendTest, ChannelShuffle) {
  ExpectAllAlgorithmsMatchReference<ChannelShuffleOp>(Backend::kCpu, Device());
}
TEST(CpuCrossBackendTest, Softmax) { ExpectAllAlgorithmsMatchReference<SoftmaxOp>(Backend::kCpu, Device()); }
TEST(CpuCrossBackendTest, Pad) { ExpectAllAlgorithmsMatchReference<PadOp>(Backend::kCpu, Device()); }
TEST(CpuCrossBackendTest, Convert) { ExpectAllAlgorithmsMatchReference<ConvertOp>(Backend::kCpu, Device()); }
TEST(CpuCrossBackendTest, Preprocess) { ExpectAllAlgorithmsMatchReference<PreprocessOp>(Backend::kCpu, Device()); }

// The same kernels on a single-threaded pool (everything inline) and a 3-thread pool (uneven chunks).
TEST(CpuCrossBackendTest, ResultsDoNotDependOnThreadCount) {
  for (int threads : {1, 3}) {
    auto device = CpuDevice::Create(CpuDevice::Options{threads});
    ASSERT_TRUE(device.ok()) << device.status();
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    ExpectAllAlgorithmsMatchReference<Pool2dOp>(Backend::kCpu, **device);
    ExpectAllAlgorithmsMatchReference<BinaryElementwiseOp>(Backend::kCpu, **device);
    ExpectAllAlgorithmsMatchReference<SoftmaxOp>(Backend::kCpu, **device);
    ExpectAllAlgorithmsMatchReference<PadOp>(Backend::kCpu, **device);
  }
}

}  // namespace
}  // namespace convoy::testing
