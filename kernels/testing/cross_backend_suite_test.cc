// Checks that the cross-backend suite itself catches what it promises to catch: an algorithm that leaves one output
// element unwritten, an algorithm that is off by more than the tolerance, and a registered algorithm that never runs.
// The failing cases run one problem each, so gtest sees exactly one failure. Fake algorithms are registered under Backend::kCuda in this binary (which links no CUDA kernels) and run on the
// CPU device, whose memory is host memory.
#include <cstring>

#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/cpu/reference/reference_ops.h"
#include "kernels/registry/registry.h"
#include "kernels/testing/cross_backend_suite.h"

namespace convoy::testing {
namespace {

// Runs the reference, then optionally damages the output: `damage` 0 = none, 1 = last element poisoned (as if never
// written), 2 = first element nudged by 1%.
template <typename Op>
class FakeAlgorithm : public Op::AlgorithmType {
 public:
  FakeAlgorithm(const char* name, int damage, bool implements_anything)
      : name_(name), damage_(damage), implements_anything_(implements_anything) {}
  absl::string_view name() const override { return name_; }
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const typename Op::Problem&) const override {
    return implements_anything_ ? absl::OkStatus() : absl::UnimplementedError("declines everything");
  }
  absl::Status Run(const typename Op::Problem& problem, const typename Op::Args& args, Workspace,
                   const ExecutionContext&) const override {
    CONVOY_RETURN_IF_ERROR(reference::Run(problem, args));
    const BufferSpec out = OpCaseTraits<typename Op::Problem>::Outputs(problem)[0];
    void* y = args.y;
    if (damage_ == 1) PoisonWithNaN(static_cast<char*>(y) + (out.count - 1) * DataTypeSize(out.dtype), out.dtype, 1);
    if (damage_ == 2) StoreFromFloat(y, out.dtype, 0, LoadAsFloat(y, out.dtype, 0) * 1.01f + 0.01f);
    return absl::OkStatus();
  }

 private:
  const char* name_;
  int damage_;
  bool implements_anything_;
};

template <typename Op>
void RegisterFake(const char* name, int damage, bool implements_anything = true) {
  OpRegistry<Op>::Global().Register(std::make_unique<FakeAlgorithm<Op>>(name, damage, implements_anything));
}

TEST(CrossBackendSuiteTest, CorrectAlgorithmPasses) {
  RegisterFake<ChannelShuffleOp>("fake.shuffle.correct", 0);
  ExpectAllAlgorithmsMatchReference<ChannelShuffleOp>(Backend::kCuda, CpuDevice::Default());
}

TEST(CrossBackendSuiteTest, UnwrittenElementFails) {
  RegisterFake<PadOp>("fake.pad.unwritten", 1);
  EXPECT_NONFATAL_FAILURE(ExpectAllAlgorithmsMatchReference<PadOp>(Backend::kCuda, CpuDevice::Default(), {PadProblems()[0]}),
                          "actual nan");
}

TEST(CrossBackendSuiteTest, ErrorBeyondToleranceFails) {
  RegisterFake<SoftmaxOp>("fake.softmax.off_by_one_percent", 2);
  EXPECT_NONFATAL_FAILURE(ExpectAllAlgorithmsMatchReference<SoftmaxOp>(Backend::kCuda, CpuDevice::Default(), {SoftmaxProblems()[0]}),
                          "elements differ");
}

TEST(CrossBackendSuiteTest, AlgorithmThatNeverRunsFails) {
  RegisterFake<ActivationOp>("fake.activation.correct", 0);
  RegisterFake<ActivationOp>("fake.activation.declines", 0, /*implements_anything=*/false);
  EXPECT_NONFATAL_FAILURE(ExpectAllAlgorithmsMatchReference<ActivationOp>(Backend::kCuda, CpuDevice::Default(), {ActivationProblems()[0]}),
                          "fake.activation.declines is registered for cuda but implements none");
}

TEST(CrossBackendSuiteTest, NoRegisteredAlgorithmFails) {
  EXPECT_NONFATAL_FAILURE(ExpectAllAlgorithmsMatchReference<ConvertOp>(Backend::kCuda, CpuDevice::Default()),
                          "no cuda algorithm is registered for convert");
}

}  // namespace
}  // namespace convoy::testing
