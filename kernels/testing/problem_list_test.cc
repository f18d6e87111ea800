// Checks the shared problem list: every problem is valid, the reference fills every output element of every
// problem with finite values, and the lists cover both layouts and all three compute types where they apply.
#include <cmath>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/reference/reference_ops.h"
#include "kernels/testing/cross_backend_suite.h"
#include "kernels/testing/problem_list.h"

namespace convoy::testing {
namespace {

template <typename Problem>
class ProblemListTest : public ::testing::Test {};

using ProblemTypes =
    ::testing::Types<Conv2dProblem, GemmProblem, Pool2dProblem, BatchNormProblem, ActivationProblem, BinaryProblem,
                     ConcatProblem, SplitProblem, ChannelShuffleProblem, SoftmaxProblem, PadProblem, ConvertProblem,
                     PreprocessProblem, TransposeProblem, ResizeProblem, ArgMaxProblem,
                     LayerNormProblem, ConvTranspose2dProblem, UnaryProblem>;
TYPED_TEST_SUITE(ProblemListTest, ProblemTypes);

TYPED_TEST(ProblemListTest, EveryProblemIsValidAndTheReferenceWritesFiniteOutputs) {
  using Problem = TypeParam;
  const std::vector<Problem> problems = ProblemsFor<Problem>();
  ASSERT_FALSE(problems.empty());
  EXPECT_LE(problems.size(), 250u) << "keep the list small: emulated CUDA kernels run every problem";
  std::set<std::string> names;
  for (size_t i = 0; i < problems.size(); ++i) {
    const Problem& p = problems[i];
    ASSERT_THAT(p.Validate(), IsOk());
    EXPECT_TRUE(names.insert(p.ToString()).second) << "duplicate problem " << p.ToString();
    const std::vector<BufferSpec> in_specs = OpCaseTraits<Problem>::Inputs(p);
    const std::vector<BufferSpec> out_specs = OpCaseTraits<Problem>::Outputs(p);
    CONVOY_ASSERT_OK_AND_ASSIGN(auto inputs, cross_backend_internal::MakeHostBuffers(in_specs, 100 + i, false));
    CONVOY_ASSERT_OK_AND_ASSIGN(auto outputs, cross_backend_internal::MakeHostBuffers(out_specs, 0, true));
    ASSERT_THAT(reference::Run(p, OpCaseTraits<Problem>::MakeArgs(p, inputs.pointers, outputs.pointers)), IsOk());
    for (size_t o = 0; o < out_specs.size(); ++o) {
      const std::vector<float> values = ToFloats(outputs.pointers[o], out_specs[o].dtype, out_specs[o].count);
      for (size_t e = 0; e < values.size(); ++e) {
        ASSERT_TRUE(std::isfinite(values[e])) << p.ToString() << " output " << o << " element " << e;
      }
    }
  }
}

TEST(ProblemListCoverageTest, ConvListCoversTheCorners) {
  bool nhwc = false, fp16 = false, bf16 = false, depthwise = false, grouped = false, dilated = false;
  bool stride2 = false, asymmetric = false, c3 = false, residual_before = false, residual_after = false;
  std::set<int> filter_sizes;
  std::set<ActivationKind> activations;
  for (const Conv2dProblem& p : Conv2dProblems()) {
    nhwc |= p.layout == Layout::kNHWC;
    fp16 |= p.dtype == DataType::kFloat16;
    bf16 |= p.dtype == DataType::kBFloat16;
    depthwise |= p.is_depthwise();
    grouped |= p.groups > 1 && !p.is_depthwise();
    dilated |= p.dilation_h > 1;
    stride2 |= p.stride_h == 2;
    asymmetric |= p.pad_top != p.pad_bottom;
    c3 |= p.c == 3;
    residual_before |= p.epilogue.residual == ResidualMode::kBeforeActivation;
    residual_after |= p.epilogue.residual == ResidualMode::kAfterActivation;
    filter_sizes.insert(p.r);
    activations.insert(p.epilogue.activation.kind);
  }
  EXPECT_TRUE(nhwc && fp16 && bf16 && depthwise && grouped && dilated && stride2 && asymmetric && c3 &&
              residual_before && residual_after);
  EXPECT_THAT(filter_sizes, ::testing::IsSupersetOf({1, 3, 5, 7}));
  EXPECT_EQ(activations.size(), AllActivations().size());
}

TEST(ProblemListCoverageTest, PoolListCoversCeilModeCountIncludePadDilationAndGlobalModes) {
  std::set<PoolMode> modes, dilated_modes;
  bool ceil = false, include_pad = false, dilated_include_pad = false, asymmetric_dilation = false;
  for (const Pool2dProblem& p : Pool2dProblems()) {
    modes.insert(p.mode);
    ceil |= p.ceil_mode;
    include_pad |= p.count_include_pad;
    if (p.dilation_h > 1 || p.dilation_w > 1) {
      dilated_modes.insert(p.mode);
      dilated_include_pad |= p.count_include_pad && p.ceil_mode;
      asymmetric_dilation |= p.dilation_h != p.dilation_w;
    }
  }
  EXPECT_EQ(modes.size(), 4u);
  EXPECT_TRUE(ceil && include_pad);
  EXPECT_EQ(dilated_modes, (std::set<PoolMode>{PoolMode::kMax, PoolMode::kAverage}));
  EXPECT_TRUE(dilated_include_pad && asymmetric_dilation);
}

TEST(ProblemListCoverageTest, TransposeListCoversEveryRankLayoutSwapAndElementSize) {
  std::set<int> ranks;
  std::set<size_t> element_sizes;
  bool to_nhwc = false, to_nchw = false;
  for (const TransposeProblem& p : TransposeProblems()) {
    ranks.insert(p.rank());
    element_sizes.insert(DataTypeSize(p.dtype));
    to_nhwc |= p.perm == std::vector<int>{0, 2, 3, 1};
    to_nchw |= p.perm == std::vector<int>{0, 3, 1, 2};
  }
  EXPECT_EQ(ranks, (std::set<int>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(element_sizes, (std::set<size_t>{1, 2, 4, 8}));
  EXPECT_TRUE(to_nhwc && to_nchw);
}

}  // namespace
}  // namespace convoy::testing
