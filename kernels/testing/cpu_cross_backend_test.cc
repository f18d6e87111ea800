// Every CPU algorithm of every op except conv2d and GEMM (the own ones and oneDNN's pooling and reorder; these and the
// binary kernel also over the blocked NCHW8c lists) against the reference over the shared problem list,
// plus the in-place forms activation and binary allow. (The conv2d and GEMM algorithms run the same harness from
// kernels/cpu:conv2d_gemm_cross_backend_test.)
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/cpu/reference/reference_ops.h"
#include "kernels/registry/registry.h"
#include "kernels/testing/cross_backend_suite.h"

namespace convoy::testing {
namespace {

CpuDevice& Device() { return CpuDevice::Default(); }

// The shared lists plus the blocked NCHW8c ones (problem_list.h) for the ops whose oneDNN algorithms take it.
template <typename Problem>
std::vector<Problem> Concatenated(std::vector<Problem> a, const std::vector<Problem>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(CpuCrossBackendTest, Pool2d) {
  ExpectAllAlgorithmsMatchReference<Pool2dOp>(Backend::kCpu, Device(),
                                              Concatenated(Pool2dProblems(), Pool2dProblemsInBlockedLayout()));
}
TEST(CpuCrossBackendTest, BatchNorm) { ExpectAllAlgorithmsMatchReference<BatchNormOp>(Backend::kCpu, Device()); }
TEST(CpuCrossBackendTest, Activation) { ExpectAllAlgorithmsMatchReference<ActivationOp>(Backend::kCpu, Device()); }
TEST(CpuCrossBackendTest, Binary) {
  ExpectAllAlgorithmsMatchReference<BinaryElementwiseOp>(
      Backend::kCpu, Device(), Concatenated(BinaryProblems(), BinaryProblemsInBlockedLayout()));
}
TEST(CpuCrossBackendTest, Concat) { ExpectAllAlgorithmsMatchReference<ConcatOp>(Backend::kCpu, Device()); }
TEST(CpuCrossBackendTest, Split) { ExpectAllAlgorithmsMatchReference<SplitOp>(Backend::kCpu, Device()); }
TEST(CpuCrossBackendTest, ChannelShuffle) {
  ExpectAllAlgorithmsMatchReference<ChannelShuffleOp>(Backend::kCpu, Device());
}
TEST(CpuCrossBackendTest, Softmax) { ExpectAllAlgorithmsMatchReference<SoftmaxOp>(Backend::kCpu, Device()); }
TEST(CpuCrossBackendTest, Pad) { ExpectAllAlgorithmsMatchReference<PadOp>(Backend::kCpu, Device()); }
TEST(CpuCrossBackendTest, Convert) {
  ExpectAllAlgorithmsMatchReference<ConvertOp>(Backend::kCpu, Device(),
                                               Concatenated(ConvertProblems(), ConvertProblemsInBlockedLayout()));
}
TEST(CpuCrossBackendTest, Preprocess) { ExpectAllAlgorithmsMatchReference<PreprocessOp>(Backend::kCpu, Device()); }
TEST(CpuCrossBackendTest, Transpose) { ExpectAllAlgorithmsMatchReference<TransposeOp>(Backend::kCpu, Device()); }
TEST(CpuCrossBackendTest, Resize) { ExpectAllAlgorithmsMatchReference<ResizeOp>(Backend::kCpu, Device()); }
TEST(CpuCrossBackendTest, ArgMax) { ExpectAllAlgorithmsMatchReference<ArgMaxOp>(Backend::kCpu, Device()); }
TEST(CpuCrossBackendTest, LayerNorm) { ExpectAllAlgorithmsMatchReference<LayerNormOp>(Backend::kCpu, Device()); }
TEST(CpuCrossBackendTest, Unary) { ExpectAllAlgorithmsMatchReference<UnaryOp>(Backend::kCpu, Device()); }
TEST(CpuCrossBackendTest, ConvTranspose2d) {
  ExpectAllAlgorithmsMatchReference<ConvTranspose2dOp>(Backend::kCpu, Device());
}

// The same kernels on a single-threaded pool (everything inline) and a 3-thread pool (uneven chunks).
TEST(CpuCrossBackendTest, ResultsDoNotDependOnThreadCount) {
  for (int threads : {1, 3}) {
    auto device = CpuDevice::Create(CpuDevice::Options{threads});
    ASSERT_TRUE(device.ok()) << device.status();
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    ExpectAllAlgorithmsMatchReference<Pool2dOp>(Backend::kCpu, **device,
                                                Concatenated(Pool2dProblems(), Pool2dProblemsInBlockedLayout()));
    ExpectAllAlgorithmsMatchReference<BinaryElementwiseOp>(
        Backend::kCpu, **device, Concatenated(BinaryProblems(), BinaryProblemsInBlockedLayout()));
    ExpectAllAlgorithmsMatchReference<SoftmaxOp>(Backend::kCpu, **device);
    ExpectAllAlgorithmsMatchReference<PadOp>(Backend::kCpu, **device);
    ExpectAllAlgorithmsMatchReference<TransposeOp>(Backend::kCpu, **device);
    ExpectAllAlgorithmsMatchReference<ResizeOp>(Backend::kCpu, **device);
    ExpectAllAlgorithmsMatchReference<ArgMaxOp>(Backend::kCpu, **device);
    ExpectAllAlgorithmsMatchReference<LayerNormOp>(Backend::kCpu, **device);
    ExpectAllAlgorithmsMatchReference<ConvTranspose2dOp>(Backend::kCpu, **device);
    ExpectAllAlgorithmsMatchReference<UnaryOp>(Backend::kCpu, **device);
  }
}

// Activation and binary allow y to alias their first input: run the CPU algorithms in place and compare.
template <typename Op, typename SetOutput>
void ExpectInPlaceMatchesReference(const typename Op::Problem& problem, int64_t count, DataType dtype,
                                   SetOutput set_output) {
  using Traits = OpCaseTraits<typename Op::Problem>;
  auto inputs = cross_backend_internal::MakeHostBuffers(Traits::Inputs(problem), 99, /*poison=*/false);
  auto expected = cross_backend_internal::MakeHostBuffers(Traits::Outputs(problem), 0, /*poison=*/true);
  ASSERT_TRUE(inputs.ok() && expected.ok());
  ASSERT_TRUE(reference::Run(problem, Traits::MakeArgs(problem, inputs->pointers, expected->pointers)).ok());
  for (const auto* algorithm : OpRegistry<Op>::Global().Candidates(problem, Backend::kCpu)) {
    auto in_place = cross_backend_internal::MakeHostBuffers(Traits::Inputs(problem), 99, /*poison=*/false);
    ASSERT_TRUE(in_place.ok());
    typename Op::Args args = Traits::MakeArgs(problem, in_place->pointers, {in_place->pointers[0]});
    set_output(args, in_place->pointers[0]);
    std::vector<uint8_t> workspace(algorithm->WorkspaceBytes(problem));
    ASSERT_TRUE(algorithm->Run(problem, args, Workspace{workspace.data(), workspace.size()}, Device().context()).ok())
        << algorithm->name() << " in place on " << problem.ToString();
    EXPECT_TRUE(CompareFloats(ToFloats(in_place->pointers[0], dtype, count),
                              ToFloats(expected->pointers[0], dtype, count), Traits::TolerancePerOutput(problem))
                    .ok())
        << algorithm->name() << " in place on " << problem.ToString();
  }
}

TEST(CpuCrossBackendTest, ActivationAndBinaryRunInPlace) {
  for (const ActivationProblem& p : ActivationProblems()) {
    ExpectInPlaceMatchesReference<ActivationOp>(p, p.count, p.dtype, [](ActivationArgs& a, void* y) { a.y = y; });
  }
  for (const BinaryProblem& p : BinaryProblems()) {
    ExpectInPlaceMatchesReference<BinaryElementwiseOp>(p, p.desc().num_elements(), p.dtype,
                                                       [](BinaryArgs& a, void* y) { a.y = y; });
  }
}

}  // namespace
}  // namespace convoy::testing
