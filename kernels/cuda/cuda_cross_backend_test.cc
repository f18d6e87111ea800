// The shared cross-backend suite (kernels/testing/cross_backend_suite.h) over every CUDA algorithm of pool2d,
// batch_norm, activation, binary, concat, split, channel_shuffle, softmax, pad, convert, preprocess, transpose,
// resize, argmax, layer_norm, conv_transpose2d and unary.
//
// Built against the emulation (cuda_cross_backend_emulated_test) the kernels run on the emulated CudaDevice; those
// with barriers or warp collectives (pool2d's global reduction, softmax's warp per row, convert's and transpose's
// shared-memory tiles, layer_norm's warp per row) also run under the emulation's reverse and seeded-random thread orders, which expose a missing
// __syncthreads. Built by nvcc (cuda_cross_backend_test) it runs on the GPU, and skips where there is none.
#include <memory>

#include "gtest/gtest.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/gpu_info.h"
#include "kernels/testing/cross_backend_suite.h"

namespace convoy::cuda {
namespace {

using ::convoy::testing::ExpectAllAlgorithmsMatchReference;

CudaDevice* SharedDevice() {
  static CudaDevice* device = [] {
    absl::StatusOr<std::unique_ptr<CudaDevice>> created = CudaDevice::Create({});
    if (!created.ok()) {
      std::cout << "[cuda_cross_backend_test] " << created.status() << "\n";
      return static_cast<CudaDevice*>(nullptr);
    }
    std::cout << "[cuda_cross_backend_test] running on " << (*created)->Identity() << "\n";
    return created->release();
  }();
  return device;
}

enum class Order { kForward, kReverse, kRandom };

class CudaCrossBackendTest : public ::testing::TestWithParam<Order> {
 protected:
  void SetUp() override {
    if (SharedDevice() == nullptr) {
      ASSERT_FALSE(IsCudaEmulated()) << "the emulated device must always exist";
      GTEST_SKIP() << "no CUDA device";
    }
#if defined(CONVOY_CUDA_EMULATION)
    switch (GetParam()) {
      case Order::kForward:
        schedule_ = std::make_unique<cuda_emulation::ScopedSchedule>(cuda_emulation::Schedule::Forward());
        break;
      case Order::kReverse:
        schedule_ = std::make_unique<cuda_emulation::ScopedSchedule>(cuda_emulation::Schedule::Reverse());
        break;
      case Order::kRandom:
        schedule_ = std::make_unique<cuda_emulation::ScopedSchedule>(cuda_emulation::Schedule::SeededRandom(1234));
        break;
    }
#else
    if (GetParam() != Order::kForward) GTEST_SKIP() << "thread orders are an emulation feature";
#endif
  }
  convoy::Device& device() { return *SharedDevice(); }

#if defined(CONVOY_CUDA_EMULATION)
  std::unique_ptr<cuda_emulation::ScopedSchedule> schedule_;
#endif
};

// Ops whose kernels synchronize threads: every thread order.
using CudaCrossBackendSynchronizingTest = CudaCrossBackendTest;

TEST_P(CudaCrossBackendSynchronizingTest, Pool2d) {
  ExpectAllAlgorithmsMatchReference<Pool2dOp>(Backend::kCuda, device());
}
TEST_P(CudaCrossBackendSynchronizingTest, Softmax) {
  ExpectAllAlgorithmsMatchReference<SoftmaxOp>(Backend::kCuda, device());
}
TEST_P(CudaCrossBackendSynchronizingTest, Convert) {
  ExpectAllAlgorithmsMatchReference<ConvertOp>(Backend::kCuda, device());
}
TEST_P(CudaCrossBackendSynchronizingTest, Transpose) {
  ExpectAllAlgorithmsMatchReference<TransposeOp>(Backend::kCuda, device());
}
TEST_P(CudaCrossBackendSynchronizingTest, LayerNorm) {
  ExpectAllAlgorithmsMatchReference<LayerNormOp>(Backend::kCuda, device());
}

INSTANTIATE_TEST_SUITE_P(ThreadOrders, CudaCrossBackendSynchronizingTest,
                         ::testing::Values(Order::kForward, Order::kReverse, Order::kRandom));

// Element-wise kernels without barriers or collectives: the forward order suffices.
TEST_P(CudaCrossBackendTest, BatchNorm) { ExpectAllAlgorithmsMatchReference<BatchNormOp>(Backend::kCuda, device()); }
TEST_P(CudaCrossBackendTest, Activation) {
  ExpectAllAlgorithmsMatchReference<ActivationOp>(Backend::kCuda, device());
}
TEST_P(CudaCrossBackendTest, Binary) {
  ExpectAllAlgorithmsMatchReference<BinaryElementwiseOp>(Backend::kCuda, device());
}
TEST_P(CudaCrossBackendTest, Concat) { ExpectAllAlgorithmsMatchReference<ConcatOp>(Backend::kCuda, device()); }
TEST_P(CudaCrossBackendTest, Split) { ExpectAllAlgorithmsMatchReference<SplitOp>(Backend::kCuda, device()); }
TEST_P(CudaCrossBackendTest, ChannelShuffle) {
  ExpectAllAlgorithmsMatchReference<ChannelShuffleOp>(Backend::kCuda, device());
}
TEST_P(CudaCrossBackendTest, Pad) { ExpectAllAlgorithmsMatchReference<PadOp>(Backend::kCuda, device()); }
TEST_P(CudaCrossBackendTest, Resize) { ExpectAllAlgorithmsMatchReference<ResizeOp>(Backend::kCuda, device()); }
TEST_P(CudaCrossBackendTest, ArgMax) { ExpectAllAlgorithmsMatchReference<ArgMaxOp>(Backend::kCuda, device()); }
TEST_P(CudaCrossBackendTest, Unary) { ExpectAllAlgorithmsMatchReference<UnaryOp>(Backend::kCuda, device()); }
TEST_P(CudaCrossBackendTest, ConvTranspose2d) {
  ExpectAllAlgorithmsMatchReference<ConvTranspose2dOp>(Backend::kCuda, device());
}
TEST_P(CudaCrossBackendTest, Preprocess) {
  ExpectAllAlgorithmsMatchReference<PreprocessOp>(Backend::kCuda, device());
}

INSTANTIATE_TEST_SUITE_P(Forward, CudaCrossBackendTest, ::testing::Values(Order::kForward));

// Every op again the way a plan with CUDA graphs runs it: recorded on a queue (stream) of its own, then replayed. A
// kernel that launches on another stream, allocates or waits fails here (in emulation as on a GPU).
class CudaCrossBackendRecordedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (SharedDevice() == nullptr) {
      ASSERT_FALSE(IsCudaEmulated()) << "the emulated device must always exist";
      GTEST_SKIP() << "no CUDA device";
    }
    options_.record_and_replay = true;
  }
  testing::CrossBackendOptions options_;
};

// conv2d and GEMM are recorded in conv2d_gemm_cuda_test on their own problem lists.
TEST_F(CudaCrossBackendRecordedTest, EveryOp) {
  ForEachOp([&](auto tag) {
    using Op = typename decltype(tag)::type;
    if constexpr (Op::kKind != OpKind::kConv2d && Op::kKind != OpKind::kGemm) {
      ExpectAllAlgorithmsMatchReference<Op>(Backend::kCuda, *SharedDevice(),
                                            testing::ProblemsFor<typename Op::Problem>(), options_);
    }
  });
}

}  // namespace
}  // namespace convoy::cuda
